// report.md: hand-built Recommendations and evaluation rows in, golden files out
// (tests/golden/reports/report_*.md), diffed exactly.
// Refresh on purpose with FP8A_UPDATE_GOLDEN=1 and review the diff.
#include <doctest/doctest.h>

#include <string>

#include "policies/layer_summary.hpp"
#include "reports/report_md.hpp"
#include "support/golden.hpp"
#include "support/recommendations.hpp"
#include "support/rows.hpp"

using namespace fp8a;
using namespace fp8a::testing;

namespace {

RunInfo report_info() {
  RunInfo i = info();
  CaptureFile f;
  f.path = "caps/step_10.safetensors";
  f.step = 10;
  f.step_source = "file name";
  f.tensor_count = 4;
  i.inputs = {f};
  f.path = "caps/step_20.safetensors";
  f.step = 20;
  f.tensor_count = 2;
  i.inputs.push_back(f);
  i.recipes = parse_recipe_list("current,current:pow2");
  i.formats = {TrainingFormat::kHybrid};
  i.format_option = i.format_description = "hybrid";
  return i;
}

std::string render(const RunInfo& run, std::span<const EvaluationRow> rows, const Recommendation* rec) {
  AnswerContext answer;
  answer.recommendation = rec;
  const auto layers = summarize_layers(rows);
  const Artifact a = render_report_md(run, rows, layers, answer);
  CHECK(a.name == "report.md");
  return a.contents;
}

}  // namespace

TEST_CASE("report.md: a mixed plan with BF16 fallbacks, the roofline's speedup and the module plan") {
  const Recommendation rec = mixed_recommendation();
  RunInfo run = report_info();
  run.warnings = {"caps/step_10.safetensors: tensor 'x.weight' holds 1 NaN and 0 Inf elements"};
  const auto rows = sample_rows();
  const std::string got = render(run, rows, &rec);
  CHECK(got.find("**Recipe:** `Float8CurrentScaling(fp8_format=Format.HYBRID)` (current/hybrid)") !=
        std::string::npos);
  CHECK(got.find("| layers.0.mlp.linear_fc2 | mixed | no | fp8 | bf16 | bf16 |") != std::string::npos);
  check_golden("report_mixed.md", got);
}

TEST_CASE("report.md: no FP8 candidate is every layer BF16 with the reason, and cost: none") {
  Recommendation rec;
  rec.why = "no FP8 candidate was evaluated (--recipes holds only bf16)";
  rec.layers = {all_bf16_layer("layers.0.mlp.linear_fc1", rec.why)};
  rec.module_plan_note = "no candidate can be mixed per module";
  rec.limits = {"no amax trend: a single captured step"};
  RunInfo run = report_info();
  run.recipes = parse_recipe_list("bf16");
  const std::vector<EvaluationRow> rows = {
      make_row(10, "layers.0.mlp.linear_fc1", Role::kActivation, "bf16", 60.0, 1.0, 0.0, 0.0)};
  rec.gpu = find_gpu_target("h100");
  rec.cost_source = "none";
  const std::string got = render(run, rows, &rec);
  CHECK(got.find("**No FP8 recipe can be recommended** (no FP8 candidate evaluated)") != std::string::npos);
  CHECK(got.find("| layers.0.mlp.linear_fc1 | bf16 | no | not judged | not judged | not judged | " +
                 rec.why + " |") != std::string::npos);
  check_golden("report_all_bf16.md", got);
}

TEST_CASE("report.md: '|' and newlines stay inside their cell") {
  CHECK(markdown_cell("a|b") == "a\\|b");
  CHECK(markdown_cell("one\ntwo\r\nthree\rfour") == "one<br>two<br>three<br>four");
  CHECK(markdown_cell("") == "");
  Recommendation rec;
  rec.candidates = {candidate("block", TrainingFormat::kHybrid)};
  add_layer(rec, rec.candidates[0], "layers.0.fc|odd", false,
            {fp8(Criterion::kRelMseFloor, 1.1, 4),
             bf16(Criterion::kUnderflow, 9, 5, "step 20 gradient underflow 9 % | 5 %\nsee metrics.csv"),
             fp8(Criterion::kUnderflow, 0.2, 5)});
  rec.chosen = 0;
  rec.why = "block/hybrid keeps 66.7 % of the GEMM FLOPs in FP8 with 1 GEMM to BF16 (risk 0.725)";
  finish(rec);  // h100; cost_source "none"
  auto rows = sample_rows();
  rows.push_back(make_row(20, "layers.0.fc|odd", Role::kGradient, "block", 22.5, 0.995, 9.0, 0.0));
  const std::string got = render(report_info(), rows, &rec);
  CHECK(got.find("| layers.0.fc\\|odd | mixed | no | fp8 | bf16 | fp8 | dgrad: step 20 gradient underflow "
                 "9 % \\| 5 %<br>see metrics.csv |") != std::string::npos);
  CHECK(got.find("| layers.0.fc\\|odd | block | hybrid |") != std::string::npos);
  check_golden("report_escaping.md", got);
}

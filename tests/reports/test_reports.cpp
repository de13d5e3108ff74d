// Report writers: hand-built rows in, golden files out (tests/golden/reports/), diffed exactly.
// Refresh on purpose with FP8A_UPDATE_GOLDEN=1 and review the diff.
#include <doctest/doctest.h>

#include <cmath>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/golden.hpp"
#include "core/error.hpp"
#include "policies/layer_summary.hpp"
#include "reports/answer_text.hpp"
#include "rundir/atomic_file.hpp"
#include "reports/console_table.hpp"
#include "reports/gemms_csv.hpp"
#include "reports/metrics_csv.hpp"
#include "reports/progress_line.hpp"
#include "support/run_info.hpp"
#include "reports/number_format.hpp"
#include "reports/summary_json.hpp"
#include "support/rows.hpp"

namespace fs = std::filesystem;

namespace {

using fp8a::testing::check_golden;
using fp8a::testing::slurp;

fp8a::RunInfo fixed_info() {
  fp8a::RunInfo info = fp8a::testing::base_run_info(4);
  info.inputs[0].step_source = "file name";
  info.inputs[0].bytes = 1234;
  info.recipes = fp8a::parse_recipe_list("current,current:pow2");
  info.formats = {fp8a::TrainingFormat::kHybrid};  // the rows' (make_row)
  info.format_option = info.format_description = "hybrid";
  info.read_seconds = 0.5;
  info.evaluate_seconds = 0.25;
  info.outputs = {"metrics.csv", "gemms.csv", "summary.json"};
  info.log_files = {"trace.csv"};
  info.log_notes = {"trace.csv: capture CSV, 40 amax values"};
  info.warnings = {"caps/step_10.safetensors: tensor 'x.weight' holds 1 NaN and 0 Inf elements"};
  return info;
}

// A hand-built recommendation: current/hybrid chosen with one wgrad to BF16 and one GEMM kept
// close to its limit; mxfp8/hybrid excluded for the GPU.
fp8a::Recommendation fixed_recommendation() {
  using namespace fp8a;
  Recommendation rec;
  CandidatePlan cur;
  cur.candidate = {parse_recipe("current"), TrainingFormat::kHybrid};
  cur.total_flops = 3e9;
  cur.fp8_flops = 2e9;
  cur.fp8_flop_share = 2.0 / 3.0;
  cur.total_risk = 1.5;
  cur.gemms_to_bf16 = 1;
  cur.speedup = 0.75;
  LayerJudgement lj;
  lj.layer = "layers.0.fc1";
  lj.steps = {10, 20};
  for (int g = 0; g < 3; ++g) {
    GemmJudgement& j = lj.gemms[g];
    j.gemm = static_cast<Gemm>(g);
    j.judged = true;
    j.steps = 2;
    j.flops = 1e9;
    j.fp8_safe = g != 2;
    j.worst.passed = j.fp8_safe;
    j.worst.limiting = g == 2 ? Criterion::kUnderflow : Criterion::kMse;
    j.worst.margin = g == 0 ? 0.125 : g == 1 ? 0.5 : -0.25;
    j.worst_step = 20;
  }
  cur.layers = {lj};
  cur.plan = {{Precision::kFp8, Precision::kFp8, Precision::kBf16}};
  CandidatePlan mx;
  mx.candidate = {parse_recipe("mxfp8"), TrainingFormat::kHybrid};
  mx.total_flops = 3e9;
  mx.runnable = false;
  mx.excluded = "mxfp8 needs sm_100+ (TE MXFP8BlockScaling); h100 is sm_90";
  rec.candidates = {cur, mx};
  rec.chosen = 0;
  rec.why = "current/hybrid keeps 66.7 % of the GEMM FLOPs in FP8 with 1 GEMMs to BF16 (risk 1.500)";
  LayerDecision ld;
  ld.layer = "layers.0.fc1";
  ld.precision = Precision::kMixed;
  for (int g = 0; g < 3; ++g) {
    GemmDecision& d = ld.gemms[g];
    d.gemm = static_cast<Gemm>(g);
    d.judged = true;
    d.fp8_safe = g != 2;
    d.precision = g == 2 ? Precision::kBf16 : Precision::kFp8;
  }
  ld.gemms[0].reason = "kept FP8: step 20 fprop mse 0.875 against 1 (margin 0.125 < 0.25)";
  ld.gemms[2].reason = "step 20 gradient underflow 6.25 % (> 5 %) under current/hybrid";
  rec.layers = {ld};
  // All-FP8 (the failing wgrad too), the chosen plan, all-BF16.
  rec.pareto = {{0, "", 1.0, 0.875, 2.75, 1, false},
                {1, "layers.0.fc1 wgrad", 2.0 / 3.0, 0.75, 1.5, 0, true},
                {3, "layers.0.fc1 fprop", 0.0, 1.0, 0.0, 0, false}};
  rec.gpu = fp8a::find_gpu_target("h100");
  rec.cost_source = "roofline";
  rec.cost_basis = "roofline at 8192 tokens a step (--tokens-per-step)";
  return rec;
}

}  // namespace

TEST_CASE("numbers print as the shortest round-trip text") {
  CHECK(fp8a::format_number(0.1) == "0.1");
  CHECK(fp8a::format_number(448.0f / 3.0f) == "149.33333");
  CHECK(fp8a::format_number(1e-300) == "1e-300");
  CHECK(fp8a::format_number(std::numeric_limits<double>::infinity()) == "inf");
  // NaN is "nan" whatever its sign bit (0/0 and inf - inf give the negative one on x86).
  CHECK(fp8a::format_number(-std::numeric_limits<double>::quiet_NaN()) == "nan");
  CHECK(fp8a::format_number(std::copysign(std::numeric_limits<float>::quiet_NaN(), -1.0f)) == "nan");
  CHECK(fp8a::format_number(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(std::strtof(fp8a::format_number(104.642334f).c_str(), nullptr) == 104.642334f);
}

TEST_CASE("metrics.csv, summary.json and the console table match their golden files") {
  auto rows = fp8a::testing::sample_rows();
  // A layer name that needs CSV quoting, and a row the backend could not evaluate.
  rows.push_back(fp8a::testing::make_row(20, "odd,\"name\"", fp8a::Role::kWeight, "current", 40.0,
                                         0.99999, 0.0, 0.0));
  rows.push_back(fp8a::testing::make_row(20, "layers.1.fc2", fp8a::Role::kWeight, "current:pow2",
                                         0.0, 0.0, 0.0, 0.0));
  rows.back().applicability = fp8a::Applicability::no("example reason");
  rows[2].metrics.sqnr_db = std::numeric_limits<double>::infinity();
  // A delayed row replayed approximately, and a blocked row in the columnwise orientation.
  auto delayed = fp8a::testing::make_row(20, "layers.0.fc1", fp8a::Role::kGradient,
                                         "delayed:history=16:algo=max:margin=0", 15.0, 0.97, 1.5625, 6.25);
  delayed.metrics.scale = 89.6f;
  delayed.current_scale = 179.2f;  // log2(89.6 / 179.2) = -1
  delayed.replay = {fp8a::ReplayMode::kApproximate, 89.6f, "history window [4, 19] has 1 of 16 steps"};
  delayed.metrics.sums.saturated_count = 2;
  delayed.metrics.underflow_energy_pct = 0.0123;  // the flushed elements' share of sum x^2
  rows.push_back(delayed);
  auto block = fp8a::testing::make_row(20, "layers.0.fc1", fp8a::Role::kGradient, "block", 28.0, 0.999, 0.0, 0.0);
  block.orientation = fp8a::Orientation::kColumnwise;
  block.metrics.scale = block.metrics.scale_inv = std::numeric_limits<float>::quiet_NaN();
  block.metrics.scale_inv_min = 0.0078125f;
  block.metrics.scale_inv_max = 0.5f;
  rows.push_back(block);
  const auto layers = fp8a::summarize_layers(rows);
  check_golden("metrics.csv", fp8a::render_metrics_csv(rows).contents);
  const fp8a::Recommendation rec = fixed_recommendation();
  fp8a::AnswerContext answer;
  answer.recommendation = &rec;
  check_golden("summary.json", fp8a::render_summary_json(fixed_info(), rows, layers, &answer).contents);
  check_golden("answer.txt", fp8a::render_answer(answer));
  check_golden("table.txt", fp8a::render_layer_table(layers));
  fp8a::GemmRow g;
  g.step = 20;
  g.layer = "layers.0.fc1";
  g.gemm = fp8a::Gemm::kWgrad;
  g.recipe = fp8a::parse_recipe("mxfp8");
  g.m = 16;
  g.n = 8;
  g.k = 64;
  g.rows_used = 32;
  g.cols_used = 48;
  g.sampled = true;
  g.rel_fro_err = 0.03125;
  g.cos = 0.9995;
  g.note = "cublaslt not run: MXFP8 block scaling (VEC32_UE8M0) needs sm_100+; this GPU is sm_90";
  g.zeroed_pct = 21.875;  // per-entry damage of the output: 28 of 128 entries zeroed
  g.sign_flip_pct = 0.78125;
  g.median_rel_err = 0.0625;
  g.zeroed_pct_se = 1.5;  // sampled: the shares' standard errors
  g.sign_flip_pct_se = 0.25;
  // The same GEMM from a real engine: its accumulation, the padded dims it ran, a quoted note.
  fp8a::GemmRow e = g;
  e.gemm = fp8a::Gemm::kFprop;
  e.recipe = fp8a::parse_recipe("current");
  e.engine = "cublaslt";
  e.accumulation = "fast";
  e.m_padded = 16;
  e.n_padded = 16;
  e.k_padded = 64;
  e.rel_fro_err = 0.0390625;
  e.note = "X E4M3 SCALAR_32F x W E4M3 SCALAR_32F, fast accumulation, FP32 output";
  check_golden("gemms.csv", fp8a::render_gemms_csv(std::vector<fp8a::GemmRow>{g, e}).contents);
}

TEST_CASE("two formats: summary.json and the console table name each entry's format") {
  // The hybrid rows, then the same tensors under e4m3 (gradients E4M3: more underflow), as
  // evaluate_captures orders them.
  const auto hybrid = fp8a::testing::sample_rows();
  std::vector<fp8a::EvaluationRow> rows;
  for (auto r : hybrid) {
    r.format = fp8a::TrainingFormat::kE4M3;
    r.fp8 = fp8a::Fp8Format::kE4M3;
    if (r.key.role == fp8a::Role::kGradient) r.metrics.underflow_pct += 4.0;
    rows.push_back(r);
  }
  rows.insert(rows.end(), hybrid.begin(), hybrid.end());
  rows.back().applicability = fp8a::Applicability::no("example reason");
  auto info = fixed_info();
  info.formats = fp8a::kAllTrainingFormats;
  info.format_option = info.format_description = "e4m3,hybrid";
  const auto layers = fp8a::summarize_layers(rows);
  check_golden("summary_formats.json", fp8a::render_summary_json(info, rows, layers).contents);
  check_golden("table_formats.txt", fp8a::render_layer_table(layers));
}

TEST_CASE("progress: the line, its share by bytes, the rate, the ETA and the clock") {
  fp8a::ProgressState s;
  s.stage = "tensors";
  s.total = 864;
  s.bytes_total = 1000000000;
  CHECK(fp8a::progress_line(s) == "tensors 0/864 (0 %)");
  s.done = 123;
  s.bytes_done = 250000000;  // a quarter of the bytes, 14 % of the units: the share goes by bytes
  s.elapsed_s = 10.0;
  s.current = "layers.3.mlp.linear_fc2";
  // 25 MB/s; 30 s left (10 s per quarter).
  CHECK(fp8a::progress_line(s) == "tensors 123/864 (25 %), 25 MB/s, ETA 0:30, layers.3.mlp.linear_fc2");
  s.done = 864;
  s.bytes_done = s.bytes_total;
  s.elapsed_s = 2.0;
  s.current.clear();
  CHECK(fp8a::progress_line(s) == "tensors 864/864 (100 %), 500 MB/s, done in 2.0 s");
  s.elapsed_s = 0.5;
  CHECK(fp8a::progress_line(s) == "tensors 864/864 (100 %), 2.00 GB/s, done in 0.5 s");
  // Without bytes the share and the ETA go by units.
  fp8a::ProgressState u;
  u.stage = "GEMM layers";
  u.total = 8;
  u.done = 2;
  u.elapsed_s = 1.0;
  CHECK(fp8a::progress_line(u) == "GEMM layers 2/8 (25 %), ETA 0:03");
  CHECK(fp8a::clock_text(0.2) == "0:01");  // rounded up
  CHECK(fp8a::clock_text(725) == "12:05");
  CHECK(fp8a::clock_text(3723) == "1:02:03");
  CHECK(fp8a::clock_text(-4) == "0:00");
}

TEST_CASE("join_by_reason: candidates sharing a reason on one line, in first-seen order") {
  const std::vector<std::pair<std::string, std::string>> excluded = {
      {"mxfp8/e4m3", "needs sm_100+"}, {"block/e4m3", "needs sm_90+"}, {"mxfp8/hybrid", "needs sm_100+"}};
  const std::vector<std::string> want = {"mxfp8/e4m3, mxfp8/hybrid: needs sm_100+", "block/e4m3: needs sm_90+"};
  CHECK(fp8a::join_by_reason(excluded) == want);
  CHECK(fp8a::join_by_reason({}).empty());
}

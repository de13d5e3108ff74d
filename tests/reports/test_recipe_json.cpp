// recipe.json: hand-built Recommendations in, golden files out (tests/golden/reports/recipe_*.json),
// diffed exactly; the consumer test recipe_json validates those files against
// reports/recipe.schema.json and builds their "recipe" with Transformer Engine.
// Refresh on purpose with FP8A_UPDATE_GOLDEN=1 and review the diff.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "support/golden.hpp"
#include "core/gpu_target.hpp"
#include "reports/recipe_json.hpp"

namespace fs = std::filesystem;

namespace {

using fp8a::testing::check_golden;
using fp8a::testing::slurp;

using namespace fp8a;

RunInfo info() {
  RunInfo i;
  i.version = "0.1.0";
  i.git_revision = "0123456789ab";
  i.command_line = {"fp8-advisor", "run", "--capture", "caps", "--out", "out", "--gpu", "h100"};
  i.requested_device = "auto";
  i.backend = "cpu";
  i.device = "2 threads (oneTBB)";
  return i;
}

Verdict verdict(bool passed, Criterion c, double measured, double threshold,
                const std::string& reason = "") {
  Verdict v;
  v.passed = passed;
  v.limiting = c;
  v.measured = measured;
  v.threshold = threshold;
  v.margin = (threshold - measured) / threshold;
  v.risk = 1 - v.margin;
  v.reason = reason;
  return v;
}

// One GEMM of a hand-built layer: its judgement and the decision.
struct GemmSpec {
  bool judged = true;
  Precision precision = Precision::kFp8;
  Verdict worst;
  std::string reason;  // the decision's
  std::optional<Verdict> forecast;
  std::int64_t worst_step = 10;
};

GemmSpec fp8(Criterion c, double measured, double threshold, const std::string& reason = "") {
  return {true, Precision::kFp8, verdict(true, c, measured, threshold), reason, std::nullopt, 10};
}
GemmSpec bf16(Criterion c, double measured, double threshold, const std::string& reason) {
  return {true, Precision::kBf16, verdict(false, c, measured, threshold, reason), reason,
          std::nullopt, 20};
}
GemmSpec not_judged(Gemm g) {
  return {false, Precision::kBf16, Verdict{}, std::string(gemm_name(g)) + ": no operand copy captured",
          std::nullopt, 0};
}

// Adds a layer to the candidate (its judgement and plan) and, when `decide`, to rec.layers.
void add_layer(Recommendation& rec, CandidateAdvice& c, const std::string& name, bool incomplete,
               const std::array<GemmSpec, 3>& gemms, bool decide = true) {
  LayerJudgement lj;
  lj.layer = name;
  lj.incomplete = incomplete;
  lj.steps = {10, 20};
  LayerDecision ld;
  ld.layer = name;
  ld.incomplete = incomplete;
  std::array<Precision, 3> plan{};
  bool any_judged = false, all_safe = true, any_fp8 = false, any_bf16 = false;
  for (int g = 0; g < 3; ++g) {
    const GemmSpec& s = gemms[static_cast<std::size_t>(g)];
    GemmJudgement& j = lj.gemms[static_cast<std::size_t>(g)];
    j.gemm = static_cast<Gemm>(g);
    j.judged = s.judged;
    j.worst = s.worst;
    j.worst_step = s.worst_step;
    j.steps = s.judged ? 2 : 0;
    j.failed_steps = s.judged && !s.worst.passed ? 1 : 0;
    j.forecast = s.forecast;
    j.fp8_safe = s.judged && s.worst.passed && (!s.forecast || s.forecast->passed);
    j.flops = s.judged ? 1e12 : 0;
    plan[static_cast<std::size_t>(g)] = s.precision;
    if (s.judged) {
      any_judged = true;
      all_safe = all_safe && j.fp8_safe;
      (s.precision == Precision::kFp8 ? any_fp8 : any_bf16) = true;
    }
    GemmDecision& d = ld.gemms[static_cast<std::size_t>(g)];
    d.gemm = j.gemm;
    d.judged = j.judged;
    d.fp8_safe = j.fp8_safe;
    d.precision = s.precision;
    d.reason = s.reason;
  }
  lj.fp8_safe = ld.fp8_safe = any_judged && all_safe;
  ld.precision = any_fp8 && any_bf16 ? Precision::kMixed
                 : any_fp8           ? Precision::kFp8
                                     : Precision::kBf16;
  c.layers.push_back(lj);
  c.plan.push_back(plan);
  if (decide) rec.layers.push_back(ld);
}

void finish(Recommendation& rec) {
  for (CandidateAdvice& c : rec.candidates) {
    c.total_flops = c.fp8_flops = 0;
    c.gemms_to_bf16 = 0;
    for (std::size_t li = 0; li < c.layers.size(); ++li)
      for (int g = 0; g < 3; ++g) {
        const GemmJudgement& j = c.layers[li].gemms[static_cast<std::size_t>(g)];
        c.total_flops += j.flops;
        if (c.plan[li][static_cast<std::size_t>(g)] == Precision::kFp8)
          c.fp8_flops += j.flops;
        else if (j.judged)
          ++c.gemms_to_bf16;
      }
    c.fp8_flop_share = c.total_flops > 0 ? c.fp8_flops / c.total_flops : 0;
  }
  // The Pareto list of the chosen candidate: all-FP8, then one point per GEMM sent to BF16.
  if (rec.chosen) {
    const CandidateAdvice& c = rec.candidates[*rec.chosen];
    rec.pareto.push_back({0, "", c.total_flops > 0 ? 1.0 : 0.0, c.speedup, c.total_risk + 1.0,
                          c.gemms_to_bf16, c.gemms_to_bf16 == 0});
    if (c.gemms_to_bf16 > 0)
      rec.pareto.push_back({c.gemms_to_bf16, c.layers.back().layer + " fprop", c.fp8_flop_share,
                            c.speedup, c.total_risk, 0, true});
  }
}

CandidateAdvice candidate(const std::string& spec, TrainingFormat format) {
  CandidateAdvice c;
  c.candidate = {parse_recipe(spec), format};
  return c;
}

std::string render(const Recommendation& rec) {
  const Artifact a = render_recipe_json(rec, info());
  CHECK(a.name == "recipe.json");
  return a.contents;
}

}  // namespace

TEST_CASE("recipe.json: mixed layers, a BF16 fallback with reasons, the roofline's speedup") {
  Recommendation rec;
  rec.candidates = {candidate("current", TrainingFormat::kHybrid),
                    candidate("mxfp8", TrainingFormat::kE4M3)};
  const std::string underflow =
      "step 20 gradient underflow 44.200 % of elements (31.000 % of its energy) under "
      "current/hybrid";
  for (std::size_t i = 0; i < 2; ++i) {
    CandidateAdvice& c = rec.candidates[i];
    const bool decide = i == 0;
    add_layer(rec, c, "layers.0.self_attention.linear_qkv", false,
              {fp8(Criterion::kRelMseFloor, 1.2, 4), fp8(Criterion::kUnderflow, 0.5, 5),
               fp8(Criterion::kUnderflow, 4.1, 5,
                   "kept FP8: wgrad underflow 4.1 % vs 5 %, margin 0.18 under current/hybrid")},
              decide);
    add_layer(rec, c, "layers.0.mlp.linear_fc2", false,
              {fp8(Criterion::kSaturation, 0.0, 0.01), bf16(Criterion::kUnderflow, 44.2, 5, underflow),
               bf16(Criterion::kUnderflow, 44.2, 5, underflow)},
              decide);
    add_layer(rec, c, "layers.0.mlp.linear_fc1", true,
              {fp8(Criterion::kMse, 2e-5, 1e-4), not_judged(Gemm::kDgrad), not_judged(Gemm::kWgrad)},
              decide);
  }
  rec.candidates[0].total_risk = 2.31;
  rec.candidates[0].speedup = 1.375;
  rec.candidates[1].runnable = false;
  rec.candidates[1].excluded = "mxfp8 needs sm_100 or later (TE); h100 is sm_90";
  rec.chosen = 0;
  rec.why = "current/hybrid keeps 71.4 % of the GEMM FLOPs in FP8 with 2 GEMMs to BF16 (risk "
            "2.310), predicted GEMM speedup 1.375x";
  rec.gpu = find_gpu_target("h100");
  REQUIRE(rec.gpu != nullptr);
  rec.cost_source = "roofline";
  rec.watch = {{"layers.0.self_attention.linear_qkv", Role::kGradient, Orientation::kColumnwise, 10,
                Criterion::kUnderflow, 4.1, 5, 0.18},
               {"layers.0.self_attention.linear_qkv", Role::kActivation, Orientation::kRowwise, 20,
                Criterion::kRelMseFloor, 1.2, 4, 0.7}};
  ModulePlan mp;
  mp.base = 0;
  mp.modules = {{"layers.0.self_attention.linear_qkv", 0, ""},
                {"layers.0.mlp.linear_fc2", std::nullopt,
                 "no per-module recipe passes all its GEMMs (1 tried); dgrad: " + underflow},
                {"layers.0.mlp.linear_fc1", 0, ""}};
  mp.fp8_flops = 4e12;
  mp.fp8_flop_share = 4.0 / 7.0;
  mp.speedup = 1.25;
  mp.bf16 = 1;
  mp.why = "per module: 2 of 3 on current/hybrid, 1 in BF16; 57.1 % of the GEMM FLOPs in FP8, "
           "predicted GEMM speedup 1.250x";
  rec.module_plan = mp;
  rec.advisories = {{"Megatron-LM --first-last-layers-bf16; Megatron-Bridge PR #651",
                     "layers.0 (the first) stays FP8: every GEMM passes the policy"}};
  finish(rec);
  check_golden("recipe_mixed.json", render(rec));
}

TEST_CASE("recipe.json: delayed scaling writes margin, history and algo by TE's names") {
  Recommendation rec;
  rec.candidates = {candidate("delayed:history=16:algo=most_recent:margin=1", TrainingFormat::kHybrid)};
  GemmSpec wgrad = fp8(Criterion::kUnderflow, 1.5, 5);
  wgrad.forecast = verdict(true, Criterion::kDelayedForecast, 54000, 10000);
  wgrad.forecast->margin = (54000.0 - 10000.0) / 10000.0;
  add_layer(rec, rec.candidates[0], "layers.3.mlp.linear_fc2", false,
            {fp8(Criterion::kSaturation, 0.001, 0.01), fp8(Criterion::kUnderflow, 2.0, 5), wgrad});
  rec.chosen = 0;
  rec.why = "delayed/hybrid keeps 100.0 % of the GEMM FLOPs in FP8 with 0 GEMMs to BF16 (risk 1.500)";
  rec.watch = {{"layers.3.mlp.linear_fc2", Role::kActivation, Orientation::kRowwise, 10,
                Criterion::kSaturation, 0.001, 0.01, 0.9}};
  finish(rec);
  const std::string got = render(rec);
  CHECK(got.find("\"amax_history_len\": 16") != std::string::npos);
  check_golden("recipe_delayed.json", got);
}

TEST_CASE("recipe.json: FP32 block scales are TE's environment variable, not a keyword") {
  Recommendation rec;
  rec.candidates = {candidate("block:fp32", TrainingFormat::kE4M3)};
  add_layer(rec, rec.candidates[0], "layers.0.mlp.linear_fc1", false,
            {fp8(Criterion::kRelMseFloor, 1.1, 4), fp8(Criterion::kRelMseFloor, 1.3, 4),
             fp8(Criterion::kUnderflow, 0.2, 5)});
  rec.chosen = 0;
  rec.why = "block:fp32/e4m3 keeps 100.0 % of the GEMM FLOPs in FP8 with 0 GEMMs to BF16 (risk 0.725)";
  finish(rec);
  const std::string got = render(rec);
  CHECK(got.find("\"NVTE_FP8_BLOCK_SCALING_FP32_SCALES\": \"1\"") != std::string::npos);
  CHECK(got.find("use_f32_scales") == std::string::npos);
  check_golden("recipe_block_fp32.json", got);
}

TEST_CASE("recipe.json: no runnable candidate is every layer BF16 with the reason, not an error") {
  Recommendation rec;
  rec.candidates = {candidate("current", TrainingFormat::kHybrid)};
  add_layer(rec, rec.candidates[0], "layers.0.mlp.linear_fc1", false,
            {fp8(Criterion::kRelMseFloor, 1.1, 4), fp8(Criterion::kRelMseFloor, 1.3, 4),
             fp8(Criterion::kUnderflow, 0.2, 5)},
            false);
  rec.candidates[0].runnable = false;
  rec.candidates[0].excluded = "current needs sm_89 or later (TE); a100 is sm_80";
  rec.why = "no FP8 candidate can be chosen: current/hybrid: " + rec.candidates[0].excluded;
  LayerDecision ld;
  ld.layer = "layers.0.mlp.linear_fc1";
  for (int g = 0; g < 3; ++g) {
    ld.gemms[static_cast<std::size_t>(g)].gemm = static_cast<Gemm>(g);
    ld.gemms[static_cast<std::size_t>(g)].reason = rec.why;
  }
  rec.layers = {ld};
  rec.gpu = find_gpu_target("a100");
  rec.cost_source = "roofline";
  finish(rec);
  const std::string got = render(rec);
  CHECK(got.find("\"recipe\": null") != std::string::npos);
  check_golden("recipe_all_bf16.json", got);
}

TEST_CASE("recipe.json: what TE's recipe cannot express is a note beside the nearest TE recipe") {
  Recommendation rec;
  rec.candidates = {candidate("mxfp8:floor", TrainingFormat::kE4M3)};
  add_layer(rec, rec.candidates[0], "layers.0.mlp.linear_fc1", false,
            {fp8(Criterion::kRelMseFloor, 1.1, 4), fp8(Criterion::kSaturation, 0.004, 0.01),
             fp8(Criterion::kUnderflow, 0.2, 5)});
  rec.chosen = 0;
  rec.why = "mxfp8:floor/e4m3 keeps 100.0 % of the GEMM FLOPs in FP8 with 0 GEMMs to BF16 (risk 0.725)";
  finish(rec);
  const std::string got = render(rec);
  CHECK(got.find("\"class\": \"MXFP8BlockScaling\"") != std::string::npos);
  CHECK(got.find("OCP MX floor rule") != std::string::npos);
  check_golden("recipe_mxfp8_floor.json", got);
}

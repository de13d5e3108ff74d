// Hand-built Recommendations for the report tests: layers judged and decided GEMM by GEMM under
// a candidate, the plan's FLOPs and Pareto points filled in by finish().
#pragma once

#include <array>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "core/gpu_target.hpp"
#include "core/recipe.hpp"
#include "policies/advice.hpp"
#include "reports/run_info.hpp"

namespace fp8a::testing {

inline RunInfo info() {
  RunInfo i;
  i.version = "0.1.0";
  i.git_revision = "0123456789ab";
  i.command_line = {"fp8-advisor", "run", "--capture", "caps", "--out", "out", "--gpu", "h100"};
  i.requested_device = "auto";
  i.backend = "cpu";
  i.device = "2 threads (oneTBB)";
  return i;
}

inline Verdict verdict(bool passed, Criterion c, double measured, double threshold,
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

inline GemmSpec fp8(Criterion c, double measured, double threshold, const std::string& reason = "") {
  return {true, Precision::kFp8, verdict(true, c, measured, threshold), reason, std::nullopt, 10};
}
inline GemmSpec bf16(Criterion c, double measured, double threshold, const std::string& reason) {
  return {true, Precision::kBf16, verdict(false, c, measured, threshold, reason), reason,
          std::nullopt, 20};
}
inline GemmSpec not_judged(Gemm g) {
  return {false, Precision::kBf16, Verdict{}, std::string(gemm_name(g)) + ": no operand copy captured",
          std::nullopt, 0};
}

// Adds a layer to the candidate (its judgement and plan) and, when `decide`, to rec.layers.
inline void add_layer(Recommendation& rec, CandidatePlan& c, const std::string& name, bool incomplete,
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

inline void finish(Recommendation& rec) {
  // recommend() always names the GPU; h100 unless the test chose one.
  if (rec.gpu == nullptr) rec.gpu = find_gpu_target("h100");
  for (CandidatePlan& c : rec.candidates) {
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
  // The watch list, as recommend() makes it.
  if (rec.chosen) rec.watch = watch_list(rec.candidates[*rec.chosen]);
  // The ranking: the chosen first, the other runnable ones in their order.
  rec.ranking.clear();
  if (rec.chosen) rec.ranking.push_back(*rec.chosen);
  for (std::size_t i = 0; i < rec.candidates.size(); ++i)
    if (rec.candidates[i].runnable && i != rec.chosen) rec.ranking.push_back(i);
  // The Pareto list of the chosen candidate: all-FP8, then one point per GEMM sent to BF16.
  if (rec.chosen) {
    const CandidatePlan& c = rec.candidates[*rec.chosen];
    rec.pareto.push_back({0, "", c.total_flops > 0 ? 1.0 : 0.0, c.speedup, c.total_risk + 1.0,
                          c.gemms_to_bf16, c.gemms_to_bf16 == 0});
    if (c.gemms_to_bf16 > 0)
      rec.pareto.push_back({c.gemms_to_bf16, c.layers.back().layer + " fprop", c.fp8_flop_share,
                            c.speedup, c.total_risk, 0, true});
  }
}

inline CandidatePlan candidate(const std::string& spec, TrainingFormat format) {
  CandidatePlan c;
  c.candidate = {parse_recipe(spec), format};
  return c;
}

// A layer no GEMM of which was judged: every GEMM BF16 with `reason` (no candidate chosen).
inline LayerDecision all_bf16_layer(const std::string& name, const std::string& reason) {
  LayerDecision ld;
  ld.layer = name;
  for (int g = 0; g < 3; ++g) {
    ld.gemms[static_cast<std::size_t>(g)].gemm = static_cast<Gemm>(g);
    ld.gemms[static_cast<std::size_t>(g)].reason = reason;
  }
  return ld;
}

// current/hybrid chosen on h100 by the roofline: QKV all FP8 (its wgrad kept close to the limit),
// FC2's dgrad and wgrad in BF16 for underflow, FC1 incomplete; mxfp8/e4m3 excluded for the GPU;
// a per-module plan with FC2 in BF16 and one advisory.
inline Recommendation mixed_recommendation() {
  Recommendation rec;
  rec.candidates = {candidate("current", TrainingFormat::kHybrid),
                    candidate("mxfp8", TrainingFormat::kE4M3)};
  const std::string underflow =
      "step 20 gradient underflow 44.200 % of elements (31.000 % of its energy) under "
      "current/hybrid";
  for (std::size_t i = 0; i < 2; ++i) {
    CandidatePlan& c = rec.candidates[i];
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
  FP8A_CHECK(rec.gpu != nullptr, "h100 is a GPU target");
  rec.cost_source = "roofline";
  rec.cost_basis = "roofline at 8192 tokens a step (--tokens-per-step)";
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
  // Its tiers: 3.5 ms of GEMM time in BF16, 2.8 ms in the plan (1.25x).
  mp.tiers = {{0, 2, 6, 4e12, 1.2, 2e-3, 1.3e-3}, {std::nullopt, 1, 3, 3e12, 0.0, 1.5e-3, 1.5e-3}};
  rec.module_plan = mp;
  rec.advisories = {{"Megatron-LM --first-last-layers-bf16; Megatron-Bridge PR #651",
                     "layers.0 (the first) stays FP8: every GEMM passes the policy"}};
  finish(rec);
  return rec;
}

}  // namespace fp8a::testing

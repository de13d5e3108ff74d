// The steps of recommend() on hand-built judgements, each number worked out by hand in the
// comments: the BF16-fallback plan, the choice, the preference order, the Pareto path, the
// module-plan note and the limits. test_advice.cpp runs the whole pipeline on real evaluations.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "policies/advice.hpp"

namespace {

using namespace fp8a;

// Sums of a few doubles: exact up to rounding.
constexpr double kSumTolerance = 1e-12;

RunCandidate cand(const std::string& recipe, TrainingFormat format) {
  return {parse_recipe_list(recipe).at(0), format};
}

// A judged GEMM over one step (step 2), passing or failing with the given margin and risk.
GemmJudgement judged(Gemm g, bool safe, double flops, double risk, const std::string& reason = "") {
  GemmJudgement j;
  j.gemm = g;
  j.judged = true;
  j.worst.passed = safe;
  j.worst.margin = safe ? 0.5 : -0.5;
  j.worst.risk = risk;
  j.worst.reason = reason;
  j.worst_step = 2;
  j.steps = 1;
  if (!safe) {
    j.failed_steps = 1;
    j.failures.push_back({2, j.worst});
  }
  j.flops = flops;
  j.fp8_safe = safe;
  j.risk = risk;
  return j;
}

LayerJudgement layer(const std::string& name, GemmJudgement fprop, GemmJudgement dgrad, GemmJudgement wgrad) {
  LayerJudgement l;
  l.layer = name;
  l.steps = {2};
  l.gemms = {fprop, dgrad, wgrad};
  bool any = false, all = true;
  for (const GemmJudgement& j : l.gemms)
    if (j.judged) any = true, all = all && j.fp8_safe;
  l.fp8_safe = any && all;
  return l;
}

GemmJudgement unjudged(Gemm g) {
  GemmJudgement j;
  j.gemm = g;
  j.unjudged = "no gradient (dY) captured";
  return j;
}

// A: fprop passes (100 FLOPs, risk 0.5), dgrad fails (200, risk 2), wgrad not judged.
// B: every GEMM passes (50 FLOPs, risk 0.1 each).
// C: fprop passes with no FLOPs (no complete step) and risk 0.4; the others not judged.
std::vector<LayerJudgement> judgements() {
  return {layer("A", judged(Gemm::kFprop, true, 100, 0.5), judged(Gemm::kDgrad, false, 200, 2.0, "too coarse"),
                unjudged(Gemm::kWgrad)),
          layer("B", judged(Gemm::kFprop, true, 50, 0.1), judged(Gemm::kDgrad, true, 50, 0.1),
                judged(Gemm::kWgrad, true, 50, 0.1)),
          layer("C", judged(Gemm::kFprop, true, 0, 0.4), unjudged(Gemm::kDgrad), unjudged(Gemm::kWgrad))};
}

}  // namespace

TEST_CASE("plan_fallback: passing GEMMs FP8, failing ones BF16; the global scope sends all") {
  const RunCandidate c = cand("current", TrainingFormat::kHybrid);
  const CandidatePlan local = plan_fallback(c, judgements(), FallbackScope::kGemm);
  using P = Precision;
  CHECK(local.plan == std::vector<std::array<P, 3>>{{P::kFp8, P::kBf16, P::kBf16},
                                                    {P::kFp8, P::kFp8, P::kFp8},
                                                    {P::kFp8, P::kBf16, P::kBf16}});
  CHECK(local.gemms_to_bf16 == 1);                   // A dgrad; unjudged GEMMs are not counted
  CHECK(local.total_flops == 450);                   // 100 + 200 + 3 * 50 + 0
  CHECK(local.fp8_flops == 250);                     // all but A dgrad
  CHECK(local.fp8_flop_share == doctest::Approx(250.0 / 450.0).epsilon(kSumTolerance));
  CHECK(local.total_risk == doctest::Approx(0.5 + 0.3 + 0.4).epsilon(kSumTolerance));
  CHECK(local.worst_failure == "A dgrad: too coarse");
  REQUIRE(local.failures_by_step.size() == 1);
  CHECK(local.failures_by_step[0].step == 2);
  CHECK(local.failures_by_step[0].gemms == 1);
  CHECK(local.failures_by_step[0].worst == "A dgrad: too coarse");

  const std::vector<LayerDecision> d = decide_layers(local, FallbackScope::kGemm);
  REQUIRE(d.size() == 3);
  CHECK(d[0].precision == P::kMixed);
  CHECK(d[1].precision == P::kFp8);
  CHECK(d[0].gemms[1].reason == "too coarse");
  // Not judged, and trained as the files leave it: under the recipe, since the plan keeps GEMMs FP8.
  CHECK(d[0].gemms[2].reason ==
        "not judged: no gradient (dY) captured; the files train it under current/hybrid, as every module they do "
        "not name");
  CHECK_FALSE(d[0].gemms[2].judged);
  CHECK(d[0].gemms[2].precision == P::kFp8);
  CHECK(d[1].gemms[0].reason.empty());  // no limiting check close to its threshold: no "kept FP8" note

  const CandidatePlan global = plan_fallback(c, judgements(), FallbackScope::kGlobal);
  CHECK(global.gemms_to_bf16 == 6);  // every judged GEMM: A fprop and dgrad, B x3, C fprop
  CHECK(global.fp8_flops == 0);
  CHECK(global.total_risk == 0);
  const std::vector<LayerDecision> g = decide_layers(global, FallbackScope::kGlobal);
  CHECK(g[1].precision == P::kBf16);
  CHECK(g[1].gemms[0].reason == "every GEMM to BF16 (policy scope global): A dgrad: too coarse");
}

TEST_CASE("the preference order and the risk tie") {
  const std::size_t i0 = 0, i1 = 1;
  CHECK(preferred_candidate(cand("current", TrainingFormat::kHybrid), i1, cand("block", TrainingFormat::kHybrid), i0));
  CHECK(preferred_candidate(cand("current", TrainingFormat::kHybrid), i1, cand("current", TrainingFormat::kE4M3), i0));
  CHECK(preferred_candidate(cand("mxfp8", TrainingFormat::kE4M3), i1, cand("mxfp8", TrainingFormat::kHybrid), i0));
  CHECK(preferred_candidate(cand("block", TrainingFormat::kE4M3), i1, cand("delayed", TrainingFormat::kHybrid), i0));
  CHECK(preferred_candidate(cand("block", TrainingFormat::kE4M3), i0, cand("block", TrainingFormat::kE4M3), i1));
  CHECK_FALSE(preferred_candidate(cand("block", TrainingFormat::kE4M3), i1, cand("block", TrainingFormat::kE4M3), i0));
  CHECK(risk_tied(1.0, 1.1));    // 0.1 <= 0.10 * 1.1
  CHECK_FALSE(risk_tied(1.0, 1.12));  // 0.12 > 0.112
}

TEST_CASE("choose_candidate: FP8 FLOPs, then risk beyond the tie, then the preference order") {
  const auto advice = [](const RunCandidate& c, double fp8_flops, double risk) {
    CandidatePlan a;
    a.candidate = c;
    a.total_flops = 200;
    a.fp8_flops = fp8_flops;
    a.fp8_flop_share = fp8_flops / 200;
    a.total_risk = risk;
    a.fp8_gemms = 2;
    return a;
  };
  std::vector<CandidatePlan> cs = {advice(cand("block", TrainingFormat::kHybrid), 100, 0.95),
                                     advice(cand("current", TrainingFormat::kHybrid), 100, 1.0),
                                     advice(cand("delayed", TrainingFormat::kHybrid), 120, 5.0)};
  Choice ch = choose_candidate(cs, false);
  CHECK(ch.chosen == 2u);
  CHECK(ch.next == 1u);  // ties block on risk (0.05 <= 0.1), first in the preference order
  CHECK(choice_why(cs, ch, false) ==
        candidate_name(cs[2].candidate) +
            " keeps 60.0 % of the GEMM FLOPs in FP8 with 0 GEMMs to BF16 (mean threshold load 2.50 "
            "over 2 FP8 GEMMs); next current/hybrid 50.0 % with 0 to BF16 (mean threshold load 0.50 "
            "over 2 FP8 GEMMs): more FP8 FLOPs");
  cs[2].runnable = false;
  cs[2].excluded = "not here";
  ch = choose_candidate(cs, false);
  CHECK(ch.chosen == 1u);
  CHECK(choice_why(cs, ch, false).ends_with(": tied, preference order"));
  cs[0].total_risk = 0.5;  // beyond the tie now
  ch = choose_candidate(cs, false);
  CHECK(ch.chosen == 0u);
  CHECK(choice_why(cs, ch, false).ends_with(": tied on FLOPs, lower threshold load"));
  // With a cost model the speedup decides first.
  cs[0].speedup = 1.1;
  cs[1].speedup = 1.3;
  ch = choose_candidate(cs, true);
  CHECK(ch.chosen == 1u);
  CHECK(choice_why(cs, ch, true).ends_with(", 1.100x: faster"));
  cs[0].runnable = cs[1].runnable = false;
  cs[0].excluded = "a";
  cs[1].excluded = "b";
  ch = choose_candidate(cs, true);
  CHECK_FALSE(ch.chosen);
  CHECK(choice_why(cs, ch, true) ==
        "no FP8 candidate can be chosen: block/hybrid: a; current/hybrid: b; " + candidate_name(cs[2].candidate) +
            ": not here");
  CHECK(choice_why({}, ch, true) == "no FP8 candidate was evaluated");
}

TEST_CASE("choose_candidate between widths: FLOPs count at their nominal rates (4-bit 4x, 8-bit 2x BF16's)") {
  const auto advice = [](const RunCandidate& c, double fp8_flops) {
    CandidatePlan a;
    a.candidate = c;
    a.total_flops = 240;
    a.fp8_flops = a.numerics_fp8_flops = fp8_flops;
    a.fp8_flop_share = fp8_flops / 240;
    a.fp8_gemms = 1;
    return a;
  };
  // calibration nvfp4-outlier20: NVFP4 keeps 22 of 24 equal GEMMs (saves 0.75 x 220 = 165 FLOP
  // units of BF16 time), MXFP8 23 (0.5 x 230 = 115): NVFP4 first, though it keeps fewer FLOPs.
  std::vector<CandidatePlan> cs = {advice(cand("mxfp8", TrainingFormat::kE4M3), 230),
                                     advice(cand("nvfp4", TrainingFormat::kE4M3), 220)};
  Choice ch = choose_candidate(cs, false);
  CHECK(ch.chosen == 1u);
  CHECK(choice_why(cs, ch, false).ends_with(
      ": more BF16 GEMM time saved at nominal rates (4-bit 4x, 8-bit 2x BF16's)"));
  // Break-even: NVFP4 on two thirds of MXFP8's FLOPs saves as much; one FLOP fewer loses.
  cs[1] = advice(cand("nvfp4", TrainingFormat::kE4M3), 153);  // 114.75 < 115
  CHECK(choose_candidate(cs, false).chosen == 0u);
  // Costed, equally fast (every GEMM BF16 where FP8 would not pay): the same nominal saving of
  // what the numbers allow decides.
  cs[1] = advice(cand("nvfp4", TrainingFormat::kE4M3), 220);
  cs[0].speedup = cs[1].speedup = 1.0;
  ch = choose_candidate(cs, true);
  CHECK(ch.chosen == 1u);
  CHECK(choice_why(cs, ch, true).ends_with(
      ": as fast, more BF16 GEMM time the numbers allow saving at nominal rates (4-bit 4x, 8-bit 2x BF16's)"));
}

// block:2d and mxfp8:floor are evaluated, never chosen (TE cannot train them): the why says when
// one would have ranked first.
TEST_CASE("evaluation-only candidates: never chosen, named in the why when they would rank first") {
  CHECK(te_cannot_train(parse_recipe("block:2d")).starts_with("128x128 blocks for every role"));
  CHECK(te_cannot_train(parse_recipe("mxfp8:floor")).starts_with("the OCP MX floor rule"));
  for (const char* trains : {"block", "block:fp32", "mxfp8", "current", "current:pow2", "delayed", "bf16"})
    CHECK(te_cannot_train(parse_recipe(trains)).empty());
  const auto plan = [](const RunCandidate& c, double fp8_flops) {
    CandidatePlan a;
    a.candidate = c;
    a.total_flops = 200;
    a.fp8_flops = fp8_flops;
    a.fp8_flop_share = fp8_flops / 200;
    a.fp8_gemms = 2;
    return a;
  };
  std::vector<CandidatePlan> cs = {plan(cand("current", TrainingFormat::kHybrid), 100),
                                     plan(cand("block:2d", TrainingFormat::kHybrid), 150)};
  cs[1].runnable = false;
  cs[1].evaluation_only = true;
  cs[1].excluded = "evaluation only: " + te_cannot_train(cs[1].candidate.recipe);
  const Choice ch = choose_candidate(cs, false);
  CHECK(ch.chosen == 0u);
  CHECK_FALSE(ch.next);
  CHECK(choice_why(cs, ch, false) ==
        "current/hybrid keeps 50.0 % of the GEMM FLOPs in FP8 with 0 GEMMs to BF16 (mean threshold load "
        "0.00 over 2 FP8 GEMMs); block:2d/hybrid would rank first (75.0 % of the GEMM FLOPs in FP8 with 0 "
        "to BF16) but is evaluation only: 128x128 blocks for every role are not a recipe TE trains with "
        "(Float8BlockScaling: 1x128 for activations and gradients, 128x128 for weights)");
  cs[1].fp8_flops = 50;  // ranks after the chosen: not named
  CHECK(choice_why(cs, choose_candidate(cs, false), false).find("evaluation only") == std::string::npos);
}

TEST_CASE("pareto_path without a cost model: FP8 share against risk, dominated points dropped") {
  const CandidatePlan c =
      plan_fallback(cand("current", TrainingFormat::kHybrid), judgements(), FallbackScope::kGemm);
  const std::vector<ParetoPoint> p = pareto_path(c, nullptr, CostRows(3));
  // The order: A dgrad (failing), then the FP8 GEMMs by falling risk: A fprop 0.5, C fprop 0.4,
  // B's three 0.1. After A fprop the share is 150/450 at risk 0.7; moving C fprop (no FLOPs)
  // keeps 150/450 at risk 0.3, so the A fprop point is dominated.
  std::vector<std::string> moved;
  for (const ParetoPoint& q : p) moved.push_back(q.moved);
  CHECK(moved == std::vector<std::string>{"", "A dgrad", "C fprop", "B fprop", "B dgrad", "B wgrad"});
  REQUIRE(p.size() == 6);
  CHECK(p[0].fp8_flop_share == 1.0);
  CHECK(p[0].risk == doctest::Approx(3.2).epsilon(kSumTolerance));  // 2 + 0.5 + 0.4 + 0.3
  CHECK(p[0].failing_in_fp8 == 1);
  CHECK(p[1].chosen);
  CHECK(p[1].gemms_to_bf16 == 1);
  CHECK(p[1].fp8_flop_share == doctest::Approx(250.0 / 450.0).epsilon(kSumTolerance));
  CHECK(p[1].risk == doctest::Approx(1.2).epsilon(kSumTolerance));
  CHECK(p[2].gemms_to_bf16 == 3);
  CHECK(p[2].fp8_flop_share == doctest::Approx(150.0 / 450.0).epsilon(kSumTolerance));
  CHECK(p[2].risk == doctest::Approx(0.3).epsilon(kSumTolerance));
  CHECK(p[5].fp8_flop_share == 0.0);
  CHECK(p[5].risk == 0.0);
  CHECK_FALSE(p[5].speedup);
}

TEST_CASE("module_plan_note: why there is no per-module plan") {
  std::vector<CandidatePlan> cs(1);
  cs[0].candidate = cand("delayed", TrainingFormat::kHybrid);
  CHECK(module_plan_note(cs, std::nullopt, FallbackScope::kGemm) ==
        "no per-module plan: no FP8 candidate was chosen");
  CHECK(module_plan_note(cs, 0, FallbackScope::kGlobal).starts_with("no per-module plan: the policy's scope is global"));
  CHECK(module_plan_note(cs, 0, FallbackScope::kGemm).starts_with("no per-module plan: no candidate that runs here"));
  cs[0].candidate = cand("current", TrainingFormat::kHybrid);
  CHECK(module_plan_note(cs, 0, FallbackScope::kGemm).empty());
  cs[0].runnable = false;
  CHECK_FALSE(module_plan_note(cs, 0, FallbackScope::kGemm).empty());
}

TEST_CASE("module_plan_conflict: no module in FP8 where the chosen plan keeps every GEMM BF16") {
  CandidatePlan chosen;
  ModulePlan mp;
  mp.modules.resize(3);
  mp.modules[1].candidate = 0;  // one module FP8
  mp.bf16 = 2;
  mp.why = "per module: 1 of 3 on current/hybrid, 2 in BF16";
  CHECK(module_plan_conflict(chosen, mp) ==
        "no per-module plan: the chosen plan keeps no GEMM in FP8, and one per module would keep 1 of 3 "
        "modules in FP8 (per module: 1 of 3 on current/hybrid, 2 in BF16)");
  chosen.fp8_gemms = 1;  // the answer keeps FP8 GEMMs: the plan may mix
  CHECK(module_plan_conflict(chosen, mp).empty());
  chosen.fp8_gemms = 0;
  mp.modules[1].candidate.reset();  // every module BF16: the plan says what the answer says
  mp.bf16 = 3;
  CHECK(module_plan_conflict(chosen, mp).empty());
}

TEST_CASE("recommendation_limits: no amax trend from one step; incomplete layers counted") {
  const std::vector<CapturedLayer> one_step = {{"A", {2}, false}, {"B", {2}, true}};
  std::vector<LayerDecision> layers(2);
  layers[1].incomplete = true;
  const std::vector<std::string> l = recommendation_limits(one_step, {}, {}, layers);
  REQUIRE(l.size() == 2);
  CHECK(l[0].starts_with("no amax trend: 1 captured step and no training log of more;"));
  CHECK(l[1] == "1 layer not captured or paired whole at some step (recipe.json: incomplete): each GEMM judged at "
               "the steps where both of its operands were, 6 of 6 GEMMs at none (not judged, said GEMM by GEMM)");
  // Two steps, no delayed candidate: the trend is not needed.
  const std::vector<CapturedLayer> two_steps = {{"A", {2, 4}, false}};
  CHECK(recommendation_limits(two_steps, {}, {}, {LayerDecision{}}).empty());
}

// TE's GroupedLinear runs every expert of a grouped module in one recipe, and no config can set
// one expert apart: one expert's failing GEMM sends that GEMM of every expert to BF16, so the
// plan's FP8 share is what the configs train. An unjudged GEMM (an expert with no token) sends
// nothing; names that only look alike ("moe.expert3") are modules of their own.
TEST_CASE("plan_fallback: a grouped module's experts share each GEMM's precision") {
  const std::string m = "decoder.layers.0.mlp.experts.linear_fc1";
  const auto passing = [](Gemm g) { return judged(g, true, 10, 0.1); };
  const std::vector<LayerJudgement> js = {
      layer(m + ".expert0", passing(Gemm::kFprop), passing(Gemm::kDgrad), passing(Gemm::kWgrad)),
      layer(m + ".expert1", judged(Gemm::kFprop, false, 10, 2.0, "weight underflow 99 %"), passing(Gemm::kDgrad),
            passing(Gemm::kWgrad)),
      layer(m + ".expert2", passing(Gemm::kFprop), unjudged(Gemm::kDgrad), passing(Gemm::kWgrad)),
      layer("moe.expert3", passing(Gemm::kFprop), passing(Gemm::kDgrad), passing(Gemm::kWgrad)),
      layer("moe.expert4", judged(Gemm::kFprop, false, 10, 2.0, "too coarse"), passing(Gemm::kDgrad),
            passing(Gemm::kWgrad))};
  const CandidatePlan p = plan_fallback(cand("current", TrainingFormat::kHybrid), js, FallbackScope::kGemm);
  using P = Precision;
  CHECK(p.plan == std::vector<std::array<P, 3>>{{P::kBf16, P::kFp8, P::kFp8},
                                                {P::kBf16, P::kFp8, P::kFp8},
                                                {P::kBf16, P::kBf16, P::kFp8},
                                                {P::kFp8, P::kFp8, P::kFp8},
                                                {P::kBf16, P::kFp8, P::kFp8}});
  CHECK(p.gemms_to_bf16 == 4);   // the three experts' fprop, moe.expert4's
  CHECK(p.total_flops == 140);   // 14 judged GEMMs of 10
  CHECK(p.fp8_flops == 100);     // 10 FP8 GEMMs: 2 + 2 + 1 + 3 + 2
  const std::vector<LayerDecision> d = decide_layers(p, FallbackScope::kGemm);
  const std::string why = "BF16 with its grouped module (TE's GroupedLinear runs all its experts in one recipe), for " +
                          m + ".expert1 fprop: weight underflow 99 %";
  CHECK(d[0].gemms[0].reason == why);
  CHECK(d[2].gemms[0].reason == why);
  CHECK(d[1].gemms[0].reason == "weight underflow 99 %");
  CHECK(d[0].gemms[1].reason.empty());

  // The per-module plan: the grouped module's experts on one recipe, here BF16 for all of them
  // (expert1 has no recipe that passes all its GEMMs); the look-alikes each on their own.
  const std::vector<CandidatePlan> cands = {p};
  const ModulePlan mp = plan_modules(cands, 0, nullptr, CostRows(js.size()));
  REQUIRE(mp.modules.size() == 5);
  for (std::size_t li : {0, 2}) {
    CHECK_FALSE(mp.modules[li].candidate);
    CHECK(mp.modules[li].reason.starts_with("with its grouped module (TE's GroupedLinear runs all its experts in one "
                                            "recipe), for " + m + ".expert1: no per-module recipe passes"));
  }
  CHECK_FALSE(mp.modules[1].candidate);
  CHECK(mp.modules[3].candidate == std::optional<std::size_t>(0));
  CHECK_FALSE(mp.modules[4].candidate);
  CHECK(mp.bf16 == 4);
  CHECK(mp.fp8_flops == 30);  // moe.expert3's three GEMMs
}

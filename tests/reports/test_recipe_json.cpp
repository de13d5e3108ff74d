// recipe.json: hand-built Recommendations in, golden files out (tests/golden/reports/recipe_*.json),
// diffed exactly; the consumer test recipe_json validates those files against
// reports/consumers/recipe.schema.json and builds their "recipe" with Transformer Engine.
// Refresh on purpose with FP8A_UPDATE_GOLDEN=1 and review the diff.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "support/golden.hpp"
#include "support/recommendations.hpp"
#include "core/gpu_target.hpp"
#include "reports/consumers/recipe_json.hpp"

namespace fs = std::filesystem;

namespace {

using fp8a::testing::check_golden;
using fp8a::testing::slurp;
using namespace fp8a::testing;

using namespace fp8a;

std::string render(const Recommendation& rec) {
  const Artifact a = render_recipe_json(plan_consumers(rec), info());
  CHECK(a.name == "recipe.json");
  return a.contents;
}

}  // namespace

TEST_CASE("recipe.json: mixed layers, a BF16 fallback with reasons, the roofline's speedup") {
  const Recommendation rec = mixed_recommendation();
  check_golden("recipe_mixed.json", render(rec));
}

TEST_CASE("recipe.json: delayed scaling writes margin, history and algo by TE's names") {
  Recommendation rec;
  rec.candidates = {candidate("delayed:history=16:algo=most_recent:margin=1", TrainingFormat::kHybrid)};
  GemmSpec wgrad = fp8(Criterion::kUnderflow, 1.5, 5);
  wgrad.forecast = verdict(true, Criterion::kSaturation, 0.002, 0.05);
  wgrad.forecast->margin = 0.96;  // (0.05 - 0.002) / 0.05
  add_layer(rec, rec.candidates[0], "layers.3.mlp.linear_fc2", false,
            {fp8(Criterion::kSaturation, 0.001, 0.01), fp8(Criterion::kUnderflow, 2.0, 5), wgrad});
  rec.chosen = 0;
  rec.why = "delayed/hybrid keeps 100.0 % of the GEMM FLOPs in FP8 with 0 GEMMs to BF16 (risk 1.500)";
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

// For TE 2.4 (the oldest --te-version): Float8CurrentScaling has no power-of-two scales before 2.8,
// so current:pow2 is a note and no environment variable (TE 2.4's recipe classes build it:
// tests/consumers run_checks.py te_oldest).
TEST_CASE("recipe.json for TE 2.4: current:pow2 cannot be expressed, the recipe still builds") {
  Recommendation rec;
  rec.candidates = {candidate("current:pow2", TrainingFormat::kHybrid)};
  add_layer(rec, rec.candidates[0], "layers.0.mlp.linear_fc1", false,
            {fp8(Criterion::kRelMseFloor, 1.1, 4), fp8(Criterion::kRelMseFloor, 1.3, 4),
             fp8(Criterion::kUnderflow, 0.2, 5)});
  rec.chosen = 0;
  rec.why = "current:pow2/hybrid keeps 100.0 % of the GEMM FLOPs in FP8 with 0 GEMMs to BF16";
  rec.te_version = kTeOldest;
  finish(rec);
  const std::string got = render(rec);
  CHECK(got.find("\"te_version\": \"2.4\"") != std::string::npos);
  CHECK(got.find("\"recipe\": {\n    \"class\": \"Float8CurrentScaling\",\n    \"fp8_format\": \"HYBRID\"\n  },") !=
        std::string::npos);  // no env, no field
  CHECK(got.find("not expressible on TE 2.4") != std::string::npos);
  check_golden("recipe_pow2_te2.4.json", got);
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
  rec.layers = {all_bf16_layer("layers.0.mlp.linear_fc1", rec.why)};
  rec.gpu = find_gpu_target("a100");
  rec.cost_source = "roofline";
  rec.cost_basis = "roofline at 8192 tokens a step (--tokens-per-step)";
  finish(rec);
  const std::string got = render(rec);
  CHECK(got.find("\"recipe\": null") != std::string::npos);
  check_golden("recipe_all_bf16.json", got);
}

TEST_CASE("recipe.json: a chosen plan that keeps no GEMM in FP8 has no recipe: train in BF16") {
  Recommendation rec;
  rec.candidates = {candidate("current", TrainingFormat::kHybrid)};
  const std::string under = "gradient underflow 44.200 % under current/hybrid";
  add_layer(rec, rec.candidates[0], "layers.0.mlp.linear_fc2", false,
            {bf16(Criterion::kUnderflow, 44.2, 5, under), bf16(Criterion::kUnderflow, 44.2, 5, under),
             bf16(Criterion::kUnderflow, 44.2, 5, under)});
  rec.chosen = 0;
  rec.why = "current/hybrid keeps 0.0 % of the GEMM FLOPs in FP8 with 3 GEMMs to BF16";
  finish(rec);
  const std::string got = render(rec);
  CHECK(got.find("\"recipe\": null") != std::string::npos);
  CHECK(got.find("\"candidate\": {") != std::string::npos);  // who was chosen stays said
  check_golden("recipe_plan_all_bf16.json", got);
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

TEST_CASE("plan_differences: the candidate, the FP8 share, layers and GEMM precisions, in that order") {
  const std::string before = R"({"candidate": {"name": "current/hybrid"}, "predicted": {"fp8_flop_share": 1.0},
    "layers": [{"layer": "a", "gemms": {"fprop": {"precision": "fp8"}, "dgrad": {"precision": "fp8"},
                                        "wgrad": {"precision": "fp8"}}},
               {"layer": "gone", "gemms": {}}]})";
  const std::string after = R"({"candidate": {"name": "block/hybrid"}, "predicted": {"fp8_flop_share": 0.75},
    "layers": [{"layer": "a", "gemms": {"fprop": {"precision": "fp8"}, "dgrad": {"precision": "fp8"},
                                        "wgrad": {"precision": "bf16", "reason": "wgrad underflow 9 %"}}},
               {"layer": "new\u001b[31m", "gemms": {}}]})";
  std::string why;
  const auto d = fp8a::plan_differences(before, after, &why);
  REQUIRE(d.has_value());
  CHECK(*d == std::vector<std::string>{"candidate: current/hybrid -> block/hybrid",
                                       "FP8 share of the GEMM FLOPs: 100.0 % -> 75.0 %", "gone: only in the earlier plan",
                                       "new\\x1b[31m: only in the new plan", "a wgrad: fp8 -> bf16: wgrad underflow 9 %"});
  CHECK(fp8a::plan_differences(after, after, &why)->empty());
  // No chosen candidate is "none".
  const std::string none = R"({"candidate": null, "predicted": {"fp8_flop_share": 0.75}, "layers": []})";
  CHECK(fp8a::plan_differences(none, none, &why)->empty());
  CHECK(fp8a::plan_differences(before, none, &why)->front() == "candidate: current/hybrid -> none");
  for (const char* bad : {"[1]", "{", R"({"layers": []})", R"({"layers": [1], "predicted": {}})"}) {
    CAPTURE(bad);
    CHECK_FALSE(fp8a::plan_differences(bad, after, &why).has_value());
    CHECK_FALSE(why.empty());
  }
}

// TE's recipe object for a candidate: the call the answer prints and the object recipe.json holds
// come from one mapping. Expected values from TE 2.20.2's constructor fields and defaults
// (transformer_engine/common/recipe/__init__.py; tests/consumers/check_te_recipe.py builds the
// objects with TE itself).
#include <doctest/doctest.h>

#include "reports/consumers/te_recipe.hpp"

using namespace fp8a;

namespace {
std::string call(const char* spec, TrainingFormat f) {
  return te_recipe_call(te_recipe_for({parse_recipe(spec), f}, kTeNewest));
}
}  // namespace

TEST_CASE("te_recipe_call: TE's class, format and the fields that differ from TE's defaults") {
  CHECK(call("current", TrainingFormat::kHybrid) == "Float8CurrentScaling(fp8_format=Format.HYBRID)");
  // Current scaling's quantizer reads the constructor field (not a QParams class attribute).
  CHECK(call("current:pow2", TrainingFormat::kE4M3) ==
        "Float8CurrentScaling(fp8_format=Format.E4M3); env NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES=1");
  CHECK(call("delayed", TrainingFormat::kHybrid) == "DelayedScaling(fp8_format=Format.HYBRID)");
  CHECK(call("delayed:history=16:algo=most_recent:margin=1", TrainingFormat::kHybrid) ==
        "DelayedScaling(fp8_format=Format.HYBRID, margin=1, amax_history_len=16, "
        "amax_compute_algo=\"most_recent\")");
  // FP32 block scales are an environment variable: use_f32_scales=True does not change them.
  CHECK(call("block:fp32", TrainingFormat::kE4M3) ==
        "Float8BlockScaling(fp8_format=Format.E4M3); env NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1");
  // 2-D blocks for every role: TE rejects 2-D x 2-D block dims, so no such field is written.
  CHECK(call("block:2d", TrainingFormat::kHybrid) ==
        "Float8BlockScaling(fp8_format=Format.HYBRID); block:2d: 128x128 blocks for every role are "
        "not a recipe TE trains with (Float8BlockScaling: 1x128 for activations and gradients, "
        "128x128 for weights)");
  CHECK(call("mxfp8", TrainingFormat::kE4M3) == "MXFP8BlockScaling(fp8_format=Format.E4M3)");
}

TEST_CASE("te_recipe_for: delayed writes every field, defaults marked") {
  const TeRecipe t = te_recipe_for({parse_recipe("delayed"), TrainingFormat::kHybrid}, kTeNewest);
  REQUIRE(t.fields.size() == 3);
  CHECK(t.fields[0].name == "margin");
  CHECK(std::get<int>(t.fields[0].value) == 0);
  CHECK(t.fields[1].name == "amax_history_len");
  CHECK(std::get<int>(t.fields[1].value) == 1024);
  CHECK(t.fields[2].name == "amax_compute_algo");
  CHECK(std::get<std::string>(t.fields[2].value) == "max");
  for (const auto& f : t.fields) CHECK(f.te_default);
  CHECK(t.env.empty());
  CHECK(t.notes.empty());
}

TEST_CASE("te_recipe_for: current:pow2 is an env var from TE 2.8, a 'not expressible' note before") {
  const RunCandidate c{parse_recipe("current:pow2"), TrainingFormat::kHybrid};
  CHECK(te_recipe_call(te_recipe_for(c, {2, 8})) ==
        "Float8CurrentScaling(fp8_format=Format.HYBRID); env NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES=1");
  CHECK(te_recipe_call(te_recipe_for(c, {2, 7})) ==
        "Float8CurrentScaling(fp8_format=Format.HYBRID); current:pow2: not expressible on TE 2.7: "
        "power-of-two current scaling needs TE 2.8 (NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES); "
        "TE 2.7 trains Float8CurrentScaling with FP32 scales");
}

// --te-version's parsing and the per-release facts, against TE's sources (core/te_version.hpp).
#include <doctest/doctest.h>

#include "core/recipe.hpp"
#include "core/te_version.hpp"

using namespace fp8a;

TEST_CASE("parse_te_version: X.Y and X.Y.Z in 2.4..2.20, one-line reasons otherwise") {
  std::string why;
  CHECK(parse_te_version("2.20", &why) == TeVersion{2, 20});
  CHECK(parse_te_version("2.4", &why) == TeVersion{2, 4});
  CHECK(parse_te_version("2.12.1", &why) == TeVersion{2, 12});
  CHECK_FALSE(parse_te_version("2.3", &why).has_value());
  CHECK(why == "fp8-advisor writes files for Transformer Engine 2.4 to 2.20");
  CHECK_FALSE(parse_te_version("2.21", &why).has_value());
  CHECK_FALSE(parse_te_version("3.0", &why).has_value());
  for (const char* bad : {"", "2", "2.", "2.x", "v2.4", "2.4.", "2.4.1.1", " 2.4", "2.4 "}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_te_version(bad, &why).has_value());
    CHECK(why == "expected a Transformer Engine release X.Y or X.Y.Z, from 2.4 to 2.20");
  }
  CHECK(te_version_text({2, 9}) == "2.9");
}

TEST_CASE("TE facts by release: autocast 2.9, DisableQuantization* 2.13, FP8 scale stats 2.7, pow2 env 2.8") {
  CHECK_FALSE(te_has_autocast({2, 8}));
  CHECK(te_has_autocast({2, 9}));
  CHECK_FALSE(te_has_disable_quantization({2, 12}));
  CHECK(te_has_disable_quantization({2, 13}));
  CHECK_FALSE(te_has_fp8_scale_stats({2, 6}));
  CHECK(te_has_fp8_scale_stats({2, 7}));
  CHECK_FALSE(te_has_current_pow2_env({2, 7}));
  CHECK(te_has_current_pow2_env({2, 8}));
  CHECK_FALSE(te_has_block_on_blackwell({2, 8}));
  CHECK(te_has_block_on_blackwell({2, 9}));
}

TEST_CASE("te_release_cannot_train: current:pow2 before TE 2.8 only; every other recipe on every release") {
  using fp8a::parse_recipe;
  CHECK(te_release_cannot_train(parse_recipe("current:pow2"), {2, 7}) ==
        "power-of-two current scaling needs TE 2.8 (NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES); TE 2.7 trains "
        "Float8CurrentScaling with FP32 scales");
  CHECK(te_release_cannot_train(parse_recipe("current:pow2"), {2, 8}).empty());
  for (const char* spec : {"current", "delayed", "block", "block:fp32", "mxfp8", "bf16"})
    for (const fp8a::TeVersion te : {fp8a::kTeOldest, fp8a::kTeNewest}) CHECK(te_release_cannot_train(parse_recipe(spec), te).empty());
}

TEST_CASE("te_release_cannot_train: block scaling on sm_100+ before TE 2.9, on Hopper on every release") {
  using fp8a::parse_recipe;
  const std::string before = "Float8BlockScaling runs on sm_100+ from TE 2.9; TE 2.8 runs it on Hopper only "
                             "(check_fp8_block_scaling_support)";
  for (const char* spec : {"block", "block:fp32"}) {
    CHECK(te_release_cannot_train(parse_recipe(spec), {2, 8}, 100) == before);
    CHECK(te_release_cannot_train(parse_recipe(spec), {2, 8}, 103) == before);
    CHECK(te_release_cannot_train(parse_recipe(spec), {2, 9}, 100).empty());
    for (const fp8a::TeVersion te : {fp8a::kTeOldest, fp8a::kTeNewest}) CHECK(te_release_cannot_train(parse_recipe(spec), te, 90).empty());
  }
  CHECK(te_release_cannot_train(parse_recipe("mxfp8"), fp8a::kTeOldest, 100).empty());
  CHECK(te_release_cannot_train(parse_recipe("current"), fp8a::kTeOldest, 100).empty());
}

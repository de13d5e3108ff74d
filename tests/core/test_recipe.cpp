#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/recipe.hpp"

using fp8a::Error;

TEST_CASE("recipe specs parse and print canonically") {
  CHECK(fp8a::parse_recipe("current").spec() == "current");
  CHECK(fp8a::parse_recipe("current:pow2").spec() == "current:pow2");
  CHECK(fp8a::parse_recipe("current:eps=1e-12:pow2").spec() == "current:pow2:eps=1e-12");
  const auto r = fp8a::parse_recipe("current:eps=0.5");
  CHECK(r.amax_epsilon == 0.5f);
  CHECK_FALSE(r.pow2_scales);
}

TEST_CASE("Megatron-Core's --fp8-recipe names are the same recipes (megatron_args.txt writes them)") {
  CHECK(fp8a::parse_recipe("tensorwise") == fp8a::parse_recipe("current"));
  CHECK(fp8a::parse_recipe("tensorwise:pow2").spec() == "current:pow2");
  CHECK(fp8a::parse_recipe("blockwise") == fp8a::parse_recipe("block"));
  CHECK(fp8a::parse_recipe("blockwise:fp32").spec() == "block:fp32");
  CHECK(fp8a::parse_recipe("delayed").spec() == "delayed:history=1024:algo=max:margin=0");
  CHECK(fp8a::parse_recipe("mxfp8").spec() == "mxfp8");
  CHECK_THROWS_AS(fp8a::parse_recipe("Tensorwise"), Error);  // as Megatron spells them
}

TEST_CASE("recipe lists keep order and drop duplicates") {
  const auto list = fp8a::parse_recipe_list("current:pow2,current,current:pow2");
  REQUIRE(list.size() == 2);
  CHECK(list[0].spec() == "current:pow2");
  CHECK(list[1].spec() == "current");
}

TEST_CASE("bad recipes are usage errors with exact messages") {
  CHECK_THROWS_WITH_AS(fp8a::parse_recipe("curent"),
                       "[fp8a.usage.201] --recipes: bad recipe 'curent': unknown kind 'curent' "
                       "(did you mean 'current'?)",
                       Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_recipe("current:pow3"),
                       "[fp8a.usage.201] --recipes: bad recipe 'current:pow3': unknown option "
                       "'pow3' for current (takes pow2, eps=V) (did you mean 'pow2'?)",
                       Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_recipe("current:eps=abc"),
                       "[fp8a.usage.201] --recipes: bad recipe 'current:eps=abc': eps must be a "
                       "finite number >= 0, got 'abc'",
                       Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_recipe_list("current,,current:pow2"),
                       "[fp8a.usage.201] --recipes: bad recipe 'current,,current:pow2': empty "
                       "entry in the list",
                       Error);
  try {
    fp8a::parse_recipe("bogus");
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.exit_code() == 2);
    CHECK(e.id() == "fp8a.usage.201");
  }
}

TEST_CASE("formats map roles to FP8 types as TE's recipe.Format does") {
  using fp8a::Fp8Format;
  using fp8a::Role;
  using fp8a::TrainingFormat;
  CHECK(fp8a::fp8_format_for(TrainingFormat::kE4M3, Role::kGradient) == Fp8Format::kE4M3);
  CHECK(fp8a::fp8_format_for(TrainingFormat::kHybrid, Role::kGradient) == Fp8Format::kE5M2);
  CHECK(fp8a::fp8_format_for(TrainingFormat::kHybrid, Role::kActivation) == Fp8Format::kE4M3);
  CHECK(fp8a::fp8_format_for(TrainingFormat::kHybrid, Role::kWeight) == Fp8Format::kE4M3);
  CHECK(fp8a::parse_training_format("hybrid") == TrainingFormat::kHybrid);
  CHECK_THROWS_WITH_AS(fp8a::parse_training_format("e5m2"),
                       "[fp8a.usage.202] --format e5m2: Transformer Engine has no all-E5M2 recipe; "
                       "use e4m3 or hybrid (E5M2 for gradients only)",
                       Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_training_format("hybird"),
                       "[fp8a.usage.202] --format 'hybird': expected auto, or e4m3 and/or hybrid (did you mean "
                       "'hybrid'?)",
                       Error);
}

TEST_CASE("--format takes a list: duplicates dropped, order kept, each entry checked") {
  using fp8a::TrainingFormat;
  using List = std::vector<TrainingFormat>;
  CHECK(fp8a::parse_training_format_list("hybrid") == List{TrainingFormat::kHybrid});
  CHECK(fp8a::parse_training_format_list("e4m3,hybrid") == fp8a::kAllTrainingFormats);
  CHECK(fp8a::parse_training_format_list("hybrid,e4m3,hybrid") ==
        List{TrainingFormat::kHybrid, TrainingFormat::kE4M3});
  CHECK(fp8a::training_format_list(fp8a::kAllTrainingFormats) == "e4m3,hybrid");
  CHECK(fp8a::training_format_list(List{TrainingFormat::kHybrid}) == "hybrid");
  CHECK_THROWS_WITH_AS(fp8a::parse_training_format_list("e4m3,hybird"),
                       "[fp8a.usage.202] --format 'hybird': expected auto, or e4m3 and/or hybrid (did you mean "
                       "'hybrid'?)",
                       Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_training_format_list("hybrid,e5m2"),
                       "[fp8a.usage.202] --format e5m2: Transformer Engine has no all-E5M2 recipe; "
                       "use e4m3 or hybrid (E5M2 for gradients only)",
                       Error);
  for (const char* bad : {"", "e4m3,", ",hybrid", "e4m3,,hybrid"})
    CHECK_THROWS_WITH_AS(fp8a::parse_training_format_list(bad),
                         ("[fp8a.usage.202] --format '" + std::string(bad) +
                          "': empty entry in the list; expected auto, or e4m3 and/or hybrid")
                             .c_str(),
                         Error);
}

TEST_CASE("every recipe kind parses, prints canonically and rejects what it does not take") {
  CHECK(fp8a::parse_recipe("delayed").spec() == "delayed:history=1024:algo=max:margin=0");
  CHECK(fp8a::parse_recipe("delayed:margin=2:algo=most_recent:history=16").spec() ==
        "delayed:history=16:algo=most_recent:margin=2");
  CHECK(fp8a::parse_recipe("block").pow2_scales);  // TE's Float8BlockScaling default
  CHECK(fp8a::parse_recipe("block").spec() == "block");
  CHECK_FALSE(fp8a::parse_recipe("block:fp32").pow2_scales);
  CHECK(fp8a::parse_recipe("block:fp32").spec() == "block:fp32");
  CHECK(fp8a::parse_recipe("block:2d").block_2d);
  CHECK(fp8a::parse_recipe("block:2d").pow2_scales);
  CHECK(fp8a::parse_recipe("block:2d:fp32").spec() == "block:fp32:2d");
  CHECK(fp8a::parse_recipe("mxfp8:floor").mx_rule == fp8a::MxScaleRule::kOcpFloor);
  CHECK(fp8a::parse_recipe("mxfp8:floor").spec() == "mxfp8:floor");
  CHECK(fp8a::parse_recipe("bf16").spec() == "bf16");
  const auto all = fp8a::parse_recipe_list(fp8a::default_recipe_list());
  CHECK(all.size() == 9);
  for (const auto& r : all) CHECK(fp8a::parse_recipe(r.spec()) == r);  // specs round-trip
  CHECK_THROWS_WITH_AS(fp8a::parse_recipe("delayed:algo=maxx"),
                       "[fp8a.usage.201] --recipes: bad recipe 'delayed:algo=maxx': algo must be "
                       "max or most_recent, got 'maxx' (did you mean 'max'?)",
                       Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_recipe("delayed:history=0"),
                       "[fp8a.usage.201] --recipes: bad recipe 'delayed:history=0': history must be "
                       "an integer from 1 to 16777216, got '0'",
                       Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_recipe("delayed:margin=-1"),
                       "[fp8a.usage.201] --recipes: bad recipe 'delayed:margin=-1': margin must be "
                       "an integer from 0 to 64, got '-1'",
                       Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_recipe("bf16:pow2"),
                       "[fp8a.usage.201] --recipes: bad recipe 'bf16:pow2': unknown option 'pow2' "
                       "for bf16 (takes no options)",
                       Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_recipe("block:pow2"),
                       "[fp8a.usage.201] --recipes: bad recipe 'block:pow2': unknown option 'pow2' "
                       "for block (takes fp32, 2d)",
                       Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_recipe("mxfp4"),
                       "[fp8a.usage.201] --recipes: bad recipe 'mxfp4': unknown kind 'mxfp4' (did "
                       "you mean 'mxfp8'?)",
                       Error);
}

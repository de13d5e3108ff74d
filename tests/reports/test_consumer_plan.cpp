// The consumer plan on its own (issue 57: tests per stage): what ConsumerPlan decides for every
// file before any renderer runs: the fallbacks, whether each file is written and why not,
// nvdlfw_inspect.yaml's sections, and what the per-module files can carry. On hand-built
// recommendations (tests/support/recommendations.hpp), each expectation read off the
// recommendation by hand.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "reports/consumers/consumer_plan.hpp"
#include "support/recommendations.hpp"

namespace {

using namespace fp8a;
using namespace fp8a::testing;

// One chosen candidate `spec` and one layer of three GEMMs decided as given.
Recommendation single_layer(const std::string& spec, TrainingFormat format, const std::array<GemmSpec, 3>& gemms,
                            TeVersion te = kTeNewest) {
  Recommendation rec;
  rec.candidates = {candidate(spec, format)};
  add_layer(rec, rec.candidates[0], "decoder.layers.0.mlp.linear_fc2", false, gemms);
  rec.chosen = 0;
  rec.te_version = te;
  finish(rec);
  return rec;
}

const std::array<GemmSpec, 3> kAllFp8 = {fp8(Criterion::kMse, 1e-5, 1e-3), fp8(Criterion::kMse, 1e-5, 1e-3),
                                         fp8(Criterion::kMse, 1e-5, 1e-3)};

}  // namespace

TEST_CASE("consumer plan: the mixed recommendation's fallbacks, sections and files") {
  const Recommendation rec = mixed_recommendation();
  const ConsumerPlan p(rec);
  REQUIRE(p.candidate != nullptr);
  CHECK(p.candidate->recipe.spec() == "current");
  CHECK(p.fp8);
  // FC2 (layer 1) keeps dgrad and wgrad in BF16 for underflow; nothing else falls back.
  REQUIRE(p.fallbacks.size() == 1);
  CHECK(p.fallbacks[0].layer == 1);
  CHECK(p.fallbacks[0].gemms == "dgrad,wgrad");
  CHECK_FALSE(p.fallbacks[0].whole);
  CHECK(p.fallbacks[0].reason.find("underflow 44.200 %") != std::string::npos);
  // Every file is written; te_precision_config.yaml holds the per-module plan (its base is the
  // chosen candidate, and current scaling can be named per module).
  CHECK_FALSE(p.nvdlfw_omitted);
  CHECK_FALSE(p.precision_config_omitted);
  CHECK(p.precision_config_mixes);
  CHECK(p.megatron.te_precision_config);
  // nvdlfw_inspect.yaml: FC2's section disables its two BF16 GEMMs; no section watches a GEMM
  // it keeps in BF16.
  bool fc2 = false;
  for (const NvdlfwSection& s : p.nvdlfw_sections) {
    CHECK((!s.bf16.empty() || !s.watch.empty()));
    for (const WatchItem* w : s.watch)
      CHECK(std::find(s.bf16.begin(), s.bf16.end(), gemm_name(w->gemm)) == s.bf16.end());
    if (s.merged.layer == "layers.0.mlp.linear_fc2") {
      fc2 = true;
      CHECK(s.bf16 == std::vector<std::string>{"dgrad", "wgrad"});
    }
  }
  CHECK(fc2);
}

TEST_CASE("consumer plan: why a file is not written, decided before any renderer runs") {
  SUBCASE("no candidate chosen") {
    Recommendation rec;
    rec.candidates = {candidate("current", TrainingFormat::kHybrid)};
    rec.layers = {all_bf16_layer("decoder.layers.0.mlp.linear_fc2", "nothing judged")};
    finish(rec);
    const ConsumerPlan p(rec);
    CHECK(p.candidate == nullptr);
    CHECK_FALSE(p.fp8);
    CHECK(p.nvdlfw_omitted == std::optional<std::string>("nvdlfw_inspect.yaml not written: no FP8 candidate was chosen"));
    CHECK(p.precision_config_omitted ==
          std::optional<std::string>("te_precision_config.yaml not written: no FP8 candidate was chosen"));
  }
  SUBCASE("delayed scaling with nothing in BF16: the precision config could only name BF16 modules") {
    const ConsumerPlan p(single_layer("delayed", TrainingFormat::kHybrid, kAllFp8));
    CHECK(p.fp8);
    CHECK(p.precision_config_omitted ==
          std::optional<std::string>("te_precision_config.yaml not written: Megatron's precision config cannot "
                                     "express delayed scaling (set by megatron_args.txt) and the plan keeps no "
                                     "module in BF16"));
    CHECK_FALSE(p.megatron.te_precision_config);
  }
  SUBCASE("NVFP4 for TE 2.12: its debug tools take NVFP4 from 2.13") {
    const ConsumerPlan p(single_layer("nvfp4", TrainingFormat::kE4M3, kAllFp8, TeVersion{2, 12}));
    REQUIRE(p.nvdlfw_omitted);
    CHECK(p.nvdlfw_omitted->find("take NVFP4 from TE 2.13") != std::string::npos);
    CHECK(p.nvdlfw_omitted->find("this is for TE 2.12") != std::string::npos);
  }
  SUBCASE("every GEMM in BF16 under the chosen recipe: the configs turn every layer BF16") {
    const std::string why = "step 20 gradient underflow 60 % of elements";
    const ConsumerPlan p(single_layer("current", TrainingFormat::kHybrid,
                                      {bf16(Criterion::kUnderflow, 60, 5, why), bf16(Criterion::kUnderflow, 60, 5, why),
                                       bf16(Criterion::kUnderflow, 60, 5, why)}));
    REQUIRE(p.candidate != nullptr);
    CHECK_FALSE(p.fp8);
    CHECK_FALSE(p.nvdlfw_omitted);  // written: every layer BF16
    CHECK(p.nvdlfw_sections.empty());
    REQUIRE(p.fallbacks.size() == 1);
    CHECK(p.fallbacks[0].whole);
  }
}

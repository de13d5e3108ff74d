// The GPU target table (core/gpu_target.hpp): lookups, and the rows against the datasheets.
#include <doctest/doctest.h>

#include <string>

#include "core/gpu_target.hpp"
#include "core/recipe.hpp"

TEST_CASE("GPU targets are found by name, with did you mean for unknown ones") {
  const fp8a::GpuTarget* h100 = fp8a::find_gpu_target("h100");
  REQUIRE(h100 != nullptr);
  CHECK(h100->sm == 90);
  std::string why;
  CHECK(fp8a::find_gpu_target("h1000", &why) == nullptr);
  CHECK(why == "unknown GPU 'h1000' (did you mean 'h100'?); known: a100, l40s, h100, h200, b200, "
               "gb200");
  CHECK(fp8a::find_gpu_target("H100") == nullptr);  // names are lower case
  CHECK(fp8a::find_gpu_target("tpu") == nullptr);
}

TEST_CASE("GPU targets are found by compute capability") {
  const auto hopper = fp8a::gpu_targets_with_sm(90);
  REQUIRE(hopper.size() == 2);
  CHECK(std::string(hopper[0]->name) == "h100");
  CHECK(std::string(hopper[1]->name) == "h200");
  CHECK(fp8a::gpu_targets_with_sm(89).size() == 1);
  CHECK(fp8a::gpu_targets_with_sm(75).empty());
}

TEST_CASE("GPU rows hold dense datasheet figures") {
  const auto& a100 = *fp8a::find_gpu_target("a100");
  const auto& l40s = *fp8a::find_gpu_target("l40s");
  const auto& h100 = *fp8a::find_gpu_target("h100");
  const auto& h200 = *fp8a::find_gpu_target("h200");
  const auto& b200 = *fp8a::find_gpu_target("b200");
  const auto& gb200 = *fp8a::find_gpu_target("gb200");
  CHECK(a100.bf16_tflops == 312.0);
  CHECK(a100.fp8_tflops == 0.0);  // Ampere has no FP8 tensor cores
  CHECK(l40s.fp8_tflops == 733.0);
  CHECK(h100.bf16_tflops == 989.0);
  CHECK(h100.fp8_tflops == 1979.0);
  CHECK(h200.fp8_tflops == h100.fp8_tflops);  // same GH100 compute, more memory bandwidth
  CHECK(h200.memory_gbs > h100.memory_gbs);
  CHECK(b200.bf16_tflops == 2250.0);
  CHECK(b200.fp8_tflops == 4500.0);
  for (const auto& t : fp8a::kGpuTargets) {
    CHECK(std::string(t.source).find("datasheet") != std::string::npos);
    // FP8 tensor cores exactly where TE runs per-tensor FP8 (sm_89+), at twice the BF16 rate.
    CHECK((t.fp8_tflops > 0) == fp8a::te_runs_on(fp8a::RecipeKind::kPerTensorCurrent, t.sm));
    if (t.fp8_tflops > 0) CHECK(t.fp8_tflops == doctest::Approx(2 * t.bf16_tflops).epsilon(0.02));
  }
  // Which recipes each generation runs (the recipe rows read with the target's SM).
  CHECK(fp8a::te_runs_on(fp8a::RecipeKind::kBlock, h100.sm));
  CHECK_FALSE(fp8a::te_runs_on(fp8a::RecipeKind::kMx, h200.sm));
  CHECK(fp8a::te_runs_on(fp8a::RecipeKind::kMx, gb200.sm));
}

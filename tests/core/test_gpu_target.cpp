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
  CHECK(why == "unknown GPU 'h1000' (did you mean 'h100'?); known: a100, l4, l40s, rtx4090, h100, "
               "h200, b200, gb200, b300, gb300, rtx5090");
  CHECK(fp8a::find_gpu_target("rtx-4090", &why) == nullptr);
  CHECK(why.find("(did you mean 'rtx4090'?)") != std::string::npos);
  // Case aside: "H100" is h100 (it answered "did you mean a100" before).
  CHECK(fp8a::find_gpu_target("H100") == fp8a::find_gpu_target("h100"));
  CHECK(fp8a::find_gpu_target("GB200") == fp8a::find_gpu_target("gb200"));
  CHECK(fp8a::find_gpu_target("RTX5090") == fp8a::find_gpu_target("rtx5090"));
  CHECK(fp8a::find_gpu_target("tpu") == nullptr);
}

TEST_CASE("GPU targets are found by compute capability") {
  const auto hopper = fp8a::gpu_targets_with_sm(90);
  REQUIRE(hopper.size() == 2);
  CHECK(std::string(hopper[0]->name) == "h100");
  CHECK(std::string(hopper[1]->name) == "h200");
  const auto ada = fp8a::gpu_targets_with_sm(89);
  REQUIRE(ada.size() == 3);
  CHECK(std::string(ada[0]->name) == "l4");
  CHECK(std::string(ada[1]->name) == "l40s");
  CHECK(std::string(ada[2]->name) == "rtx4090");
  CHECK(fp8a::gpu_targets_with_sm(120).size() == 1);
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

// TE's support matrix (docs support_matrix.html, "Format support by compute capability"):
// 8.9 (L4, L40S, RTX 40) per-tensor FP8 only; 12.0 (RTX 50) per-tensor and block scaling, no MXFP8.
TEST_CASE("L4: Ada datacenter, datasheet figures halved for density; per-tensor FP8 only") {
  const auto& l4 = *fp8a::find_gpu_target("l4");
  CHECK(l4.sm == 89);
  CHECK(l4.bf16_tflops == 242.0 / 2);  // "BF16 Tensor Core 242 TFLOPS*", * with sparsity
  CHECK(l4.fp8_tflops == 485.0 / 2);   // "FP8 Tensor Core 485 TFLOPS*"
  CHECK(l4.memory_gbs == 300.0);
  CHECK(fp8a::te_runs_on(fp8a::RecipeKind::kPerTensorCurrent, l4.sm));
  CHECK(fp8a::te_runs_on(fp8a::RecipeKind::kPerTensorDelayed, l4.sm));
  CHECK_FALSE(fp8a::te_runs_on(fp8a::RecipeKind::kBlock, l4.sm));
  CHECK_FALSE(fp8a::te_runs_on(fp8a::RecipeKind::kMx, l4.sm));
}

TEST_CASE("RTX 4090: the FP32-accumulate rates TE's GEMMs get, not the FP16-accumulate ones") {
  const auto& rtx = *fp8a::find_gpu_target("rtx4090");
  CHECK(rtx.sm == 89);
  CHECK(rtx.bf16_tflops == 165.2);
  CHECK(rtx.fp8_tflops == 330.3);  // the whitepaper's FP16-accumulate FP8 rate is 660.6
  CHECK(rtx.fp8_tflops == doctest::Approx(660.6 / 2));
  CHECK(rtx.memory_gbs == 1008.0);
  CHECK(std::string(rtx.source).find("FP32 Accumulate") != std::string::npos);
  CHECK(fp8a::te_runs_on(fp8a::RecipeKind::kPerTensorCurrent, rtx.sm));
  CHECK_FALSE(fp8a::te_runs_on(fp8a::RecipeKind::kBlock, rtx.sm));
  CHECK_FALSE(fp8a::te_runs_on(fp8a::RecipeKind::kMx, rtx.sm));
}

TEST_CASE("RTX 5090: sm_120, FP32-accumulate rates; block scaling yes, MXFP8 not yet") {
  const auto& rtx = *fp8a::find_gpu_target("rtx5090");
  CHECK(rtx.sm == 120);
  CHECK(rtx.bf16_tflops == 209.5);
  CHECK(rtx.fp8_tflops == 419.0);  // the whitepaper's FP16-accumulate FP8 rate is 838
  CHECK(rtx.fp8_tflops == doctest::Approx(838.0 / 2));
  CHECK(rtx.memory_gbs == 1792.0);
  CHECK(std::string(rtx.source).find("FP32 Accumulate") != std::string::npos);
  CHECK(fp8a::te_runs_on(fp8a::RecipeKind::kPerTensorCurrent, rtx.sm));
  CHECK(fp8a::te_runs_on(fp8a::RecipeKind::kBlock, rtx.sm));
  CHECK_FALSE(fp8a::te_runs_on(fp8a::RecipeKind::kMx, rtx.sm));  // te_max_sm 119
}

TEST_CASE("B300 and GB300: Blackwell Ultra, sm_103, 1.5x B200's dense FP4; MXFP8 and NVFP4 run") {
  const auto& b300 = *fp8a::find_gpu_target("b300");
  const auto& gb300 = *fp8a::find_gpu_target("gb300");
  // The datasheets' system totals, with sparsity, per GPU and halved for density: HGX B300
  // (8 GPUs) FP4 108 PFLOPS dense, FP8 72 and BF16 36 sparse; GB300 NVL72 (72 GPUs) FP4 1,080
  // dense, FP8 720 and BF16 360 sparse, 576 TB/s.
  CHECK(b300.sm == 103);
  CHECK(b300.fp4_tflops == 108000.0 / 8);
  CHECK(b300.fp8_tflops == 72000.0 / 8 / 2);
  CHECK(b300.bf16_tflops == 36000.0 / 8 / 2);
  CHECK(gb300.sm == 103);
  CHECK(gb300.fp4_tflops == 1080000.0 / 72);
  CHECK(gb300.fp8_tflops == 720000.0 / 72 / 2);
  CHECK(gb300.bf16_tflops == 360000.0 / 72 / 2);
  CHECK(gb300.memory_gbs == 576000.0 / 72);
  CHECK(b300.fp4_tflops == 1.5 * fp8a::find_gpu_target("b200")->fp4_tflops);
  CHECK(gb300.fp4_tflops == 1.5 * fp8a::find_gpu_target("gb200")->fp4_tflops);
  CHECK(fp8a::gpu_targets_with_sm(103).size() == 2);
  for (const fp8a::GpuTarget* t : {&b300, &gb300}) {
    CHECK(fp8a::te_runs_on(fp8a::RecipeKind::kMx, t->sm));
    CHECK(fp8a::te_runs_on(fp8a::RecipeKind::kNvfp4, t->sm));
    CHECK(fp8a::lt_runs_on(fp8a::RecipeKind::kNvfp4, t->sm));
    CHECK_FALSE(fp8a::lt_runs_on(fp8a::RecipeKind::kBlock, t->sm));  // Hopper's block GEMMs only
  }
}

// The recipe rows (core/recipe.hpp kRecipeKinds) against Transformer Engine's facts, and the
// functions that derive from them.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/recipe.hpp"
#include "core/recipe_options.hpp"

using fp8a::BlockShape;
using fp8a::Granularity;
using fp8a::Orientation;
using fp8a::RecipeKind;
using fp8a::Role;
using fp8a::ScaleType;

namespace {

const fp8a::RecipeKindTraits& row(RecipeKind k) { return fp8a::recipe_kind_traits(k); }

}  // namespace

TEST_CASE("every kind has exactly one row, named after its TE recipe") {
  for (const auto& t : fp8a::kRecipeKinds) CHECK(&row(t.kind) == &t);
  // The recipe classes of TE transformer_engine/common/recipe/__init__.py.
  CHECK(std::string(row(RecipeKind::kPerTensorCurrent).te_recipe) == "Float8CurrentScaling");
  CHECK(std::string(row(RecipeKind::kPerTensorDelayed).te_recipe) == "DelayedScaling");
  CHECK(std::string(row(RecipeKind::kBlock).te_recipe) == "Float8BlockScaling");
  CHECK(std::string(row(RecipeKind::kMx).te_recipe) == "MXFP8BlockScaling");
}

TEST_CASE("granularity, scale type and history follow TE's recipes") {
  // TE common/recipe/__init__.py DelayedScaling, Float8CurrentScaling: delayed and current
  // scaling have one fp32 scale per tensor; only delayed keeps an amax history.
  CHECK(row(RecipeKind::kPerTensorCurrent).granularity == Granularity::kPerTensor);
  CHECK(row(RecipeKind::kPerTensorDelayed).granularity == Granularity::kPerTensor);
  CHECK(row(RecipeKind::kPerTensorCurrent).scale_type == ScaleType::kFp32);  // use_power_2_scales False
  CHECK(row(RecipeKind::kPerTensorDelayed).scale_type == ScaleType::kFp32);
  CHECK(row(RecipeKind::kPerTensorDelayed).replays_history);
  CHECK_FALSE(row(RecipeKind::kPerTensorCurrent).replays_history);
  // TE common/recipe/__init__.py: Float8BlockScaling's QParams power_2_scale = not use_f32_scales
  // -> pow2 default.
  CHECK(row(RecipeKind::kBlock).granularity == Granularity::kBlock);
  CHECK(row(RecipeKind::kBlock).scale_type == ScaleType::kPow2);
  CHECK(fp8a::parse_recipe("block").pow2_scales);
  CHECK_FALSE(fp8a::parse_recipe("current").pow2_scales);
  // TE common/recipe/__init__.py MXFP8BlockScaling: blocks of 32 with an E8M0 scale.
  CHECK(row(RecipeKind::kMx).granularity == Granularity::kBlock);
  CHECK(row(RecipeKind::kMx).scale_type == ScaleType::kE8M0);
  CHECK(row(RecipeKind::kBf16).granularity == Granularity::kNone);
  CHECK(row(RecipeKind::kBf16).scale_type == ScaleType::kNone);
  CHECK(fp8a::is_per_tensor(RecipeKind::kPerTensorCurrent));
  CHECK(fp8a::is_per_tensor(RecipeKind::kPerTensorDelayed));
  CHECK_FALSE(fp8a::is_per_tensor(RecipeKind::kBlock));
  CHECK_FALSE(fp8a::is_per_tensor(RecipeKind::kMx));
  CHECK_FALSE(fp8a::is_per_tensor(RecipeKind::kBf16));
}

TEST_CASE("block shapes per role and orientation follow TE's block dims") {
  // TE common/recipe/__init__.py Float8BlockScaling: x_block_scaling_dim 1 (1x128),
  // w_block_scaling_dim 2 (128x128), grad_block_scaling_dim 1 (1x128).
  const auto block = fp8a::parse_recipe("block");
  CHECK(fp8a::block_shape(block, Role::kActivation, Orientation::kRowwise) == BlockShape{1, 128});
  CHECK(fp8a::block_shape(block, Role::kActivation, Orientation::kColumnwise) == BlockShape{128, 1});
  CHECK(fp8a::block_shape(block, Role::kGradient, Orientation::kRowwise) == BlockShape{1, 128});
  CHECK(fp8a::block_shape(block, Role::kWeight, Orientation::kRowwise) == BlockShape{128, 128});
  CHECK(fp8a::block_shape(block, Role::kWeight, Orientation::kColumnwise) == BlockShape{128, 128});
  // Float8BlockQuantizer's default block_scaling_dim=2: 128x128 for every role under :2d.
  const auto block_2d = fp8a::parse_recipe("block:2d");
  CHECK(fp8a::block_shape(block_2d, Role::kActivation, Orientation::kRowwise) == BlockShape{128, 128});
  CHECK(fp8a::orientations_for(block_2d, Role::kGradient).size() == 1);
  CHECK(fp8a::orientations_for(block, Role::kActivation).size() == 2);
  CHECK(fp8a::orientations_for(block, Role::kWeight).size() == 1);
  // TE common/cast/mxfp8/quantize_mxfp8.cuh: 32 consecutive values, rowwise and columnwise copies
  // quantised independently.
  const auto mx = fp8a::parse_recipe("mxfp8");
  for (Role r : {Role::kActivation, Role::kWeight, Role::kGradient}) {
    CHECK(fp8a::block_shape(mx, r, Orientation::kRowwise) == BlockShape{1, 32});
    CHECK(fp8a::block_shape(mx, r, Orientation::kColumnwise) == BlockShape{32, 1});
    CHECK(fp8a::orientations_for(mx, r).size() == 2);
  }
  for (const char* spec : {"current", "delayed", "bf16"}) {
    const auto rec = fp8a::parse_recipe(spec);
    CHECK(fp8a::block_shape(rec, Role::kWeight, Orientation::kColumnwise) == BlockShape{0, 0});
    CHECK(fp8a::orientations_for(rec, Role::kActivation).size() == 1);
  }
}

TEST_CASE("MXFP8's shape divisor is TE MXFP8Quantizer.is_quantizable's 32") {
  // TE docs/features/low_precision_training/mxfp8/mxfp8.rst: last dim % 32 == 0 and product of
  // the other dims % 32 == 0.
  CHECK(row(RecipeKind::kMx).shape_divisor == 32);
  CHECK(std::string(row(RecipeKind::kMx).te_quantizer) == "MXFP8Quantizer");
  CHECK(row(RecipeKind::kPerTensorCurrent).shape_divisor == 0);
  CHECK(row(RecipeKind::kBlock).shape_divisor == 0);  // partial blocks are padded, as TE's reference
}

TEST_CASE("minimum GPUs follow TE's support checks and cuBLASLt's scaling modes") {
  // TE transformer_engine/pytorch/quantization.py: _compute_fp8_support (>= 8.9 for delayed and
  // current), _compute_fp8_block_scaling_support (>= 9.0, CUDA 12.9), _compute_mxfp8_support
  // (>= 10.0 and not 12.0+).
  CHECK(row(RecipeKind::kPerTensorCurrent).te_min_sm == 89);
  CHECK(row(RecipeKind::kPerTensorDelayed).te_min_sm == 89);
  CHECK(row(RecipeKind::kBlock).te_min_sm == 90);
  CHECK(row(RecipeKind::kMx).te_min_sm == 100);
  CHECK(fp8a::te_runs_on(RecipeKind::kBlock, 100));  // TE emulates block scaling on Blackwell
  CHECK(fp8a::te_runs_on(RecipeKind::kMx, 100));
  CHECK_FALSE(fp8a::te_runs_on(RecipeKind::kMx, 120));
  CHECK_FALSE(fp8a::te_runs_on(RecipeKind::kPerTensorCurrent, 80));
  // cuBLASLt (cuda/cublaslt_gemm_plan.cpp): SCALAR_32F FP8 from sm_89, VEC128_32F/BLK128x128_32F
  // on Hopper only, VEC32_UE8M0 from sm_100, BF16 from sm_80.
  CHECK(fp8a::lt_runs_on(RecipeKind::kPerTensorCurrent, 89));
  CHECK_FALSE(fp8a::lt_runs_on(RecipeKind::kPerTensorDelayed, 80));
  CHECK(fp8a::lt_runs_on(RecipeKind::kBlock, 90));
  CHECK_FALSE(fp8a::lt_runs_on(RecipeKind::kBlock, 89));
  CHECK_FALSE(fp8a::lt_runs_on(RecipeKind::kBlock, 100));
  CHECK_FALSE(fp8a::lt_runs_on(RecipeKind::kMx, 90));
  CHECK(fp8a::lt_runs_on(RecipeKind::kMx, 100));
  CHECK(fp8a::lt_runs_on(RecipeKind::kBf16, 80));
  CHECK_FALSE(fp8a::lt_runs_on(RecipeKind::kBf16, 75));
}

TEST_CASE("NVFP4's row follows TE's NVFP4BlockScaling and NVFP4Quantizer") {
  const auto& k = row(RecipeKind::kNvfp4);
  // common/recipe/__init__.py NVFP4BlockScaling; fp4_quant_fwd_weight has fp4_2d_quantization
  // (16x16 tiles), the input and gradient QParams 1-D blocks of 16 (NVTE's 1x16).
  CHECK(std::string(k.te_recipe) == "NVFP4BlockScaling");
  CHECK(k.granularity == Granularity::kBlock);
  CHECK(k.scale_type == ScaleType::kE4M3);
  const auto nvfp4 = fp8a::parse_recipe("nvfp4");
  CHECK(fp8a::block_shape(nvfp4, Role::kActivation, Orientation::kRowwise) == BlockShape{1, 16});
  CHECK(fp8a::block_shape(nvfp4, Role::kActivation, Orientation::kColumnwise) == BlockShape{16, 1});
  CHECK(fp8a::block_shape(nvfp4, Role::kGradient, Orientation::kColumnwise) == BlockShape{16, 1});
  CHECK(fp8a::block_shape(nvfp4, Role::kWeight, Orientation::kColumnwise) == BlockShape{16, 16});
  // 16x16 tiles: W and W^T are one copy, so only the rowwise one is reported.
  CHECK(fp8a::orientations_for(nvfp4, Role::kWeight).size() == 1);
  CHECK(fp8a::orientations_for(nvfp4, Role::kGradient).size() == 2);
  // pytorch/tensor/nvfp4_tensor.py NVFP4Quantizer.is_quantizable: shape[-1] % 16, prod(rest) % 16.
  CHECK(k.shape_divisor == 16);
  CHECK(std::string(k.te_quantizer) == "NVFP4Quantizer");
  // quantization.py _compute_nvfp4_support: 10.0+; refused at autocast on Hopper.
  CHECK_FALSE(fp8a::te_runs_on(RecipeKind::kNvfp4, 90));
  CHECK(fp8a::te_runs_on(RecipeKind::kNvfp4, 100));
  CHECK(fp8a::te_runs_on(RecipeKind::kNvfp4, 103));
  CHECK_FALSE(fp8a::te_runs_on(RecipeKind::kNvfp4, 120));  // SR gives zeros there up to TE 2.18
  CHECK(fp8a::is_fp8(RecipeKind::kNvfp4));  // a quantising kind: not the BF16 round trip
  CHECK_FALSE(fp8a::is_per_tensor(RecipeKind::kNvfp4));
  // From TE 2.8, and trainable: calibration/RESULTS.md's nvfp4-* cases.
  CHECK_FALSE(fp8a::te_release_cannot_train(nvfp4, fp8a::TeVersion{2, 7}).empty());
  CHECK(fp8a::te_release_cannot_train(nvfp4, fp8a::TeVersion{2, 8}).empty());
  CHECK(fp8a::te_cannot_train(nvfp4).empty());
  // Megatron names it among its FP4 recipes (fp4_utils.py get_fp4_recipe: --fp4-recipe nvfp4), and
  // its precision config per module (TEQuantizationRecipe.fp4_quantization_recipe, core 0.16+).
  CHECK(std::string(k.megatron_recipe) == "nvfp4");
  CHECK(k.megatron_fp4);
  CHECK(k.te_per_module);
  CHECK_FALSE(row(RecipeKind::kMx).megatron_fp4);
  CHECK(nvfp4.spec() == "nvfp4");
  // Its elements are E2M1 ({0, 0.5, ..., 6}: smallest subnormal 2^-1, smallest normal 2^0).
  const fp8a::Fp8Traits& e2m1 = fp8a::element_traits(RecipeKind::kNvfp4, fp8a::Fp8Format::kE4M3);
  CHECK(std::string(e2m1.name) == "e2m1");
  CHECK(e2m1.max_finite == 6.0f);
  CHECK(std::ldexp(1.0, e2m1.min_normal_exp - e2m1.mantissa_bits) == 0.5);
  CHECK(std::string(fp8a::cast_type_name(RecipeKind::kNvfp4, fp8a::Fp8Format::kE4M3)) == "e2m1");
  CHECK(std::string(fp8a::cast_type_name(RecipeKind::kMx, fp8a::Fp8Format::kE5M2)) == "e5m2");
  CHECK(std::string(fp8a::cast_type_name(RecipeKind::kBf16, fp8a::Fp8Format::kE4M3)) == "bf16");
  CHECK_THROWS(fp8a::parse_recipe("nvfp4:2d"));
}

TEST_CASE("NVFP4's differences are row fields, and no other kind has them") {
  const auto& k = row(RecipeKind::kNvfp4);
  // E4M3 block scales under an FP32 per-tensor scale (NVFP4Quantizer's amax and global scale).
  CHECK(k.two_level_scale);
  CHECK(fp8a::two_level_scale(RecipeKind::kNvfp4));
  // NVFP4BlockScaling.__post_init__ asserts fp8_format == Format.E4M3: every format is one cast.
  CHECK(k.fixed_e4m3);
  CHECK(fp8a::operand_bits(RecipeKind::kNvfp4) == 4);
  // NVTE_NVFP4_DISABLE_2D_QUANTIZATION: W in 1x16 blocks too.
  const auto no_2d = fp8a::parse_recipe("nvfp4:no_2d");
  CHECK(fp8a::block_shape(no_2d, Role::kWeight, Orientation::kRowwise) == BlockShape{1, 16});
  CHECK(fp8a::block_shape(no_2d, Role::kWeight, Orientation::kColumnwise) == BlockShape{16, 1});
  // The recipe class from TE 2.8 (te_has_nvfp4), the debug features from 2.13
  // (DisableQuantizationGEMM, LogNvfp4TensorStats: te_has_disable_quantization).
  CHECK(k.te_since == fp8a::TeVersion{2, 8});
  CHECK_FALSE(fp8a::te_has_nvfp4(fp8a::TeVersion{2, 7}));
  CHECK(fp8a::te_has_nvfp4(k.te_since));
  CHECK(k.te_debug_since == fp8a::TeVersion{2, 13});
  CHECK_FALSE(fp8a::te_has_disable_quantization(fp8a::TeVersion{2, 12}));
  CHECK(std::string(k.nvdlfw_stats) == "LogNvfp4TensorStats");
  CHECK(fp8a::te_release_cannot_train(fp8a::parse_recipe("nvfp4"), fp8a::TeVersion{2, 7}) ==
        "NVFP4BlockScaling exists from TE 2.8; TE 2.7 has no NVFP4 recipe");
  for (const auto& t : fp8a::kRecipeKinds) {
    if (t.kind == RecipeKind::kNvfp4) continue;
    CAPTURE(t.name);
    CHECK_FALSE(t.two_level_scale);
    CHECK_FALSE(t.fixed_e4m3);
    CHECK(t.block_1d == BlockShape{});
    CHECK(t.te_since <= fp8a::kTeOldest);
    CHECK(t.te_debug_since <= fp8a::kTeOldest);
    CHECK(std::string(t.nvdlfw_stats) == "LogFp8TensorStats");
    // The no-2d option changes no other kind's blocks.
    fp8a::Recipe r = fp8a::parse_recipe(t.name);
    r.nvfp4_2d = false;
    CHECK(fp8a::block_shape(r, Role::kWeight, Orientation::kRowwise) ==
          fp8a::block_shape(fp8a::parse_recipe(t.name), Role::kWeight, Orientation::kRowwise));
  }
}

TEST_CASE("a format reported against a kind is cited only where it is not the kind's default") {
  // Megatron-Bridge PR #638 (MXFP8 hybrid diverged), TE#2754 (block with all-E4M3 worse).
  CHECK(std::string(row(RecipeKind::kMx).other_format_source) == "NVIDIA-NeMo/Megatron-Bridge PR #638");
  CHECK(row(RecipeKind::kMx).default_format == fp8a::TrainingFormat::kE4M3);
  CHECK(std::string(row(RecipeKind::kBlock).other_format_source) == "NVIDIA/TransformerEngine#2754");
  CHECK(row(RecipeKind::kBlock).default_format == fp8a::TrainingFormat::kHybrid);
  for (const auto& t : fp8a::kRecipeKinds)  // a source comes with its evidence
    CHECK((*t.other_format_source == '\0') == (*t.other_format_evidence == '\0'));
  // torchao.json's reason for each kind torchao has no recipe for.
  for (const auto& t : fp8a::kRecipeKinds)
    CHECK((*t.torchao_recipe == '\0') == (*t.torchao_none != '\0'));
}

// The Transformer Engine release the written files are for (`run --te-version`), and what each
// release in the supported range has, one fact per function, each citing TE's sources.
// docs/VERSIONS.md is the table these facts make.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace fp8a {

struct TeVersion {
  int major = 2;
  int minor = 20;
  auto operator<=>(const TeVersion&) const = default;
};

// The range --te-version accepts. 2.4: the first release with TE's debug features
// (transformer_engine/debug/features), which nvdlfw_inspect.yaml needs, and the first with
// NVTE_FP8_BLOCK_SCALING_FP32_SCALES; every recipe class fp8-advisor names exists from 2.3.
// 2.20: the newest release the consumer checks run (scripts/consumers-env.sh, TE 2.20.2).
inline constexpr TeVersion kTeOldest{2, 4};
inline constexpr TeVersion kTeNewest{2, 20};

// "X.Y" or "X.Y.Z" (the patch level does not change what is written); unset otherwise, or when
// outside kTeOldest..kTeNewest; `why` then says which.
std::optional<TeVersion> parse_te_version(std::string_view text, std::string* why);

std::string te_version_text(TeVersion v);  // "2.20"

// te.autocast(recipe=...) exists from TE 2.9 (transformer_engine/pytorch/quantization.py);
// before, te.fp8_autocast(fp8_recipe=...) (pytorch/fp8.py), which 2.9+ keep as deprecated.
constexpr bool te_has_autocast(TeVersion v) { return v >= TeVersion{2, 9}; }

// The debug features DisableQuantizationGEMM / DisableQuantizationLayer exist from TE 2.13
// (debug/features/disable_quantization_*.py); DisableFP8GEMM / DisableFP8Layer from 2.4 on.
inline constexpr TeVersion kTeDisableQuantizationSince{2, 13};
constexpr bool te_has_disable_quantization(TeVersion v) { return v >= kTeDisableQuantizationSince; }

// LogFp8TensorStats computes overflows% (delayed scaling only), scale_inv_min, scale_inv_max and
// mse from TE 2.7 (debug/features/log_fp8_tensor_stats.py check_if_stat_is_supported); TE 2.4-2.6
// support underflows% alone and reject the others at initialize().
constexpr bool te_has_fp8_scale_stats(TeVersion v) { return v >= TeVersion{2, 7}; }

// Float8CurrentScaling reads NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES at import from TE 2.8
// (common/recipe/__init__.py use_power_2_scales); before, its quantizers' power_2_scale is
// fixed False and nothing TE reads turns it on.
constexpr bool te_has_current_pow2_env(TeVersion v) { return v >= TeVersion{2, 8}; }

// Float8BlockScaling runs on sm_100+ from TE 2.9: check_fp8_block_scaling_support asks for
// compute capability 9.0 to 10.0 in TE 2.4-2.8 ("requires Hopper", pytorch/fp8.py) and 9.0+ from
// 2.9 (pytorch/quantization.py), where gemm.cpp runs the block-scaled GEMMs on Blackwell as MXFP8
// (nvte_swizzle_block_scaling_to_mxfp8_scaling_factors).
constexpr bool te_has_block_on_blackwell(TeVersion v) { return v >= TeVersion{2, 9}; }

// NVFP4BlockScaling exists from TE 2.8 (common/recipe/__init__.py, PR #2177; docs/NVFP4-TE.md §1.3).
inline constexpr TeVersion kTeNvfp4Since{2, 8};
constexpr bool te_has_nvfp4(TeVersion v) { return v >= kTeNvfp4Since; }

}  // namespace fp8a

// The GEMM cost model: the predicted time of a layer's fprop, dgrad and wgrad on a GPU target,
// in BF16 and under each FP8 recipe with the casts the recipe adds, as a roofline in the spirit of
// torchao's (pytorch/ao torchao/testing/training/roofline_utils.py). METRICS.md "Cost model"
// defines every term and its source; the constants below are those terms.
//
// Pure functions. build_cost_model precomputes, per layer, every GEMM's time in BF16 and under
// each recipe and every cast's time, so estimate_cost (which the recipe search calls once per
// candidate plan) only adds numbers.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/gpu_target.hpp"
#include "core/recipe.hpp"
#include "engine/gemm_pairing.hpp"
#include "policies/target_model.hpp"

namespace fp8a {

// Bytes per element as a GEMM or a cast reads and writes them.
inline constexpr double kBf16Bytes = 2.0;  // high-precision operands, every GEMM output
inline constexpr double kFp8Bytes = 1.0;   // an FP8 operand copy
inline constexpr double kFp32ScaleBytes = 4.0;  // a per-tensor or block scale (block: pow2 or not)
inline constexpr double kE8M0ScaleBytes = 1.0;  // an MXFP8 block scale
inline constexpr double kFp4Bytes = 0.5;        // an NVFP4 operand copy (E2M1, two to a byte)
inline constexpr double kE4M3ScaleBytes = 1.0;  // an NVFP4 block scale
// The share of the datasheet peaks a kernel reaches: torchao's roofline
// (roofline_utils.py gpu_name_to_specs, H100: pct_achievable_gemm_tops, pct_achievable_mem_bw).
inline constexpr double kAchievableGemmFraction = 0.78;
inline constexpr double kAchievableBandwidthFraction = 0.92;
// The least time any kernel takes: torchao's KERNEL_LAUNCH_OVERHEAD_SEC.
inline constexpr double kKernelLaunchSeconds = 2e-6;

struct CostOptions {
  // Tokens (rows of X and dY) one pass of each layer processes, over the ranks the capture covers,
  // when the capture holds a sample of them; 0 (or less): the captured count (GemmLayer::m).
  // Every GEMM's token dimension becomes tokens_per_step: fprop's and dgrad's m, wgrad's k.
  double tokens_per_step = 0;
  // Where tokens_per_step comes from, for the cost line: "--tokens-per-step", "recorded in <file>".
  std::string tokens_source = {};
  // --price-as: each layer it prices is costed at its target module's W [n, k] and
  // tokens_per_step as one GEMM (no split), counted PricedLayer::weight times; the rest as above.
  std::shared_ptr<const TargetPricing> pricing = {};
};

// The cost line's words for a roofline with these options: "roofline at N tokens a step (<source>)",
// or "roofline at the captured token count" when tokens_per_step is 0; with a pricing, "roofline
// at <target>'s shapes ..." (pricing_basis) and its tokens.
std::string roofline_basis(const CostOptions& options);

// Whether TE trains with the recipe on the GPU (the recipe row's te_runs_on at the target's SM,
// and block:fp32 nowhere on sm_100+), and why not, e.g. "mxfp8 needs sm_100+ (TE
// MXFP8BlockScaling); h100 is sm_90". What a TE release before the target's lacks is
// te_release_cannot_train's.
struct RecipeSupport {
  bool runs = true;
  std::string reason;  // empty when it runs
};
RecipeSupport recipe_support(const Recipe& recipe, const GpuTarget& gpu);

// One GEMM as one rank runs it: output [m, n], reduction k, in elements (double: the token
// dimension may be scaled by CostOptions::tokens_per_step). Operand a is [m, k], b is [n, k].
struct GemmShape {
  double m = 0, n = 0, k = 0;
};

// The layer's GEMM as each rank runs it: the whole layer's dims (GemmLayer::dims) with the token
// dimension set to tokens_per_step (when given), then the split dimension divided by the number of
// ranks: n of column-parallel W, k of row-parallel W, the tokens of data-parallel X and dY.
GemmShape rank_gemm_shape(const GemmLayer& layer, Gemm gemm, const CostOptions& options);

// 2 m n k: one multiply and one add per term of each output's reduction.
double gemm_flops(const GemmShape& shape);

// One kernel's roofline: time = max(flops / (peak * kAchievableGemmFraction),
// bytes / (bandwidth * kAchievableBandwidthFraction), kKernelLaunchSeconds).
struct KernelCost {
  double flops = 0;
  double bytes = 0;  // read plus written
  double seconds = 0;
};

// The GEMM in BF16: reads both operands in BF16, writes the output in BF16, at the BF16 peak.
KernelCost gemm_cost_bf16(const GemmShape& shape, const GpuTarget& gpu);
// The GEMM on FP8 copies: reads both operands in FP8 and their scales (block_scale_count each),
// writes the output in BF16, at the FP8 peak. `a` and `b` are the operands' roles (which block
// shape each has). Only for recipes with fp8 elements (not kBf16).
KernelCost gemm_cost_fp8(const GemmShape& shape, const Recipe& recipe, Role a, Role b,
                         const GpuTarget& gpu);

// The number of scales of one FP8 copy of an operand seen as [outer, reduction] (the layout the
// GEMM reads; a columnwise copy is the transposed tensor): 1 for per-tensor recipes;
// ceil(outer / rows) * ceil(reduction / cols) for the role's rowwise block {rows, cols}
// (block_shape). 0 for kBf16.
double block_scale_count(const Recipe& recipe, Role role, double outer, double reduction);
// The bytes of one such scale: E8M0 and NVFP4's E4M3 1, otherwise fp32 4; 0 for kBf16.
double scale_bytes(const Recipe& recipe);
// The bytes of one element of a quantised copy: NVFP4 0.5, FP8 1.
double element_bytes(const Recipe& recipe);

// Which FP8 copies of a tensor a plan reads: rowwise (the stored layout), columnwise (its
// transpose), or both. A bit mask: kBoth = kRowwise | kColumnwise.
enum class Copies { kRowwise = 1, kColumnwise = 2, kBoth = 3 };

// TE's quantize of a tensor stored as [outer, reduction] into `copies`, as one kernel: reads it in
// BF16 once and writes each copy in FP8 with its scales (TE casts both layouts in one pass: the
// cast-transpose of per-tensor recipes, its block and MXFP8 quantize kernels). Memory-bound.
KernelCost cast_cost(const Recipe& recipe, Role role, double outer, double reduction, Copies copies,
                     const GpuTarget& gpu);
// Current scaling's amax pass before the cast: reads the BF16 tensor once. Other kinds compute
// their amax inside the cast (delayed: from the history, the new amax recorded by the cast;
// block, mxfp8: per block), so none is charged for them (seconds 0).
KernelCost amax_cost(const Recipe& recipe, double elements, const GpuTarget& gpu);

// Whether the layer's input X is the output of a LayerNorm/RMSNorm fused into the module (TE's
// LayerNormLinear): Megatron-Core's TE layer spec builds `self_attention.linear_qkv` and
// `mlp.linear_fc1` so (TELayerNormColumnParallelLinear), TE's TransformerLayer
// `self_attention.layernorm_qkv`. Not MoE experts (their input is permuted, the norm apart).
// There TE's norm kernel quantizes X (transformer_engine/pytorch/csrc/extensions/normalization.cpp):
// under delayed scaling it writes the rowwise FP8 copy itself (no cast; the columnwise copy is a
// transpose of it, 1 B read and written per element); under current scaling it computes the amax
// (no amax pass), then X is cast; block and MXFP8 recipes quantize after it as anywhere else.
bool input_from_fused_norm(std::string_view layer);

// Whether the GPU's FP8 GEMM reads a copy in the transposed layout, so per-tensor recipes (one
// scale, the same codes either way) need no columnwise copy: TE's is_non_tn_fp8_gemm_supported,
// sm_100 to sm_119 and sm_130+. Block and MXFP8 copies always need their own columnwise
// quantisation (scales run along the reduction dimension).
bool fp8_gemm_reads_transposed(int sm);

// The precomputed costs of one layer (every captured step of it summed: each step is a pass).
struct LayerCost {
  std::string layer;
  int steps = 0;                      // captured steps summed
  std::array<double, 3> flops{};      // whole-layer GEMM FLOPs per Gemm (all ranks), scaled
  std::array<double, 3> bf16_seconds{};  // per Gemm, one rank's GEMM in BF16
  // Indexed [recipe][gemm]: the GEMM alone under the recipe (its casts are below); 0 where the
  // recipe does not run on the GPU. For a kBf16 recipe, the BF16 time.
  std::vector<std::array<double, 3>> fp8_seconds;
  // Indexed [recipe][role][Copies - 1]: the cast into those copies; a per-tensor recipe on a GPU
  // that reads transposed copies casts the one rowwise copy whichever it reads.
  std::vector<std::array<std::array<double, 3>, 3>> cast_seconds;
  // Indexed [recipe][role]: the amax pass, charged once per role whose copies any FP8 GEMM reads.
  std::vector<std::array<double, 3>> amax_seconds;
};

struct CostModel {
  const GpuTarget* gpu = nullptr;
  CostOptions options;
  std::vector<Recipe> recipes;          // the candidates, in the order given
  std::vector<RecipeSupport> support;   // per recipe: whether the GPU runs it, why not
  // Per recipe: its GEMMs read one FP8 copy of each operand in either layout (a per-tensor recipe
  // where fp8_gemm_reads_transposed), so a columnwise use casts the rowwise copy.
  std::vector<bool> single_copy;
  std::vector<LayerCost> layers;        // one per layer name, in plain string order
};

// Precomputes every GEMM's and cast's time. `layers` as pair_gemm_operands returns them (any
// order; a layer's steps are summed into one LayerCost).
CostModel build_cost_model(std::span<const GemmLayer> layers, std::span<const Recipe> recipes,
                           const GpuTarget& gpu, const CostOptions& options = {});

// A precision choice per (layer, GEMM): an index into CostModel::recipes, or kCostBf16.
inline constexpr int kCostBf16 = -1;
struct CostPlan {
  // Indexed like CostModel::layers, then by Gemm.
  std::vector<std::array<int, 3>> choice;
};
// Every GEMM of every layer under one recipe (kCostBf16: the all-BF16 baseline).
CostPlan uniform_plan(const CostModel& model, int recipe);

struct CostEstimate {
  double bf16_seconds = 0;   // every GEMM in BF16, no casts
  double plan_seconds = 0;   // the plan's GEMMs plus the casts its FP8 GEMMs need
  double speedup = 1;        // bf16_seconds / plan_seconds (1 when there are no GEMMs)
  double total_flops = 0;    // all GEMM FLOPs (whole layers, all ranks, scaled)
  double fp8_flops = 0;      // those of GEMMs the plan runs in FP8
  double fp8_flop_share = 0; // fp8_flops / total_flops (0 when there are no GEMMs)
};
// The plan's predicted GEMM time against all-BF16. Each tensor an FP8 GEMM reads is cast once per
// pass and recipe into the copies its GEMMs read, however many read them; a recipe's amax pass
// once per role it casts. Choosing a
// recipe the GPU does not run is a caller's bug (FP8A_CHECK), as is a plan of the wrong size.
CostEstimate estimate_cost(const CostModel& model, const CostPlan& plan);

}  // namespace fp8a

// Recipes are data: one row per recipe kind in kRecipeKinds, a Recipe value per candidate, and a
// canonical spec string ("current:pow2") that names it in options and output files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/fp8_codec.hpp"
#include "core/te_version.hpp"

namespace fp8a {

// GEMM operand roles, named as Transformer Engine's debug tools name them.
enum class Role : std::uint8_t { kActivation, kWeight, kGradient };
inline constexpr const char* kRoleNames[] = {"activation", "weight", "gradient"};
inline const char* role_name(Role r) { return kRoleNames[static_cast<int>(r)]; }
bool role_from_name(std::string_view name, Role* out);

// Which FP8 type each role uses (TE's recipe.Format): E4M3 everywhere, or HYBRID
// (E4M3 for activation and weight, E5M2 for gradients).
enum class TrainingFormat : std::uint8_t { kE4M3, kHybrid };
const char* training_format_name(TrainingFormat f);
// Throws usage error fp8a.usage.202 for anything but "e4m3" / "hybrid".
TrainingFormat parse_training_format(std::string_view name);
// `--format LIST`: comma-separated formats, duplicates dropped, order kept. Throws usage error
// fp8a.usage.202 for a bad or empty entry.
std::vector<TrainingFormat> parse_training_format_list(std::string_view list);
// The formats as `--format` takes them ("e4m3,hybrid"); the inverse of parse_training_format_list.
std::string training_format_list(const std::vector<TrainingFormat>& formats);
// Every format: `--format`'s and RunConfig's default.
inline const std::vector<TrainingFormat> kAllTrainingFormats = {TrainingFormat::kE4M3,
                                                                TrainingFormat::kHybrid};
Fp8Format fp8_format_for(TrainingFormat f, Role role);

// How scales are chosen. One row per kind in kRecipeKinds.
enum class RecipeKind : std::uint8_t {
  kPerTensorCurrent,  // TE Float8CurrentScaling: scale from this tensor's amax
  kPerTensorDelayed,  // TE DelayedScaling: scale from the amax history of earlier steps
  kBlock,             // TE Float8BlockScaling: 1x128 blocks (activation, gradient), 128x128 (weight)
  kMx,                // TE MXFP8BlockScaling: 32-element blocks with E8M0 scales
  kBf16,              // no FP8: the BF16 round trip (the fallback a layer is kept in)
  kNvfp4,             // TE NVFP4BlockScaling: E2M1 in 16-element blocks with E4M3 scales under an
                      // FP32 per-tensor scale (core/nvfp4.hpp)
};

enum class DelayedAlgo : std::uint8_t { kMax, kMostRecent };
// TE's MXFP8 rule rounds the E8M0 scale up (never saturates); the OCP MX reference rule takes
// floor(log2(amax)) - emax and may saturate the largest elements.
enum class MxScaleRule : std::uint8_t { kTeRoundUp, kOcpFloor };

// Which copy of an operand is quantised: rowwise blocks run along the last dim (fprop, dgrad),
// columnwise along the first (the transposed copies that wgrad consumes, and W in dgrad).
enum class Orientation : std::uint8_t { kRowwise, kColumnwise };
inline const char* orientation_name(Orientation o) {
  return o == Orientation::kRowwise ? "rowwise" : "columnwise";
}

// Block shape in elements of the 2-D view [rows, cols]: {1, 128} is a run of 128 along a row.
// {0, 0} for per-tensor recipes and bf16 (no blocks).
struct BlockShape {
  std::int64_t rows = 0, cols = 0;
  bool operator==(const BlockShape&) const = default;
};

// How many scales a tensor gets.
enum class Granularity : std::uint8_t {
  kPerTensor,  // one scale for the whole tensor
  kBlock,      // one scale per block (block shapes in the row)
  kNone,       // no FP8 cast and no scale: the BF16 round trip
};

// How a scale is stored (the kind's default; an option may change it, e.g. block:fp32).
enum class ScaleType : std::uint8_t {
  kFp32,  // any fp32 value
  kPow2,  // fp32 rounded down to a power of two
  kE8M0,  // an 8-bit exponent (OCP MX E8M0)
  kNone,  // no scale
  kE4M3,  // an E4M3 value under an FP32 per-tensor scale (NVFP4's two levels)
};

// One recipe kind: its names and its behaviour. The functions below derive from these fields.
struct RecipeKindTraits {
  RecipeKind kind;
  const char* name;       // first field of the spec string
  const char* options;    // the options it takes, for messages
  const char* summary;    // one line for --help
  const char* te_recipe;  // TE's recipe class (transformer_engine/common/recipe/__init__.py)
  Granularity granularity;
  ScaleType scale_type;   // the default; Recipe::pow2_scales starts as scale_type == kPow2
  // Rowwise block per role (indexed by Role); the columnwise block is its transpose.
  BlockShape blocks[3];
  BlockShape block_2d;    // every role's block under the :2d option; {0, 0}: no such option
  // The tensor must be >= 2-D with the last dim and the product of the others divisible by this
  // (te_quantizer's is_quantizable); 0: any shape (a last partial block gets its own scale).
  int shape_divisor;
  const char* te_quantizer;  // the TE quantizer class that states shape_divisor's rule
  const char* short_name;    // the kind in messages ("MXFP8")
  bool replays_history;      // the scale comes from the amax history of earlier steps
  // Minimum compute capability (10 * major + minor) for TE to train with it
  // (transformer_engine/pytorch/quantization.py: _compute_fp8_support, _compute_mxfp8_support,
  // _compute_fp8_block_scaling_support).
  int te_min_sm;
  int te_max_sm;  // the last one TE supports; 0: no upper bound
  // The compute capabilities whose cuBLASLt runs its GEMMs: [lt_min_sm, lt_max_sm]; lt_max_sm 0
  // means no upper bound.
  int lt_min_sm, lt_max_sm;
  // The consumers' names of the kind, "" where the consumer has none. Megatron-LM's --fp8-recipe
  // (megatron_args.txt; te_precision_config.yaml's fp8_quantization_recipe), torchao's
  // Float8LinearRecipeName closest to it (torchao.json; block's rowwise becomes
  // rowwise_with_gw_hp when some module keeps only its wgrad in BF16).
  const char* megatron_recipe;
  const char* torchao_recipe;
  // The format torchao's recipe trains (its gradients' FP8 type: tensorwise E5M2, so hybrid;
  // rowwise E4M3; torchao/float8/config.py Float8LinearConfig.from_recipe_name); kinds without a
  // torchao recipe: kHybrid, unused.
  TrainingFormat torchao_format;
  // Megatron's --te-precision-config-file can give a module this kind (a config of its own), so
  // the per-module plan may switch modules to it (policies/advice.hpp per_module_recipe).
  bool te_per_module;
  // The format `--format auto` (the default) evaluates it in: the one NVIDIA's recipes train it
  // with. HYBRID for delayed, current and block scaling (Megatron-Bridge's presets; TE#2754:
  // blockwise with E5M2 gradients tracks BF16 where all-E4M3 does not; TE's Float8BlockScaling
  // class itself defaults to E4M3), E4M3 for MXFP8 (TE's default; Megatron-Bridge PR #638
  // switched its MXFP8 preset to it after E5M2 gradients diverged). BF16 has no FP8 type.
  TrainingFormat default_format;
  // A 4-bit kind: Megatron names megatron_recipe among its FP4 recipes (--fp4-format e2m1
  // --fp4-recipe, Megatron-Core 0.15+; Bridge's fp4 / fp4_recipe; the precision config's
  // fp4_quantization_recipe, with no fp8_format), not its FP8 ones.
  bool megatron_fp4 = false;
  // Bits of an element of its quantised copy: 8 (FP8), 4 (NVFP4's E2M1: the GPU's FP4 peak and
  // half a byte in the cost model), 16 (BF16).
  int element_bits = 8;
  // Its cast needs the tensor's amax first, in a pass of its own over the BF16 tensor (current
  // scaling; delayed takes it from the history, block and MXFP8 find each block's inside the cast).
  bool amax_pass = false;
  // Megatron runs its LM head (output_layer) in this kind with --fp8-output-proj
  // (TELMHeadColumnParallelLinear, Megatron-Core 0.18+: MXFP8 only); other kinds leave it BF16.
  bool megatron_output_proj = false;
  // Its blocks' scales sit under an FP32 per-tensor scale from the tensor's amax (NVFP4's level-2
  // scale, core/nvfp4.hpp): the cast needs that amax first (the transformed copy's where the
  // Hadamard transform applies), ranks share the reduced one, and an evaluation carries it.
  bool two_level_scale = false;
  // Its cast is E4M3's whatever the training format (NVFP4BlockScaling asserts fp8_format E4M3,
  // the type of its block scales; the elements are E2M1): one evaluation serves every format.
  bool fixed_e4m3 = false;
  // Every role's block under the :no_2d option; {0, 0}: no such option.
  BlockShape block_1d = {};
  // The first TE release with its recipe class, and the first whose debug features
  // (nvdlfw_inspect.yaml) take it; {0, 0}: every release --te-version accepts.
  TeVersion te_since = {0, 0};
  TeVersion te_debug_since = {0, 0};
  // The nvdlfw_inspect feature that logs its casts' statistics.
  const char* nvdlfw_stats = "LogFp8TensorStats";
  // torchao.json's reason where torchao has no recipe for it (torchao_recipe ""); "{spec}" stands
  // for the recipe's spec.
  const char* torchao_none = "";
  // A reported training result against it in the format other than default_format: where it was
  // reported, and what (the advisory's text before its "consider ..."); "" where none.
  const char* other_format_source = "";
  const char* other_format_evidence = "";
};
inline constexpr RecipeKindTraits kRecipeKinds[] = {
    {.kind = RecipeKind::kPerTensorCurrent,
     .name = "current",
     .options = "pow2, eps=V",
     .summary = "per-tensor current scaling (TE Float8CurrentScaling); options :pow2, :eps=V",
     .te_recipe = "Float8CurrentScaling",
     .granularity = Granularity::kPerTensor,
     .scale_type = ScaleType::kFp32,
     .blocks = {},
     .block_2d = {},
     .shape_divisor = 0,
     .te_quantizer = "Float8CurrentScalingQuantizer",
     .short_name = "current scaling",
     .replays_history = false,
     .te_min_sm = 89,
     .te_max_sm = 0,
     .lt_min_sm = 89,
     .lt_max_sm = 0,
     .megatron_recipe = "tensorwise",
     .torchao_recipe = "tensorwise",
     .torchao_format = TrainingFormat::kHybrid,
     .te_per_module = true,
     .default_format = TrainingFormat::kHybrid,
     .amax_pass = true},
    {.kind = RecipeKind::kPerTensorDelayed,
     .name = "delayed",
     .options = "history=H, algo=max|most_recent, margin=M",
     .summary = "delayed scaling (TE DelayedScaling) replayed over steps; defaults "
                "history=1024:algo=max:margin=0",
     .te_recipe = "DelayedScaling",
     .granularity = Granularity::kPerTensor,
     .scale_type = ScaleType::kFp32,
     .blocks = {},
     .block_2d = {},
     .shape_divisor = 0,
     .te_quantizer = "Float8Quantizer",
     .short_name = "delayed scaling",
     .replays_history = true,
     .te_min_sm = 89,
     .te_max_sm = 0,
     .lt_min_sm = 89,
     .lt_max_sm = 0,
     .megatron_recipe = "delayed",
     .torchao_recipe = "",
     .torchao_format = TrainingFormat::kHybrid,
     .te_per_module = false,
     .default_format = TrainingFormat::kHybrid,
     .torchao_none = "the advice is delayed scaling ({spec}); torchao's float8 training has no delayed "
                     "scaling, and its tensorwise recipe (current scaling) was not the choice"},
    {.kind = RecipeKind::kBlock,
     .name = "block",
     .options = "fp32, 2d",
     .summary = "TE Float8BlockScaling: 1x128 blocks, 128x128 for weights, power-of-two scales "
                "(:fp32 for fp32 scales, :2d for 128x128 tiles everywhere)",
     .te_recipe = "Float8BlockScaling",
     .granularity = Granularity::kBlock,
     .scale_type = ScaleType::kPow2,
     .blocks = {{1, 128}, {128, 128}, {1, 128}},  // x, w, grad _block_scaling_dim 1, 2, 1
     .block_2d = {128, 128},
     .shape_divisor = 0,
     .te_quantizer = "Float8BlockQuantizer",
     .short_name = "block scaling",
     .replays_history = false,
     .te_min_sm = 90,  // Hopper; TE emulates the GEMMs on Blackwell
     .te_max_sm = 0,
     .lt_min_sm = 90,  // VEC128_32F / BLK128x128_32F: Hopper only
     .lt_max_sm = 99,
     .megatron_recipe = "blockwise",
     .torchao_recipe = "rowwise",
     .torchao_format = TrainingFormat::kE4M3,
     .te_per_module = true,
     .default_format = TrainingFormat::kHybrid,
     .other_format_source = "NVIDIA/TransformerEngine#2754",
     .other_format_evidence = "block scaling with all-E4M3 tracked BF16's loss worse than HYBRID (E5M2 "
                              "gradients) in a reported run; the captured numbers favour e4m3 here; "},
    {.kind = RecipeKind::kMx,
     .name = "mxfp8",
     .options = "floor",
     .summary = "TE MXFP8BlockScaling: 32-element blocks, E8M0 scales rounded up (:floor for the "
                "OCP MX rule)",
     .te_recipe = "MXFP8BlockScaling",
     .granularity = Granularity::kBlock,
     .scale_type = ScaleType::kE8M0,
     .blocks = {{1, 32}, {1, 32}, {1, 32}},
     .block_2d = {},
     .shape_divisor = 32,
     .te_quantizer = "MXFP8Quantizer",
     .short_name = "MXFP8",
     .replays_history = false,
     .te_min_sm = 100,
     .te_max_sm = 119,  // "not supported on 12.0+ architectures yet" (_compute_mxfp8_support)
     .lt_min_sm = 100,  // VEC32_UE8M0
     .lt_max_sm = 0,
     .megatron_recipe = "mxfp8",
     .torchao_recipe = "",
     .torchao_format = TrainingFormat::kHybrid,
     .te_per_module = true,
     .default_format = TrainingFormat::kE4M3,
     .megatron_output_proj = true,
     .torchao_none = "the advice is MXFP8BlockScaling; torchao's float8 training has no MXFP8 recipe "
                     "(prototype only)",
     .other_format_source = "NVIDIA-NeMo/Megatron-Bridge PR #638",
     .other_format_evidence = "MXFP8 with E5M2 (hybrid) gradients diverged and lowered MMLU on Nemotron5-8B; "
                              "Megatron-Bridge's MXFP8 preset and TE's MXFP8BlockScaling default use E4M3. "
                              "The captured numbers favour hybrid here; "},
    {.kind = RecipeKind::kNvfp4,
     .name = "nvfp4",
     .options = "no_rht, no_sr, no_2d",
     .summary = "TE NVFP4BlockScaling (TE 2.8+, Blackwell): E2M1 in 16-element blocks, 16x16 for "
                "weights, E4M3 block scales, the Hadamard transform on wgrad's inputs, stochastic "
                "rounding of gradients (:no_rht, :no_sr, :no_2d turn each off)",
     .te_recipe = "NVFP4BlockScaling",
     .granularity = Granularity::kBlock,
     .scale_type = ScaleType::kE4M3,
     .blocks = {{1, 16}, {16, 16}, {1, 16}},  // fp4_quant_fwd_inp, fp4_quant_fwd_weight (2-D), bwd_grad
     .block_2d = {},
     .shape_divisor = 16,  // NVFP4Quantizer.is_quantizable: shape[-1] and prod(shape[:-1]) % 16
     .te_quantizer = "NVFP4Quantizer",
     .short_name = "NVFP4",
     .replays_history = false,
     // _compute_nvfp4_support: compute capability 10.0+; sm_120/121 are left out because TE up to
     // 2.18 quantises stochastically rounded gradients to all zeros there (TE fc1fc0e78, main only).
     .te_min_sm = 100,
     .te_max_sm = 119,
     .lt_min_sm = 100,  // CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3, cuBLAS 12.8+
     .lt_max_sm = 0,
     // megatron/core/fp4_utils.py get_fp4_recipe; extensions/transformer_engine.py
     // _get_fp8_model_init_for_quant_recipe maps fp4_quantization_recipe nvfp4 to NVFP4BlockScaling().
     .megatron_recipe = "nvfp4",
     .torchao_recipe = "",
     .torchao_format = TrainingFormat::kHybrid,
     .te_per_module = true,
     // NVFP4BlockScaling's fp8_format (E4M3, asserted in __post_init__): the block scales' type.
     .default_format = TrainingFormat::kE4M3,
     .megatron_fp4 = true,
     .element_bits = 4,
     .two_level_scale = true,
     .fixed_e4m3 = true,
     .block_1d = {1, 16},  // NVTE_NVFP4_DISABLE_2D_QUANTIZATION: weights in 1x16 blocks too
     .te_since = kTeNvfp4Since,
     .te_debug_since = kTeDisableQuantizationSince,  // DisableQuantizationGEMM; TE PR #2296
     .nvdlfw_stats = "LogNvfp4TensorStats",
     .torchao_none = "the advice is NVFP4BlockScaling; torchao's float8 training has no 4-bit recipe"},
    {.kind = RecipeKind::kBf16,
     .name = "bf16",
     .options = "",
     .summary = "no FP8: the BF16 round trip, for comparison",
     .te_recipe = "",
     .granularity = Granularity::kNone,
     .scale_type = ScaleType::kNone,
     .blocks = {},
     .block_2d = {},
     .shape_divisor = 0,
     .te_quantizer = "",
     .short_name = "bf16",
     .replays_history = false,
     .te_min_sm = 80,  // BF16 tensor cores (Ampere)
     .te_max_sm = 0,
     .lt_min_sm = 80,
     .lt_max_sm = 0,
     .megatron_recipe = "",
     .torchao_recipe = "",
     .torchao_format = TrainingFormat::kHybrid,
     .te_per_module = false,
     .default_format = TrainingFormat::kHybrid,
     .element_bits = 16,
     .torchao_none = "the advice is BF16"},
};
const RecipeKindTraits& recipe_kind_traits(RecipeKind kind);

struct Recipe {
  RecipeKind kind = RecipeKind::kPerTensorCurrent;
  bool pow2_scales = false;   // current, block: round scales down to powers of two
  float amax_epsilon = 0.0f;  // current: amax is raised to at least this before the division
  int history = 1024;         // delayed: amax_history_len
  DelayedAlgo algo = DelayedAlgo::kMax;  // delayed: amax_compute_algo
  int margin = 0;                        // delayed: the scale has 2^-margin headroom (METRICS.md)
  MxScaleRule mx_rule = MxScaleRule::kTeRoundUp;
  // block: 128x128 tiles for every role (TE Float8BlockQuantizer's default block_scaling_dim=2,
  // which nvdlfw_inspect's fp8_block_scaling statistics use) instead of 1x128 for X and dY.
  bool block_2d = false;
  // nvfp4: TE's three switches (NVTE_NVFP4_DISABLE_RHT, _STOCHASTIC_ROUNDING, _2D_QUANTIZATION),
  // each on by default: the Hadamard transform on wgrad's copies of X and dY, stochastic rounding
  // of dY, 16x16 tiles for W. Options :no_rht, :no_sr, :no_2d turn them off.
  bool nvfp4_rht = true, nvfp4_sr = true, nvfp4_2d = true;

  // Canonical spec string: options in a fixed order; for delayed every option is written.
  std::string spec() const;
  bool operator==(const Recipe&) const = default;
};

// Parses one spec ("current:pow2", "delayed:history=16:algo=most_recent", "block:fp32",
// "mxfp8:floor", "nvfp4:no_rht", "bf16"). Throws usage error fp8a.usage.201 with "did you mean" for unknown kinds
// and options.
Recipe parse_recipe(std::string_view spec);
// TE's DelayedScaling with these options (the rest as "delayed" parses: TE's defaults).
Recipe delayed_recipe(int history, DelayedAlgo algo, int margin);
// Comma-separated list; duplicates (same canonical spec) are dropped, order kept.
std::vector<Recipe> parse_recipe_list(std::string_view list);

// Every recipe fp8-advisor simulates, in one list (the default of --recipes).
std::string default_recipe_list();

// Whether TE trains with the kind on a GPU of this compute capability (10 * major + minor), and
// whether cuBLASLt runs its GEMMs there: the row's [te_min_sm, te_max_sm], [lt_min_sm, lt_max_sm].
bool te_runs_on(RecipeKind kind, int sm);
bool lt_runs_on(RecipeKind kind, int sm);

// The next two read the option rows (core/recipe_options.hpp) and are defined beside them.
// Why Transformer Engine cannot train with the recipe; empty when it can. The evaluation-only
// variants: block:2d (128x128 tiles for every role: Float8BlockScaling trains 1x128 activations
// and gradients) and mxfp8:floor (OCP's floor rule: MXFP8BlockScaling rounds the E8M0 scale up).
// They are evaluated for comparison and never the answer.
std::string te_cannot_train(const Recipe& recipe);

// Why Transformer Engine release `te` cannot train with the recipe as it was evaluated, though
// a later release can; empty when it can. In the supported range (core/te_version.hpp): current
// scaling with power-of-two scales before TE 2.8, where Float8CurrentScaling's scales are FP32 and
// nothing TE reads turns them to powers of two (te_has_current_pow2_env); NVFP4 before 2.8
// (te_has_nvfp4); with `sm` the target GPU's SM (0: any GPU), block scaling on sm_100+ before 2.9
// (te_has_block_on_blackwell).
std::string te_release_cannot_train(const Recipe& recipe, TeVersion te, int sm = 0);

// An FP8 recipe: the kind casts to an FP8 type (every kind but bf16, the BF16 round trip).
bool is_fp8(RecipeKind kind);
// The width in bits of a recipe's GEMM operands: 4 for NVFP4 (E2M1), 8 for the FP8 kinds, 16 for
// bf16. Tensor cores run a GEMM at 16 / bits times BF16's rate on B200 and GB200.
int operand_bits(RecipeKind kind);
// What the answer calls a GEMM kept in the recipe's low precision: "NVFP4" at 4 bits, else "FP8".
const char* low_precision_name(RecipeKind kind);
// Per-tensor recipes have one scale for the whole tensor (current, delayed).
bool is_per_tensor(RecipeKind kind);
// The scale is replayed from the amax history of earlier steps (delayed).
bool replays_history(RecipeKind kind);
// Block scales under a per-tensor scale from the amax (NVFP4): the row's two_level_scale.
bool two_level_scale(RecipeKind kind);

// The element type a recipe casts to, as the type's traits: E2M1 for NVFP4 (1 mantissa bit, bias
// 1, smallest normal 2^0, largest 6), else the FP8 type (kFp8Traits). Not for bf16.
inline constexpr Fp8Traits kE2M1Traits{1, 1, 0, 6.0f, 0x7, "e2m1"};
const Fp8Traits& element_traits(RecipeKind kind, Fp8Format fp8);
// The cast's type as reports name it: "bf16" for the BF16 round trip, else element_traits' name.
const char* cast_type_name(RecipeKind kind, Fp8Format fp8);

// The scale current scaling gives a tensor whose amax (TE's: max |x|, NaN skipped) is amax.
float per_tensor_scale(const Recipe& recipe, Fp8Format format, float amax);

// The row's block for the role (block_2d under :2d, block_1d under :no_2d), transposed for the
// columnwise copy.
BlockShape block_shape(const Recipe& recipe, Role role, Orientation orientation);

// The orientations worth reporting for a recipe and role: only rowwise where the columnwise
// copy has the same numbers (per-tensor scales, bf16, 128x128 weight tiles).
std::vector<Orientation> orientations_for(const Recipe& recipe, Role role);

}  // namespace fp8a

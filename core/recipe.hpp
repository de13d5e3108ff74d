// Recipes are data: one row per recipe kind in kRecipeKinds, a Recipe value per candidate, and a
// canonical spec string ("current:pow2") that names it in options and output files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/fp8_codec.hpp"

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
Fp8Format fp8_format_for(TrainingFormat f, Role role);

// How scales are chosen. One row per kind in kRecipeKinds.
enum class RecipeKind : std::uint8_t {
  kPerTensorCurrent,  // TE Float8CurrentScaling: scale from this tensor's amax
  kPerTensorDelayed,  // TE DelayedScaling: scale from the amax history of earlier steps
  kBlock,             // TE Float8BlockScaling: 1x128 blocks (activation, gradient), 128x128 (weight)
  kMx,                // TE MXFP8BlockScaling: 32-element blocks with E8M0 scales
  kBf16,              // no FP8: the BF16 round trip (the fallback a layer is kept in)
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

struct RecipeKindTraits {
  RecipeKind kind;
  const char* name;     // first field of the spec string
  const char* options;  // the options it takes, for messages
  const char* summary;  // one line for --help
};
inline constexpr RecipeKindTraits kRecipeKinds[] = {
    {RecipeKind::kPerTensorCurrent, "current", "pow2, eps=V",
     "per-tensor current scaling (TE Float8CurrentScaling); options :pow2, :eps=V"},
    {RecipeKind::kPerTensorDelayed, "delayed", "history=H, algo=max|most_recent, margin=M",
     "delayed scaling (TE DelayedScaling) replayed over steps; defaults history=1024:algo=max:margin=0"},
    {RecipeKind::kBlock, "block", "fp32, 2d",
     "TE Float8BlockScaling: 1x128 blocks, 128x128 for weights, power-of-two scales (:fp32 for "
     "fp32 scales, :2d for 128x128 tiles everywhere)"},
    {RecipeKind::kMx, "mxfp8", "floor",
     "TE MXFP8BlockScaling: 32-element blocks, E8M0 scales rounded up (:floor for the OCP MX rule)"},
    {RecipeKind::kBf16, "bf16", "", "no FP8: the BF16 round trip, for comparison"},
};
const RecipeKindTraits& recipe_kind_traits(RecipeKind kind);

struct Recipe {
  RecipeKind kind = RecipeKind::kPerTensorCurrent;
  bool pow2_scales = false;   // current, block: round scales down to powers of two
  float amax_epsilon = 0.0f;  // current: amax is raised to at least this before the division
  int history = 1024;         // delayed: amax_history_len
  DelayedAlgo algo = DelayedAlgo::kMax;  // delayed: amax_compute_algo
  int margin = 0;                        // delayed: scale = (fp8_max * 2^-margin) / amax
  MxScaleRule mx_rule = MxScaleRule::kTeRoundUp;
  // block: 128x128 tiles for every role (TE Float8BlockQuantizer's default block_scaling_dim=2,
  // which nvdlfw_inspect's fp8_block_scaling statistics use) instead of 1x128 for X and dY.
  bool block_2d = false;

  // Canonical spec string: options in a fixed order; for delayed every option is written.
  std::string spec() const;
  bool operator==(const Recipe&) const = default;
};

// Parses one spec ("current:pow2", "delayed:history=16:algo=most_recent", "block:fp32",
// "mxfp8:floor", "bf16"). Throws usage error fp8a.usage.201 with "did you mean" for unknown kinds
// and options.
Recipe parse_recipe(std::string_view spec);
// Comma-separated list; duplicates (same canonical spec) are dropped, order kept.
std::vector<Recipe> parse_recipe_list(std::string_view list);

// Every recipe fp8-advisor simulates, in one list (the default of --recipes).
std::string default_recipe_list();

// Per-tensor recipes have one scale for the whole tensor (current, delayed).
bool is_per_tensor(RecipeKind kind);

// The scale current scaling gives a tensor whose amax (TE's: max |x|, NaN skipped) is amax.
float per_tensor_scale(const Recipe& recipe, Fp8Format format, float amax);

// Block shape in elements of the 2-D view [rows, cols]: {1, 128} is a run of 128 along a row.
// {0, 0} for per-tensor recipes and bf16 (no blocks).
struct BlockShape {
  std::int64_t rows = 0, cols = 0;
  bool operator==(const BlockShape&) const = default;
};
BlockShape block_shape(const Recipe& recipe, Role role, Orientation orientation);

// The orientations worth reporting for a recipe and role: only rowwise where the columnwise
// copy has the same numbers (per-tensor scales, bf16, 128x128 weight tiles).
std::vector<Orientation> orientations_for(const Recipe& recipe, Role role);

}  // namespace fp8a

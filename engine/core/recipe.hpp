// Recipes are data: one row per recipe kind in kRecipeKinds, a Recipe value per candidate, and a
// canonical spec string ("current:pow2") that names it in options and output files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/fp8_codec.hpp"

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

// How the scale is chosen; later kinds (delayed, blocks, MX) are added as rows.
enum class RecipeKind : std::uint8_t { kPerTensorCurrent };

struct RecipeKindTraits {
  RecipeKind kind;
  const char* name;     // first field of the spec string
  const char* summary;  // one line for --help
};
inline constexpr RecipeKindTraits kRecipeKinds[] = {
    {RecipeKind::kPerTensorCurrent, "current",
     "per-tensor current scaling (TE Float8CurrentScaling); options :pow2, :eps=V"},
};

struct Recipe {
  RecipeKind kind = RecipeKind::kPerTensorCurrent;
  bool pow2_scales = false;   // round scales down to powers of two
  float amax_epsilon = 0.0f;  // amax is raised to at least this before the division

  // Canonical spec string: options in a fixed order, defaults omitted.
  std::string spec() const;
  bool operator==(const Recipe&) const = default;
};

// Parses one spec ("current", "current:pow2", "current:eps=1e-12"). Throws usage error
// fp8a.usage.201 with "did you mean" for unknown kinds and options.
Recipe parse_recipe(std::string_view spec);
// The scale a per-tensor recipe gives a tensor whose amax (TE's: max |x|, NaN skipped) is amax.
float per_tensor_scale(const Recipe& recipe, Fp8Format format, float amax);

// Comma-separated list; duplicates (same canonical spec) are dropped, order kept.
std::vector<Recipe> parse_recipe_list(std::string_view list);

}  // namespace fp8a

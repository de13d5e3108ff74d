// Transformer Engine's recipe object for a candidate, in TE's own names
// (transformer_engine/common/recipe/__init__.py): the class, its fp8_format, the constructor
// fields the spec sets, what TE reads only from the environment, and notes where TE's recipe
// cannot express what was evaluated. One mapping that recipe.json, the answer and summary.json
// all render, so they cannot disagree.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/recipe_options.hpp"
#include "core/te_version.hpp"
#include "policies/advice.hpp"

namespace fp8a {

struct TeRecipeField {
  std::string name;                             // TE's constructor field, e.g. "margin"
  std::variant<bool, int, std::string> value;  // as the field's Python type
  bool te_default = false;                      // TE uses this value when the field is not given
};

struct TeRecipe {
  std::string class_name;             // "DelayedScaling", "Float8CurrentScaling", ...
  std::string fp8_format;             // "E4M3" or "HYBRID" (TE's recipe.Format)
  std::vector<TeRecipeField> fields;  // in TE's declaration order
  // Environment variables TE reads at import instead of a field (set before importing TE).
  std::vector<std::pair<std::string, std::string>> env;
  // What the evaluation assumed that this object cannot say (recipe.json's "recipe_notes").
  std::vector<std::string> notes;
};

// For Transformer Engine release `te` (--te-version): where that release cannot express what was
// evaluated (current:pow2 before TE 2.8), a note says so and names what TE trains with instead.
TeRecipe te_recipe_for(const RunCandidate& candidate, TeVersion te);

// The constructor call, e.g. "Float8CurrentScaling(fp8_format=Format.HYBRID)", with the fields
// that differ from TE's defaults, then "; env NAME=VALUE" and "; <note>" for each.
std::string te_recipe_call(const TeRecipe& recipe);

}  // namespace fp8a

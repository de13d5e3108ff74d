#include "engine/evaluation_index.hpp"

#include <algorithm>

namespace fp8a {

EvaluationIndex::EvaluationIndex(std::span<const EvaluationRow> rows) : rows_(rows) {
  for (const auto& r : rows) {
    const std::string spec = r.recipe.spec();
    by_key_.try_emplace(RowKey(r.key.step, r.key.layer, r.key.role, spec, r.format, r.orientation), &r);
    tensors_.emplace(r.key.step, r.key.layer, r.key.role);
    if (recipe_specs_.insert(spec).second) recipes_.push_back(r.recipe);
    recipe_formats_.emplace(spec, r.format);
    if (std::find(formats_.begin(), formats_.end(), r.format) == formats_.end()) formats_.push_back(r.format);
    auto [it, inserted] = by_layer_.try_emplace(r.key.layer);
    if (inserted) layers_.push_back(r.key.layer);
    it->second.push_back(&r);
  }
}

const EvaluationRow* EvaluationIndex::find(const CaptureKey& tensor, const Recipe& recipe,
                                           TrainingFormat format, Orientation orientation) const {
  const auto it =
      by_key_.find(RowKey(tensor.step, tensor.layer, tensor.role, recipe.spec(), format, orientation));
  return it == by_key_.end() ? nullptr : it->second;
}

const EvaluationRow* EvaluationIndex::find_for_use(const CaptureKey& tensor, const Recipe& recipe,
                                                   TrainingFormat format,
                                                   Orientation orientation) const {
  if (const EvaluationRow* r = find(tensor, recipe, format, orientation)) return r;
  return orientation == Orientation::kRowwise ? nullptr
                                              : find(tensor, recipe, format, Orientation::kRowwise);
}

bool EvaluationIndex::has_tensor(const CaptureKey& tensor) const {
  return tensors_.count(TensorKey(tensor.step, tensor.layer, tensor.role)) != 0;
}

bool EvaluationIndex::has_recipe(const Recipe& recipe) const {
  return recipe_specs_.count(recipe.spec()) != 0;
}

bool EvaluationIndex::has(const Recipe& recipe, TrainingFormat format) const {
  return recipe_formats_.count({recipe.spec(), format}) != 0;
}

std::span<const EvaluationRow* const> EvaluationIndex::rows_of(std::string_view layer) const {
  const auto it = by_layer_.find(layer);
  if (it == by_layer_.end()) return {};
  return it->second;
}

}  // namespace fp8a

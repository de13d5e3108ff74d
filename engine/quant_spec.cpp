#include "engine/quant_spec.hpp"

#include <cmath>

namespace fp8a {

Applicability make_quant_spec(const Candidate& c, const TensorStats& stats, DType dtype,
                              QuantSpec* spec) {
  spec->kind = c.recipe.kind;
  spec->format = c.format;
  spec->block = block_shape(c.recipe, c.role, c.orientation);
  spec->pow2_scales = c.recipe.pow2_scales;
  spec->mx_rule = c.recipe.mx_rule;
  spec->value_for_inf = input_type_max(dtype);
  if (!is_per_tensor(c.recipe.kind)) return Applicability::yes();
  if (replays_history(c.recipe.kind)) {
    if (std::isnan(c.given_scale))
      return Applicability::no("no amax history before this step to replay delayed scaling");
    spec->scale = c.given_scale;
  } else {
    // A given scale: the amax was reduced over ranks (engine/run.hpp AmaxReduction).
    spec->scale = std::isnan(c.given_scale) ? per_tensor_scale(c.recipe, c.format, stats.amax)
                                            : c.given_scale;
  }
  return Applicability::yes();
}

}  // namespace fp8a

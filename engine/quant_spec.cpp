#include "engine/quant_spec.hpp"

#include <cmath>
#include <limits>
#include <string>

namespace fp8a {

void set_nvfp4_amax(float amax, QuantSpec* spec) {
  spec->scale = nvfp4_global_encode_scale(amax);
  spec->nvfp4_decode = nvfp4_decode_factor(amax);
}

Nvfp4Copy nvfp4_copy_for(const Recipe& recipe, Role role, Orientation orientation) {
  Nvfp4Copy copy;
  copy.columnwise = orientation == Orientation::kColumnwise;
  copy.two_d = role == Role::kWeight && recipe.nvfp4_2d;
  copy.rht = copy.columnwise && role != Role::kWeight && recipe.nvfp4_rht;
  copy.stochastic = role == Role::kGradient && recipe.nvfp4_sr;
  copy.rule = Nvfp4BlockRule::kScaleFirst;
  // One stream per copy kind; an element's draw is a function of its place in the tensor.
  copy.seed = 0x4E56465034ull + 2 * static_cast<std::uint64_t>(role) + (copy.columnwise ? 1 : 0);
  return copy;
}

Applicability nvfp4_finite(const TensorStats& stats, const Nvfp4Copy& copy, float given_amax) {
  if (stats.inf_count > 0 || std::isinf(given_amax))
    return Applicability::no("an Inf element makes the NVFP4 tensor scale's amax inf, and the decode factor "
                             "amax / 2688 with it (TE's GEMM alpha too): every block decodes to NaN or Inf");
  if (copy.rht && stats.nan_count > 0)
    return Applicability::no("a NaN element: the Hadamard transform of the columnwise NVFP4 copy spreads it "
                             "over its 16-element block");
  if (copy.rht && stats.amax_finite > std::numeric_limits<float>::max() / 4)
    return Applicability::no("|x| up to 4 x amax in the Hadamard transform of the columnwise NVFP4 copy "
                             "overflows fp32 (amax " + std::to_string(stats.amax_finite) + ")");
  return Applicability::yes();
}

Applicability make_quant_spec(const Candidate& c, const TensorStats& stats, DType dtype,
                              QuantSpec* spec) {
  spec->kind = c.recipe.kind;
  spec->format = c.format;
  spec->block = block_shape(c.recipe, c.role, c.orientation);
  spec->pow2_scales = c.recipe.pow2_scales;
  spec->mx_rule = c.recipe.mx_rule;
  spec->value_for_inf = input_type_max(dtype);
  if (two_level_scale(c.recipe.kind)) {
    spec->nvfp4 = nvfp4_copy_for(c.recipe, c.role, c.orientation);
    // The copy's own amax: the tensor's, unless the transform changes it (the caller then finds
    // it: nvfp4_rht_amax) or the ranks reduced it (given).
    constexpr float kFoundByCaller = std::numeric_limits<float>::quiet_NaN();
    const float amax = !std::isnan(c.given_amax) ? c.given_amax : spec->nvfp4.rht ? kFoundByCaller : stats.amax;
    if (!std::isnan(amax)) set_nvfp4_amax(amax, spec);
    return nvfp4_finite(stats, spec->nvfp4, c.given_amax);
  }
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

#include "reports/te_recipe.hpp"

#include "core/te_version.hpp"

namespace fp8a {

TeRecipe te_recipe_for(const RunCandidate& c, TeVersion te) {
  const Recipe& r = c.recipe;
  TeRecipe t;
  t.class_name = recipe_kind_traits(r.kind).te_recipe;
  t.fp8_format = c.format == TrainingFormat::kE4M3 ? "E4M3" : "HYBRID";
  switch (r.kind) {
    case RecipeKind::kPerTensorDelayed:
      t.fields.push_back({"margin", r.margin, r.margin == 0});
      t.fields.push_back({"amax_history_len", r.history, r.history == 1024});
      t.fields.push_back({"amax_compute_algo",
                          std::string(r.algo == DelayedAlgo::kMax ? "max" : "most_recent"),
                          r.algo == DelayedAlgo::kMax});
      break;
    case RecipeKind::kPerTensorCurrent:
      // TE's Linear modules overwrite their quantizers' power-of-two choice with the class's
      // fp8_quant_*.power_2_scale, set once at import from NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES
      // (module/linear.py _customize_quantizers_float8_current_scaling): the env var, not the field.
      // Before TE 2.8 the same rule that excludes the candidate (te_release_cannot_train).
      if (r.pow2_scales && te_has_current_pow2_env(te))
        t.env.emplace_back("NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES", "1");
      else if (!te_release_cannot_train(r, te).empty())
        t.notes.push_back(r.spec() + ": not expressible on TE " + te_version_text(te) +
                          ": Float8CurrentScaling has power-of-two scales from TE 2.8 "
                          "(NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES); TE " + te_version_text(te) +
                          " trains with FP32 scales");
      if (r.amax_epsilon != 0.0f)
        t.notes.push_back(r.spec() + ": Float8CurrentScaling takes no amax epsilon (its QParams' "
                                     "amax_epsilon is a class attribute, 0); TE trains without it");
      break;
    case RecipeKind::kBlock:
      // Float8BlockScaling(use_f32_scales=True) does not change the scales; the env var does.
      if (!r.pow2_scales) t.env.emplace_back("NVTE_FP8_BLOCK_SCALING_FP32_SCALES", "1");
      if (r.block_2d)
        t.notes.push_back(r.spec() + ": 128x128 blocks for every role are not a Float8BlockScaling "
                                     "recipe TE trains with; TE's default is 1x128 for activations "
                                     "and gradients, 128x128 for weights");
      break;
    case RecipeKind::kMx:
      if (r.mx_rule == MxScaleRule::kOcpFloor)
        t.notes.push_back(r.spec() + ": evaluated with the OCP MX floor rule; TE's MXFP8BlockScaling "
                                     "rounds the E8M0 scale up (never saturates)");
      break;
    case RecipeKind::kBf16:
      break;
  }
  return t;
}

std::string te_recipe_call(const TeRecipe& t) {
  std::string s = t.class_name + "(fp8_format=Format." + t.fp8_format;
  for (const TeRecipeField& f : t.fields) {
    if (f.te_default) continue;
    s += ", " + f.name + "=";
    if (const bool* b = std::get_if<bool>(&f.value)) s += *b ? "True" : "False";
    else if (const int* i = std::get_if<int>(&f.value)) s += std::to_string(*i);
    else s += "\"" + std::get<std::string>(f.value) + "\"";
  }
  s += ")";
  for (const auto& [name, value] : t.env) s += "; env " + name + "=" + value;
  for (const std::string& n : t.notes) s += "; " + n;
  return s;
}

}  // namespace fp8a

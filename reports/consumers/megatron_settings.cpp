#include "reports/consumers/megatron_settings.hpp"

#include "reports/consumers/consumer_plan.hpp"

namespace fp8a {

MegatronFp8 megatron_fp8(const ConsumerPlan& plan) {
  const Recommendation& rec = *plan.rec;
  MegatronFp8 m;
  m.candidate = plan.candidate;
  if (m.candidate == nullptr) return m;
  const Recipe& r = m.candidate->recipe;
  m.fp8 = plan.fp8;
  m.fp4 = recipe_kind_traits(r.kind).megatron_fp4;
  m.format = m.fp4 ? "e2m1" : carry_format(r.kind, m.candidate->format, Consumer::kMegatronArgs).value;
  m.recipe = recipe_kind_traits(r.kind).megatron_recipe;
  m.delayed = r.kind == RecipeKind::kPerTensorDelayed;
  if (m.delayed) m.amax_compute_algo = r.algo == DelayedAlgo::kMax ? "max" : "most_recent";
  m.first_last = plan.first_last;
  m.first_last_applied = !m.delayed && (m.first_last.at_start > 0 || m.first_last.at_end > 0);
  for (const LayerDecision& l : rec.layers) {
    if (megatron_module_path(l.layer).name != "output_layer") continue;
    m.head_layer = l.layer;
    if (l.precision == Precision::kBf16) m.head = MegatronHead::kBf16;
    else m.head = r.kind == RecipeKind::kMx ? MegatronHead::kFp8 : MegatronHead::kFp8Lost;
    break;
  }
  m.te_precision_config = !plan.precision_config_omitted.has_value();
  const FirstLastBf16& fl = m.first_last;
  for (const LayerFallback& f : plan.fallbacks) {
    const std::string& layer = rec.layers[f.layer].layer;
    const auto i = transformer_layer_index(layer);
    const bool covered = m.first_last_applied && i &&
                         (*i < fl.at_start || (fl.at_end > 0 && *i > fl.last_index - fl.at_end));
    if (!covered) m.uncovered.push_back(layer + " (" + f.gemms + ")");
  }
  return m;
}

}  // namespace fp8a

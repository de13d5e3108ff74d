#include "policies/advisories.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "core/layer_name.hpp"
#include "core/text.hpp"

namespace fp8a {

// Each field fact with when it applies.
std::vector<Advisory> field_advisories(const std::vector<CandidatePlan>& candidates,
                                       std::optional<std::size_t> chosen, const std::vector<LayerDecision>& layers) {
  std::vector<Advisory> out;
  if (!chosen) return out;
  const CandidatePlan& c = candidates[*chosen];
  // The same recipe in the other format, when evaluated.
  const auto other = [&]() -> const CandidatePlan* {
    for (const CandidatePlan& o : candidates)
      if (o.candidate.recipe == c.candidate.recipe && o.candidate.format != c.candidate.format)
        return &o;
    return nullptr;
  };
  const auto numbers = [](const CandidatePlan* o) {
    return o == nullptr ? std::string(" (not evaluated here)")
                        : format_text(" (here %.1f %% of the GEMM FLOPs in FP8 with %d GEMMs to "
                                      "BF16, %s)",
                                      100.0 * o->fp8_flop_share, o->gemms_to_bf16,
                                      threshold_load_text(o->total_risk, o->fp8_gemms).c_str());
  };
  // A format reported to train worse than the kind's default, chosen because the numbers favour it.
  const RecipeKindTraits& row = recipe_kind_traits(c.candidate.recipe.kind);
  if (*row.other_format_source != '\0' && c.candidate.format != row.default_format) {
    const CandidatePlan* o = other();
    const std::string fallback = std::string(row.name) + "/" + training_format_name(row.default_format);
    out.push_back({row.other_format_source, row.other_format_evidence + std::string("consider ") +
                                                (o ? candidate_name(o->candidate) : fallback) + numbers(o)});
  }
  // The first and last captured transformer layers kept FP8 against the common rule of thumb.
  std::map<int, std::vector<std::size_t>> by_index;  // index -> layers
  for (std::size_t li = 0; li < layers.size(); ++li)
    if (const auto i = transformer_layer_index(layers[li].layer)) by_index[*i].push_back(li);
  std::vector<std::string> kept;
  double margin = 0;
  bool any_margin = false;
  // The first layer when it was captured (index 0), and the last captured one when it is another.
  std::vector<int> ends;
  if (!by_index.empty()) {
    const int first = by_index.begin()->first, last = by_index.rbegin()->first;
    if (first == 0) ends.push_back(0);
    if (last != first) ends.push_back(last);
  }
  for (int index : ends) {
    bool all_fp8 = true;
    for (std::size_t li : by_index[index])
      all_fp8 = all_fp8 && layers[li].precision == Precision::kFp8;
    if (!all_fp8) continue;
    for (std::size_t li : by_index[index])
      for (const GemmJudgement& j : c.layers[li].gemms) {
        if (!j.judged) continue;
        for (const Check& k : j.worst.checks)
          if (!k.watch) {  // what "passes the policy" means: watch-only breaches pass
            margin = any_margin ? std::min(margin, k.margin) : k.margin;
            any_margin = true;
          }
      }
    kept.push_back(format_text("layers.%d (%s)", index,
                                 index == 0 ? "the first" : "the last captured"));
  }
  if (!kept.empty()) {
    std::string names = kept[0];
    if (kept.size() > 1) names += " and " + kept[1];
    const std::string passes = names + (kept.size() > 1 ? " stay " : " stays ") + low_precision_name(row.kind) +
                               ": every GEMM passes the policy" +
                               (any_margin ? format_text(" (smallest margin %.3f)", margin) : std::string());
    if (operand_bits(row.kind) == 4)
      out.push_back({"arXiv:2509.25149 (NVIDIA, Pretraining Large Language Models with NVFP4)",
                     passes + ". NVIDIA's 12B NVFP4 pretraining kept about 16 % of the linear layers, "
                              "mostly in the last blocks, in BF16; these numbers do not call for it "
                              "here, and it costs NVFP4 GEMMs"});
    else
      out.push_back({"Megatron-LM --first-last-layers-bf16; Megatron-Bridge PR #651",
                     passes + ". A common rule of thumb keeps the first and last layers in BF16; these "
                              "numbers do not call for it, and it costs FP8 GEMMs (Megatron-Bridge "
                              "turned it off in its current-scaling performance configs)"});
  }
  return out;
}

std::vector<std::string> recommendation_limits(std::span<const CapturedLayer> captured,
                                               const std::vector<CandidatePlan>& candidates,
                                       std::span<const DelayedForecast> forecasts,
                                       const std::vector<LayerDecision>& layers) {
  std::vector<std::string> limits;
  std::set<std::int64_t> all_steps;
  for (const CapturedLayer& l : captured) all_steps.insert(l.steps.begin(), l.steps.end());
  const bool any_delayed = std::any_of(candidates.begin(), candidates.end(), [](const CandidatePlan& c) {
    return replays_history(c.candidate.recipe.kind);
  });
  const bool any_trend =
      std::any_of(forecasts.begin(), forecasts.end(), [](const DelayedForecast& f) { return f.has_trend; });
  if (!any_trend && (all_steps.size() <= 1 || any_delayed))
    limits.push_back(format_text(
        "no amax trend: %zu captured step%s and no training log of more; how fast each amax grows, "
        "and when a delayed-scaling history would run out of headroom, is not judged (capture more "
        "steps, or pass --training-log with every step's amax)",
        all_steps.size(), all_steps.size() == 1 ? "" : "s"));
  int incomplete = 0, unjudged = 0, gemms = 0;
  for (const LayerDecision& l : layers) {
    incomplete += l.incomplete ? 1 : 0;
    for (const GemmDecision& g : l.gemms) unjudged += g.judged ? 0 : 1, ++gemms;
  }
  if (incomplete > 0)
    limits.push_back(format_text(
        "%d layer%s not captured or paired whole at some step (recipe.json: incomplete): each GEMM judged "
        "at the steps where both of its operands were, %d of %d GEMMs at none (not judged, said GEMM by GEMM)",
        incomplete, incomplete == 1 ? "" : "s", unjudged, gemms));
  return limits;
}

}  // namespace fp8a

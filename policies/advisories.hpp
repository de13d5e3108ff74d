// What the captured numbers cannot show, beside the choice: facts from the field with their
// sources, and the limits of what the advice could judge.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "policies/amax_trend.hpp"
#include "policies/fallback_plan.hpp"
#include "policies/judging.hpp"

namespace fp8a {

// A fact from the field that the captured numbers cannot show, with its source: advice beside the
// choice (field_advisories says when each applies). It never changes the choice, except where
// the preference order cites it (mxfp8: e4m3 before hybrid).
struct Advisory {
  std::string source;  // "NVIDIA-NeMo/Megatron-Bridge PR #638"
  std::string text;    // the fact and what it means for this plan, with numbers
};

// The field facts that apply to the chosen candidate and its layer decisions; none when nothing
// is chosen: MXFP8 in hybrid (Megatron-Bridge PR #638), block scaling in e4m3
// (TransformerEngine #2754), the first / last transformer layers kept FP8 (Megatron-LM
// --first-last-layers-bf16).
std::vector<Advisory> field_advisories(const std::vector<CandidatePlan>& candidates,
                                       std::optional<std::size_t> chosen, const std::vector<LayerDecision>& layers);

// What the advice could not judge and why: no amax trend (one captured step, or delayed
// candidates, and no forecast with a trend), layers not captured or paired whole at some step
// (with how many GEMMs were judged at no step).
std::vector<std::string> recommendation_limits(std::span<const CapturedLayer> captured,
                                               const std::vector<CandidatePlan>& candidates,
                                       std::span<const DelayedForecast> forecasts,
                                       const std::vector<LayerDecision>& layers);

}  // namespace fp8a

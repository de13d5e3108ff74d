// The search over delayed scaling's options on an amax trace: every history length of
// kSearchHistories with amax_compute_algo max, most_recent, each with margins 0..kSearchMaxMargin,
// replayed exactly over the trace and forecast over the horizon (amax_trend.hpp), ranked safest
// first. The run evaluates the front-runners on the captures (the GEMM-error stage is the costly
// one), and the answer says what the best of them buys over TE's default (METRICS.md "Amax trend
// and the delayed-scaling forecast", docs/POLICY.md "Delayed scaling's options").
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/recipe.hpp"
#include "datasets/training_log.hpp"
#include "engine/evaluation_row.hpp"
#include "policies/amax_trend.hpp"
#include "policies/fallback_plan.hpp"

namespace fp8a {

inline constexpr int kSearchHistories[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
inline constexpr int kSearchMaxMargin = 3;

// One option judged on every (layer, role) of the trace in each FP8 type the formats give it.
struct DelayedOption {
  Recipe recipe;
  // The most any series clips by, in binades: max over the series of max(0, worst observed jump
  // - margin, horizon excess) (0: no step of the trace and no forecast step clips).
  double clip_binades = 0.0;
  std::size_t clipping_series = 0;  // the series that clip (observed or forecast)
  std::size_t series = 0;
  // The mean over the series of their mean headroom (mean_headroom_binades): how far the scale
  // sits below current scaling's on average, the underflow it costs.
  double mean_headroom_binades = 0.0;
};

struct DelayedSearch {
  // Every option, safest first: the least clip_binades (within kClipTieBinades), then the least
  // mean headroom, then the search order (history 1024 first, max before most_recent).
  std::vector<DelayedOption> options;
  // What the run evaluates, in this order, each once: the safest option, the safest with margin
  // 0, and TE's default (history 1024, max, margin 0).
  std::vector<Recipe> front_runners;
};

// Clip amounts this close count as equal (a thousandth of a binade: 0.07 % of the amax).
inline constexpr double kClipTieBinades = 1e-3;

// The search on the log's series (no captures: the clipping's damage is judged later, on the
// front-runners' evaluation).
DelayedSearch search_delayed_options(const TrainingLog& log, std::span<const TrainingFormat> formats,
                                     const AmaxTrendConfig& config = {});

// `recipes` with its delayed recipes replaced by the search's front-runners (at the first
// delayed one's position; appended when there was none).
std::vector<Recipe> with_front_runners(std::span<const Recipe> recipes, const DelayedSearch& search);

// The answer's line on the search: what was searched, which delayed candidate the numbers rank
// first among those evaluated, and what it buys over TE's default on the trace (clipping against
// headroom), in the plan (FP8 FLOPs) and on the captures (`rows`, the evaluation's: the share of
// the elements its casts flush and clip, over every evaluated tensor copy, element-weighted).
// `candidates` as Recommendation::candidates.
std::string delayed_search_summary(const DelayedSearch& search, const std::vector<CandidatePlan>& candidates,
                                   std::span<const EvaluationRow> rows, bool costed);

}  // namespace fp8a

// The amax trend of each GEMM operand and the delayed-scaling forecast built on it: how fast each
// (layer, role)'s amax moves, how many binades a delayed-scaling recipe's scale leaves before it
// saturates, whether its history holds an old spike (scale too small, underflow), and the step
// from which the fitted growth outruns the history window. The definitions are METRICS.md's
// "Amax trend and the delayed-scaling forecast"; this header says what each field holds.
//
// Why Theil–Sen: amax series of real runs are noisy and hold spikes (datasets/real/lm-spike: one
// step 2^9.8 above its neighbours). Least squares over log2(amax) lets one spike tilt the line;
// the Theil–Sen slope (median of the pairwise slopes) ignores up to 29 % of outlying points, needs
// no tuning, and is deterministic (a sort of the pairwise slopes, ties broken by value).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/amax_by_step.hpp"
#include "core/recipe.hpp"
#include "datasets/training_log.hpp"
#include "engine/clip_damage.hpp"
#include "engine/delayed_replay.hpp"
#include "engine/evaluation_row.hpp"

namespace fp8a {

struct AmaxTrendConfig {
  // Fit only the points of the last N steps before the series' last step (steps > last - N);
  // 0: every point.
  std::int64_t fit_last_steps = 0;
  // At most this many points enter the fit (every point when fewer): evenly spaced by index,
  // first and last always kept. Theil–Sen costs points² / 2 slopes.
  std::size_t max_fit_points = 1024;
  // A history window max this many binades above the current amax (beyond the margin) is
  // reported as "history holds a spike".
  double held_spike_binades = 1.0;
  // The forecast's horizon: steps after the series' last step over which its clipping is judged
  // (the policy's delayed_forecast.horizon_steps).
  std::int64_t horizon_steps = 10000;
};

// The amax series of one (layer, role) and its fitted trend.
struct AmaxTrend {
  std::string layer;
  Role role = Role::kActivation;
  // The merged series: the training log's amaxes, plus the captured tensors' amaxes at steps the
  // log lacks (the log wins where both have a step, as engine/run.cpp's replay does).
  AmaxByStep amax_by_step;
  std::size_t logged_steps = 0;    // steps that came from the training log
  std::size_t captured_steps = 0;  // steps that came from captured tensors only
  // The fit. Points: steps with a finite, nonzero amax (zero, inf and NaN cannot be logged).
  bool has_trend = false;         // false: fewer than two points (see no_trend)
  std::string no_trend;           // "no trend: one step", ...; empty when has_trend
  std::size_t points = 0;         // points fitted (after fit_last_steps and max_fit_points)
  std::int64_t first_step = 0;    // first and last fitted step
  std::int64_t last_step = 0;
  std::int64_t steps_spanned = 0;  // last_step - first_step
  // Theil–Sen: binades (log2 amax) per 1000 steps; NaN without a trend. Positive: growing.
  double slope_log2_per_1000 = 0.0;
  // The fitted line's log2(amax) at last_step (median of log2 a_i - slope·(s_i - last_step)).
  double fitted_log2_at_last = 0.0;
};

// The merged series of every (layer, role) of the log and of the rows, sorted by (layer, role).
// `log` may be null (captured steps only). Rows of one tensor (several recipes, copies) carry the
// same stats; the max over them is taken.
std::map<std::pair<std::string, Role>, AmaxByStep> merge_amax_series(
    const TrainingLog* log, std::span<const EvaluationRow> rows);

// The trend of one series (layer and role left empty).
// A training log whose amax at a captured step cannot be the captured tensor's: below it (a step's
// amax is the max over its micro-batches, so never under the one captured; by more than BF16's
// rounding, or 0.0001 for nvdlfw_inspect's rounded values), or kTraceMismatchRatio times above
// it. The log is then from another run, and delayed scaling's replay on it is wrong. Empty when
// every (step, layer, role) both hold agrees, or none is in both; else one sentence with the
// count and the first (in key order) with both numbers.
inline constexpr double kTraceMismatchRatio = 64.0;
std::string trace_mismatch(const TrainingLog& log, std::span<const EvaluationRow> rows);

AmaxTrend fit_amax_trend(AmaxByStep amax_by_step,
                         const AmaxTrendConfig& config = {});

// Every (layer, role) of merge_amax_series, in its order.
std::vector<AmaxTrend> fit_amax_trends(const TrainingLog* log, std::span<const EvaluationRow> rows,
                                       const AmaxTrendConfig& config = {});

// The damage a forecast's excess does, predicted from a captured tensor: its values scaled so that
// its amax is the forecast amax (the shape held), clipped at the stale scale's threshold, which
// lies horizon_excess_binades below that amax (METRICS.md).
struct ForecastClipping {
  // false: nothing forecast to clip (excess <= 0 or no trend), or no captured tensor of the
  // (layer, role) to take the shape from (then `none` says so).
  bool predicted = false;
  std::string none;
  std::int64_t from_step = -1;   // the captured step whose tensor gives the shape (the latest)
  double saturated_pct = 0.0;    // elements above the threshold, percent of the finite ones
  double clipped_rel_mse = 0.0;  // sum (|x| - c)^2 / sum x^2 over the tensor: clipping's rel_mse
  // The rel_mse of that step's rowwise copy under the recipe (0 when not applicable), and the
  // predicted rel_mse: it plus clipped_rel_mse (the rounding of the rest held).
  double captured_rel_mse = 0.0;
  double rel_mse = 0.0;
};

// One delayed-scaling recipe on one (layer, role)'s series. "Now" is the series' last step T.
// Binades are log2 units; W is the window: the history length (algo max) or 1 (most_recent).
struct DelayedForecast {
  std::string layer;
  Role role = Role::kActivation;
  std::string recipe;  // canonical spec
  Fp8Format fp8 = Fp8Format::kE4M3;
  // The trend it builds on (copied from AmaxTrend).
  bool has_trend = false;
  double slope_log2_per_1000 = 0.0;
  std::size_t points = 0;
  std::int64_t steps_spanned = 0;
  // The fitted line: log2 amax(s) = fitted_log2_at_last + slope_log2_per_1000 / 1000 ·
  // (s - fit_last_step), fitted over fit_first_step..fit_last_step (meaningful with has_trend).
  std::int64_t fit_first_step = 0;
  std::int64_t fit_last_step = 0;
  double fitted_log2_at_last = 0.0;
  // Now.
  std::int64_t step = 0;                       // T
  ReplayMode replay = ReplayMode::kUnavailable;  // how scale(T) was replayed from the series
  // log2(saturating scale / delayed scale) at T, saturating scale = fp8_max / amax(T): how many
  // binades amax(T) could grow before scale(T) saturates it. = -delayed_vs_current_log2, with the
  // series' amax. Negative: saturating now. NaN when unavailable; +inf for amax 0.
  double headroom_binades = 0.0;
  // The same with the captured tensor's own amax at T (EvaluationRow stats, the max over its
  // rows), which can be below the log's (a capture holds one micro-batch); NaN when T was not
  // captured or rows were not given.
  double captured_headroom_binades = 0.0;
  // The step whose amax sets scale(T) (latest of the window's largest; -1 when none), and the
  // last step whose scale it sets if nothing larger arrives: window_max_step + W.
  std::int64_t window_max_step = -1;
  std::int64_t window_max_until = -1;
  // headroom - margin > held_spike_binades and window_max_step < T: the history holds an older
  // amax that keeps the scale small (underflow) until window_max_until.
  bool holds_spike = false;
  // Observed over the series: steps t >= 1 whose amax exceeds the delayed threshold
  // (log2 amax(t) - log2 window max(t) > margin), of the steps with a known window, and the
  // step with the largest jump log2 amax(t) - log2 window max(t) (margin not subtracted).
  std::size_t saturated_steps = 0;
  std::size_t judged_steps = 0;
  std::int64_t worst_jump_step = -1;
  double worst_jump_binades = 0.0;  // -inf when no step was judged
  // The mean over those steps of M - jump: how many binades the scale sits below current
  // scaling's (the range given up at the bottom: underflow); NaN when no step was judged.
  double mean_headroom_binades = 0.0;
  // Forecast: the first step > T at which the fitted line outgrows the delayed threshold, the
  // window holding the series' known amaxes and the line's own earlier steps; none when it never
  // does (then growth per step <= margin). excess: binades above the threshold at that step.
  std::optional<std::int64_t> saturation_step;
  double saturation_excess_binades = 0.0;
  // The smallest margin >= 0 with no forecast saturation (same history and algo).
  int margin_for_trend = 0;
  // Over the horizon T+1..T+horizon_steps: the largest excess e(t) = L(t) - M - window max(t)
  // (binades the forecast amax stands above the stale threshold; <= 0: nothing clips) and the
  // first step it is reached. Under steady growth it is g - M from the step the known peaks leave
  // the window. NaN and -1 without a trend.
  double horizon_excess_binades = 0.0;
  std::int64_t horizon_excess_step = -1;
  // What that excess clips (predict_clippings fills it from the values the pipeline measured on
  // the captured tensors; forecast_delayed_scaling fills `none` where there are none).
  ForecastClipping clipping;
  // One line, numbers included, for the advice and the watch list.
  std::string reason;
};

// The forecast of one recipe (must replay history) on one trend; `captured` are the captured
// amaxes by step (for captured_headroom_binades; may be empty).
DelayedForecast forecast_delayed(const AmaxTrend& trend, const Recipe& recipe, Fp8Format fp8,
                                 const AmaxByStep& captured = {},
                                 const AmaxTrendConfig& config = {});

// Every (layer, role) of the log and rows x every delayed recipe of `recipes` (others skipped) x
// every FP8 type the role has under `formats` (each once: activations and weights are E4M3 in
// both formats), in (layer, role) order, then recipe order, then `formats` order. The trends are
// fitted once. A forecast with a positive horizon excess whose (layer, role) has no captured row
// says so in its clipping (`none`) and reason; the others' clipping is left to clipping_requests
// and predict_clippings.
std::vector<DelayedForecast> forecast_delayed_scaling(const TrainingLog* log,
                                                      std::span<const EvaluationRow> rows,
                                                      std::span<const Recipe> recipes,
                                                      std::span<const TrainingFormat> formats,
                                                      const AmaxTrendConfig& config = {});

// The clipping still to predict, as values for the pipeline to measure (engine/operand_pass.hpp):
// one request per (layer, role) with forecasts of a positive horizon excess and captured rows, at
// the latest captured step of that (layer, role), in the forecasts' order.
struct ClippingRequest {
  CaptureKey key;                    // the captured operand whose shape is taken
  std::vector<std::size_t> forecasts;  // indices into the forecasts given
  // One per forecast: that step's finite amax (its rows' stats) x 2^-horizon_excess_binades, the
  // stale scale's threshold under the forecast amax, with the shape held (METRICS.md).
  std::vector<double> thresholds;
};
std::vector<ClippingRequest> clipping_requests(std::span<const DelayedForecast> forecasts,
                                               std::span<const EvaluationRow> rows);

// Fills each requested forecast's clipping from clip_damage measured at its threshold (damage[i]
// for requests[i], one per threshold) and the rowwise copy's rel_mse in `rows`, and appends it to
// the forecast's reason.
void predict_clippings(std::span<DelayedForecast> forecasts, std::span<const EvaluationRow> rows,
                       std::span<const ClippingRequest> requests,
                       std::span<const std::vector<ClipDamage>> damage);

}  // namespace fp8a

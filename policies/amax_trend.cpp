#include "policies/amax_trend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <set>

#include <oneapi/tbb/parallel_for.h>

#include "core/delayed_window.hpp"
#include "core/error.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kMaxMargin = 64;  // parse_recipe's range

struct Point {
  std::int64_t step;
  double log2_amax;
};

bool fittable(float amax) { return std::isfinite(amax) && amax > 0.0f; }

std::vector<Point> points_of(const AmaxByStep& series) {
  std::vector<Point> out;
  for (const auto& [step, amax] : series)
    if (fittable(amax)) out.push_back({step, std::log2(static_cast<double>(amax))});
  return out;
}

// The middle value, or the mean of the two middle ones: a selection (nth_element), the same value
// a sort gives at a fraction of its cost (a Theil-Sen fit of 1024 points has 523,776 slopes).
double median(std::vector<double> v) {
  FP8A_CHECK(!v.empty(), "median of nothing");
  const std::size_t n = v.size();
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (n % 2 == 1) return *mid;
  return 0.5 * (*std::max_element(v.begin(), mid) + *mid);
}

std::string num(double v, const char* format = "%.3g") {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

std::map<std::pair<std::string, Role>, AmaxByStep> merge_amax_series(
    const TrainingLog* log, std::span<const EvaluationRow> rows) {
  std::map<std::pair<std::string, Role>, AmaxByStep> out;
  if (log != nullptr)
    for (const auto& [key, series] : log->series) out[key] = series.amax_by_step;
  for (const auto& row : rows) {
    const AmaxSeries* logged = log != nullptr ? log->find(row.key.layer, row.key.role) : nullptr;
    if (logged != nullptr && logged->amax_by_step.count(row.key.step) != 0) continue;
    auto [it, inserted] = out[{row.key.layer, row.key.role}].try_emplace(row.key.step, row.stats.amax);
    if (!inserted) it->second = std::max(it->second, row.stats.amax);
  }
  return out;
}

std::string trace_mismatch(const TrainingLog& log, std::span<const EvaluationRow> rows) {
  std::size_t compared = 0, wrong = 0;
  std::string first;
  std::set<CaptureKey> seen;  // one check per tensor, whatever its rows' order
  for (const EvaluationRow& row : rows) {
    if (!seen.insert(row.key).second) continue;
    const AmaxSeries* series = log.find(row.key.layer, row.key.role);
    if (series == nullptr) continue;
    const auto it = series->amax_by_step.find(row.key.step);
    const double captured = row.stats.amax;
    if (it == series->amax_by_step.end() || !std::isfinite(it->second) || !std::isfinite(captured)) continue;
    ++compared;
    const double logged = it->second;
    const double floor = log.rounded ? captured - 0.0001 : captured * (1.0 - 1.0 / 128);
    if (logged >= floor && logged <= captured * kTraceMismatchRatio) continue;
    if (wrong++ == 0)
      first = format_text("step %lld %s %s: log %.6g, captured %.6g", static_cast<long long>(row.key.step),
                          visible_text(row.key.layer).c_str(), role_name(row.key.role), logged, captured);
  }
  if (wrong == 0) return {};
  return format_text("the training log does not match the capture: at %zu of %zu captured (step, tensor) pairs its "
                     "amax is below the captured tensor's (a step's amax is at least any of its micro-batches') "
                     "or over %.0fx above it (%s); is it from another run? Delayed scaling's replay on it is "
                     "not the capture's",
                     wrong, compared, kTraceMismatchRatio, first.c_str());
}

AmaxTrend fit_amax_trend(AmaxByStep amax_by_step, const AmaxTrendConfig& config) {
  AmaxTrend t;
  t.amax_by_step = std::move(amax_by_step);  // a log's series can be millions of steps: moved, not copied
  const AmaxByStep& series = t.amax_by_step;
  t.slope_log2_per_1000 = kNaN;
  t.fitted_log2_at_last = kNaN;
  std::vector<Point> pts = points_of(series);
  if (!pts.empty() && config.fit_last_steps > 0) {
    const std::int64_t from = pts.back().step - config.fit_last_steps;
    std::erase_if(pts, [from](const Point& p) { return p.step <= from; });
  }
  if (pts.size() > config.max_fit_points && config.max_fit_points >= 2) {
    std::vector<Point> thin;
    const std::size_t n = pts.size(), m = config.max_fit_points;
    for (std::size_t k = 0; k < m; ++k) thin.push_back(pts[k * (n - 1) / (m - 1)]);
    pts = std::move(thin);
  }
  t.points = pts.size();
  if (!pts.empty()) {
    t.first_step = pts.front().step;
    t.last_step = pts.back().step;
    t.steps_spanned = t.last_step - t.first_step;
  }
  if (pts.size() < 2) {
    if (series.empty()) t.no_trend = "no trend: no steps";
    else if (pts.empty()) t.no_trend = "no trend: no finite nonzero amax";
    else if (series.size() == 1) t.no_trend = "no trend: one step";
    else t.no_trend = "no trend: one step with a finite nonzero amax";
    if (pts.size() == 1) t.fitted_log2_at_last = pts[0].log2_amax;
    return t;
  }
  std::vector<double> slopes;
  slopes.reserve(pts.size() * (pts.size() - 1) / 2);
  for (std::size_t i = 0; i < pts.size(); ++i)
    for (std::size_t j = i + 1; j < pts.size(); ++j)
      slopes.push_back((pts[j].log2_amax - pts[i].log2_amax) /
                       static_cast<double>(pts[j].step - pts[i].step));
  const double b = median(std::move(slopes));
  std::vector<double> at_last;
  for (const auto& p : pts) at_last.push_back(p.log2_amax - b * static_cast<double>(p.step - t.last_step));
  t.has_trend = true;
  t.slope_log2_per_1000 = 1000.0 * b;
  t.fitted_log2_at_last = median(std::move(at_last));
  return t;
}

std::vector<AmaxTrend> fit_amax_trends(const TrainingLog* log, std::span<const EvaluationRow> rows,
                                       const AmaxTrendConfig& config) {
  std::vector<std::pair<std::pair<std::string, Role>, AmaxByStep>> merged;
  for (auto& [key, series] : merge_amax_series(log, rows)) merged.emplace_back(key, std::move(series));
  // Each series' fit is its own (a Theil-Sen fit of 1024 points takes milliseconds; a log holds a
  // series per GEMM operand).
  std::vector<AmaxTrend> out(merged.size());
  tbb::parallel_for(std::size_t{0}, merged.size(), [&](std::size_t i) {
    auto& [key, series] = merged[i];
    std::size_t logged_steps = 0;
    if (const AmaxSeries* logged = log != nullptr ? log->find(key.first, key.second) : nullptr) {
      // Both in step order: one walk.
      auto l = logged->amax_by_step.begin();
      for (const auto& entry : series) {
        const std::int64_t step = entry.first;
        while (l != logged->amax_by_step.end() && l->first < step) ++l;
        if (l != logged->amax_by_step.end() && l->first == step) ++logged_steps;
      }
    }
    const std::size_t steps = series.size();
    AmaxTrend t = fit_amax_trend(std::move(series), config);
    t.layer = key.first;
    t.role = key.second;
    t.logged_steps = logged_steps;
    t.captured_steps = steps - logged_steps;
    out[i] = std::move(t);
  });
  return out;
}

namespace {

// Observed: each known step t >= 1 against its window (a monotone deque of point indices,
// values decreasing; on ties the later point stays): the steps judged, those that saturated, the
// worst jump and the mean headroom. This and the forecast run on the trend's points (log2 of the
// finite nonzero amaxes: a step TE would skip is no point of a trend).
void observe_windows(DelayedForecast& f, const std::vector<Point>& pts, const Recipe& recipe) {
  const double M = recipe.margin;
  double headroom_sum = 0.0;
  std::deque<std::size_t> dq;
  for (std::size_t j = 0; j < pts.size(); ++j) {
    if (j > 0) {
      while (!dq.empty() && pts[dq.back()].log2_amax <= pts[j - 1].log2_amax) dq.pop_back();
      dq.push_back(j - 1);
    }
    const std::int64_t t = pts[j].step;
    while (!dq.empty() && pts[dq.front()].step < delayed_window(recipe, t).first) dq.pop_front();
    if (t < 1 || j == 0) continue;  // step 0 casts with TE's initial scale 1
    const double held = dq.empty() ? pts[j - 1].log2_amax : pts[dq.front()].log2_amax;
    const double jump = pts[j].log2_amax - held;
    ++f.judged_steps;
    headroom_sum += M - jump;
    if (jump > M) ++f.saturated_steps;
    if (jump > f.worst_jump_binades) {
      f.worst_jump_binades = jump;
      f.worst_jump_step = t;
    }
  }
  f.mean_headroom_binades = f.judged_steps > 0 ? headroom_sum / static_cast<double>(f.judged_steps) : kNaN;
}

// Now: the replayed scale of the last step T against amax(T) (and the captured amax there), the
// window amax it holds and until when, whether it holds a spike. Returns the replay.
ReplayedScale judge_now(DelayedForecast& f, const AmaxByStep& series, const Recipe& recipe,
                        Fp8Format fp8, const AmaxByStep& captured, const AmaxTrendConfig& config) {
  const std::int64_t T = series.rbegin()->first;
  f.step = T;
  const ReplayedScale rs = replay_delayed_scale(series, T, recipe, fp8);
  f.replay = rs.mode;
  auto headroom_for = [&](float amax) {
    if (rs.mode == ReplayMode::kUnavailable || std::isnan(amax)) return kNaN;
    if (amax == 0.0f) return kInf;
    if (std::isinf(amax)) return -kInf;
    return std::log2(static_cast<double>(fp8_max_finite(fp8))) - std::log2(static_cast<double>(amax)) -
           std::log2(static_cast<double>(rs.scale));
  };
  f.headroom_binades = headroom_for(series.rbegin()->second);
  if (const auto c = captured.find(T); c != captured.end()) f.captured_headroom_binades = headroom_for(c->second);
  if (rs.amax_step >= 0) {  // the window amax the replayed scale holds, and until when
    f.window_max_step = rs.amax_step;
    f.window_max_until = rs.amax_step + delayed_window_length(recipe);
  }
  f.holds_spike = std::isfinite(f.headroom_binades) && f.headroom_binades - recipe.margin > config.held_spike_binades;
  return rs;
}

// Forecast: the line L(t) = c + g (t - last fitted step) against M + the window max, the window
// holding the known points of [t-W, T] and the line's own steps of [T+1, t-1]: when it starts
// saturating, the margin that avoids it, and the horizon's worst excess.
void forecast_line(DelayedForecast& f, const AmaxTrend& trend, const std::vector<Point>& pts, const Recipe& recipe,
                   const AmaxTrendConfig& config) {
  const std::int64_t T = f.step, W = delayed_window_length(recipe);
  const double M = recipe.margin;
  const double g = trend.slope_log2_per_1000 / 1000.0;
  auto line = [&](std::int64_t t) { return trend.fitted_log2_at_last + g * static_cast<double>(t - trend.last_step); };
  std::vector<double> suffix_max(pts.size());
  for (std::size_t i = pts.size(); i-- > 0;)
    suffix_max[i] = i + 1 < pts.size() ? std::max(pts[i].log2_amax, suffix_max[i + 1]) : pts[i].log2_amax;
  auto held = [&](std::int64_t t) {  // max known point in [t-W, T]; -inf when none
    const auto it = std::lower_bound(pts.begin(), pts.end(), delayed_window(recipe, t).first,
                                     [](const Point& p, std::int64_t s) { return p.step < s; });
    return it == pts.end() ? -kInf : suffix_max[static_cast<std::size_t>(it - pts.begin())];
  };
  double held_next = held(T + 1);
  if (held_next == -kInf) held_next = pts.back().log2_amax;  // the replay's approximate rule
  const double jump_next = line(T + 1) - held_next;
  if (jump_next > M) {
    f.saturation_step = T + 1;
    f.saturation_excess_binades = jump_next - M;
  } else if (g > M) {
    // From T+2 the window holds L(t-1), so L(t) > M + L(t-1) every step; the first t with
    // L(t) > M + held(t) (monotone in t) is found by bisection; held is empty from T+W+1.
    std::int64_t lo = T + 2, hi = T + W + 1;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (line(mid) > M + held(mid)) hi = mid;
      else lo = mid + 1;
    }
    f.saturation_step = lo;
    f.saturation_excess_binades = line(lo) - M - std::max(held(lo), line(lo - 1));
  }
  const double need = std::max({0.0, jump_next, g});
  f.margin_for_trend = static_cast<int>(std::min<double>(kMaxMargin, std::ceil(need)));
  // The horizon's worst excess. From T+2, L(t) - max(held(t), L(t-1)) = min(L(t) - held(t), g)
  // (for g > 0; for g <= 0 both are <= 0, nothing clips), nondecreasing as the known peaks
  // leave the window: the worst is at T+1 or at T+H, and first reached where bisection finds it.
  const std::int64_t H = config.horizon_steps;
  auto excess = [&](std::int64_t t) { return std::min(line(t) - held(t), g) - M; };
  if (H >= 1) {
    f.horizon_excess_binades = jump_next - M;
    f.horizon_excess_step = T + 1;
  }
  if (H >= 2 && excess(T + H) > f.horizon_excess_binades) {
    const double worst = excess(T + H);
    std::int64_t lo = T + 2, hi = T + H;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (excess(mid) >= worst) hi = mid;
      else lo = mid + 1;
    }
    f.horizon_excess_binades = worst;
    f.horizon_excess_step = lo;
  }
}

// The reason, one line: the trend, the scale now, the forecast, the steps that saturated.
std::string forecast_reason(const DelayedForecast& f, const AmaxTrend& trend, const Recipe& recipe,
                            const ReplayedScale& rs) {
  const std::int64_t T = f.step;
  std::string r = f.layer + " " + role_name(f.role) + ", " + f.recipe + ": ";
  if (trend.has_trend) {
    const double s = trend.slope_log2_per_1000;
    const std::string fit = std::to_string(trend.points) + " points over " + std::to_string(trend.steps_spanned) + " steps";
    r += s == 0.0 ? "amax is flat (" + fit + ")"
                  : std::string("amax ") + (s > 0 ? "grows" : "shrinks") + " 2^" + num(std::fabs(s)) +
                        " per 1000 steps (" + fit + ")";
  } else {
    r += trend.no_trend;
  }
  if (rs.mode == ReplayMode::kUnavailable) {
    r += "; no delayed scale at step " + std::to_string(T) + " (" + rs.detail + ")";
  } else if (f.headroom_binades < 0) {
    r += "; saturating at step " + std::to_string(T) + ": amax " + num(-f.headroom_binades) +
         " binades above the delayed scale's range";
  } else if (f.holds_spike) {
    const std::int64_t more = std::max<std::int64_t>(0, f.window_max_until - T);
    r += "; history holds step " + std::to_string(f.window_max_step) + "'s amax: scale " + num(f.headroom_binades) +
         " binades below current scaling's at step " + std::to_string(T) + " (underflow), for " +
         std::to_string(more) + " more steps (through step " + std::to_string(f.window_max_until) + ")";
  } else {
    r += "; headroom " + num(f.headroom_binades) + " binades at step " + std::to_string(T);
  }
  if (f.saturation_step) {
    r += "; starts saturating near step " + std::to_string(*f.saturation_step) + " (by " +
         num(f.saturation_excess_binades) + " binades), margin=" + std::to_string(f.margin_for_trend) + " avoids it";
  } else if (trend.has_trend) {
    r += "; no saturation forecast (growth " + num(trend.slope_log2_per_1000 / 1000.0) + " binades per step, margin " +
         std::to_string(recipe.margin) + ")";
  }
  if (f.saturated_steps > 0)
    r += "; saturated at " + std::to_string(f.saturated_steps) + " of " + std::to_string(f.judged_steps) +
         " steps, worst step " + std::to_string(f.worst_jump_step) + " (amax 2^" + num(f.worst_jump_binades) +
         " above its window max)";
  return r;
}

}  // namespace

DelayedForecast forecast_delayed(const AmaxTrend& trend, const Recipe& recipe, Fp8Format fp8,
                                 const AmaxByStep& captured,
                                 const AmaxTrendConfig& config) {
  FP8A_CHECK(replays_history(recipe.kind), "forecast_delayed needs a delayed recipe");
  DelayedForecast f;
  f.layer = trend.layer;
  f.role = trend.role;
  f.recipe = recipe.spec();
  f.fp8 = fp8;
  f.has_trend = trend.has_trend;
  f.slope_log2_per_1000 = trend.slope_log2_per_1000;
  f.points = trend.points;
  f.steps_spanned = trend.steps_spanned;
  f.fit_first_step = trend.first_step;
  f.fit_last_step = trend.last_step;
  f.fitted_log2_at_last = trend.fitted_log2_at_last;
  f.headroom_binades = kNaN;
  f.captured_headroom_binades = kNaN;
  f.worst_jump_binades = -kInf;
  f.margin_for_trend = recipe.margin;
  f.horizon_excess_binades = kNaN;
  const auto& series = trend.amax_by_step;
  const std::vector<Point> pts = points_of(series);
  observe_windows(f, pts, recipe);
  if (series.empty()) {
    f.reason = f.layer + " " + role_name(f.role) + ", " + f.recipe + ": " + trend.no_trend;
    return f;
  }
  const ReplayedScale rs = judge_now(f, series, recipe, fp8, captured, config);
  if (trend.has_trend && !pts.empty()) forecast_line(f, trend, pts, recipe, config);
  f.reason = forecast_reason(f, trend, recipe, rs);
  return f;
}

std::vector<DelayedForecast> forecast_delayed_scaling(const TrainingLog* log,
                                                      std::span<const EvaluationRow> rows,
                                                      std::span<const Recipe> recipes,
                                                      std::span<const TrainingFormat> formats,
                                                      const AmaxTrendConfig& config) {
  std::map<std::pair<std::string, Role>, AmaxByStep> captured;
  for (const auto& row : rows) {
    auto [it, inserted] = captured[{row.key.layer, row.key.role}].try_emplace(row.key.step, row.stats.amax);
    if (!inserted) it->second = std::max(it->second, row.stats.amax);
  }
  const AmaxByStep none;
  std::vector<DelayedForecast> out;
  for (const auto& trend : fit_amax_trends(log, rows, config)) {
    const auto c = captured.find({trend.layer, trend.role});
    std::vector<Fp8Format> fp8s;  // the role's FP8 types under the formats, each once
    for (const TrainingFormat f : formats) {
      const Fp8Format t = fp8_format_for(f, trend.role);
      if (std::find(fp8s.begin(), fp8s.end(), t) == fp8s.end()) fp8s.push_back(t);
    }
    const auto& known = c != captured.end() ? c->second : none;
    const std::size_t first = out.size();
    for (const auto& recipe : recipes)
      if (replays_history(recipe.kind))
        for (const Fp8Format t : fp8s) out.push_back(forecast_delayed(trend, recipe, t, known, config));
    if (known.empty())
      for (auto f = out.begin() + static_cast<std::ptrdiff_t>(first); f != out.end(); ++f)
        if (f->horizon_excess_binades > 0) {
          f->clipping.none = "no captured tensor of " + f->layer + " " + role_name(f->role) +
                             " to predict the clipping from";
          f->reason += "; forecast clips by " + num(f->horizon_excess_binades) + " binades from step " +
                       std::to_string(f->horizon_excess_step) + ", not predicted: " + f->clipping.none;
        }
  }
  return out;
}

std::vector<ClippingRequest> clipping_requests(std::span<const DelayedForecast> forecasts,
                                               std::span<const EvaluationRow> rows) {
  std::map<std::pair<std::string, Role>, std::int64_t> latest;
  for (const EvaluationRow& r : rows) {
    auto [it, inserted] = latest.try_emplace({r.key.layer, r.key.role}, r.key.step);
    if (!inserted) it->second = std::max(it->second, r.key.step);
  }
  std::vector<ClippingRequest> out;
  std::map<std::pair<std::string, Role>, std::size_t> slot;
  for (std::size_t i = 0; i < forecasts.size(); ++i) {
    const DelayedForecast& f = forecasts[i];
    if (!(f.horizon_excess_binades > 0) || f.clipping.predicted) continue;
    const auto l = latest.find({f.layer, f.role});
    if (l == latest.end()) continue;  // forecast_delayed_scaling said so (clipping.none)
    auto [it, fresh] = slot.try_emplace({f.layer, f.role}, out.size());
    if (fresh) out.push_back({CaptureKey{l->second, f.layer, f.role}, {}, {}});
    out[it->second].forecasts.push_back(i);
  }
  for (ClippingRequest& q : out) {
    // The tensor's finite amax (rows of one tensor carry the same stats).
    float amax = 0.0f;
    for (const EvaluationRow& r : rows)
      if (r.key == q.key) amax = std::max(amax, r.stats.amax_finite);
    for (const std::size_t i : q.forecasts)
      q.thresholds.push_back(static_cast<double>(amax) * std::exp2(-forecasts[i].horizon_excess_binades));
  }
  return out;
}

void predict_clippings(std::span<DelayedForecast> forecasts, std::span<const EvaluationRow> rows,
                       std::span<const ClippingRequest> requests,
                       std::span<const std::vector<ClipDamage>> damage) {
  FP8A_CHECK(requests.size() == damage.size(), "predict_clippings: one damage list per request");
  for (std::size_t q = 0; q < requests.size(); ++q) {
    const ClippingRequest& request = requests[q];
    FP8A_CHECK(damage[q].size() == request.forecasts.size(), "predict_clippings: one damage per forecast");
    for (std::size_t k = 0; k < request.forecasts.size(); ++k) {
      DelayedForecast& f = forecasts[request.forecasts[k]];
      ForecastClipping& c = f.clipping;
      c.predicted = true;
      c.from_step = request.key.step;
      // The rowwise copy of that step under the forecast's recipe and FP8 type.
      for (const EvaluationRow& r : rows)
        if (r.key == request.key && r.recipe.spec() == f.recipe && r.fp8 == f.fp8 &&
            r.orientation == Orientation::kRowwise && r.applicability.ok)
          c.captured_rel_mse = r.metrics.rel_mse;
      c.saturated_pct = damage[q][k].clipped_pct();
      c.clipped_rel_mse = damage[q][k].clipped_rel_mse();
      c.rel_mse = c.captured_rel_mse + c.clipped_rel_mse;
      f.reason += "; forecast clips by " + num(f.horizon_excess_binades) + " binades from step " +
                  std::to_string(f.horizon_excess_step) + ": " + num(c.saturated_pct) + " % of step " +
                  std::to_string(request.key.step) + "'s elements, rel_mse " + num(c.rel_mse) + " (" +
                  num(c.clipped_rel_mse) + " from clipping)";
    }
  }
}

}  // namespace fp8a

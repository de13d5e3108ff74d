// The amax trend and the delayed-scaling forecast (METRICS.md "Amax trend and the delayed-scaling
// forecast"): hand-built series whose answers are worked out here, and the real captures'
// training logs, checked against numbers computed from the CSV in this file.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "datasets/training_log.hpp"
#include "engine/cpu_backend.hpp"
#include "pipeline/run_pipeline.hpp"
#include "engine/run.hpp"
#include "policies/amax_trend.hpp"

namespace {

// The forecasts with their clipping measured on `captures`, as run's pipeline does.
std::vector<fp8a::DelayedForecast> forecasts_measured(const fp8a::TrainingLog* log,
                                                      std::span<const fp8a::EvaluationRow> rows,
                                                      const fp8a::CaptureSet& captures,
                                                      std::span<const fp8a::Recipe> recipes,
                                                      std::span<const fp8a::TrainingFormat> formats) {
  std::vector<fp8a::DelayedForecast> f = fp8a::forecast_delayed_scaling(log, rows, recipes, formats);
  fp8a::measure_clipping(captures, rows, f);
  return f;
}

// Amaxes are float32: log2 of a rounded float is off by at most 2^-24 / ln 2 = 8.6e-8 binades, a
// slope over steps >= 1 apart by twice that; 1e-6 covers both with room.
constexpr double kFloatLog2Tol = 1e-6;
// Bounded noise of +-0.05 binades around a line moves the Theil–Sen slope by far less than this
// (measured 4e-7 per 1000 steps for the series below); least squares moves it by 2.
constexpr double kNoisySlopeTol = 0.01;
// The README's figures carry 2-3 decimals.
constexpr double kReadmeTol = 0.005;

using Series = fp8a::AmaxByStep;

Series line_series(std::int64_t first, std::int64_t last, double per_step) {
  Series s;
  for (std::int64_t t = first; t <= last; ++t) s[t] = static_cast<float>(std::exp2(per_step * static_cast<double>(t)));
  return s;
}

fp8a::Recipe delayed(int history, fp8a::DelayedAlgo algo, int margin) {
  return fp8a::delayed_recipe(history, algo, margin);
}

constexpr auto kMax = fp8a::DelayedAlgo::kMax;
constexpr auto kMostRecent = fp8a::DelayedAlgo::kMostRecent;
constexpr auto kE4M3 = fp8a::Fp8Format::kE4M3;

}  // namespace

TEST_CASE("steady growth: the slope, the one-step lag, and the margin that absorbs it") {
  // log2 amax = 0.01 t, t = 0..99: 10 binades per 1000 steps.
  const auto trend = fp8a::fit_amax_trend(line_series(0, 99, 0.01));
  REQUIRE(trend.has_trend);
  CHECK(trend.points == 100);
  CHECK(trend.steps_spanned == 99);
  CHECK(std::fabs(trend.slope_log2_per_1000 - 10.0) < 1000 * kFloatLog2Tol);
  CHECK(std::fabs(trend.fitted_log2_at_last - 0.99) < kFloatLog2Tol);

  // Margin 0: the window max is step 98's amax, 0.01 binades below step 99's: saturating now,
  // and the line saturates at step 100 by its one-step growth; margin 1 (>= 0.01) absorbs it.
  const auto m0 = fp8a::forecast_delayed(trend, delayed(1024, kMax, 0), kE4M3);
  CHECK(m0.step == 99);
  CHECK(m0.replay == fp8a::ReplayMode::kExact);
  CHECK(std::fabs(m0.headroom_binades - (-0.01)) < kFloatLog2Tol);
  CHECK(m0.window_max_step == 98);
  REQUIRE(m0.saturation_step.has_value());
  CHECK(*m0.saturation_step == 100);
  CHECK(std::fabs(m0.saturation_excess_binades - 0.01) < kFloatLog2Tol);
  CHECK(m0.margin_for_trend == 1);
  CHECK(m0.judged_steps == 99);
  CHECK(m0.saturated_steps == 99);
  CHECK(std::fabs(m0.worst_jump_binades - 0.01) < kFloatLog2Tol);

  const auto m1 = fp8a::forecast_delayed(trend, delayed(1024, kMax, 1), kE4M3);
  CHECK(std::fabs(m1.headroom_binades - 0.99) < kFloatLog2Tol);
  CHECK_FALSE(m1.saturation_step.has_value());
  CHECK(m1.saturated_steps == 0);
  CHECK(m1.reason.find("no saturation forecast") != std::string::npos);

  // 1.5 binades per step (outliers growing 2.83x a step): margin 1 is not enough, 2 is.
  const auto fast = fp8a::fit_amax_trend(line_series(0, 20, 1.5));
  CHECK(std::fabs(fast.slope_log2_per_1000 - 1500.0) < 1000 * kFloatLog2Tol);
  for (auto algo : {kMax, kMostRecent}) {
    const auto f1 = fp8a::forecast_delayed(fast, delayed(1024, algo, 1), kE4M3);
    REQUIRE(f1.saturation_step.has_value());
    CHECK(*f1.saturation_step == 21);
    CHECK(std::fabs(f1.saturation_excess_binades - 0.5) < kFloatLog2Tol);
    CHECK(std::fabs(f1.headroom_binades - (-0.5)) < kFloatLog2Tol);
    CHECK(f1.margin_for_trend == 2);
    CHECK_FALSE(fp8a::forecast_delayed(fast, delayed(1024, algo, 2), kE4M3).saturation_step.has_value());
  }
}

TEST_CASE("growth outruns a held peak once the peak leaves the window or is outgrown") {
  // log2 amax = 0.01 t, t = 0..99, but step 95 is 1.005 binades above its line (1.955).
  Series s = line_series(0, 99, 0.01);
  s[95] = static_cast<float>(std::exp2(0.95 + 1.005));
  const auto trend = fp8a::fit_amax_trend(s);
  // 4851 of the 4950 pairwise slopes are exactly the line's: the median is the line.
  CHECK(std::fabs(trend.slope_log2_per_1000 - 10.0) < 1000 * kFloatLog2Tol);
  CHECK(std::fabs(trend.fitted_log2_at_last - 0.99) < kFloatLog2Tol);
  // Line L(t) = 0.99 + 0.01 (t - 99); margin 0.
  // history 1024: step 95 stays in the window until 1119; L(t) > 1.955 first at t = 196.
  const auto h1024 = fp8a::forecast_delayed(trend, delayed(1024, kMax, 0), kE4M3);
  CHECK(std::fabs(h1024.headroom_binades - (1.955 - 0.99)) < kFloatLog2Tol);
  CHECK(h1024.window_max_step == 95);
  CHECK(h1024.window_max_until == 95 + 1024);
  CHECK_FALSE(h1024.holds_spike);  // 0.965 binades: below held_spike_binades (1)
  REQUIRE(h1024.saturation_step.has_value());
  CHECK(*h1024.saturation_step == 196);
  CHECK(std::fabs(h1024.saturation_excess_binades - (1.96 - 1.955)) < kFloatLog2Tol);
  // history 16: step 95 leaves the window at step 112, where L(112) = 1.12 > max(steps 96..99) 0.99.
  const auto h16 = fp8a::forecast_delayed(trend, delayed(16, kMax, 0), kE4M3);
  REQUIRE(h16.saturation_step.has_value());
  CHECK(*h16.saturation_step == 112);
  CHECK(std::fabs(h16.saturation_excess_binades - (1.12 - 1.11)) < kFloatLog2Tol);
  // most_recent: step 100's scale comes from step 99 alone: L(100) = 1.00 > 0.99.
  const auto mr = fp8a::forecast_delayed(trend, delayed(16, kMostRecent, 0), kE4M3);
  CHECK(std::fabs(mr.headroom_binades - (-0.01)) < kFloatLog2Tol);
  REQUIRE(mr.saturation_step.has_value());
  CHECK(*mr.saturation_step == 100);
  // Observed, history 1024: step 95 jumps 1.005 - 0.01 above step 94 (the window max), the steps
  // after it stay below it; the other 94 steps each exceed their predecessor by 0.01.
  CHECK(h1024.saturated_steps == 95);
  CHECK(h1024.worst_jump_step == 95);
  CHECK(std::fabs(h1024.worst_jump_binades - (1.955 - 0.94)) < kFloatLog2Tol);
}

TEST_CASE("a spike: the robust slope ignores it, the long history holds it (underflow lag)") {
  Series s;
  for (std::int64_t t = 0; t < 300; ++t) s[t] = 1.0f;
  s[2] = static_cast<float>(std::exp2(9.75));
  auto trend = fp8a::fit_amax_trend(s);
  trend.layer = "layers.0.fc1";
  // 299 of the 44850 pairwise slopes involve the spike: the median is 0.
  CHECK(trend.slope_log2_per_1000 == 0.0);
  CHECK(trend.fitted_log2_at_last == 0.0);
  const auto h = fp8a::forecast_delayed(trend, delayed(1024, kMax, 0), kE4M3);
  CHECK(h.step == 299);
  CHECK(std::fabs(h.headroom_binades - 9.75) < kFloatLog2Tol);
  CHECK(h.holds_spike);
  CHECK(h.window_max_step == 2);
  CHECK(h.window_max_until == 1026);
  CHECK_FALSE(h.saturation_step.has_value());
  CHECK(h.margin_for_trend == 0);
  CHECK(h.saturated_steps == 1);
  CHECK(h.judged_steps == 299);
  CHECK(h.worst_jump_step == 2);
  CHECK(std::fabs(h.worst_jump_binades - 9.75) < kFloatLog2Tol);
  CHECK(h.reason ==
        "layers.0.fc1 activation, delayed:history=1024:algo=max:margin=0: amax is flat (300 points "
        "over 299 steps); history holds step 2's amax: scale 9.75 binades below current scaling's "
        "at step 299 (underflow), for 727 more steps (through step 1026); no saturation forecast "
        "(growth 0 binades per step, margin 0); saturated at 1 of 299 steps, worst step 2 (amax "
        "2^9.75 above its window max)");
  // most_recent forgets it after one step.
  const auto mr = fp8a::forecast_delayed(trend, delayed(16, kMostRecent, 0), kE4M3);
  CHECK(std::fabs(mr.headroom_binades) < kFloatLog2Tol);
  CHECK_FALSE(mr.holds_spike);
  CHECK(mr.saturated_steps == 1);
}

TEST_CASE("flat and one-step series") {
  Series flat;
  for (std::int64_t t = 0; t < 50; ++t) flat[t] = 3.0f;
  const auto f = fp8a::forecast_delayed(fp8a::fit_amax_trend(flat), delayed(1024, kMax, 2), kE4M3);
  CHECK(f.slope_log2_per_1000 == 0.0);
  CHECK(std::fabs(f.headroom_binades - 2.0) < kFloatLog2Tol);  // the margin, no more
  CHECK_FALSE(f.saturation_step.has_value());
  CHECK(f.saturated_steps == 0);
  CHECK(f.margin_for_trend == 0);

  const auto one = fp8a::fit_amax_trend(Series{{5, 2.0f}});
  CHECK_FALSE(one.has_trend);
  CHECK(one.no_trend == "no trend: one step");
  CHECK(one.points == 1);
  CHECK(std::isnan(one.slope_log2_per_1000));
  const auto f5 = fp8a::forecast_delayed(one, delayed(1024, kMax, 0), kE4M3);
  CHECK(f5.replay == fp8a::ReplayMode::kUnavailable);
  CHECK(std::isnan(f5.headroom_binades));
  CHECK_FALSE(f5.saturation_step.has_value());
  CHECK(f5.reason.find("no trend: one step; no delayed scale at step 5") != std::string::npos);
  // Step 0 casts with TE's initial scale 1: headroom log2(448 / 2).
  const auto f0 = fp8a::forecast_delayed(fp8a::fit_amax_trend(Series{{0, 2.0f}}), delayed(1024, kMax, 0), kE4M3);
  CHECK(std::fabs(f0.headroom_binades - std::log2(448.0 / 2.0)) < kFloatLog2Tol);
  CHECK(fp8a::fit_amax_trend(Series{{3, 0.0f}, {4, 0.0f}}).no_trend == "no trend: no finite nonzero amax");
}

TEST_CASE("noisy growth with outliers: Theil–Sen keeps the slope, least squares does not") {
  // log2 amax = 0.002 t + noise in {-0.05, -0.025, 0, 0.025, 0.05}, t = 0..399, and +6 binades at
  // every 4th step from 360 (10 outliers, 2.5 %).
  Series s;
  std::vector<double> xs, ys;
  for (std::int64_t t = 0; t < 400; ++t) {
    double y = 0.002 * static_cast<double>(t) + 0.05 * static_cast<double>((t * 7) % 5 - 2) / 2.0;
    if (t >= 360 && t % 4 == 0) y += 6.0;
    s[t] = static_cast<float>(std::exp2(y));
    xs.push_back(static_cast<double>(t));
    ys.push_back(std::log2(static_cast<double>(s[t])));
  }
  const auto trend = fp8a::fit_amax_trend(s);
  CHECK(std::fabs(trend.slope_log2_per_1000 - 2.0) < kNoisySlopeTol);
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) mx += xs[i], my += ys[i];
  mx /= static_cast<double>(xs.size());
  my /= static_cast<double>(ys.size());
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) sxy += (xs[i] - mx) * (ys[i] - my), sxx += (xs[i] - mx) * (xs[i] - mx);
  CHECK(1000.0 * sxy / sxx > 3.0);  // least squares: about 4.0
  // Thinning to 64 evenly spaced points and fitting the last 200 steps still find the line.
  CHECK(std::fabs(fp8a::fit_amax_trend(s, {.max_fit_points = 64}).slope_log2_per_1000 - 2.0) < 10 * kNoisySlopeTol);
  const auto last200 = fp8a::fit_amax_trend(s, {.fit_last_steps = 200});
  CHECK(last200.first_step == 200);
  CHECK(last200.points == 200);
}

TEST_CASE("merge: the training log wins where it has the step, captured steps fill the rest") {
  fp8a::TrainingLog log;
  log.series[{"fc2", fp8a::Role::kActivation}].amax_by_step = {{0, 1.0f}, {1, 2.0f}};
  std::vector<fp8a::EvaluationRow> rows(3);
  rows[0].key = {1, "fc2", fp8a::Role::kActivation};
  rows[0].stats.amax = 1.5f;  // the log's 2.0 wins
  rows[1].key = {7, "fc2", fp8a::Role::kActivation};
  rows[1].stats.amax = 4.0f;
  rows[2] = rows[1];
  rows[2].stats.amax = 5.0f;  // another row of the same tensor: the max
  const auto merged = fp8a::merge_amax_series(&log, rows);
  REQUIRE(merged.size() == 1);
  CHECK(merged.begin()->second == Series{{0, 1.0f}, {1, 2.0f}, {7, 5.0f}});
  const auto trends = fp8a::fit_amax_trends(&log, rows);
  REQUIRE(trends.size() == 1);
  CHECK(trends[0].logged_steps == 2);
  CHECK(trends[0].captured_steps == 1);
}

namespace {

// The CSV's amaxes of one tensor, parsed here independently of datasets/.
std::map<std::int64_t, double> csv_amaxes(const std::string& path, const std::string& tensor) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::string line;
  std::getline(in, line);
  std::map<std::int64_t, double> out;
  while (std::getline(in, line)) {
    const auto a = line.find(','), b = line.rfind(',');
    if (line.substr(a + 1, b - a - 1) == tensor) out[std::stoll(line.substr(0, a))] = std::stod(line.substr(b + 1));
  }
  return out;
}

}  // namespace

TEST_CASE("real captures: the lm-spike gradient spike at step 2 and its lag at step 299") {
  const std::string qkv = "layers.0.self_attention.linear_qkv";
  const std::vector<fp8a::Recipe> recipes = {fp8a::parse_recipe("delayed"),
                                             fp8a::parse_recipe("delayed:history=16:algo=most_recent")};
  for (const std::string run : {"lm-spike", "lm-sane"}) {
    CAPTURE(run);
    const std::string dir = std::string(FP8A_SOURCE_DIR) + "/datasets/real/" + run;
    const fp8a::DiskFileSystem fs;
    const auto log = fp8a::load_training_log({dir + "/amax_trace_rank0.csv"}, fs);
    const auto captures = fp8a::load_captures({dir}, fs);
    fp8a::RunConfig config;
    config.recipes = recipes;
    config.training_log = &log;
    const auto rows = fp8a::evaluate_captures(captures, config, fp8a::CpuBackend{});
    const auto forecasts =
        forecasts_measured(&log, rows, captures, recipes, std::vector{fp8a::TrainingFormat::kHybrid});
    CHECK(forecasts.size() == 6 * 2);
    const fp8a::DelayedForecast* f = nullptr;
    for (const auto& x : forecasts)
      if (x.layer == qkv && x.role == fp8a::Role::kGradient && x.recipe == recipes[0].spec()) f = &x;
    REQUIRE(f != nullptr);

    // From the CSV: the window of step 299 (history 1024 > 299) is steps 0..298.
    const auto a = csv_amaxes(dir + "/amax_trace_rank0.csv", qkv + ".gradient");
    REQUIRE(a.size() == 300);
    double held = 0;
    std::int64_t held_step = -1;
    for (std::int64_t t = 0; t < 299; ++t)
      if (a.at(t) >= held) held = a.at(t), held_step = t;
    const double lag = std::log2(held / a.at(299));
    double worst = -INFINITY, prefix = a.at(0);
    std::int64_t worst_step = -1;
    for (std::int64_t t = 1; t < 300; ++t) {
      if (std::log2(a.at(t) / prefix) > worst) worst = std::log2(a.at(t) / prefix), worst_step = t;
      prefix = std::max(prefix, a.at(t));
    }
    CHECK(f->step == 299);
    CHECK(f->replay == fp8a::ReplayMode::kExact);
    CHECK(f->window_max_step == held_step);
    CHECK(std::fabs(f->headroom_binades - lag) < kFloatLog2Tol);
    CHECK(f->worst_jump_step == worst_step);
    CHECK(std::fabs(f->worst_jump_binades - worst) < kFloatLog2Tol);
    CHECK(f->points == 300);
    // captured_headroom_binades is -delayed_vs_current_log2 of the captured step-299 tensor.
    const fp8a::EvaluationRow* row299 = nullptr;
    for (const auto& r : rows)
      if (r.key.step == 299 && r.key.layer == qkv && r.key.role == fp8a::Role::kGradient &&
          r.recipe == recipes[0] && r.orientation == fp8a::Orientation::kRowwise)
        row299 = &r;
    REQUIRE(row299 != nullptr);
    CHECK(std::fabs(f->captured_headroom_binades + fp8a::delayed_vs_current_log2(*row299)) < kFloatLog2Tol);
    if (run == "lm-spike") {
      // datasets/real/README.md: the jump 9.16e-05 (step 1) -> 0.0835 (step 2); step 2's amax sets
      // the scale for the rest of the run, "at step 299 still 8.16 binades" below the current scale
      // of the captured micro-batch. The trace's own step-299 amax (max over 16 micro-batches) is
      // larger, so the lag against it is 6.68 binades.
      CHECK(held_step == 2);
      CHECK(worst_step == 2);
      CHECK(f->holds_spike);
      CHECK(f->window_max_until == 2 + 1024);
      CHECK(std::fabs(f->captured_headroom_binades - 8.16) < kReadmeTol);
      CHECK(std::fabs(f->headroom_binades - 6.676) < kReadmeTol);
    } else {
      CHECK(held_step != 2);
      CHECK(worst < 1.0);  // no spike: no step jumps a binade above its history
    }
  }
}

TEST_CASE("the forecast's damage: a known tensor, a known growth, the clipped share and energy") {
  // The log: log2 amax = 0.01 t, t = 0..99; the captured step 99 holds x_i = i / 1000, i = 1..1000
  // (amax 1). History 1024 (max) holds step 99's amax from step 101 on, so every step after T = 99
  // outgrows the stale threshold by g = 0.01 binades (at T + 1 too: its window max is step 99's):
  // the threshold is the amax * 2^-0.01 = 0.99309, and x_994 .. x_1000 clip.
  const std::string layer = "layers.0.mlp.linear_fc1";
  fp8a::TrainingLog log;
  log.series[{layer, fp8a::Role::kActivation}].amax_by_step = line_series(0, 99, 0.01);
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1) / 1000.0f;
  fp8a::CaptureSet captures;
  fp8a::CapturedTensor t;
  t.key = {99, layer, fp8a::Role::kActivation};
  t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(x.data()), fp8a::DType::kF32, {2, 500});
  captures.tensors.push_back(t);
  const std::vector<fp8a::Recipe> recipes = {delayed(1024, kMax, 0), delayed(1024, kMax, 1),
                                             delayed(1, kMostRecent, 0)};
  // The rows of that step: its stats and each recipe's rel_mse (hand values).
  std::vector<fp8a::EvaluationRow> rows;
  for (const fp8a::Recipe& r : recipes) {
    fp8a::EvaluationRow row;
    row.key = t.key;
    row.recipe = r;
    row.stats.amax = row.stats.amax_finite = 1.0f;
    row.metrics.rel_mse = 7.0e-4;
    rows.push_back(row);
  }
  const auto forecasts =
      forecasts_measured(&log, rows, captures, recipes, std::vector{fp8a::TrainingFormat::kHybrid});
  REQUIRE(forecasts.size() == 3);
  // Independently: the elements above 2^-0.01 and what clipping them costs.
  const double c = std::exp2(-0.01);
  double sq_err = 0, energy = 0;
  for (int i = 1; i <= 1000; ++i) {
    const double v = i / 1000.0;
    energy += v * v;
    if (v > c) sq_err += (v - c) * (v - c);
  }
  for (const auto* f : {&forecasts[0], &forecasts[2]}) {
    CAPTURE(f->recipe);
    CHECK(std::fabs(f->horizon_excess_binades - 0.01) < kFloatLog2Tol * 100);
    CHECK(f->horizon_excess_step == 100);
    REQUIRE(f->clipping.predicted);
    CHECK(f->clipping.from_step == 99);
    CHECK(f->clipping.saturated_pct == doctest::Approx(0.7));  // 7 of 1000
    CHECK(f->clipping.clipped_rel_mse == doctest::Approx(sq_err / energy).epsilon(1e-3));
    CHECK(f->clipping.captured_rel_mse == 7.0e-4);
    CHECK(f->clipping.rel_mse == doctest::Approx(7.0e-4 + sq_err / energy).epsilon(1e-3));
  }
  // One binade of margin absorbs 0.01 binades a step: nothing forecast to clip.
  CHECK(forecasts[1].horizon_excess_binades == doctest::Approx(0.01 - 1.0).epsilon(1e-4));
  CHECK_FALSE(forecasts[1].clipping.predicted);

  // A horizon of one step ends at T + 1; none at all judges nothing.
  fp8a::AmaxTrendConfig one;
  one.horizon_steps = 1;
  const auto near = fp8a::forecast_delayed(fp8a::fit_amax_trend(line_series(0, 99, 0.01)), recipes[0], kE4M3, {}, one);
  CHECK(near.horizon_excess_step == 100);
  one.horizon_steps = 0;
  const auto never = fp8a::forecast_delayed(fp8a::fit_amax_trend(line_series(0, 99, 0.01)), recipes[0], kE4M3, {}, one);
  CHECK(std::isnan(never.horizon_excess_binades));
}

TEST_CASE("the forecast's horizon excess waits for an old peak to leave the window") {
  // log2 amax = 0.0625 t for t = 0..99, except a peak of 2^19.99 at step 10: history 16 holds
  // only the line (the peak left at step 27), history 1024 holds the peak through step 1034, so
  // the excess is the full 0.0625 a step only once the line passes 19.99 + 0.0625: step 321.
  Series s = line_series(0, 99, 0.0625);
  s[10] = std::exp2(19.99f);
  const auto trend = fp8a::fit_amax_trend(s);
  REQUIRE(std::fabs(trend.slope_log2_per_1000 - 62.5) < 1000 * kFloatLog2Tol);
  const auto h16 = fp8a::forecast_delayed(trend, delayed(16, kMax, 0), kE4M3);
  CHECK(h16.horizon_excess_step == 100);
  CHECK(h16.horizon_excess_binades == doctest::Approx(0.0625).epsilon(1e-4));
  const auto h1024 = fp8a::forecast_delayed(trend, delayed(1024, kMax, 0), kE4M3);
  CHECK(h1024.horizon_excess_binades == doctest::Approx(0.0625).epsilon(1e-4));
  CHECK(h1024.horizon_excess_step == 321);
}

TEST_CASE("trace_mismatch: a log from another run is named, rounding and micro-batches are not") {
  // One tensor per (step, layer, role); the captured amax 4.65 against the log's value.
  auto rows_of = [](std::vector<std::pair<std::int64_t, float>> captured) {
    std::vector<fp8a::EvaluationRow> rows;
    for (const auto& [step, amax] : captured)
      for (int copy = 0; copy < 2; ++copy) {  // two rows (recipes) per tensor: checked once
        fp8a::EvaluationRow row;
        row.key = {step, "layers.0.fc1", fp8a::Role::kActivation};
        row.stats.amax = amax;
        rows.push_back(row);
      }
    return rows;
  };
  fp8a::TrainingLog log;
  auto& series = log.series[{"layers.0.fc1", fp8a::Role::kActivation}].amax_by_step;
  series = {{1, 4.65f}, {2, 4.65f * 60}, {3, 4.65f * (1 - 1.0f / 256)}};
  // Equal, 60x above (another micro-batch's outlier), under by less than BF16's rounding: agree.
  CHECK(fp8a::trace_mismatch(log, rows_of({{1, 4.65f}, {2, 4.65f}, {3, 4.65f}})).empty());
  // Steps the log lacks are not compared.
  CHECK(fp8a::trace_mismatch(log, rows_of({{7, 1e6f}})).empty());
  // The newcomer trial's case: 4537 logged at a step whose captured amax is 4.65 (975x).
  series[4] = 4537.0f;
  series[5] = 4.0f;  // below the captured 4.65: no micro-batch max can be
  const std::string m = fp8a::trace_mismatch(log, rows_of({{1, 4.65f}, {4, 4.65f}, {5, 4.65f}}));
  CHECK(m == "the training log does not match the capture: at 2 of 3 captured (step, tensor) pairs its amax is "
             "below the captured tensor's (a step's amax is at least any of its micro-batches') or over 64x above "
             "it (step 4 layers.0.fc1 activation: log 4537, captured 4.65); is it from another run? Delayed "
             "scaling's replay on it is not the capture's");
  // nvdlfw_inspect prints value={:.4f}: 4.6562 for the BF16 amax 4.65625 agrees, 4.6 does not.
  log.rounded = true;
  series = {{1, 4.6562f}, {2, 4.6f}};
  CHECK(fp8a::trace_mismatch(log, rows_of({{1, 4.65625f}})).empty());
  CHECK_FALSE(fp8a::trace_mismatch(log, rows_of({{2, 4.65625f}})).empty());
}

#include "engine/logged_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "core/fp8_codec.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Half a unit of nvdlfw's default logger's last digit (value={:.4f}).
constexpr double kRounding = 0.00005;
// A rounded value determines a ratio when its rounding is at most 1 % of it.
constexpr double kPreciseEnough = kRounding / 0.01;

// One statistic of one tensor at one step, over the files (ranks) that logged it: the first value
// of each file; across files the mean (tensor-parallel shards of equal size: the whole tensor's
// underflow % and mse; data-parallel replicas log the same value) or, for a scale, the largest.
struct Value {
  double v = kNaN;
  bool rounded = false;
  bool set = false;
  double sum = 0;
  std::size_t files = 0;
  std::size_t last_file = static_cast<std::size_t>(-1);
  void add(double x, bool r, std::size_t file, bool largest) {
    if (set && file == last_file) return;
    rounded = rounded || r;
    if (largest) {
      v = set && !(x > v) ? v : x;
    } else {
      sum += x;
      v = sum / static_cast<double>(++files);
    }
    set = true;
    last_file = file;
  }
  // The value moved by its rounding: up (hi) or down towards 0 (lo).
  double hi() const { return rounded ? v + kRounding : v; }
  double lo() const { return rounded ? std::max(0.0, std::abs(v) - kRounding) : std::abs(v); }
  bool precise() const { return set && std::isfinite(v) && (!rounded || std::abs(v) >= kPreciseEnough); }
};

using TensorKey = std::tuple<std::int64_t, std::string, Role>;

// A tensor's mean and std at one step; over several files (shards of equal size) the whole
// tensor's: the mean of the means, and the std from the mean of std^2 + mean^2.
struct MeanStd {
  Value mean, std;
  Value mean_square;  // std^2 + mean^2 per file (a file's std and mean pair up in file order)
  void finish() {
    if (!std.set || !mean.set || std.files < 2) return;
    std.v = std::sqrt(std::max(0.0, mean_square.v - mean.v * mean.v));
  }
};

// One logged (recipe, copy) of one tensor at one step.
struct Fp8Values {
  Value underflow, mse, scale_inv_max, overflow;
  std::size_t file = 0;
  std::string underflow_name;  // the statistic's name in the log, for the row's source
};

using Fp8Key = std::tuple<std::int64_t, std::string, Role, LoggedRecipe, bool>;

// Where a logged recipe's values go: the recipe judged, and whether they bound it from above.
struct Target {
  Recipe recipe;
  bool upper_bound = false;
};

std::optional<Target> target_of(LoggedRecipe logged, const std::optional<Recipe>& training, std::string* why) {
  switch (logged) {
    case LoggedRecipe::kTraining:
      if (!training) {
        *why = "statistics without a recipe name are the training run's recipe: give --training-recipe";
        return std::nullopt;
      }
      if (!is_fp8(training->kind) || two_level_scale(training->kind)) {
        *why = "LogFp8TensorStats statistics under training recipe " + training->spec() + " are not read";
        return std::nullopt;
      }
      return Target{*training, false};
    case LoggedRecipe::kDelayed:
      if (!training || !replays_history(training->kind)) {
        *why = "fp8_delayed_scaling statistics come from a delayed-scaling run: give --training-recipe";
        return std::nullopt;
      }
      return Target{*training, false};
    case LoggedRecipe::kCurrent: return Target{parse_recipe("current"), false};
    case LoggedRecipe::kBlock: return Target{parse_recipe("block"), true};  // exact for W: make_row
    case LoggedRecipe::kMxfp8: return Target{parse_recipe("mxfp8"), false};
  }
  return std::nullopt;
}

// The largest dequantisation factor the recipe's cast can have used, or NaN.
double scale_inv_bound(const Fp8Values& v, const Recipe& recipe, double amax_hi, Fp8Format fp8) {
  if (v.scale_inv_max.set && std::isfinite(v.scale_inv_max.v)) {
    if (recipe_kind_traits(recipe.kind).scale_type == ScaleType::kE8M0)
      return std::exp2(v.scale_inv_max.v - 127.0);  // TE logs the biased E8M0 exponent
    return v.scale_inv_max.hi();
  }
  if (!std::isfinite(amax_hi) || replays_history(recipe.kind)) return kNaN;
  const double per_tensor = amax_hi / static_cast<double>(fp8_max_finite(fp8));
  return recipe_kind_traits(recipe.kind).granularity == Granularity::kBlock ? 2.0 * per_tensor : per_tensor;
}

EvaluationRow make_row(const TrainingLog& log, const Fp8Key& key, const Fp8Values& v, const Target& target,
                       const MeanStd* ms, TrainingFormat format) {
  const auto& [step, layer, role, logged, columnwise] = key;
  EvaluationRow row;
  row.key = {step, layer, role};
  row.file = log.files.at(v.file);
  row.tensor_name = layer + "_" + role_name(role);
  row.recipe = target.recipe;
  row.format = format;
  row.fp8 = fp8_format_for(format, role);
  row.orientation = columnwise ? Orientation::kColumnwise : Orientation::kRowwise;
  row.applicability = Applicability::yes();
  LoggedMeasures lm;
  // The block recipe casts W in 128x128 tiles too: only X and dY's values are bounds.
  lm.upper_bound = target.upper_bound && role != Role::kWeight;
  lm.source = v.underflow_name;
  QuantMetrics& m = row.metrics;
  m.scale = m.scale_inv = std::numeric_limits<float>::quiet_NaN();
  m.scale_inv_min = m.scale_inv_max = std::numeric_limits<float>::quiet_NaN();
  if (v.scale_inv_max.set) m.scale_inv_max = static_cast<float>(v.scale_inv_max.v);
  m.cos = kNaN;
  m.underflow_pct = v.underflow.set ? v.underflow.v : kNaN;
  lm.underflow = v.underflow.set && std::isfinite(v.underflow.v);
  m.mse = v.mse.set ? v.mse.v : kNaN;
  m.rel_mse = m.sqnr_db = m.underflow_energy_pct = m.saturated_pct = m.overflow_pct = kNaN;
  double amax_hi = kNaN;
  if (const AmaxSeries* s = log.find(layer, role); s != nullptr)
    if (const auto it = s->amax_by_step.find(step); it != s->amax_by_step.end()) {
      row.stats.amax = row.stats.amax_finite = it->second;  // the rest of TensorStats is not logged
      amax_hi = static_cast<double>(it->second) + (log.rounded ? kRounding : 0.0);
    }
  if (ms != nullptr && ms->std.set && ms->mean.set) {
    const double mean_sq = ms->std.v * ms->std.v + ms->mean.v * ms->mean.v;
    if (v.mse.precise() && ms->std.precise() && mean_sq > 0) {
      m.rel_mse = v.mse.v / mean_sq;
      m.sqnr_db = -10.0 * std::log10(m.rel_mse);
      lm.rel_mse = true;
    }
    const double mean_sq_lo = ms->std.lo() * ms->std.lo() + ms->mean.lo() * ms->mean.lo();
    const double t = 0.5 * std::ldexp(1.0, kFp8Traits[static_cast<int>(row.fp8)].min_normal_exp -
                                               kFp8Traits[static_cast<int>(row.fp8)].mantissa_bits) *
                     scale_inv_bound(v, target.recipe, amax_hi, row.fp8);
    if (lm.underflow && std::isfinite(t) && mean_sq_lo > 0) {
      m.underflow_energy_pct = std::min(100.0, v.underflow.hi() * t * t / mean_sq_lo);
      lm.energy_bound = true;
    }
  }
  if (replays_history(target.recipe.kind)) {
    if (v.overflow.set && std::isfinite(v.overflow.v)) {
      m.saturated_pct = m.overflow_pct = v.overflow.v;
      lm.saturation = true;
    }
  } else if (recipe_kind_traits(target.recipe.kind).scale_type != ScaleType::kE8M0) {
    m.saturated_pct = m.overflow_pct = 0.0;
    lm.saturation = true;
  }
  row.logged = std::move(lm);
  return row;
}

// A row's measures, for choosing the steps that decide them: NaN where not determined.
struct Point {
  std::int64_t step = 0;
  double underflow = kNaN, energy = kNaN, rel_mse = kNaN, saturated = kNaN;
};

Point point_of(const EvaluationRow& row) {
  const LoggedMeasures& k = *row.logged;
  const QuantMetrics& m = row.metrics;
  return {row.key.step, k.underflow ? m.underflow_pct : kNaN, k.energy_bound ? m.underflow_energy_pct : kNaN,
          k.rel_mse ? m.rel_mse : kNaN, k.saturation ? m.saturated_pct : kNaN};
}

// A larger value, NaN the smallest: a step whose measure is unknown never decides it.
double rank(double v) { return std::isnan(v) ? -std::numeric_limits<double>::infinity() : v; }

// The steps that decide one copy's criteria: the Pareto front of (underflow, energy bound), the
// largest rel_mse and the largest saturation (the earliest step of a tie).
std::vector<std::int64_t> deciding_steps(std::vector<Point> points) {
  std::vector<std::int64_t> out;
  const auto best = [&](double Point::*field) {
    const auto it = std::max_element(points.begin(), points.end(), [&](const Point& a, const Point& b) {
      return rank(a.*field) < rank(b.*field) || (rank(a.*field) == rank(b.*field) && a.step > b.step);
    });
    if (it != points.end() && rank((*it).*field) > 0) out.push_back(it->step);  // 0 fails no criterion
  };
  best(&Point::rel_mse);
  best(&Point::saturated);
  // Underflow descending (energy descending within a tie, then the earliest): each point whose
  // energy bound is above every point before it is on the front.
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    if (rank(a.underflow) != rank(b.underflow)) return rank(a.underflow) > rank(b.underflow);
    if (rank(a.energy) != rank(b.energy)) return rank(a.energy) > rank(b.energy);
    return a.step < b.step;
  });
  double energy = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < points.size(); ++i)
    if (i == 0 || rank(points[i].energy) > energy) {
      out.push_back(points[i].step);
      energy = std::max(energy, rank(points[i].energy));
    }
  return out;
}

// At most kLoggedSeriesPoints points: past that, each the worst (largest underflow, then rel_mse)
// of a run of consecutive steps.
LoggedSeries thinned(LoggedSeries s) {
  const std::size_t n = s.steps.size();
  if (n <= kLoggedSeriesPoints) return s;
  LoggedSeries t = s;
  t.steps.clear(), t.underflow_pct.clear(), t.rel_mse.clear();
  for (std::size_t b = 0; b < kLoggedSeriesPoints; ++b) {
    const std::size_t lo = b * n / kLoggedSeriesPoints, hi = (b + 1) * n / kLoggedSeriesPoints;
    std::size_t w = lo;
    for (std::size_t i = lo + 1; i < hi; ++i)
      if (rank(s.underflow_pct[i]) > rank(s.underflow_pct[w]) ||
          (rank(s.underflow_pct[i]) == rank(s.underflow_pct[w]) && rank(s.rel_mse[i]) > rank(s.rel_mse[w])))
        w = i;
    t.steps.push_back(s.steps[w]);
    t.underflow_pct.push_back(s.underflow_pct[w]);
    t.rel_mse.push_back(s.rel_mse[w]);
  }
  return t;
}

// Each tensor's mean and std per step, over the files that logged them.
std::map<TensorKey, MeanStd> tensor_stats_of(const TrainingLog& log) {
  std::map<TensorKey, MeanStd> tensor;
  // (step, layer, role, file) -> that file's mean, for its std's mean square.
  std::map<std::tuple<std::int64_t, std::string, Role, std::size_t>, double> file_mean;
  for (const LoggedTensorStat& s : log.tensor_stats)
    if (s.stat == LoggedTensorStatKind::kMean) {
      tensor[{s.step, s.layer, s.role}].mean.add(s.value, s.rounded, s.file, false);
      file_mean.try_emplace({s.step, s.layer, s.role, s.file}, s.value);
    }
  for (const LoggedTensorStat& s : log.tensor_stats)
    if (s.stat == LoggedTensorStatKind::kStd) {
      MeanStd& t = tensor[{s.step, s.layer, s.role}];
      const auto m = file_mean.find({s.step, s.layer, s.role, s.file});
      const double mean = m == file_mean.end() ? 0.0 : m->second;
      t.mean_square.add(s.value * s.value + mean * mean, false, s.file, false);
      t.std.add(s.value, s.rounded, s.file, false);
    }
  for (auto& [key, t] : tensor) t.finish();
  return tensor;
}

// The FP8 statistics grouped by the row they make (the training run's own names and a what-if of
// the same recipe are one row), the recipe each logged recipe judges, and what was left out.
struct Grouped {
  std::map<Fp8Key, Fp8Values> fp8;
  std::map<LoggedRecipe, std::pair<std::optional<Target>, std::string>> targets;  // and why not
  std::map<std::string, std::size_t> left_out;                                    // why -> statistics
};

Grouped group_fp8_stats(const TrainingLog& log, const std::optional<Recipe>& training_recipe) {
  Grouped g;
  for (const LoggedFp8Stat& s : log.fp8_stats) {
    const auto [at, first] = g.targets.try_emplace(s.recipe);
    if (first) at->second.first = target_of(s.recipe, training_recipe, &at->second.second);
    if (!at->second.first) {
      ++g.left_out[at->second.second];
      continue;
    }
    const Target& target = *at->second.first;
    const bool own = s.recipe == LoggedRecipe::kTraining || s.recipe == LoggedRecipe::kDelayed ||
                     (training_recipe && target.recipe == *training_recipe && !target.upper_bound);
    Fp8Values& v = g.fp8[{s.step, s.layer, s.role, own ? LoggedRecipe::kTraining : s.recipe, s.columnwise}];
    if (!v.underflow.set && !v.mse.set && !v.scale_inv_max.set && !v.overflow.set) v.file = s.file;
    switch (s.stat) {
      case LoggedStatKind::kUnderflowPct:
        if (!v.underflow.set)
          v.underflow_name = std::string(logged_recipe_name(s.recipe)) +
                             (s.recipe == LoggedRecipe::kTraining ? "" : "_") + "underflows%" +
                             (s.columnwise ? "_columnwise" : "");
        v.underflow.add(s.value, s.rounded, s.file, false);
        break;
      case LoggedStatKind::kMse: v.mse.add(s.value, s.rounded, s.file, false); break;
      case LoggedStatKind::kScaleInvMax: v.scale_inv_max.add(s.value, s.rounded, s.file, true); break;
      case LoggedStatKind::kOverflowPct: v.overflow.add(s.value, s.rounded, s.file, false); break;
      case LoggedStatKind::kScaleInvMin: break;
    }
  }
  return g;
}

using CopyKey = std::tuple<std::string, Role, std::string, Orientation>;  // layer, role, spec, copy

// Appends a row's measures to its copy's points and series (a what-if and the run's own of one
// step: the first).
void add_to_series(const EvaluationRow& row, std::map<CopyKey, std::vector<Point>>& copies,
                   std::map<CopyKey, LoggedSeries>& series) {
  const CopyKey copy{row.key.layer, row.key.role, row.recipe.spec(), row.orientation};
  copies[copy].push_back(point_of(row));
  LoggedSeries& s = series[copy];
  if (s.steps.empty()) {
    s.layer = row.key.layer, s.role = row.key.role, s.recipe = row.recipe, s.format = row.format;
    s.orientation = row.orientation;
  }
  if (s.steps.empty() || s.steps.back() != row.key.step) {
    s.steps.push_back(row.key.step);
    s.underflow_pct.push_back(row.logged->underflow ? row.metrics.underflow_pct : kNaN);
    s.rel_mse.push_back(row.logged->rel_mse ? row.metrics.rel_mse : kNaN);
  }
}

}  // namespace

LoggedRows rows_from_logged_stats(const TrainingLog& log, const std::optional<Recipe>& training_recipe,
                                  TrainingFormat format) {
  const std::map<TensorKey, MeanStd> tensor = tensor_stats_of(log);
  const Grouped g = group_fp8_stats(log, training_recipe);
  const auto row_of = [&](const Fp8Key& key, const Fp8Values& v) {
    const Target target = std::get<3>(key) == LoggedRecipe::kTraining ? Target{*training_recipe, false}
                                                                      : *g.targets.at(std::get<3>(key)).first;
    const auto t = tensor.find({std::get<0>(key), std::get<1>(key), std::get<2>(key)});
    return make_row(log, key, v, target, t == tensor.end() ? nullptr : &t->second, format);
  };
  // Each candidate copy's measures over the steps, then the steps that decide them, per layer.
  std::map<CopyKey, std::vector<Point>> copies;
  std::map<CopyKey, LoggedSeries> series;
  std::set<std::int64_t> logged_steps;
  for (const auto& [key, v] : g.fp8) {
    add_to_series(row_of(key, v), copies, series);
    logged_steps.insert(std::get<0>(key));
  }
  std::set<std::pair<std::string, std::int64_t>> kept;  // (layer, step)
  for (auto& [copy, points] : copies)
    for (std::int64_t step : deciding_steps(points)) kept.emplace(std::get<0>(copy), step);
  // (key, spec, orientation) -> the row; an exact source replaces an upper bound.
  std::map<std::tuple<CaptureKey, std::string, Orientation>, EvaluationRow> rows;
  for (const auto& [key, v] : g.fp8) {
    if (!kept.contains({std::get<1>(key), std::get<0>(key)})) continue;
    EvaluationRow row = row_of(key, v);
    auto slot = std::tuple{row.key, row.recipe.spec(), row.orientation};
    if (const auto it = rows.find(slot); it == rows.end())
      rows.emplace(std::move(slot), std::move(row));
    else if (it->second.logged->upper_bound && !row.logged->upper_bound)
      it->second = std::move(row);
  }
  LoggedRows out;
  std::set<std::int64_t> kept_steps;
  for (auto& [slot, row] : rows) {
    kept_steps.insert(row.key.step);
    out.rows.push_back(std::move(row));
  }
  for (auto& [copy, s] : series) out.series.push_back(thinned(std::move(s)));
  out.steps_logged = logged_steps.size();
  out.steps_kept = kept_steps.size();
  if (out.steps_kept < out.steps_logged)
    out.not_kept = format_text(
        "%zu of the %zu logged steps: at none is a candidate copy's logged measure worse than at the %zu judged "
        "(per layer, where its underflow and flushed-energy bound are at their worst together, its rel_mse and "
        "saturation at their largest: a criterion that fails at any logged step fails at one of these); report.html "
        "draws every step",
        out.steps_logged - out.steps_kept, out.steps_logged, out.steps_kept);
  for (const auto& [why, n] : g.left_out)
    out.notes.push_back(format_text("%zu logged statistics left out: %s", n, why.c_str()));
  return out;
}

}  // namespace fp8a

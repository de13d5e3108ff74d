#include "engine/logged_rows.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
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

struct Value {
  double v = kNaN;
  bool rounded = false;
  bool set = false;
  // The value moved by its rounding: up (hi) or down towards 0 (lo).
  double hi() const { return rounded ? v + kRounding : v; }
  double lo() const { return rounded ? std::max(0.0, std::abs(v) - kRounding) : std::abs(v); }
  bool precise() const { return set && std::isfinite(v) && (!rounded || std::abs(v) >= kPreciseEnough); }
};

void keep_first(Value& slot, double v, bool rounded) {
  if (!slot.set) slot = {v, rounded, true};
}

using TensorKey = std::tuple<std::int64_t, std::string, Role>;

struct MeanStd {
  Value mean, std;
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

}  // namespace

LoggedRows rows_from_logged_stats(const TrainingLog& log, const std::optional<Recipe>& training_recipe,
                                  TrainingFormat format) {
  std::map<TensorKey, MeanStd> tensor;
  for (const LoggedTensorStat& s : log.tensor_stats) {
    MeanStd& t = tensor[{s.step, s.layer, s.role}];
    keep_first(s.stat == LoggedTensorStatKind::kMean ? t.mean : t.std, s.value, s.rounded);
  }
  LoggedRows out;
  std::map<std::string, std::size_t> left_out;  // why -> statistics
  // The statistics grouped by the row they make: the training run's own names and a what-if of
  // the same recipe are one row.
  std::map<Fp8Key, Fp8Values> fp8;
  std::map<LoggedRecipe, std::pair<std::optional<Target>, std::string>> targets;  // and why not
  for (const LoggedFp8Stat& s : log.fp8_stats) {
    const auto [at, first] = targets.try_emplace(s.recipe);
    if (first) at->second.first = target_of(s.recipe, training_recipe, &at->second.second);
    if (!at->second.first) {
      ++left_out[at->second.second];
      continue;
    }
    const Target& target = *at->second.first;
    const bool own = s.recipe == LoggedRecipe::kTraining || s.recipe == LoggedRecipe::kDelayed ||
                     (training_recipe && target.recipe == *training_recipe && !target.upper_bound);
    Fp8Values& v = fp8[{s.step, s.layer, s.role, own ? LoggedRecipe::kTraining : s.recipe, s.columnwise}];
    if (!v.underflow.set && !v.mse.set && !v.scale_inv_max.set && !v.overflow.set) v.file = s.file;
    switch (s.stat) {
      case LoggedStatKind::kUnderflowPct:
        if (!v.underflow.set)
          v.underflow_name = std::string(logged_recipe_name(s.recipe)) +
                             (s.recipe == LoggedRecipe::kTraining ? "" : "_") + "underflows%" +
                             (s.columnwise ? "_columnwise" : "");
        keep_first(v.underflow, s.value, s.rounded);
        break;
      case LoggedStatKind::kMse: keep_first(v.mse, s.value, s.rounded); break;
      case LoggedStatKind::kScaleInvMax: keep_first(v.scale_inv_max, s.value, s.rounded); break;
      case LoggedStatKind::kOverflowPct: keep_first(v.overflow, s.value, s.rounded); break;
      case LoggedStatKind::kScaleInvMin: break;
    }
  }
  // (key, spec, orientation) -> the row; an exact source replaces an upper bound.
  std::map<std::tuple<CaptureKey, std::string, Orientation>, EvaluationRow> rows;
  for (const auto& [key, v] : fp8) {
    const Target target = std::get<3>(key) == LoggedRecipe::kTraining ? Target{*training_recipe, false}
                                                                      : *targets.at(std::get<3>(key)).first;
    const auto t = tensor.find({std::get<0>(key), std::get<1>(key), std::get<2>(key)});
    EvaluationRow row = make_row(log, key, v, target, t == tensor.end() ? nullptr : &t->second, format);
    auto slot = std::tuple{row.key, row.recipe.spec(), row.orientation};
    const auto [it, added] = rows.try_emplace(std::move(slot), std::move(row));
    if (!added && it->second.logged->upper_bound && !target.upper_bound)
      it->second = make_row(log, key, v, target, t == tensor.end() ? nullptr : &t->second, format);
  }
  for (auto& [slot, row] : rows) out.rows.push_back(std::move(row));
  for (const auto& [why, n] : left_out)
    out.notes.push_back(format_text("%zu logged statistics left out: %s", n, why.c_str()));
  return out;
}

}  // namespace fp8a

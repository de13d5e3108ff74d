#include "engine/logged_rows.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "core/fp8_codec.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Half a unit of nvdlfw's default logger's last digit (value={:.4f}).
constexpr double kRounding = 0.00005;
// A rounded value determines a ratio when its rounding is at most 1 % of it.
constexpr double kPreciseEnough = kRounding / 0.01;
// The most torch.std's n-1 can raise std^2 + mean^2 over the mean square, for 1,000 elements.
constexpr double kStdBias = 1000.0 / 999.0;

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

// A tensor's mean and std at one step; over several files (shards of equal size) the whole
// tensor's: the mean of the means, and the std from the mean of std^2 + mean^2.
struct MeanStd {
  Value mean, std;
  Value mean_square;  // std^2 + mean^2 per file (a file's std and mean pair up in file order)
  std::vector<std::pair<std::size_t, double>> file_mean;  // (file, its first mean)
  void finish() {
    if (!std.set || !mean.set || std.files < 2) return;
    std.v = std::sqrt(std::max(0.0, mean_square.v - mean.v * mean.v));
  }
};

// One logged (recipe, copy) of one tensor at one step.
struct Fp8Values {
  Value underflow, mse, scale_inv_max, overflow;
  std::size_t file = 0;
  LoggedRecipe underflow_recipe = LoggedRecipe::kTraining;  // the underflow statistic's name, for the row's source
};

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
    case LoggedRecipe::kNvfp4:
      // TE counts nonzero FP4 codes; a block whose E4M3 scale rounds to 0 is coded at +-6
      // (block_scale_inverse = min(1 / 0, FLT_MAX)) yet decodes to 0: the count misses those
      // flushes, so it bounds the underflow from below and cannot pass a GEMM.
      *why = "nvfp4_underflows% (LogNvfp4TensorStats) counts nonzero FP4 codes, and a block whose E4M3 scale "
             "rounds to 0 keeps nonzero codes though it decodes to 0: the count misses those flushes, so NVFP4 "
             "is judged from a capture";
      return std::nullopt;
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

// What one logged (recipe, copy) of a tensor at one step determines.
struct Measured {
  QuantMetrics m;
  LoggedMeasures lm;
};

Measured measure(Role role, const Fp8Values& v, const Target& target, const MeanStd* ms, const LoggedAmax* amax,
                 Fp8Format fp8) {
  Measured out;
  LoggedMeasures& lm = out.lm;
  // The block recipe casts W in 128x128 tiles too: only X and dY's values are bounds.
  lm.upper_bound = target.upper_bound && role != Role::kWeight;
  QuantMetrics& m = out.m;
  m.scale = m.scale_inv = std::numeric_limits<float>::quiet_NaN();
  m.scale_inv_min = m.scale_inv_max = std::numeric_limits<float>::quiet_NaN();
  if (v.scale_inv_max.set) m.scale_inv_max = static_cast<float>(v.scale_inv_max.v);
  m.cos = kNaN;
  m.underflow_pct = v.underflow.set ? v.underflow.v : kNaN;
  lm.underflow = v.underflow.set && std::isfinite(v.underflow.v);
  m.mse = v.mse.set ? v.mse.v : kNaN;
  m.rel_mse = m.sqnr_db = m.underflow_energy_pct = m.saturated_pct = m.overflow_pct = kNaN;
  const double amax_hi = amax == nullptr ? kNaN : static_cast<double>(amax->amax) + (amax->rounded ? kRounding : 0.0);
  if (ms != nullptr && ms->std.set && ms->mean.set) {
    const double mean_sq = ms->std.v * ms->std.v + ms->mean.v * ms->mean.v;
    if (v.mse.precise() && ms->std.precise() && mean_sq > 0) {
      m.rel_mse = v.mse.v / mean_sq;
      m.sqnr_db = -10.0 * std::log10(m.rel_mse);
      lm.rel_mse = true;
    }
    const double mean_sq_lo = ms->std.lo() * ms->std.lo() + ms->mean.lo() * ms->mean.lo();
    const Fp8Traits& traits = kFp8Traits[static_cast<int>(fp8)];
    const double t = 0.5 * std::ldexp(1.0, traits.min_normal_exp - traits.mantissa_bits) *
                     scale_inv_bound(v, target.recipe, amax_hi, fp8);
    // Two bounds, the smaller holds: every flushed |x| is below t (the share of elements times
    // t^2), and every flushed x adds x^2 to the squared error, so the flushed share of the energy
    // is at most mse / mean square. torch.std's n-1 makes the logged mean square high by up to
    // 1/(n-1) of itself, within kStdBias for a tensor of 1,000 elements or more: both bounds carry
    // it (a flushed x can sit at t itself, which rounds half to even to 0: calibration's
    // late-underflow@d256 gradient and ramp@d256 weight meet the first bound to that 1/(n-1)).
    double bound = std::numeric_limits<double>::infinity();
    if (std::isfinite(t)) bound = v.underflow.hi() * t * t * kStdBias / mean_sq_lo;
    if (v.mse.set && std::isfinite(v.mse.v)) bound = std::min(bound, 100.0 * v.mse.hi() * kStdBias / mean_sq_lo);
    if (lm.underflow && std::isfinite(bound) && mean_sq_lo > 0) {
      m.underflow_energy_pct = std::min(100.0, bound);
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
  return out;
}

// A row's measures, for choosing the steps that decide them: NaN where not determined.
struct Point {
  std::int64_t step = 0;
  double underflow = kNaN, energy = kNaN, rel_mse = kNaN, saturated = kNaN;
};

Point point_of(std::int64_t step, const Measured& x) {
  return {step, x.lm.underflow ? x.m.underflow_pct : kNaN, x.lm.energy_bound ? x.m.underflow_energy_pct : kNaN,
          x.lm.rel_mse ? x.m.rel_mse : kNaN, x.lm.saturation ? x.m.saturated_pct : kNaN};
}

// A larger value, NaN the smallest: a step whose measure is unknown never decides it.
double rank(double v) { return std::isnan(v) ? -std::numeric_limits<double>::infinity() : v; }

// A point of the series is worse than another: more underflow, then a larger rel_mse.
bool worse(double u, double r, double than_u, double than_r) {
  return rank(u) > rank(than_u) || (rank(u) == rank(than_u) && rank(r) > rank(than_r));
}

// A copy's series, thinned as it grows: buckets of `width` consecutive steps, each its worst step
// (the earliest of equals); at 2 x kLoggedSeriesPoints buckets, pairs merge and the width doubles.
// The open bucket is held here, not in the vectors: a step of every copy comes each logged step,
// and the vectors' storage is elsewhere in memory.
struct SeriesBuilder {
  LoggedSeries s;  // the closed buckets
  std::size_t width = 1;
  bool open = false;
  std::int64_t last = 0;                // the step added last
  std::int64_t open_step = 0;           // the open bucket's worst step
  double open_u = kNaN, open_r = kNaN;  // and its measures
  std::size_t fill = 0;                 // steps in the open bucket
  void add(std::int64_t step, double u, double r) {
    if (open && step == last) return;  // a what-if and the run's own: the first (the run's own)
    last = step;
    if (open && fill < width) {
      ++fill;
      if (worse(u, r, open_u, open_r)) open_step = step, open_u = u, open_r = r;
      return;
    }
    if (open) close();
    open = true, open_step = step, open_u = u, open_r = r, fill = 1;
  }
  void close() {
    s.steps.push_back(open_step), s.underflow_pct.push_back(open_u), s.rel_mse.push_back(open_r);
    open = false;
    if (s.steps.size() == 2 * kLoggedSeriesPoints) halve();
  }
  // Merges buckets in pairs (the last alone when their number is odd).
  void halve() {
    std::size_t out = 0;
    for (std::size_t i = 0; i < s.steps.size(); i += 2, ++out) {
      std::size_t w = i;
      if (i + 1 < s.steps.size() && worse(s.underflow_pct[i + 1], s.rel_mse[i + 1], s.underflow_pct[i], s.rel_mse[i]))
        w = i + 1;
      s.steps[out] = s.steps[w], s.underflow_pct[out] = s.underflow_pct[w], s.rel_mse[out] = s.rel_mse[w];
    }
    s.steps.resize(out), s.underflow_pct.resize(out), s.rel_mse.resize(out);
    width *= 2;
  }
  LoggedSeries finish() {
    if (open) close();
    while (s.steps.size() > kLoggedSeriesPoints) halve();
    return std::move(s);
  }
};

// A copy's Pareto front: a few points in practice, held inline (it is read every logged step).
class Front {
 public:
  template <class Pred>
  bool any_of(const Pred& pred) const {
    return std::any_of(inline_.begin(), inline_.begin() + static_cast<std::ptrdiff_t>(n_), pred) ||
           std::any_of(more_.begin(), more_.end(), pred);
  }
  template <class Pred>
  void erase_if(const Pred& pred) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < n_; ++i)
      if (!pred(inline_[i])) inline_[kept++] = inline_[i];
    n_ = kept;
    std::erase_if(more_, pred);
    while (n_ < kInline && !more_.empty()) inline_[n_++] = more_.back(), more_.pop_back();
  }
  void push_back(const Point& p) {
    if (n_ < kInline)
      inline_[n_++] = p;
    else
      more_.push_back(p);
  }

 private:
  static constexpr std::size_t kInline = 4;
  std::array<Point, kInline> inline_{};
  std::size_t n_ = 0;
  std::vector<Point> more_;
};

}  // namespace

// ---- the builder --------------------------------------------------------------------------------

struct LoggedRowsBuilder::State {
  std::optional<Recipe> training;
  TrainingFormat format;

  // Layers and tensors, interned by the storage of their names (equal names view the same).
  std::unordered_map<const char*, std::uint32_t> layer_of_name;
  std::vector<std::string> layers;
  static std::uint32_t tensor_id(std::uint32_t layer, Role role) { return layer * 3 + static_cast<std::uint32_t>(role); }
  std::uint32_t layer_id(std::string_view layer) {
    const auto [it, added] = layer_of_name.try_emplace(layer.data(), static_cast<std::uint32_t>(layers.size()));
    if (added) layers.emplace_back(layer);
    return it->second;
  }

  // The logged recipes' targets, and each distinct target spec's index.
  struct TargetOf {
    bool known = false;
    std::optional<Target> target;
    std::string why;
    std::size_t spec = 0;
  };
  std::array<TargetOf, kLoggedRecipes> targets;
  std::vector<std::string> specs;
  std::map<std::string, std::size_t> left_out;  // why -> statistics
  std::size_t spec_index(const Recipe& r) {
    const std::string spec = r.spec();
    const auto at = static_cast<std::size_t>(std::find(specs.begin(), specs.end(), spec) - specs.begin());
    if (at == specs.size()) specs.push_back(spec);  // (an iterator would not outlive the push)
    return at;
  }
  TargetOf& target(LoggedRecipe r) {
    TargetOf& t = targets[static_cast<std::size_t>(r)];
    if (!t.known) {
      t.known = true;
      t.target = target_of(r, training, &t.why);
      if (t.target) t.spec = spec_index(t.target->recipe);
    }
    return t;
  }
  // The recipe and spec index a row slot's values judge (kTraining: the training recipe's, its
  // index found once: this runs for every slot of every step).
  std::optional<std::size_t> training_spec;
  std::pair<Target, std::size_t> target_of_row(LoggedRecipe logged) {
    if (logged == LoggedRecipe::kTraining) {
      if (!training_spec) training_spec = spec_index(*training);
      return {Target{*training, false}, *training_spec};
    }
    const TargetOf& t = targets[static_cast<std::size_t>(logged)];
    return {*t.target, t.spec};
  }

  // One step's statistics, grouped: slot = tensor x kSlots + row recipe x 2 + columnwise.
  static constexpr std::uint64_t kSlots = 2 * kLoggedRecipes;
  struct Group {
    Fp8Values v;
    std::int64_t stamp = -1;
  };
  std::vector<Group> groups;
  std::vector<std::uint64_t> touched;  // group slots of this step
  struct TensorOfStep {
    MeanStd ms;
    const LoggedAmax* amax = nullptr;
    std::int64_t ms_stamp = -1, amax_stamp = -1;
  };
  std::vector<TensorOfStep> tensors;
  std::int64_t stamp = -1;  // the step's index

  // Each candidate copy (tensor, target spec, orientation) over the steps.
  struct Copy {
    bool used = false;
    Front front;  // Pareto front of (underflow, energy bound)
    std::optional<Point> rel_mse, saturated;
    bool rel_mse_held = false, saturated_held = false;
    SeriesBuilder series;
  };
  // By copy key, (tensor x 8 + spec) x 2 + columnwise: looked up for every statistic of every
  // step, so one array indexed by the key (in key order, as the touched slots come), not a hash.
  std::vector<Copy> copies;
  // The copy of `key`, and whether this is its first use.
  std::pair<Copy&, bool> copy(std::uint64_t key) {
    if (key >= copies.size()) copies.resize(std::max<std::size_t>(key + 1, 2 * copies.size()));
    Copy& c = copies[key];
    return {c, !std::exchange(c.used, true)};
  }

  // Rows held at (layer, step) while some copy of the layer has the step among its candidates.
  struct Held {
    int refs = 0;
    std::vector<EvaluationRow> rows;
  };
  std::map<std::pair<std::uint32_t, std::int64_t>, Held> held;
  void acquire(std::uint32_t layer, std::int64_t step) { ++held[{layer, step}].refs; }
  void release(std::uint32_t layer, std::int64_t step) {
    const auto it = held.find({layer, step});
    if (it != held.end() && --it->second.refs == 0) held.erase(it);
  }

  std::size_t steps_logged = 0;

  void gather(const LoggedStep& step);
  void update(Copy& c, std::uint32_t layer, const Point& p);
  void add_step(const LoggedStep& step);
  EvaluationRow row(const LoggedStep& step, std::uint64_t slot);
};

void LoggedRowsBuilder::State::gather(const LoggedStep& step) {
  ++stamp;
  touched.clear();
  for (const LoggedTensorStat& s : step.tensor) {
    const std::uint32_t t = tensor_id(layer_id(s.layer), s.role);
    if (t >= tensors.size()) tensors.resize(t + 1);
    TensorOfStep& x = tensors[t];
    if (x.ms_stamp != stamp) x.ms = MeanStd{}, x.ms_stamp = stamp;
    if (s.stat == LoggedTensorStatKind::kMean) {
      x.ms.mean.add(s.value, s.rounded, s.file, false);
      if (std::none_of(x.ms.file_mean.begin(), x.ms.file_mean.end(), [&](const auto& f) { return f.first == s.file; }))
        x.ms.file_mean.emplace_back(s.file, s.value);
    }
  }
  for (const LoggedTensorStat& s : step.tensor)
    if (s.stat == LoggedTensorStatKind::kStd) {
      MeanStd& ms = tensors[tensor_id(layer_id(s.layer), s.role)].ms;
      const auto m = std::find_if(ms.file_mean.begin(), ms.file_mean.end(), [&](const auto& f) { return f.first == s.file; });
      const double mean = m == ms.file_mean.end() ? 0.0 : m->second;
      ms.mean_square.add(s.value * s.value + mean * mean, false, s.file, false);
      ms.std.add(s.value, s.rounded, s.file, false);
    }
  for (const LoggedTensorStat& s : step.tensor) tensors[tensor_id(layer_id(s.layer), s.role)].ms.finish();
  for (const LoggedAmax& a : step.amax) {
    const std::uint32_t t = tensor_id(layer_id(a.layer), a.role);
    if (t >= tensors.size()) tensors.resize(t + 1);
    tensors[t].amax = &a, tensors[t].amax_stamp = stamp;
  }
  for (const LoggedFp8Stat& s : step.fp8) {
    TargetOf& at = target(s.recipe);
    if (!at.target) {
      ++left_out[at.why];
      continue;
    }
    const Target& target = *at.target;
    const bool own = s.recipe == LoggedRecipe::kTraining || s.recipe == LoggedRecipe::kDelayed ||
                     (training && target.recipe == *training && !target.upper_bound);
    const LoggedRecipe row_recipe = own ? LoggedRecipe::kTraining : s.recipe;
    const std::uint32_t t = tensor_id(layer_id(s.layer), s.role);
    if (t >= tensors.size()) tensors.resize(t + 1);
    const std::uint64_t slot = std::uint64_t{t} * kSlots +
                               static_cast<std::uint64_t>(row_recipe) * 2 + (s.columnwise ? 1 : 0);
    if (slot >= groups.size()) groups.resize(slot + 1);
    Group& g = groups[slot];
    if (g.stamp != stamp) {
      g = Group{};
      g.stamp = stamp;
      g.v.file = s.file;
      touched.push_back(slot);
    }
    Fp8Values& v = g.v;
    switch (s.stat) {
      case LoggedStatKind::kUnderflowPct:
        if (!v.underflow.set) v.underflow_recipe = s.recipe;
        v.underflow.add(s.value, s.rounded, s.file, false);
        break;
      case LoggedStatKind::kMse: v.mse.add(s.value, s.rounded, s.file, false); break;
      case LoggedStatKind::kScaleInvMax: v.scale_inv_max.add(s.value, s.rounded, s.file, true); break;
      case LoggedStatKind::kOverflowPct: v.overflow.add(s.value, s.rounded, s.file, false); break;
      case LoggedStatKind::kScaleInvMin: break;
    }
  }
  std::sort(touched.begin(), touched.end());  // a copy's own row before its what-if's
}

// The copy's candidates after point p: the Pareto front of (underflow, energy bound) loses the
// points p dominates and gains p unless a point at least as good in both holds it; the largest
// rel_mse and saturation move to p when it is larger. The steps gained are held, those lost let go.
void LoggedRowsBuilder::State::update(Copy& c, std::uint32_t layer, const Point& p) {
  const auto best = [&](std::optional<Point>& b, bool& held_b, double Point::*field) {
    if (b && !(rank(p.*field) > rank((*b).*field))) return;
    if (b && held_b) release(layer, b->step);
    b = p;
    held_b = rank(p.*field) > 0;  // 0 fails no criterion
    if (held_b) acquire(layer, p.step);
  };
  best(c.rel_mse, c.rel_mse_held, &Point::rel_mse);
  best(c.saturated, c.saturated_held, &Point::saturated);
  const auto at_least = [](const Point& a, const Point& b) {  // a is at least as good as b in both
    return rank(a.underflow) >= rank(b.underflow) && rank(a.energy) >= rank(b.energy);
  };
  if (c.front.any_of([&](const Point& q) { return at_least(q, p); })) return;
  c.front.erase_if([&](const Point& q) {
    if (!at_least(p, q)) return false;
    release(layer, q.step);
    return true;
  });
  c.front.push_back(p);
  acquire(layer, p.step);
}

EvaluationRow LoggedRowsBuilder::State::row(const LoggedStep& step, std::uint64_t slot) {
  const std::uint32_t t = static_cast<std::uint32_t>(slot / kSlots);
  const auto logged = static_cast<LoggedRecipe>(slot % kSlots / 2);
  const bool columnwise = slot % 2 == 1;
  const Fp8Values& v = groups[slot].v;
  const Target target = target_of_row(logged).first;
  const Role role = static_cast<Role>(t % 3);
  const TensorOfStep& x = tensors[t];
  EvaluationRow row;
  row.key = {step.step, layers[t / 3], role};
  row.file = step.files[v.file];
  row.tensor_name = row.key.layer + "_" + role_name(role);
  row.recipe = target.recipe;
  row.format = format;
  row.fp8 = fp8_format_for(format, role);
  row.orientation = columnwise ? Orientation::kColumnwise : Orientation::kRowwise;
  row.applicability = Applicability::yes();
  const LoggedAmax* amax = x.amax_stamp == stamp ? x.amax : nullptr;
  Measured m = measure(role, v, target, x.ms_stamp == stamp ? &x.ms : nullptr, amax, row.fp8);
  row.metrics = m.m;
  if (amax != nullptr) row.stats.amax = row.stats.amax_finite = amax->amax;  // the rest of TensorStats is not logged
  m.lm.source = std::string(logged_recipe_name(v.underflow_recipe)) +
                (v.underflow_recipe == LoggedRecipe::kTraining ? "" : "_") + "underflows%" +
                (columnwise ? "_columnwise" : "");
  row.logged = std::move(m.lm);
  return row;
}

void LoggedRowsBuilder::State::add_step(const LoggedStep& step) {
  gather(step);
  if (touched.empty()) return;
  ++steps_logged;
  // Each copy's candidates, then the rows of the layers some copy holds this step for.
  for (const std::uint64_t slot : touched) {
    const std::uint32_t t = static_cast<std::uint32_t>(slot / kSlots);
    const auto logged = static_cast<LoggedRecipe>(slot % kSlots / 2);
    const auto [target, spec] = target_of_row(logged);
    const Role role = static_cast<Role>(t % 3);
    const TensorOfStep& x = tensors[t];
    const Measured m = measure(role, groups[slot].v, target, x.ms_stamp == stamp ? &x.ms : nullptr,
                               x.amax_stamp == stamp ? x.amax : nullptr, fp8_format_for(format, role));
    const Point p = point_of(step.step, m);
    static_assert(kLoggedRecipes + 1 <= 8, "a tensor's specs (the logged recipes' and the training one) fit 8");
    const std::uint64_t copy_key = (std::uint64_t{t} * 8 + spec) * 2 + slot % 2;
    const auto [c, first_use] = copy(copy_key);
    if (first_use) {
      LoggedSeries& s = c.series.s;
      s.layer = layers[t / 3], s.role = role, s.recipe = target.recipe, s.format = format;
      s.orientation = slot % 2 == 1 ? Orientation::kColumnwise : Orientation::kRowwise;
    }
    c.series.add(step.step, p.underflow, p.rel_mse);
    update(c, t / 3, p);
  }
  // The touched slots are sorted, so each layer's are one run.
  for (std::size_t i = 0; i < touched.size();) {
    const std::uint32_t layer = static_cast<std::uint32_t>(touched[i] / kSlots / 3);
    std::size_t end = i;
    while (end < touched.size() && touched[end] / kSlots / 3 == layer) ++end;
    if (const auto it = held.find({layer, step.step}); it != held.end()) {
      // (role, spec, orientation) -> the row; an exact source replaces an upper bound.
      std::vector<EvaluationRow>& rows = it->second.rows;
      for (std::size_t k = i; k < end; ++k) {
        EvaluationRow r = row(step, touched[k]);
        const auto same = std::find_if(rows.begin(), rows.end(), [&](const EvaluationRow& o) {
          return o.key.role == r.key.role && o.orientation == r.orientation && o.recipe == r.recipe;
        });
        if (same == rows.end())
          rows.push_back(std::move(r));
        else if (same->logged->upper_bound && !r.logged->upper_bound)
          *same = std::move(r);
      }
    }
    i = end;
  }
}

LoggedRowsBuilder::LoggedRowsBuilder(std::optional<Recipe> training_recipe, TrainingFormat format)
    : state_(std::make_unique<State>()) {
  state_->training = std::move(training_recipe);
  state_->format = format;
}

LoggedRowsBuilder::~LoggedRowsBuilder() = default;

void LoggedRowsBuilder::add_step(const LoggedStep& step) { state_->add_step(step); }

LoggedRows LoggedRowsBuilder::finish() {
  State& st = *state_;
  LoggedRows out;
  std::set<std::int64_t> kept_steps;
  for (auto& [at, h] : st.held)
    for (EvaluationRow& r : h.rows) {
      kept_steps.insert(r.key.step);
      out.rows.push_back(std::move(r));
    }
  std::sort(out.rows.begin(), out.rows.end(), [](const EvaluationRow& a, const EvaluationRow& b) {
    if (!(a.key == b.key)) return a.key < b.key;
    const std::string sa = a.recipe.spec(), sb = b.recipe.spec();
    if (sa != sb) return sa < sb;
    return a.orientation < b.orientation;
  });
  for (auto& c : st.copies)
    if (c.used) out.series.push_back(c.series.finish());
  std::sort(out.series.begin(), out.series.end(), [](const LoggedSeries& a, const LoggedSeries& b) {
    return std::tuple(a.layer, a.role, a.recipe.spec(), a.orientation) <
           std::tuple(b.layer, b.role, b.recipe.spec(), b.orientation);
  });
  out.steps_logged = st.steps_logged;
  out.steps_kept = kept_steps.size();
  if (out.steps_kept < out.steps_logged)
    out.not_kept = format_text(
        "%zu of the %zu logged steps: at none is a candidate copy's logged measure worse than at the %zu judged "
        "(per layer, where its underflow and flushed-energy bound are at their worst together, its rel_mse and "
        "saturation at their largest: a criterion that fails at any logged step fails at one of these); report.html "
        "draws every step",
        out.steps_logged - out.steps_kept, out.steps_logged, out.steps_kept);
  for (const auto& [why, n] : st.left_out)
    out.notes.push_back(format_text("%zu logged statistics left out: %s", n, why.c_str()));
  return out;
}

LoggedRows rows_from_logged_stats(const TrainingLog& log, const std::optional<Recipe>& training_recipe,
                                  TrainingFormat format) {
  // The statistics by step, each layer name interned, the amaxes from the series.
  std::deque<std::string> names;
  std::map<std::string, std::string_view, std::less<>> interned;
  const auto intern = [&](std::string_view layer) {
    const auto it = interned.find(layer);
    if (it != interned.end()) return it->second;
    const std::string_view v = names.emplace_back(layer);
    interned.emplace(std::string(layer), v);
    return v;
  };
  std::map<std::int64_t, std::pair<std::vector<LoggedFp8Stat>, std::vector<LoggedTensorStat>>> by_step;
  for (LoggedFp8Stat s : log.fp8_stats) {
    s.layer = intern(s.layer);
    by_step[s.step].first.push_back(s);
  }
  for (LoggedTensorStat s : log.tensor_stats) {
    s.layer = intern(s.layer);
    by_step[s.step].second.push_back(s);
  }
  const auto by_file_line = [](const auto& a, const auto& b) { return std::tie(a.file, a.line) < std::tie(b.file, b.line); };
  LoggedRowsBuilder builder(training_recipe, format);
  for (auto& [step, stats] : by_step) {
    std::stable_sort(stats.first.begin(), stats.first.end(), by_file_line);
    std::stable_sort(stats.second.begin(), stats.second.end(), by_file_line);
    std::vector<LoggedAmax> amax;
    for (const auto& [key, series] : log.series)
      if (const auto it = series.amax_by_step.find(step); it != series.amax_by_step.end())
        amax.push_back({intern(key.first), key.second, it->second, log.rounded});
    builder.add_step({step, stats.first, stats.second, amax, log.files});
  }
  return builder.finish();
}

}  // namespace fp8a

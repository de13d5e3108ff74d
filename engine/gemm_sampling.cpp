#include "engine/gemm_sampling.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "engine/cpu_isa.hpp"
#include "engine/gemm_operands.hpp"

namespace fp8a {

namespace {

// Σ x² over a row of floats, non-finite as 0, in 8 interleaved partial sums added in lane order
// (the same bits on every CPU path).
double row_energy_body(const float* x, std::int64_t n) {
  constexpr std::int64_t kLanes = 8;
  double lane[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) {
      const double v = std::isfinite(x[j + l]) ? static_cast<double>(x[j + l]) : 0.0;
      lane[l] += v * v;
    }
  for (std::int64_t l = 0; j < n; ++j, ++l) {
    const double v = std::isfinite(x[j]) ? static_cast<double>(x[j]) : 0.0;
    lane[l] += v * v;
  }
  double s = 0;
  for (double v : lane) s += v;
  return s;
}
// acc [j] += x [j]², non-finite as 0.
void add_squares_body(const float* x, std::int64_t n, double* acc) {
  for (std::int64_t j = 0; j < n; ++j) {
    const double v = std::isfinite(x[j]) ? static_cast<double>(x[j]) : 0.0;
    acc[j] += v * v;
  }
}
FP8A_CPU_PATHS(double, row_energy_on, (const float* x, std::int64_t n), (x, n), row_energy_body)
FP8A_CPU_PATHS(void, add_squares_on, (const float* x, std::int64_t n, double* acc), (x, n, acc), add_squares_body)

// A draw's units from its clusters (cluster numbers ascending, each with its weight and rest
// number, -1 certain).
struct DrawnCluster {
  std::int64_t cluster = 0;
  double weight = 1.0;
  std::int32_t rest = -1;
};
void expand(std::vector<DrawnCluster> drawn, std::int64_t population, std::int64_t group, UnitDraw* d) {
  std::sort(drawn.begin(), drawn.end(), [](const DrawnCluster& x, const DrawnCluster& y) { return x.cluster < y.cluster; });
  for (const DrawnCluster& c : drawn)
    for (std::int64_t u = c.cluster * group; u < std::min(population, (c.cluster + 1) * group); ++u) {
      d->idx.push_back(u);
      d->weight.push_back(c.weight);
      d->cluster.push_back(c.rest);
      if (c.rest < 0) ++d->certain;
    }
}

// The clusters of `group` units of `population`, and how many of them to draw for `want` units:
// at least two (one alone has no standard error), all when want is 0 or covers them.
std::pair<std::int64_t, std::int64_t> clusters_to_draw(std::int64_t population, std::int64_t want, std::int64_t group) {
  const std::int64_t groups = (population + group - 1) / group;
  if (want <= 0 || want >= population) return {groups, groups};
  return {groups, std::min(groups, std::max<std::int64_t>(2, (want + group - 1) / group))};
}

}  // namespace

bool UnitDraw::uniform() const {
  return std::all_of(weight.begin(), weight.end(), [&](double w) { return w == weight.front(); });
}

UnitDraw all_units(std::int64_t population) {
  UnitDraw d;
  d.population = population;
  d.idx.resize(static_cast<std::size_t>(population));
  std::iota(d.idx.begin(), d.idx.end(), std::int64_t{0});
  d.weight.assign(d.idx.size(), 1.0);
  d.cluster.assign(d.idx.size(), -1);
  d.certain = population;
  return d;
}

UnitDraw draw_units(std::span<const double> energy, std::int64_t want, std::int64_t group) {
  const auto population = static_cast<std::int64_t>(energy.size());
  group = std::max<std::int64_t>(1, group);
  const auto [groups, n] = clusters_to_draw(population, want, group);
  if (n >= groups) return all_units(population);
  std::vector<double> x(static_cast<std::size_t>(groups), 0.0);
  for (std::int64_t u = 0; u < population; ++u) x[static_cast<std::size_t>(u / group)] += energy[static_cast<std::size_t>(u)];
  // The largest first (ties by position), taken with certainty while they pass the rule.
  std::vector<std::int64_t> order(static_cast<std::size_t>(groups));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t p, std::int64_t q) {
    return x[static_cast<std::size_t>(p)] > x[static_cast<std::size_t>(q)];
  });
  double rest_energy = 0;
  for (double v : x) rest_energy += v;
  std::int64_t certain = 0;
  while (certain < n / 2 && n - certain > 2) {
    const double v = x[static_cast<std::size_t>(order[static_cast<std::size_t>(certain)])];
    if (!(v > 0) || v * static_cast<double>(n - certain) < kGemmCertainty * rest_energy) break;
    rest_energy -= v;
    ++certain;
  }
  std::vector<DrawnCluster> drawn;
  for (std::int64_t i = 0; i < certain; ++i) drawn.push_back({order[static_cast<std::size_t>(i)], 1.0, -1});
  // The rest, ascending by energy (ties by position), drawn systematically from the middle of
  // each of n - certain equal intervals.
  std::vector<std::int64_t> left(order.begin() + certain, order.end());
  std::stable_sort(left.begin(), left.end(), [&](std::int64_t p, std::int64_t q) {
    const double xp = x[static_cast<std::size_t>(p)], xq = x[static_cast<std::size_t>(q)];
    return xp < xq || (xp == xq && p < q);
  });
  const auto r = static_cast<std::int64_t>(left.size());
  const std::int64_t m = n - certain;
  // Each drawn cluster stands for r / m clusters (a last partial cluster counted as one, as the
  // estimator of a total over clusters drawn with equal probability wants).
  const double weight = static_cast<double>(r) / static_cast<double>(m);
  std::vector<DrawnCluster> rest;
  for (std::int64_t i = 0; i < m; ++i) rest.push_back({left[static_cast<std::size_t>((2 * i + 1) * r / (2 * m))], weight, 0});
  // Rest numbers in cluster order.
  std::sort(rest.begin(), rest.end(), [](const DrawnCluster& p, const DrawnCluster& q) { return p.cluster < q.cluster; });
  for (std::size_t i = 0; i < rest.size(); ++i) rest[i].rest = static_cast<std::int32_t>(i);
  drawn.insert(drawn.end(), rest.begin(), rest.end());
  UnitDraw d;
  d.population = population;
  d.rest_clusters = r;
  d.drawn_clusters = m;
  expand(std::move(drawn), population, group, &d);
  return d;
}

UnitDraw even_units(std::int64_t population, std::int64_t want, std::int64_t group) {
  group = std::max<std::int64_t>(1, group);
  const auto [groups, n] = clusters_to_draw(population, want, group);
  if (n >= groups) return all_units(population);
  std::vector<DrawnCluster> drawn;
  for (std::int64_t i = 0; i < n; ++i) drawn.push_back({i * groups / n, 1.0, static_cast<std::int32_t>(i)});
  UnitDraw d;
  d.population = population;
  d.rest_clusters = groups;
  d.drawn_clusters = n;
  expand(std::move(drawn), population, group, &d);
  const double w = static_cast<double>(population) / static_cast<double>(d.size());
  d.weight.assign(d.idx.size(), w);
  return d;
}

std::vector<double> unit_energies(const TensorView& view, GemmLayout layout) {
  const std::int64_t rows = view.rows, cols = view.cols;
  const CpuIsa isa = default_cpu_isa();
  if (layout == GemmLayout::kKMajor) {
    std::vector<double> e(static_cast<std::size_t>(rows), 0.0);
    const auto energy = FP8A_CPU_PICK(isa, row_energy_on);
    tbb::this_task_arena::isolate([&] {
      tbb::parallel_for(std::int64_t{0}, rows, [&](std::int64_t r) {
        thread_local std::vector<float> buf;
        buf.resize(static_cast<std::size_t>(cols));
        load_clean(view, r * cols, cols, buf.data());
        e[static_cast<std::size_t>(r)] = energy(buf.data(), cols);
      });
    });
    return e;
  }
  // Columns: blocks of a fixed number of rows as tasks, their sums added in block order.
  constexpr std::int64_t kBlockRows = 256;
  const std::int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  std::vector<std::vector<double>> part(static_cast<std::size_t>(blocks));
  const auto add_squares = FP8A_CPU_PICK(isa, add_squares_on);
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(std::int64_t{0}, blocks, [&](std::int64_t b) {
      std::vector<double>& acc = part[static_cast<std::size_t>(b)];
      acc.assign(static_cast<std::size_t>(cols), 0.0);
      std::vector<float> buf(static_cast<std::size_t>(cols));
      for (std::int64_t r = b * kBlockRows; r < std::min(rows, (b + 1) * kBlockRows); ++r) {
        load_clean(view, r * cols, cols, buf.data());
        add_squares(buf.data(), cols, acc.data());
      }
    });
  });
  std::vector<double> e(static_cast<std::size_t>(cols), 0.0);
  for (const auto& p : part)
    for (std::int64_t j = 0; j < cols; ++j) e[static_cast<std::size_t>(j)] += p[static_cast<std::size_t>(j)];
  return e;
}

}  // namespace fp8a

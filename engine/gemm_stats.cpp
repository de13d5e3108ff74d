#include "engine/gemm_stats.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/error.hpp"
#include "engine/cpu_isa.hpp"

namespace fp8a {

void NoiseTable::add(std::span<const double> ref, std::span<const double> s) {
  entries += static_cast<std::int64_t>(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    s_sum += s[i];
    if (const double ti = noise_t(ref[i], s[i]); ti > 0) t.push_back(ti);
  }
}

void NoiseTable::add_weighted(std::span<const double> ref, std::span<const double> s, std::int64_t rows,
                              std::int64_t cols, const double* row_w, const double* col_w) {
  entries += rows * cols;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const auto e = static_cast<std::size_t>(i * cols + j);
      const double wt = row_w[i] * (col_w != nullptr ? col_w[j] : 1.0);
      weight += wt;
      s_sum += wt * s[e];
      if (const double ti = noise_t(ref[e], s[e]); ti > 0) {
        t.push_back(ti);
        w.push_back(wt);
      }
    }
}

void NoiseTable::merge(const NoiseTable& o) {
  entries += o.entries;
  weight += o.weight;
  s_sum += o.s_sum;
  t.insert(t.end(), o.t.begin(), o.t.end());
  w.insert(w.end(), o.w.begin(), o.w.end());
}

void NoiseTable::finish() {
  std::vector<std::size_t> count(kBinades + 1, 0);
  for (double ti : t) ++count[static_cast<std::size_t>(std::ilogb(ti) - kMinBinade + 1)];
  for (std::size_t b = 1; b < count.size(); ++b) count[b] += count[b - 1];
  binade_end.assign(count.begin() + 1, count.end());
  std::vector<double> grouped(t.size()), grouped_w(w.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    const std::size_t at = count[static_cast<std::size_t>(std::ilogb(t[i]) - kMinBinade)]++;
    grouped[at] = t[i];
    if (!w.empty()) grouped_w[at] = w[i];
  }
  t = std::move(grouped);
  w = std::move(grouped_w);
}

double NoiseTable::flips(double err2) const {
  if (entries == 0 || !(s_sum > 0) || !std::isfinite(err2) || !(err2 > 0)) return 0.0;
  const double two_c = 2.0 * err2 / s_sum, cut = 64.0 * two_c;
  const int last = std::isfinite(cut) ? std::min(std::ilogb(cut) - kMinBinade, kBinades - 1) : kBinades - 1;
  const std::size_t end = last < 0 ? 0 : binade_end[static_cast<std::size_t>(last)];
  // In blocks of a fixed size, as tasks, added in block order: the same sum on
  // any thread count.
  constexpr std::size_t kBlock = std::size_t{1} << 16;
  std::vector<double> part((end + kBlock - 1) / kBlock, 0.0);
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(std::size_t{0}, part.size(), [&](std::size_t b) {
      double p = 0;
      for (std::size_t i = b * kBlock; i < std::min(end, (b + 1) * kBlock); ++i)
        if (t[i] < cut) p += (w.empty() ? 0.5 : 0.5 * w[i]) * std::erfc(std::sqrt(t[i] / two_c));
      part[b] = p;
    });
  });
  double p = 0;
  for (double x : part) p += x;
  return 100.0 * p / (w.empty() && weight == 0 ? static_cast<double>(entries) : weight);
}

double median_nonnegative(std::span<const double> v) {
  constexpr std::size_t kBins = std::size_t{1} << 15, kBlock = std::size_t{1} << 20;  // sign bit 0
  const auto bin_of = [](double x) { return static_cast<std::size_t>(std::bit_cast<std::uint64_t>(x) >> 48); };
  const std::size_t blocks = (v.size() + kBlock - 1) / kBlock;
  const auto block = [&](std::size_t b) { return v.subspan(b * kBlock, std::min(kBlock, v.size() - b * kBlock)); };
  // Every value counted, without a branch: a negative one's top 16 bits are kBins or more (its
  // sign bit), the bins left out below.
  std::vector<std::vector<std::uint32_t>> counts(blocks);
  tbb::parallel_for(std::size_t{0}, blocks, [&](std::size_t b) {
    counts[b].assign(2 * kBins, 0);
    for (double x : block(b)) ++counts[b][bin_of(x)];
  });
  std::vector<std::size_t> count(kBins, 0);
  for (const auto& c : counts)
    for (std::size_t i = 0; i < kBins; ++i) count[i] += c[i];
  std::size_t n = 0;
  for (std::size_t c : count) n += c;
  if (n == 0) return 0.0;
  // The bins of ranks lo = (n - 1) / 2 and hi = n / 2, and the rank of lo's
  // bin's first value.
  const std::size_t lo = (n - 1) / 2, hi = n / 2;
  std::size_t bin_lo = 0, before = 0;
  while (before + count[bin_lo] <= lo) before += count[bin_lo++];
  std::size_t bin_hi = bin_lo, upto = before + count[bin_lo];
  while (upto <= hi) upto += count[++bin_hi];
  // The values in those bins, gathered without a branch: each is written, and kept by advancing
  // the end (one unsigned compare: a negative value's bin is beyond every kept one).
  std::vector<std::vector<double>> found(blocks);
  tbb::parallel_for(std::size_t{0}, blocks, [&](std::size_t b) {
    const auto values = block(b);
    std::vector<double>& f = found[b];
    f.resize(values.size() + 1);
    std::size_t end = 0;
    for (double x : values) {
      f[end] = x;
      end += bin_of(x) - bin_lo <= bin_hi - bin_lo;
    }
    f.resize(end);
  });
  std::vector<double> middle;
  for (const auto& f : found) middle.insert(middle.end(), f.begin(), f.end());
  const auto kth = [&](std::size_t k) {
    std::nth_element(middle.begin(), middle.begin() + static_cast<std::ptrdiff_t>(k), middle.end());
    return middle[k];
  };
  const double upper = kth(hi - before);
  return lo == hi ? upper : (kth(lo - before) + upper) / 2.0;
}

double weighted_median_nonnegative(std::span<const double> v, std::int64_t rows, std::int64_t cols,
                                   const double* row_w, const double* col_w) {
  constexpr std::size_t kBins = std::size_t{1} << 15;  // sign bit 0: negative values lie beyond
  const auto bin_of = [](double x) { return static_cast<std::size_t>(std::bit_cast<std::uint64_t>(x) >> 48); };
  const auto weight_of = [&](std::int64_t i, std::int64_t j) { return row_w[i] * (col_w != nullptr ? col_w[j] : 1.0); };
  std::vector<double> bin_weight(kBins, 0.0);
  double total = 0;
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::size_t b = bin_of(v[static_cast<std::size_t>(i * cols + j)]);
      if (b >= kBins) continue;
      const double wt = weight_of(i, j);
      bin_weight[b] += wt;
      total += wt;
    }
  if (!(total > 0)) return 0.0;
  const double half = total / 2;
  // The bin where the weights reach half, and the next one holding values (the mean's other
  // value may lie there).
  std::size_t lo = 0;
  double before = 0;
  while (lo + 1 < kBins && before + bin_weight[lo] < half) before += bin_weight[lo++];
  std::size_t hi = lo + 1;
  while (hi < kBins && bin_weight[hi] == 0) ++hi;
  std::vector<std::pair<double, double>> middle;  // (value, weight) in bins lo..hi
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const double x = v[static_cast<std::size_t>(i * cols + j)];
      const std::size_t b = bin_of(x);
      if (b == lo || (b == hi && hi < kBins)) middle.emplace_back(x, weight_of(i, j));
    }
  std::sort(middle.begin(), middle.end());
  double c = before;
  for (std::size_t k = 0; k < middle.size(); ++k) {
    c += middle[k].second;
    if (c > half) return middle[k].first;
    if (c == half) return k + 1 < middle.size() ? (middle[k].first + middle[k + 1].first) / 2.0 : middle[k].first;
  }
  return middle.empty() ? 0.0 : middle.back().first;
}

namespace {

// One output row's sums, in kLanes interleaved partial sums added in lane order at the end (a
// fixed order: the same bits on every CPU path), branch-free so that the loop vectorises.
struct RowSums {
  double err2 = 0, ref2 = 0, got2 = 0, dot = 0;
  std::int64_t zeroed = 0, flipped = 0;
};
constexpr std::int64_t kLanes = 8;

RowSums row_sums_body(const double* ref, const double* got, std::int64_t n, double* rel) {
  double e2[kLanes] = {}, r2[kLanes] = {}, g2[kLanes] = {}, gr[kLanes] = {};
  std::int64_t zeroed[kLanes] = {}, flipped[kLanes] = {};
  const auto entry = [&](std::int64_t j, std::int64_t l) {
    const double r = ref[j], g = got[j], d = g - r;
    e2[l] += d * d;
    r2[l] += r * r;
    g2[l] += g * g;
    gr[l] += g * r;
    const bool counted = r != 0.0;
    zeroed[l] += counted & (g == 0.0);
    flipped[l] += counted & (g != 0.0) & ((g < 0.0) != (r < 0.0));
    rel[j] = relative_error(r, g);
  };
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (std::int64_t l = 0; l < kLanes; ++l) entry(j + l, l);
  for (std::int64_t l = 0; j < n; ++j, ++l) entry(j, l);
  RowSums s;
  for (std::int64_t l = 0; l < kLanes; ++l) {
    s.err2 += e2[l], s.ref2 += r2[l], s.got2 += g2[l], s.dot += gr[l];
    s.zeroed += zeroed[l], s.flipped += flipped[l];
  }
  return s;
}
FP8A_CPU_PATHS(RowSums, row_sums_on, (const double* ref, const double* got, std::int64_t n, double* rel),
               (ref, got, n, rel), row_sums_body)

// A sampled output row's sums, each entry times its column's weight v [j] (v null: 1), zeroed and
// flipped as weights; in entry order.
struct WeightedRowSums {
  double err2 = 0, ref2 = 0, got2 = 0, dot = 0, zeroed = 0, flipped = 0;
};
WeightedRowSums weighted_row_sums_body(const double* ref, const double* got, std::int64_t n, const double* v,
                                       double* rel) {
  WeightedRowSums s;
  for (std::int64_t j = 0; j < n; ++j) {
    const double r = ref[j], g = got[j], d = g - r, wt = v != nullptr ? v[j] : 1.0;
    s.err2 += wt * (d * d);
    s.ref2 += wt * (r * r);
    s.got2 += wt * (g * g);
    s.dot += wt * (g * r);
    const bool counted = r != 0.0;
    s.zeroed += counted && g == 0.0 ? wt : 0.0;
    s.flipped += counted && g != 0.0 && (g < 0.0) != (r < 0.0) ? wt : 0.0;
    rel[j] = relative_error(r, g);
  }
  return s;
}
FP8A_CPU_PATHS(WeightedRowSums, weighted_row_sums_on,
               (const double* ref, const double* got, std::int64_t n, const double* v, double* rel),
               (ref, got, n, v, rel), weighted_row_sums_body)

// Grows per-unit sums err2 and ref2 to at least n units, the new ones 0.
void grow_units(std::size_t n, std::vector<double>* err2, std::vector<double>* ref2) {
  if (err2->size() >= n) return;
  err2->resize(n, 0.0);
  ref2->resize(n, 0.0);
}

// Adds o_err2 and o_ref2 into err2 and ref2 unit by unit, growing them to o's length.
void add_units(const std::vector<double>& o_err2, const std::vector<double>& o_ref2, std::vector<double>* err2,
               std::vector<double>* ref2) {
  grow_units(o_err2.size(), err2, ref2);
  for (std::size_t u = 0; u < o_err2.size(); ++u) {
    (*err2)[u] += o_err2[u];
    (*ref2)[u] += o_ref2[u];
  }
}

// Adds o into *into element by element, growing it to o's length.
void add_into(const std::vector<double>& o, std::vector<double>* into) {
  into->resize(std::max(into->size(), o.size()), 0.0);
  for (std::size_t u = 0; u < o.size(); ++u) (*into)[u] += o[u];
}

}  // namespace

void ErrorSums::add(const double* ref, std::int64_t ref_stride, const double* got, std::int64_t rows, std::int64_t cols,
                    std::int64_t first_unit, double* rel, std::int64_t rel_stride, std::int64_t first_col,
                    const SampledOutput* design) {
  if (design != nullptr) {
    weighted = true;
    const double* row_w = design->rows->weight.data() + first_unit;
    const double* col_w = design->cols != nullptr ? design->cols->weight.data() + first_col : nullptr;
    if (first_col >= 0) {
      const auto end = static_cast<std::size_t>(first_col + cols);
      grow_units(end, &col_err2, &col_ref2);
      grow_units(end, &col_zeroed, &col_flipped);
      col_weight.resize(std::max(col_weight.size(), end), 0.0);
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j) {
          const double r = ref[i * ref_stride + j], g = got[i * cols + j], d = g - r;
          const auto c = static_cast<std::size_t>(first_col + j);
          col_err2[c] += row_w[i] * (d * d);
          col_ref2[c] += row_w[i] * (r * r);
          col_weight[c] += row_w[i];
          col_zeroed[c] += r != 0.0 && g == 0.0 ? row_w[i] : 0.0;
          col_flipped[c] += r != 0.0 && g != 0.0 && (g < 0.0) != (r < 0.0) ? row_w[i] : 0.0;
        }
    }
    const auto unit_end = static_cast<std::size_t>(first_unit + rows);
    grow_units(unit_end, &unit_err2, &unit_ref2);
    grow_units(unit_end, &unit_zeroed, &unit_flipped);
    unit_weight.resize(std::max(unit_weight.size(), unit_end), 0.0);
    entries += rows * cols;
    const auto row_sums = FP8A_CPU_PICK(default_cpu_isa(), weighted_row_sums_on);
    double row_weight = 0;  // what a row's entries stand for, its weight aside (the same for each)
    for (std::int64_t j = 0; j < cols; ++j) row_weight += col_w != nullptr ? col_w[j] : 1.0;
    for (std::int64_t i = 0; i < rows; ++i) {
      const WeightedRowSums s = row_sums(ref + i * ref_stride, got + i * cols, cols, col_w, rel + i * rel_stride);
      const double wi = row_w[i];
      err2 += wi * s.err2;
      ref2 += wi * s.ref2;
      got2 += wi * s.got2;
      dot += wi * s.dot;
      weight += wi * row_weight;
      zeroed_w += wi * s.zeroed;
      flipped_w += wi * s.flipped;
      const auto u = static_cast<std::size_t>(first_unit + i);
      unit_err2[u] += s.err2;
      unit_ref2[u] += s.ref2;
      unit_zeroed[u] += s.zeroed;
      unit_flipped[u] += s.flipped;
      unit_weight[u] += row_weight;
    }
    return;
  }
  if (first_col >= 0) {
    grow_units(static_cast<std::size_t>(first_col + cols), &col_err2, &col_ref2);
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) {
        const double r = ref[i * ref_stride + j], d = got[i * cols + j] - r;
        col_err2[static_cast<std::size_t>(first_col + j)] += d * d;
        col_ref2[static_cast<std::size_t>(first_col + j)] += r * r;
      }
  }
  grow_units(static_cast<std::size_t>(first_unit + rows), &unit_err2, &unit_ref2);
  entries += rows * cols;
  const auto row_sums = FP8A_CPU_PICK(default_cpu_isa(), row_sums_on);
  for (std::int64_t i = 0; i < rows; ++i) {
    const RowSums s = row_sums(ref + i * ref_stride, got + i * cols, cols, rel + i * rel_stride);
    err2 += s.err2;
    ref2 += s.ref2;
    got2 += s.got2;
    dot += s.dot;
    zeroed += s.zeroed;
    flipped += s.flipped;
    unit_err2[static_cast<std::size_t>(first_unit + i)] += s.err2;
    unit_ref2[static_cast<std::size_t>(first_unit + i)] += s.ref2;
  }
}

void ErrorSums::merge(ErrorSums&& o) {
  err2 += o.err2, ref2 += o.ref2, got2 += o.got2, dot += o.dot;
  entries += o.entries, zeroed += o.zeroed, flipped += o.flipped;
  weight += o.weight, zeroed_w += o.zeroed_w, flipped_w += o.flipped_w;
  weighted = weighted || o.weighted;
  add_units(o.unit_err2, o.unit_ref2, &unit_err2, &unit_ref2);
  add_units(o.col_err2, o.col_ref2, &col_err2, &col_ref2);
  add_units(o.unit_zeroed, o.unit_flipped, &unit_zeroed, &unit_flipped);
  add_units(o.col_zeroed, o.col_flipped, &col_zeroed, &col_flipped);
  add_into(o.unit_weight, &unit_weight);
  add_into(o.col_weight, &col_weight);
}

namespace {

// The variance of one dimension's estimated total of z = e - ratio * r, from the units' sums
// (e, r per drawn unit, in draw order) and the draw: its rest stratum's clusters.
double total_variance(const std::vector<double>& e, const std::vector<double>& r, const UnitDraw& draw,
                      double ratio) {
  const std::int64_t n = draw.drawn_clusters, big_n = draw.rest_clusters;
  if (!draw.sampled() || n >= big_n) return 0.0;  // every unit of the rest: no sampling error
  if (n < 2) return INFINITY;
  std::vector<double> z(static_cast<std::size_t>(n), 0.0);
  for (std::size_t u = 0; u < e.size() && u < draw.cluster.size(); ++u)
    if (draw.cluster[u] >= 0) z[static_cast<std::size_t>(draw.cluster[u])] += e[u] - ratio * r[u];
  double mean = 0;
  for (double v : z) mean += v;
  mean /= static_cast<double>(n);
  double s2 = 0;
  for (double v : z) s2 += (v - mean) * (v - mean);
  s2 /= static_cast<double>(n - 1);
  const double nn = static_cast<double>(n), bn = static_cast<double>(big_n);
  return bn * bn * std::max(0.0, 1.0 - nn / bn) * s2 / nn;
}

}  // namespace

namespace {

// The ratio a / b of a sampled output's weighted totals (a, b per drawn unit and column, weighted
// in the other dimension) and its standard error: the totals from the units' sums and the rows'
// weights (the same as the weighted sums, and right for sums added without weights too), the
// variance from the rows' and the columns' rest strata. total_a, total_b: the two totals; sd: the
// standard deviation of the estimated total of a - ratio b (the ratio's standard error times
// total_b).
struct RatioEstimate {
  double total_a = 0, total_b = 0, ratio = 0, sd = 0;
};
RatioEstimate ratio_estimate(const std::vector<double>& unit_a, const std::vector<double>& unit_b,
                             const std::vector<double>& col_a, const std::vector<double>& col_b,
                             const SampledOutput& design) {
  const UnitDraw& rows = *design.rows;
  RatioEstimate r;
  for (std::size_t u = 0; u < unit_a.size() && u < rows.weight.size(); ++u)
    r.total_a += rows.weight[u] * unit_a[u], r.total_b += rows.weight[u] * unit_b[u];
  if (!(r.total_b > 0)) return r;
  r.ratio = r.total_a / r.total_b;
  double var = total_variance(unit_a, unit_b, rows, r.ratio);
  // Column sums carry the rows' weights already: the same totals.
  if (design.cols != nullptr) var += total_variance(col_a, col_b, *design.cols, r.ratio);
  r.sd = std::isinf(var) ? INFINITY : std::sqrt(var);
  return r;
}

// A share's standard error, in percent (0 without entries).
double share_se(const std::vector<double>& unit_a, const std::vector<double>& unit_b, const std::vector<double>& col_a,
                const std::vector<double>& col_b, const SampledOutput& design) {
  const RatioEstimate r = ratio_estimate(unit_a, unit_b, col_a, col_b, design);
  return r.total_b > 0 ? 100.0 * r.sd / r.total_b : 0.0;
}

}  // namespace

double ErrorSums::standard_error(const SampledOutput& design) const {
  const RatioEstimate r = ratio_estimate(unit_err2, unit_ref2, col_err2, col_ref2, design);
  if (!(r.total_b > 0)) return r.total_a > 0 ? INFINITY : 0.0;
  if (std::isinf(r.sd)) return INFINITY;
  return r.ratio > 0 ? r.sd / r.total_b / (2.0 * std::sqrt(r.ratio)) : 0.0;
}

double ErrorSums::zeroed_pct_se(const SampledOutput& design) const {
  return share_se(unit_zeroed, unit_weight, col_zeroed, col_weight, design);
}

double ErrorSums::sign_flip_pct_se(const SampledOutput& design) const {
  return share_se(unit_flipped, unit_weight, col_flipped, col_weight, design);
}

void ErrorSums::finish(const SampledOutput* design, const NoiseTable* noise, std::span<const double> rel,
                       GemmRow* row) {
  const double ref_norm = std::sqrt(ref2), got_norm = std::sqrt(got2), err = std::sqrt(err2);
  row->rel_fro_err = ref_norm > 0 ? err / ref_norm : (err > 0 ? INFINITY : 0.0);
  row->cos =
      (ref_norm > 0 && got_norm > 0) ? dot / (ref_norm * got_norm) : (ref_norm == 0 && got_norm == 0 ? 1.0 : 0.0);
  if (weighted) {
    row->zeroed_pct = weight > 0 ? 100.0 * zeroed_w / weight : 0.0;
    row->sign_flip_pct = weight > 0 ? 100.0 * flipped_w / weight : 0.0;
  } else {
    const double e = static_cast<double>(entries);
    row->zeroed_pct = entries > 0 ? 100.0 * static_cast<double>(zeroed) / e : 0.0;
    row->sign_flip_pct = entries > 0 ? 100.0 * static_cast<double>(flipped) / e : 0.0;
  }
  if (design != nullptr && !design->uniform()) {
    const std::int64_t rows = design->rows->size();
    const std::int64_t cols = rows > 0 ? static_cast<std::int64_t>(rel.size()) / rows : 0;
    FP8A_CHECK(rows * cols == static_cast<std::int64_t>(rel.size()), "a weighted output is not [rows, cols]");
    row->median_rel_err = weighted_median_nonnegative(rel, rows, cols, design->rows->weight.data(),
                                                      design->cols != nullptr ? design->cols->weight.data() : nullptr);
  } else {
    tbb::this_task_arena::isolate([&] { row->median_rel_err = median_nonnegative(rel); });
  }
  row->rel_fro_err_se = design != nullptr ? standard_error(*design) : std::nan("");
  // The shares' standard errors where the sums were weighted (a sampled output's).
  row->zeroed_pct_se = design != nullptr && weighted ? zeroed_pct_se(*design) : std::nan("");
  row->sign_flip_pct_se = design != nullptr && weighted ? sign_flip_pct_se(*design) : std::nan("");
  row->noise_sign_flip_pct = noise != nullptr && noise->entries > 0 ? noise->flips(err2) : std::nan("");
}

}  // namespace fp8a

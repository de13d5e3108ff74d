#include "engine/gemm_stats.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "engine/cpu_isa.hpp"

namespace fp8a {

void NoiseTable::add(std::span<const double> ref, std::span<const double> s) {
  entries += static_cast<std::int64_t>(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    s_sum += s[i];
    const double r = ref[i], v = s[i];
    if (r != 0.0 && v > 0.0) {
      const double ti = r * r / v;
      if (std::isfinite(ti) && ti > 0) t.push_back(ti);
    }
  }
}

void NoiseTable::merge(const NoiseTable& o) {
  entries += o.entries;
  s_sum += o.s_sum;
  t.insert(t.end(), o.t.begin(), o.t.end());
}

void NoiseTable::finish() {
  std::vector<std::size_t> count(kBinades + 1, 0);
  for (double ti : t) ++count[static_cast<std::size_t>(std::ilogb(ti) - kMinBinade + 1)];
  for (std::size_t b = 1; b < count.size(); ++b) count[b] += count[b - 1];
  binade_end.assign(count.begin() + 1, count.end());
  std::vector<double> grouped(t.size());
  for (double ti : t) grouped[count[static_cast<std::size_t>(std::ilogb(ti) - kMinBinade)]++] = ti;
  t = std::move(grouped);
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
        if (t[i] < cut) p += 0.5 * std::erfc(std::sqrt(t[i] / two_c));
      part[b] = p;
    });
  });
  double p = 0;
  for (double x : part) p += x;
  return 100.0 * p / static_cast<double>(entries);
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
    const double e = std::fabs(d) / std::fabs(r);
    rel[j] = counted ? (e != e ? INFINITY : e) : -1.0;  // a NaN (inf - inf) is the worst
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

}  // namespace

void ErrorSums::add(const double* ref, std::int64_t ref_stride, const double* got, std::int64_t rows, std::int64_t cols,
                    std::int64_t first_unit, double* rel, std::int64_t rel_stride, std::int64_t first_col) {
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
  add_units(o.unit_err2, o.unit_ref2, &unit_err2, &unit_ref2);
  add_units(o.col_err2, o.col_ref2, &col_err2, &col_ref2);
}

namespace {

// se(R) of the ratio estimator over units (err2, ref2) sampled from `population`; R into *ratio.
double ratio_standard_error(const std::vector<double>& err2, const std::vector<double>& ref2,
                            std::int64_t population, double* ratio) {
  const std::size_t units = err2.size();
  const auto n = static_cast<double>(units);
  double e = 0, r = 0;
  for (std::size_t u = 0; u < units; ++u) e += err2[u], r += ref2[u];
  *ratio = r > 0 ? e / r : (e > 0 ? INFINITY : 0.0);
  if (static_cast<std::int64_t>(units) >= population) return 0.0;  // every unit: no sampling error
  if (units < 2 || !(r > 0)) return e > 0 || units < 2 ? INFINITY : 0.0;
  const double rbar = r / n;
  double s2 = 0;
  for (std::size_t u = 0; u < units; ++u) {
    const double d = err2[u] - *ratio * ref2[u];
    s2 += d * d;
  }
  s2 /= n - 1;
  const double fpc = std::max(0.0, 1.0 - n / static_cast<double>(population));
  return std::sqrt(fpc * s2 / n) / rbar;
}

}  // namespace

double ErrorSums::standard_error(std::int64_t population, std::int64_t col_population) const {
  double ratio = 0;
  double se = ratio_standard_error(unit_err2, unit_ref2, population, &ratio);
  if (col_population > 0) {
    double col_ratio = 0;
    se = std::hypot(se, ratio_standard_error(col_err2, col_ref2, col_population, &col_ratio));
  }
  if (std::isinf(se)) return INFINITY;
  return ratio > 0 ? se / (2.0 * std::sqrt(ratio)) : 0.0;
}

void ErrorSums::finish(bool sampled, std::int64_t population, std::int64_t col_population, const NoiseTable* noise,
                       std::span<const double> rel, GemmRow* row) {
  const double ref_norm = std::sqrt(ref2), got_norm = std::sqrt(got2), err = std::sqrt(err2);
  row->rel_fro_err = ref_norm > 0 ? err / ref_norm : (err > 0 ? INFINITY : 0.0);
  row->cos =
      (ref_norm > 0 && got_norm > 0) ? dot / (ref_norm * got_norm) : (ref_norm == 0 && got_norm == 0 ? 1.0 : 0.0);
  const double e = static_cast<double>(entries);
  row->zeroed_pct = entries > 0 ? 100.0 * static_cast<double>(zeroed) / e : 0.0;
  row->sign_flip_pct = entries > 0 ? 100.0 * static_cast<double>(flipped) / e : 0.0;
  tbb::this_task_arena::isolate([&] { row->median_rel_err = median_nonnegative(rel); });
  row->rel_fro_err_se = sampled ? standard_error(population, col_population) : std::nan("");
  row->noise_sign_flip_pct = noise != nullptr && noise->entries > 0 ? noise->flips(err2) : std::nan("");
}

}  // namespace fp8a

// The statistics of a GEMM output against its reference (gemms.csv's columns, METRICS.md):
// the error sums and per-entry damage of an output or a tile of it, the exact median of the
// entries' relative errors, and wgrad's noise table. Computed by evaluate_gemm_errors
// (gemm_error.hpp) tile by tile; here so that they can be tested on their own.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/gemm_row.hpp"
#include "engine/gemm_sampling.hpp"

namespace fp8a {

// The flips independent rounding noise would make in an output (METRICS.md
// noise_sign_flip_pct): each entry's noise variance c * S, where S is the output of the squared
// operands (sum over the reduction of a^2 b^2, what per-element rounding of the operands puts
// into that entry), c scaled so that the variances add up to ||got - ref||^2. S and the reference
// are the same for every recipe, so a table per (layer, step, GEMM) holds t = ref^2 / S of the
// entries with ref != 0 < S, sorted: a row's sum covers only the entries its noise can reach.
// An entry's relative error |got - ref| / |ref|, a NaN (inf - inf) as +inf (the worst); -1 where
// ref = 0 (none: left out of the median).
inline double relative_error(double ref, double got) {
  const double e = std::fabs(got - ref) / std::fabs(ref);
  return ref != 0.0 ? (e != e ? INFINITY : e) : -1.0;
}

// An entry's t = ref^2 / S for the noise flips (NoiseTable), 0 where it has none (ref = 0, S <= 0,
// or t not finite and positive).
inline double noise_t(double ref, double s) {
  if (ref == 0.0 || !(s > 0.0)) return 0.0;
  const double t = ref * ref / s;
  return std::isfinite(t) && t > 0 ? t : 0.0;
}

// A sampled output's entries carry weights (the entries each stands for: EntryWeights): then S,
// the entries and the flips are weighted sums.
struct NoiseTable {
  std::vector<double> t;   // grouped by binade, ascending binades (finish)
  std::vector<double> w;   // t's weights, in t's order; empty: every weight 1
  std::vector<std::size_t> binade_end;  // t[binade_end[b - 1], binade_end[b]) have ilogb b + kMinBinade
  double s_sum = 0;        // S over every entry (weighted)
  std::int64_t entries = 0;
  double weight = 0;       // the entries' weights added up (weighted tables)
  static constexpr int kMinBinade = -1100, kBinades = 2200;  // every finite positive double's ilogb
  // Entries ref [i] with their S [i].
  void add(std::span<const double> ref, std::span<const double> s);
  // Entries ref [rows, cols] with their S, entry (i, j) weighing row_w [i] * col_w [j] (col_w null:
  // 1).
  void add_weighted(std::span<const double> ref, std::span<const double> s, std::int64_t rows, std::int64_t cols,
                    const double* row_w, const double* col_w);
  void merge(const NoiseTable& o);
  // Groups t by binade (a counting sort, two passes: cheaper than sorting, and all flips needs).
  void finish();
  // 100 / entries * sum over those entries of P(N(0, c S) < -|ref|) = erfc(sqrt(t / 2c)) / 2.
  // Entries beyond 8 noise deviations (erfc(8) / 2 = 5.6e-30) add nothing a double holds next
  // to the rest: the sum stops at the binade past t = 64 * 2c. In blocks as tasks, added in
  // block order: the same sum on any thread count.
  double flips(double err2) const;
};

// The median of the values >= 0 of v (the others are left out): the middle value, or the mean of
// the two middle values of an even count; 0 if there are none. Exact: a radix select on the bits
// of the values, which order as the values do (+inf last). The top 16 bits' histogram finds the
// bins of the middle ranks, then those bins' values are selected among. Both passes run in
// blocks as tasks; the result does not depend on their order.
double median_nonnegative(std::span<const double> v);

// The weighted median of the values >= 0 of v [rows, cols], value (i, j) weighing row_w [i] *
// col_w [j] (col_w null: row_w [i]), weights > 0: with the values sorted and C their weights added
// up to and including each, the first whose C exceeds half the total, or the mean of it and the
// next where its C is exactly half (as median_nonnegative for equal weights); 0 if there are none.
// A radix select on the values' bits as median_nonnegative's, with weights in the histogram.
double weighted_median_nonnegative(std::span<const double> v, std::int64_t rows, std::int64_t cols,
                                   const double* row_w, const double* col_w);

// The design of a sampled output: how its rows (units first_unit.. of ErrorSums) and columns were
// drawn (gemm_sampling.hpp), and so what each computed entry stands for.
struct SampledOutput {
  const UnitDraw* rows = nullptr;  // never null for a sampled output
  const UnitDraw* cols = nullptr;  // null: every column
  bool uniform() const { return rows->uniform() && (cols == nullptr || cols->uniform()); }
};

// The comparison of an output (or a tile of it) with its reference: ||got - ref||^2, ||ref||^2,
// ||got||^2 and <got, ref>; entries zeroed and signs flipped; per output row (a unit: a token of
// fprop and dgrad, a row of dW) ||got - ref||^2 and ||ref||^2, for the standard error of a sample
// of rows, and where the columns are a sample too, the same per output column. Every entry's
// |got - ref| / |ref| (-1 where ref = 0) goes to a buffer of the whole output, for the median
// (median_nonnegative).
//
// A sampled output (add given its SampledOutput) sums each entry times the entries it stands for
// (its row's weight times its column's): the sums, zeroed and flipped shares estimate the whole
// output's (Horvitz-Thompson); the per-unit sums are those of the drawn units, each over its
// computed entries weighted by their columns' weights (and per column by their rows'), what the
// standard error of the estimate needs.
struct ErrorSums {
  double err2 = 0, ref2 = 0, got2 = 0, dot = 0;
  std::int64_t entries = 0, zeroed = 0, flipped = 0;
  double weight = 0, zeroed_w = 0, flipped_w = 0;  // weighted sums only: entries, zeroed, flipped
  bool weighted = false;
  std::vector<double> unit_err2, unit_ref2;
  std::vector<double> col_err2, col_ref2;  // empty unless add is given columns
  // Weighted sums only, per drawn unit and column as the error sums: the zeroed and flipped
  // entries' weights and all the entries' (the shares' standard errors).
  std::vector<double> unit_zeroed, unit_flipped, unit_weight;
  std::vector<double> col_zeroed, col_flipped, col_weight;

  // ref [rows, cols] with rows ref_stride apart, got [rows, cols], rel [rows, cols] with rows
  // rel_stride apart; their row i is unit first_unit + i, their column j column first_col + j
  // (first_col -1: no per-column sums). design: the output's, weighting each entry (null: every
  // entry counts once).
  void add(const double* ref, std::int64_t ref_stride, const double* got, std::int64_t rows, std::int64_t cols,
           std::int64_t first_unit, double* rel, std::int64_t rel_stride, std::int64_t first_col = -1,
           const SampledOutput* design = nullptr);
  // Adds a tile's sums (in a fixed order: the numbers do not depend on the thread count).
  void merge(ErrorSums&& o);
  // The standard error of a sampled output's rel_fro_err (METRICS.md rel_fro_err_se): R = err2 /
  // ref2 (weighted sums: a combined ratio estimator), var R ~ (V_rows + V_cols) / ref2^2, where
  // V of a dimension is the variance of the estimated total of z = e - R r from its rest
  // stratum's drawn clusters (N clusters, n drawn, z_c each cluster's sum over its units):
  // N^2 (1 - n/N) s_z^2 / n with s_z^2 their sample variance (certain units add none); then
  // se(R) / (2 sqrt R). Rows and columns added: conservative for a crossed sample (each counts
  // the entries' own scatter).
  double standard_error(const SampledOutput& design) const;
  // The standard errors of a sampled output's zeroed_pct and sign_flip_pct, in percentage points:
  // each share a ratio estimator (the zeroed or flipped entries' weight over all the entries'),
  // its variance from the rest strata as standard_error's.
  double zeroed_pct_se(const SampledOutput& design) const;
  double sign_flip_pct_se(const SampledOutput& design) const;
  // The row's statistics. design: the output's (null: every entry computed, no standard error);
  // noise: wgrad's (null: none); rel: the whole output's relative errors (the single part of a
  // weighted design, [rows, cols]).
  void finish(const SampledOutput* design, const NoiseTable* noise, std::span<const double> rel, GemmRow* row);
};

}  // namespace fp8a

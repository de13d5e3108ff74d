// The statistics of a GEMM output against its reference (gemms.csv's columns, METRICS.md):
// the error sums and per-entry damage of an output or a tile of it, the exact median of the
// entries' relative errors, and wgrad's noise table. Computed by evaluate_gemm_errors
// (gemm_error.hpp) tile by tile; here so that they can be tested on their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/gemm_row.hpp"

namespace fp8a {

// The flips independent rounding noise would make in an output (METRICS.md
// noise_sign_flip_pct): each entry's noise variance c * S, where S is the output of the squared
// operands (sum over the reduction of a^2 b^2, what per-element rounding of the operands puts
// into that entry), c scaled so that the variances add up to ||got - ref||^2. S and the reference
// are the same for every recipe, so a table per (layer, step, GEMM) holds t = ref^2 / S of the
// entries with ref != 0 < S, sorted: a row's sum covers only the entries its noise can reach.
struct NoiseTable {
  std::vector<double> t;   // grouped by binade, ascending binades (finish)
  std::vector<std::size_t> binade_end;  // t[binade_end[b - 1], binade_end[b]) have ilogb b + kMinBinade
  double s_sum = 0;        // S over every entry
  std::int64_t entries = 0;
  static constexpr int kMinBinade = -1100, kBinades = 2200;  // every finite positive double's ilogb
  // Entries ref [i] with their S [i].
  void add(std::span<const double> ref, std::span<const double> s);
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

// The comparison of an output (or a tile of it) with its reference: ||got - ref||^2, ||ref||^2,
// ||got||^2 and <got, ref>; entries zeroed and signs flipped; per output row (a unit: a token of
// fprop and dgrad, a row of dW) ||got - ref||^2 and ||ref||^2, for the standard error of a sample
// of rows, and where the columns are a sample too, the same per output column. Every entry's
// |got - ref| / |ref| (-1 where ref = 0) goes to a buffer of the whole output, for the median
// (median_nonnegative).
struct ErrorSums {
  double err2 = 0, ref2 = 0, got2 = 0, dot = 0;
  std::int64_t entries = 0, zeroed = 0, flipped = 0;
  std::vector<double> unit_err2, unit_ref2;
  std::vector<double> col_err2, col_ref2;  // empty unless add is given columns

  // ref [rows, cols] with rows ref_stride apart, got [rows, cols], rel [rows, cols] with rows
  // rel_stride apart; their row i is unit first_unit + i, their column j column first_col + j
  // (first_col -1: no per-column sums).
  void add(const double* ref, std::int64_t ref_stride, const double* got, std::int64_t rows, std::int64_t cols,
           std::int64_t first_unit, double* rel, std::int64_t rel_stride, std::int64_t first_col = -1);
  // Adds a tile's sums (in a fixed order: the numbers do not depend on the thread count).
  void merge(ErrorSums&& o);
  // The ratio estimator's standard error (METRICS.md rel_fro_err_se): R = sum e / sum r over the
  // n sampled of `population` units, var R ~ (1 - n/M) / (n rbar^2) * sum (e - R r)^2 / (n - 1),
  // and rel_fro_err = sqrt R, so its standard error is se(R) / (2 sqrt R). Over the rows, or with
  // col_population > 0 the rows' and the columns' added in quadrature (a crossed sample of rows
  // and columns: conservative, each counting the entries' own scatter).
  double standard_error(std::int64_t population, std::int64_t col_population = 0) const;
  // The row's statistics. sampled: the rows (and, col_population > 0, the columns) are a sample of
  // `population` units (a standard error); noise: wgrad's (null: none); rel: the whole output's
  // relative errors.
  void finish(bool sampled, std::int64_t population, std::int64_t col_population, const NoiseTable* noise,
              std::span<const double> rel, GemmRow* row);
};

}  // namespace fp8a

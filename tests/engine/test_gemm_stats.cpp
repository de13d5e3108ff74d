// The GEMM-output statistics (engine/gemm_stats.hpp) against references written here: the median
// by sorting, the standard error by its formula.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/gemm_stats.hpp"

namespace {

// The median by the definition: sort the values >= 0, the middle one or the mean of the two.
double median_sorted(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return x < 0.0; }), v.end());
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2.0;
}

struct Lcg {
  std::uint64_t s = 7;
  double next() {  // uniform in [0, 1)
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(s >> 11) / 9007199254740992.0;
  }
};

}  // namespace

TEST_CASE("median_nonnegative: the sorted median over millions of values, ties, +inf and left-out entries") {
  Lcg rng;
  // Sizes over several of its 2^20-value blocks, odd and even counts of kept values.
  for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{1001}, std::size_t{3'000'001},
                              std::size_t{2'500'000}}) {
    INFO(n);
    std::vector<double> v(n);
    for (double& x : v) {
      const double u = rng.next();
      x = u < 0.1 ? -1.0                                      // ref = 0: left out
          : u < 0.15 ? 0.03125                                // many ties at one value
          : u < 0.151 ? std::numeric_limits<double>::infinity()
                      : std::exp(12.0 * rng.next() - 8.0);  // rel errors over 5 decades
    }
    CHECK(fp8a::median_nonnegative(v) == median_sorted(v));
  }
  // The two middle values in different bins of the radix select.
  CHECK(fp8a::median_nonnegative(std::vector<double>{1.0, 1e-300, 1e300, 0.5}) == (0.5 + 1.0) / 2.0);
  CHECK(fp8a::median_nonnegative(std::vector<double>{0.0, 0.0, -1.0}) == 0.0);
  CHECK(fp8a::median_nonnegative(std::vector<double>{-1.0, -1.0}) == 0.0);  // none kept
  CHECK(fp8a::median_nonnegative(std::vector<double>{}) == 0.0);
}

TEST_CASE("ErrorSums: tiles merged give the whole output's sums, zeroes, flips and standard error") {
  // ref and got [3, 4]; in two tiles of two columns, as evaluate_gemm_errors computes them.
  const std::vector<double> ref = {1, -2, 0, 4, 0.5, 3, -1, 2, 8, -8, 1, 1};
  const std::vector<double> got = {1.5, 2, 1, 0, 0.5, 2, -1, 2, 8, -7, 0, 1};
  std::vector<double> rel(ref.size());
  fp8a::ErrorSums left, right, whole;
  left.add(ref.data(), 4, got.data() + 0, 0, 0, 0, nullptr, 0);  // an empty tile adds nothing
  std::vector<double> got_l(6), got_r(6);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) got_l[i * 2 + j] = got[i * 4 + j], got_r[i * 2 + j] = got[i * 4 + 2 + j];
  left.add(ref.data(), 4, got_l.data(), 3, 2, 0, rel.data(), 4);
  right.add(ref.data() + 2, 4, got_r.data(), 3, 2, 0, rel.data() + 2, 4);
  whole.merge(std::move(left));
  whole.merge(std::move(right));
  double err2 = 0, ref2 = 0;
  int zeroed = 0, flipped = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err2 += (got[i] - ref[i]) * (got[i] - ref[i]);
    ref2 += ref[i] * ref[i];
    zeroed += ref[i] != 0 && got[i] == 0;
    flipped += ref[i] != 0 && got[i] != 0 && (got[i] < 0) != (ref[i] < 0);
    CHECK(rel[i] == (ref[i] == 0 ? -1.0 : std::fabs(got[i] - ref[i]) / std::fabs(ref[i])));
  }
  CHECK(whole.err2 == err2);
  CHECK(whole.ref2 == ref2);
  CHECK(whole.entries == 12);
  CHECK(whole.zeroed == zeroed);    // 4 -> 0 and 1 -> 0
  CHECK(whole.flipped == flipped);  // -2 -> 2
  fp8a::GemmRow row;
  // Rows as units, 3 of 10, evenly spaced (each standing for 10/3).
  const fp8a::UnitDraw three = fp8a::even_units(10, 3, 1);
  const fp8a::SampledOutput design{&three, nullptr};
  whole.finish(&design, nullptr, rel, &row);
  CHECK(row.rel_fro_err == doctest::Approx(std::sqrt(err2 / ref2)).epsilon(1e-15));
  CHECK(row.zeroed_pct == doctest::Approx(100.0 * zeroed / 12));
  CHECK(row.median_rel_err == median_sorted(rel));
  CHECK(std::isnan(row.noise_sign_flip_pct));
  // The standard error by the formula (METRICS.md), rows as units, 3 of 10.
  double e[3] = {}, r[3] = {};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) e[i] += (got[i * 4 + j] - ref[i * 4 + j]) * (got[i * 4 + j] - ref[i * 4 + j]), r[i] += ref[i * 4 + j] * ref[i * 4 + j];
  const double ratio = err2 / ref2, rbar = ref2 / 3;
  double s2 = 0;
  for (int i = 0; i < 3; ++i) s2 += (e[i] - ratio * r[i]) * (e[i] - ratio * r[i]) / 2;
  const double se_ratio = std::sqrt((1 - 3.0 / 10) * s2 / 3) / rbar;
  CHECK(row.rel_fro_err_se == doctest::Approx(se_ratio / (2 * std::sqrt(ratio))).epsilon(1e-12));
}

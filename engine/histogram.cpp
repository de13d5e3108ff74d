#include "engine/histogram.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>

namespace fp8a {

namespace {

// floor(log2 |x|) of a finite nonzero float lies in [-149, 127].
constexpr int kMinExp = -149;
constexpr int kMaxExp = 127;
constexpr std::int64_t kChunk = 4096;

// floor(log2 |x|) of a finite nonzero float from its magnitude's bits, as std::ilogb gives it:
// a normal's exponent field, a subnormal's (m * 2^-149) place of its leading one.
int binade(std::uint32_t magnitude) {
  const auto field = static_cast<int>(magnitude >> 23);
  return field != 0 ? field - 127 : kMinExp + 31 - std::countl_zero(magnitude);
}

}  // namespace

std::int64_t Log2Histogram::nonzero_finite() const {
  return std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
}

void Log2Histogram::merge(const Log2Histogram& other) {
  numel += other.numel;
  zeros += other.zeros;
  nan_count += other.nan_count;
  inf_count += other.inf_count;
  if (other.counts.empty()) return;
  if (counts.empty()) {
    min_exp = other.min_exp;
    counts = other.counts;
    amin_nonzero = other.amin_nonzero;
    amax_finite = other.amax_finite;
    return;
  }
  amin_nonzero = std::min(amin_nonzero, other.amin_nonzero);
  amax_finite = std::max(amax_finite, other.amax_finite);
  const int lo = std::min(min_exp, other.min_exp), hi = std::max(max_exp(), other.max_exp());
  std::vector<std::int64_t> merged(static_cast<std::size_t>(hi - lo + 1), 0);
  for (std::size_t i = 0; i < counts.size(); ++i) merged[static_cast<std::size_t>(min_exp - lo) + i] += counts[i];
  for (std::size_t i = 0; i < other.counts.size(); ++i)
    merged[static_cast<std::size_t>(other.min_exp - lo) + i] += other.counts[i];
  min_exp = lo;
  counts = std::move(merged);
}

Log2Histogram log2_histogram(const TensorView& tensor) {
  std::array<std::int64_t, kMaxExp - kMinExp + 1> bins{};
  Log2Histogram h;
  h.numel = tensor.numel();
  // |x| ordered by its bits (a nonnegative float's bits order as its value).
  std::uint32_t amin = std::bit_cast<std::uint32_t>(std::numeric_limits<float>::infinity()), amax = 0;
  std::vector<float> buf(static_cast<std::size_t>(std::min(kChunk, std::max<std::int64_t>(h.numel, 1))));
  for (std::int64_t begin = 0; begin < h.numel; begin += kChunk) {
    const std::int64_t n = std::min(kChunk, h.numel - begin);
    tensor.load_floats(begin, n, buf.data());
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint32_t m = std::bit_cast<std::uint32_t>(buf[static_cast<std::size_t>(i)]) & 0x7FFFFFFFu;
      if (m > 0x7F800000u) ++h.nan_count;
      else if (m == 0x7F800000u) ++h.inf_count;
      else if (m == 0) ++h.zeros;
      else {
        ++bins[static_cast<std::size_t>(binade(m) - kMinExp)];  // exact, subnormals included
        amin = std::min(amin, m);
        amax = std::max(amax, m);
      }
    }
  }
  int lo = 0, hi = static_cast<int>(bins.size()) - 1;
  while (lo <= hi && bins[static_cast<std::size_t>(lo)] == 0) ++lo;
  while (hi >= lo && bins[static_cast<std::size_t>(hi)] == 0) --hi;
  if (lo <= hi) {
    h.min_exp = lo + kMinExp;
    h.counts.assign(bins.begin() + lo, bins.begin() + hi + 1);
    h.amin_nonzero = std::bit_cast<float>(amin);
    h.amax_finite = std::bit_cast<float>(amax);
  }
  return h;
}

}  // namespace fp8a

// log2_histogram against a reference written here: the binade of each element found by comparing
// |x| with powers of two in double (no ilogb, no bit tricks), over the fill cases (zeros, float
// subnormals, normal, a wide range, near FLT_MAX, NaN/Inf) and the three input types.
#include <doctest/doctest.h>

#include <cmath>
#include <algorithm>
#include <cfloat>
#include <limits>
#include <map>
#include <vector>

#include "engine/histogram.hpp"
#include "support/fills.hpp"

using namespace fp8a;
using fp8a::testing::Fill;

namespace {

struct RefHistogram {
  std::map<int, std::int64_t> bins;  // exponent -> count
  std::int64_t zeros = 0, nans = 0, infs = 0;
};

// The e with 2^e <= a < 2^(e+1), by stepping e until it brackets a (a finite, > 0).
int binade_ref(double a) {
  int e = 0;
  while (std::ldexp(1.0, e) > a) --e;
  while (std::ldexp(1.0, e + 1) <= a) ++e;
  return e;
}

RefHistogram histogram_ref(const std::vector<float>& v) {
  RefHistogram r;
  for (float x : v) {
    if (x != x) ++r.nans;
    else if (x == INFINITY || x == -INFINITY) ++r.infs;
    else if (x == 0.0f) ++r.zeros;
    else ++r.bins[binade_ref(std::fabs(static_cast<double>(x)))];
  }
  return r;
}

void check_against_ref(const Log2Histogram& h, const std::vector<float>& v) {
  const RefHistogram r = histogram_ref(v);
  CHECK(h.numel == static_cast<std::int64_t>(v.size()));
  CHECK(h.zeros == r.zeros);
  CHECK(h.nan_count == r.nans);
  CHECK(h.inf_count == r.infs);
  if (r.bins.empty()) {
    CHECK(h.counts.empty());
    return;
  }
  REQUIRE_FALSE(h.counts.empty());
  float amin = INFINITY, amax = 0;
  for (float x : v)
    if (std::isfinite(x) && x != 0.0f) {
      amin = std::min(amin, std::fabs(x));
      amax = std::max(amax, std::fabs(x));
    }
  CHECK(h.amin_nonzero == amin);
  CHECK(h.amax_finite == amax);
  CHECK(h.min_exp == r.bins.begin()->first);
  CHECK(h.max_exp() == r.bins.rbegin()->first);
  for (int e = h.min_exp; e <= h.max_exp(); ++e) {
    const auto it = r.bins.find(e);
    CHECK_MESSAGE(h.counts[static_cast<std::size_t>(e - h.min_exp)] == (it == r.bins.end() ? 0 : it->second),
                  "exponent ", e);
  }
  CHECK(h.nonzero_finite() + h.zeros + h.nan_count + h.inf_count == h.numel);
}

TensorView f32_view(const std::vector<float>& v, std::int64_t rows) {
  return make_tensor_view(reinterpret_cast<const std::byte*>(v.data()), DType::kF32,
                          {rows, static_cast<std::int64_t>(v.size()) / rows});
}

}  // namespace

TEST_CASE("log2_histogram: every fill case of F32 against the reference") {
  for (Fill fill : testing::kFills) {
    CAPTURE(testing::fill_name(fill));
    const auto v = testing::make_fill(5 * 1601, fill, 7);  // crosses the 4096-element chunks
    check_against_ref(log2_histogram(f32_view(v, 5)), v);
  }
}

TEST_CASE("log2_histogram: the binade edges, -0, the float subnormals and the extremes") {
  const std::vector<float> v = {1.0f, std::nextafter(1.0f, 0.0f), 2.0f, -3.99f, 0.0f, -0.0f,
                                std::numeric_limits<float>::denorm_min(), 1e-40f, FLT_MAX, -FLT_MAX,
                                std::numeric_limits<float>::min(), NAN, INFINITY, -INFINITY};
  const Log2Histogram h = log2_histogram(f32_view(v, 1));
  check_against_ref(h, v);
  CHECK(h.min_exp == -149);
  CHECK(h.max_exp() == 127);
  CHECK(h.counts[static_cast<std::size_t>(0 - h.min_exp)] == 1);   // 1.0
  CHECK(h.counts[static_cast<std::size_t>(-1 - h.min_exp)] == 1);  // just below 1
  CHECK(h.counts[static_cast<std::size_t>(1 - h.min_exp)] == 2);   // 2.0 and 3.99
  CHECK(h.zeros == 2);
}

TEST_CASE("log2_histogram: every BF16 and every F16 code, binned by its exact value") {
  std::vector<std::uint16_t> codes(65536);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint16_t>(i);
  std::vector<float> as_bf(codes.size()), as_hf(codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i) {
    as_bf[i] = bf16_to_float(codes[i]);
    as_hf[i] = f16_to_float(codes[i]);
  }
  const auto* bytes = reinterpret_cast<const std::byte*>(codes.data());
  const Log2Histogram bf = log2_histogram(make_tensor_view(bytes, DType::kBF16, {256, 256}));
  check_against_ref(bf, as_bf);
  CHECK(bf.min_exp == -133);  // BF16's smallest subnormal, 2^-133
  const Log2Histogram hf = log2_histogram(make_tensor_view(bytes, DType::kF16, {256, 256}));
  check_against_ref(hf, as_hf);
  CHECK(hf.min_exp == -24);  // F16's smallest subnormal
  CHECK(hf.max_exp() == 15);
}

TEST_CASE("log2_histogram: an empty tensor and an all-zero one have no bins") {
  const std::vector<float> zeros(64, 0.0f);
  const Log2Histogram z = log2_histogram(f32_view(zeros, 8));
  CHECK(z.counts.empty());
  CHECK(z.zeros == 64);
  const Log2Histogram e = log2_histogram(make_tensor_view(nullptr, DType::kF32, {0, 16}));
  CHECK(e.numel == 0);
  CHECK(e.counts.empty());
}

TEST_CASE("log2_histogram: merging the shards of a tensor gives the whole tensor's histogram") {
  auto v = testing::make_fill(4 * 160, Fill::kWide, 3);
  v[5] = 0.0f;
  v[600] = NAN;
  const std::vector<float> a(v.begin(), v.begin() + 160), b(v.begin() + 160, v.end());
  Log2Histogram h = log2_histogram(f32_view(std::vector<float>(1, 0.0f), 1));
  h.merge(log2_histogram(f32_view(a, 1)));
  h.merge(log2_histogram(f32_view(b, 3)));
  check_against_ref(h, [&] {
    std::vector<float> all(1, 0.0f);
    all.insert(all.end(), v.begin(), v.end());
    return all;
  }());
}

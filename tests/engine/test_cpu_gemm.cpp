// The CPU GEMM (engine/cpu_gemm.hpp) against a float64 triple loop written here. Run twice by
// ctest: as part of test_engine on this CPU's best path, and as test_engine_gemm_no_bf16_units
// with DNNL_MAX_CPU_ISA=AVX2 (BF16 operands widened to float32 for the float32 kernel), so both
// paths are checked on any machine that has AVX2.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/cpu_gemm.hpp"

namespace {

std::uint16_t to_bf16_bits(float f) {  // f must be a BF16 value
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16_bits(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Values on a BF16 grid: small integers times powers of two, so that every product and every
// partial sum of `exact` cases is exact in float32.
struct Lcg {
  std::uint64_t s = 42;
  int next(int n) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((s >> 33) % static_cast<std::uint64_t>(n));
  }
};

// Shapes that straddle every kernel's blocking: thin, odd, K not a multiple of 2, 16 or 32.
struct Shape {
  std::int64_t m, n, k;
};
constexpr auto kMajor = fp8a::GemmLayout::kKMajor;
constexpr auto kOuter = fp8a::GemmLayout::kKOuter;

const Shape kShapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 48, 300}, {130, 257, 1031}};

}  // namespace

TEST_CASE("cpu_gemm: BF16 and float32 products of exactly summable values are exact") {
  Lcg rng;
  for (const Shape& s : kShapes) {
    INFO(s.m << "x" << s.n << "x" << s.k);
    std::vector<float> a(static_cast<std::size_t>(s.m * s.k)), b(static_cast<std::size_t>(s.n * s.k));
    for (float& v : a) v = static_cast<float>(rng.next(15) - 7) * 0.25f;  // |a| <= 1.75, 1/4 steps
    for (float& v : b) v = static_cast<float>(rng.next(9) - 4) * 0.5f;    // |b| <= 2, 1/2 steps
    std::vector<std::uint16_t> ah(a.size()), bh(b.size());
    for (std::size_t i = 0; i < a.size(); ++i) ah[i] = to_bf16_bits(a[i]);
    for (std::size_t i = 0; i < b.size(); ++i) bh[i] = to_bf16_bits(b[i]);
    std::vector<float> c16(static_cast<std::size_t>(s.m * s.n), -1.0f), c32(c16.size(), -1.0f);
    fp8a::cpu_gemm_bf16(ah.data(), kMajor, bh.data(), kMajor, s.m, s.n, s.k, c16.data());
    fp8a::cpu_gemm_f32(a.data(), kMajor, b.data(), kMajor, s.m, s.n, s.k, c32.data());
    // The same operands K-outer (transposed copies): the same sums.
    std::vector<float> at(a.size()), bt(b.size()), ct(c32.size(), -1.0f);
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t l = 0; l < s.k; ++l) at[l * s.m + i] = a[i * s.k + l];
    for (std::int64_t j = 0; j < s.n; ++j)
      for (std::int64_t l = 0; l < s.k; ++l) bt[l * s.n + j] = b[j * s.k + l];
    fp8a::cpu_gemm_f32(at.data(), kOuter, bt.data(), kOuter, s.m, s.n, s.k, ct.data());
    CHECK(ct == c32);
    int wrong16 = 0, wrong32 = 0;
    for (std::int64_t i = 0; i < s.m; ++i)
      for (std::int64_t j = 0; j < s.n; ++j) {
        double want = 0;  // multiples of 1/8 below 2^13: exact in float32 in any order
        for (std::int64_t l = 0; l < s.k; ++l) want += static_cast<double>(a[i * s.k + l]) * b[j * s.k + l];
        wrong16 += c16[i * s.n + j] != static_cast<float>(want);
        wrong32 += c32[i * s.n + j] != static_cast<float>(want);
      }
    CHECK(wrong16 == 0);
    CHECK(wrong32 == 0);
  }
}

TEST_CASE("cpu_gemm: batched products of exactly summable values are exact, entry by entry") {
  Lcg rng;
  const std::int64_t batch = 3, m = 5, n = 7, k = 128;
  std::vector<std::uint16_t> a(static_cast<std::size_t>(batch * m * k)), b(static_cast<std::size_t>(batch * n * k));
  for (auto& h : a) h = to_bf16_bits(static_cast<float>(rng.next(15) - 7));
  for (auto& h : b) h = to_bf16_bits(static_cast<float>(rng.next(9) - 4) * 0.5f);
  std::vector<float> c(static_cast<std::size_t>(batch * m * n), -1.0f);
  fp8a::cpu_gemm_bf16_batched(a.data(), b.data(), batch, m, n, k, c.data());
  int wrong = 0;
  for (std::int64_t e = 0; e < batch; ++e)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (std::int64_t l = 0; l < k; ++l)
          want += static_cast<double>(from_bf16_bits(a[(e * m + i) * k + l])) * from_bf16_bits(b[(e * n + j) * k + l]);
        wrong += c[(e * m + i) * n + j] != static_cast<float>(want);
      }
  CHECK(wrong == 0);
}

TEST_CASE("cpu_gemm: general values within float32 accumulation of the float64 sums") {
  Lcg rng;
  const Shape s{37, 70, 4099};
  std::vector<std::uint16_t> ah(static_cast<std::size_t>(s.m * s.k)), bh(static_cast<std::size_t>(s.n * s.k));
  // Any BF16 value of magnitude 2^-20 .. 2^20 and either sign.
  for (auto& h : ah) h = static_cast<std::uint16_t>(((108 + rng.next(40)) << 7) | rng.next(128) | (rng.next(2) << 15));
  for (auto& h : bh) h = static_cast<std::uint16_t>(((108 + rng.next(40)) << 7) | rng.next(128) | (rng.next(2) << 15));
  std::vector<float> c(static_cast<std::size_t>(s.m * s.n));
  fp8a::cpu_gemm_bf16(ah.data(), kMajor, bh.data(), kMajor, s.m, s.n, s.k, c.data());
  double worst = 0;
  for (std::int64_t i = 0; i < s.m; ++i)
    for (std::int64_t j = 0; j < s.n; ++j) {
      double want = 0, magnitude = 0;
      for (std::int64_t l = 0; l < s.k; ++l) {
        const double p = static_cast<double>(from_bf16_bits(ah[i * s.k + l])) * from_bf16_bits(bh[j * s.k + l]);
        want += p;
        magnitude += std::fabs(p);
      }
      // The classical bound of a float32 sum of k exact products, in any order: k u sum |p|.
      worst = std::max(worst, std::fabs(c[i * s.n + j] - want) / (static_cast<double>(s.k) * 0x1p-24 * magnitude));
    }
  CHECK(worst <= 1.0);
  CHECK(worst > 0.0);  // not a float64 sum either
}

TEST_CASE("cpu_gemm: the path it runs on") {
  const char* limit = std::getenv("DNNL_MAX_CPU_ISA");
  const std::string path = "oneDNN runs on " + fp8a::cpu_gemm_isa() +
                           (fp8a::cpu_gemm_native_bf16() ? ", BF16 units" : ", BF16 widened to float32");
  MESSAGE(path);
  if (limit != nullptr && std::string(limit) == "AVX2") {
    CHECK(fp8a::cpu_gemm_isa() == "avx2");
    CHECK_FALSE(fp8a::cpu_gemm_native_bf16());
  }
  std::vector<float> c(6, -1.0f);
  fp8a::cpu_gemm_f32(nullptr, kMajor, nullptr, kOuter, 2, 3, 0, c.data());  // an empty sum is 0
  for (float v : c) CHECK(v == 0.0f);
}

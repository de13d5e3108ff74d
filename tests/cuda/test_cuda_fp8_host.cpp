// The metric kernels' FP8 conversions as sm_89+ runs them, checked on the host (label cuda-host;
// needs the CUDA toolkit's headers, no GPU). On sm_89+ cuda/element_quant.hpp converts with
// cuda_fp8.h's intrinsics (cvt.rn.satfinite.e4m3x2.f32 and cvt.rn.f16x2.e4m3x2, E5M2 likewise);
// compiled for the host with FP8A_NV_FP8_ON_HOST, the same calls run cuda_fp8.h's software
// implementation of those instructions, NVIDIA's own (a float -> double -> FP8 rounding written
// independently of ours). Checked against the shared codec of core/fp8_codec.hpp that the
// CPU backend and the other kernels use:
//   - __nv_cvt_float_to_fp8(x, __NV_SATFINITE, E4M3/E5M2) == encode_e4m3/encode_e5m2(x);
//   - fp8_round_trip<F> and fp8_round_trip_x2<F> (the kernels' code, intrinsic path) ==
//     round_trip_e4m3/round_trip_e5m2 (the software path), bit for bit, -0 apart from +0;
// over every sign, exponent and top 12 mantissa bits with the low 11 bits at and around each
// rounding boundary (12.6M floats; NaN compared by NaN-ness, as CUDA cuda_fp8.hpp's float and
// double paths give different NaN codes). With FP8A_EXHAUSTIVE=1 in the environment: all 2^32
// floats instead (about two minutes).
// test_cuda_codec compares the real hardware with the same codec on a GPU.
#define FP8A_NV_FP8_ON_HOST 1
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cuda/element_quant.hpp"
#include "core/fp8_codec.hpp"

static_assert(FP8A_CUDA_FP8_INTRINSICS == 1, "the intrinsic path must be the one under test");

namespace {

using fp8a::Fp8Format;

bool same_value(float a, float b) { return (std::isnan(a) && std::isnan(b)) || fp8a::float_bits(a) == fp8a::float_bits(b); }

// NaN codes compare by NaN-ness: E4M3 has S.1111.111 only, E5M2 S.11111.xx with xx != 0.
bool same_code(Fp8Format f, std::uint8_t a, std::uint8_t b, bool nan) {
  if (!nan) return a == b;
  return f == Fp8Format::kE4M3 ? (a & 0x7F) == 0x7F && (b & 0x7F) == 0x7F
                               : (a & 0x7F) > 0x7C && (b & 0x7F) > 0x7C;
}

struct Tally {
  std::uint64_t checked = 0, encode = 0, round_trip = 0, round_trip_x2 = 0;
  std::uint32_t first_bad = 0;
  bool any_bad = false;
  void bad(std::uint32_t u) {
    if (!any_bad) first_bad = u;
    any_bad = true;
  }
};

template <Fp8Format F>
void check_pair(std::uint32_t u0, std::uint32_t u1, Tally& t) {
  constexpr __nv_fp8_interpretation_t kType = F == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  const float x0 = fp8a::bits_float(u0), x1 = fp8a::bits_float(u1);
  const auto soft = [](float x) {
    return F == Fp8Format::kE4M3 ? fp8a::round_trip_e4m3(x) : fp8a::round_trip_e5m2(x);
  };
  const auto code = [](float x) { return F == Fp8Format::kE4M3 ? fp8a::encode_e4m3(x) : fp8a::encode_e5m2(x); };
  for (const float x : {x0, x1}) {
    const std::uint8_t nv = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, kType);
    if (!same_code(F, nv, code(x), std::isnan(x))) {
      ++t.encode;
      t.bad(fp8a::float_bits(x));
    }
    if (!same_value(fp8a::cuda::fp8_round_trip<F>(x), soft(x))) {
      ++t.round_trip;
      t.bad(fp8a::float_bits(x));
    }
  }
  float q0 = 0.0f, q1 = 0.0f;
  fp8a::cuda::fp8_round_trip_x2<F>(x0, x1, &q0, &q1);
  if (!same_value(q0, soft(x0)) || !same_value(q1, soft(x1))) {
    ++t.round_trip_x2;
    t.bad(u0);
  }
}

// Patterns [begin, end) of a pattern -> float bits map, both formats, in two threads.
template <class Bits>
Tally check_range(std::uint64_t count, Bits bits) {
  Tally parts[2];
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p)
    threads.emplace_back([&, p] {
      const std::uint64_t begin = count / 2 * static_cast<std::uint64_t>(p), end = p == 0 ? count / 2 : count;
      for (std::uint64_t i = begin; i + 1 < end; i += 2) {
        check_pair<Fp8Format::kE4M3>(bits(i), bits(i + 1), parts[p]);
        check_pair<Fp8Format::kE5M2>(bits(i), bits(i + 1), parts[p]);
        parts[p].checked += 2;
      }
    });
  for (auto& th : threads) th.join();
  Tally t = parts[0];
  t.checked += parts[1].checked;
  t.encode += parts[1].encode;
  t.round_trip += parts[1].round_trip;
  t.round_trip_x2 += parts[1].round_trip_x2;
  if (!t.any_bad && parts[1].any_bad) t.bad(parts[1].first_bad);
  return t;
}

}  // namespace

TEST_CASE("sm_89+ conversion path (cuda_fp8.h intrinsics) == the shared FP8 codec, bit for bit") {
  // The host emulation of the conversions is the one under test: spot values first.
  CHECK(__nv_cvt_float_to_fp8(464.0f, __NV_SATFINITE, __NV_E4M3) == 0x7E);       // tie to even: 448
  CHECK(__nv_cvt_float_to_fp8(464.0001f, __NV_SATFINITE, __NV_E4M3) == 0x7E);    // saturates
  CHECK(__nv_cvt_float_to_fp8(INFINITY, __NV_SATFINITE, __NV_E5M2) == 0x7B);     // satfinite: 57344
  CHECK(__nv_cvt_float_to_fp8(0.0009765625f, __NV_SATFINITE, __NV_E4M3) == 0x00);  // 2^-10: tie to 0
  CHECK(__nv_cvt_float_to_fp8(-0.0f, __NV_SATFINITE, __NV_E4M3) == 0x80);

  const char* env = std::getenv("FP8A_EXHAUSTIVE");
  const bool exhaustive = env != nullptr && *env == '1';
  // The low 11 bits of the mantissa at and around every rounding boundary of both formats (the
  // boundaries sit at bit 19 or above, in the top 12 bits, which run through all values).
  static constexpr std::uint32_t kLow[6] = {0x000, 0x001, 0x3FF, 0x400, 0x401, 0x7FF};
  const Tally t = exhaustive ? check_range(std::uint64_t{1} << 32,
                                           [](std::uint64_t i) { return static_cast<std::uint32_t>(i); })
                             : check_range(std::uint64_t{2} * 256 * 4096 * 6, [](std::uint64_t i) {
                                 const auto low = kLow[i % 6];
                                 const auto high = static_cast<std::uint32_t>(i / 6);  // sign|exp|top 12
                                 return high << 11 | low;
                               });
  MESSAGE(std::string(exhaustive ? "all 2^32 floats" : "boundary sample") << ": " << t.checked
                                                                          << " floats x 2 formats");
  char first_bad[16];
  std::snprintf(first_bad, sizeof first_bad, "0x%08x", t.first_bad);
  INFO("first mismatch at float bits " << std::string(first_bad));
  CHECK(t.encode == 0);
  CHECK(t.round_trip == 0);
  CHECK(t.round_trip_x2 == 0);
  CHECK(t.checked == (exhaustive ? std::uint64_t{1} << 32 : std::uint64_t{2} * 256 * 4096 * 6));
}

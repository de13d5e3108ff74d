// GPU checks (ctest label "cuda"): the shared FP8 encoder gives the same codes on the device as on
// the host and as the hardware satfinite conversion. Exits 77 (ctest: skipped) without a device.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "cuda/device_info.hpp"
#include "tests/cuda/gpu_test_main.hpp"
#include "core/fp8_codec.hpp"
#include "tests/cuda/codec_kernels.cuh"

namespace {

constexpr int kRandomBitPatterns = 1 << 22;

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> inputs() {
  std::vector<float> x;
  // Every FP8 value, every midpoint between neighbours and the floats next to it, both signs.
  for (int c = 0; c < 256; ++c) {
    for (float v : {fp8a::decode_e4m3(static_cast<std::uint8_t>(c)),
                    fp8a::decode_e5m2(static_cast<std::uint8_t>(c))}) {
      if (!std::isfinite(v)) continue;
      const float next4 = fp8a::decode_e4m3(static_cast<std::uint8_t>(c + 1));
      const float next5 = fp8a::decode_e5m2(static_cast<std::uint8_t>(c + 1));
      for (float n : {next4, next5}) {
        if (!std::isfinite(n) || n <= v) continue;
        const float mid = (v + n) / 2;
        for (float m : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
          x.push_back(m);
          x.push_back(-m);
        }
      }
      x.push_back(v);
    }
  }
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 448.0f, 464.0f, 464.01f, 480.0f,
                  57344.0f, 61440.0f, 65536.0f, 3e38f, 1e-45f})
    x.push_back(v);
  std::mt19937_64 rng(90);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < kRandomBitPatterns; ++i) x.push_back(from_bits(bits(rng)));
  return x;
}

}  // namespace

TEST_CASE("device encoder == host encoder == hardware satfinite conversion") {
  const auto x = inputs();
  const auto codes = fp8a::cuda_test::encode_on_device(x);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool nan = std::isnan(x[i]);
    const std::uint8_t host4 = fp8a::encode_e4m3(x[i]), host5 = fp8a::encode_e5m2(x[i]);
    // NaN codes compare by NaN-ness only (CUDA cuda_fp8.hpp: __nv_cvt_float_to_fp8 gives 0x7F for
    // any NaN, __nv_cvt_double_to_fp8 keeps its sign).
    auto same4 = [&](std::uint8_t a, std::uint8_t b) {
      return nan ? ((a & 0x7F) == 0x7F && (b & 0x7F) == 0x7F) : a == b;
    };
    auto same5 = [&](std::uint8_t a, std::uint8_t b) {
      return nan ? ((a & 0x7F) > 0x7C && (b & 0x7F) > 0x7C) : a == b;
    };
    const bool ok = same4(codes.ours_e4m3[i], host4) && same4(codes.hw_e4m3[i], host4) &&
                    same5(codes.ours_e5m2[i], host5) && same5(codes.hw_e5m2[i], host5);
    if (!ok && ++mismatches <= 10)
      MESSAGE("x=" << x[i] << " host " << int(host4) << "/" << int(host5) << " device "
                   << int(codes.ours_e4m3[i]) << "/" << int(codes.ours_e5m2[i]) << " hw "
                   << int(codes.hw_e4m3[i]) << "/" << int(codes.hw_e5m2[i]));
  }
  CHECK(mismatches == 0);
}

TEST_CASE("the metric kernels' round trip, one at a time and in pairs, == the host's") {
  auto x = inputs();
  if (x.size() % 2 != 0) x.push_back(1.0f);
  const auto rt = fp8a::cuda_test::round_trip_on_device(x);
  // Same value, or both NaN; -0 and +0 are told apart.
  const auto same = [](float a, float b) {
    std::uint32_t ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    return (std::isnan(a) && std::isnan(b)) || ua == ub;
  };
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float h4 = fp8a::round_trip_e4m3(x[i]), h5 = fp8a::round_trip_e5m2(x[i]);
    const bool ok = same(rt.e4m3[i], h4) && same(rt.e4m3_x2[i], h4) && same(rt.e5m2[i], h5) &&
                    same(rt.e5m2_x2[i], h5);
    if (!ok && ++mismatches <= 10)
      MESSAGE("x=" << x[i] << " (index " << i << ") host " << h4 << "/" << h5 << " device "
                   << rt.e4m3[i] << "/" << rt.e5m2[i] << " pairs " << rt.e4m3_x2[i] << "/"
                   << rt.e5m2_x2[i]);
  }
  CHECK(mismatches == 0);
}

int main(int argc, char** argv) { return fp8a::cuda_test::run_gpu_tests("test_cuda_codec", argc, argv); }

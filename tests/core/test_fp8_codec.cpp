// FP8, BF16 and FP16 codecs against the independent references in tests/support/fp8_ref.hpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <ios>
#include <random>

#include "core/fp8_codec.hpp"
#include "support/fp8_ref.hpp"

namespace {

using fp8a::ref::kE4M3;
using fp8a::ref::kE5M2;

// Random samples per format in the broad sweeps; fixed seed so failures reproduce.
constexpr int kRandomBitPatterns = 4'000'000;
constexpr int kRandomInRange = 4'000'000;

std::uint8_t encode(const fp8a::ref::Fp8Spec& s, float x) {
  return s.e4m3 ? fp8a::encode_e4m3(x) : fp8a::encode_e5m2(x);
}
float decode(const fp8a::ref::Fp8Spec& s, std::uint8_t c) {
  return s.e4m3 ? fp8a::decode_e4m3(c) : fp8a::decode_e5m2(c);
}

float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Compares the engine's encoder with the reference on x; NaN results compare by NaN-ness only.
void check_encode(const fp8a::ref::Fp8Spec& s, float x) {
  const unsigned want = fp8a::ref::encode_ref(s, x);
  const unsigned got = encode(s, x);
  if (got != want) {
    INFO("x = " << x << " (bits 0x" << std::hex << [&] { std::uint32_t u; std::memcpy(&u, &x, 4); return u; }()
                << ") want 0x" << want << " got 0x" << got);
    CHECK(got == want);
  }
}

}  // namespace

TEST_CASE("decode: all 256 codes match the OFP8 definition") {
  for (const auto* s : {&kE4M3, &kE5M2}) {
    for (unsigned c = 0; c < 256; ++c) {
      const double want = fp8a::ref::decode_ref(*s, c);
      const float got = decode(*s, static_cast<std::uint8_t>(c));
      INFO("format " << (s->e4m3 ? "e4m3" : "e5m2") << " code " << c);
      if (std::isnan(want)) {
        CHECK(std::isnan(got));
      } else {
        CHECK(static_cast<double>(got) == want);
        CHECK(std::signbit(got) == ((c & 0x80u) != 0));
      }
    }
  }
}

TEST_CASE("known constants") {
  CHECK(fp8a::decode_e4m3(0x7E) == 448.0f);
  CHECK(fp8a::decode_e4m3(0x08) == std::ldexp(1.0f, -6));
  CHECK(fp8a::decode_e4m3(0x01) == std::ldexp(1.0f, -9));
  CHECK(std::isnan(fp8a::decode_e4m3(0x7F)));
  CHECK(std::isnan(fp8a::decode_e4m3(0xFF)));
  CHECK(fp8a::decode_e5m2(0x7B) == 57344.0f);
  CHECK(fp8a::decode_e5m2(0x01) == std::ldexp(1.0f, -16));
  CHECK(std::isinf(fp8a::decode_e5m2(0x7C)));
  CHECK(std::isnan(fp8a::decode_e5m2(0x7D)));
}

TEST_CASE("encode: every finite code round-trips") {
  for (const auto* s : {&kE4M3, &kE5M2}) {
    for (unsigned c = 0; c < 256; ++c) {
      const float v = decode(*s, static_cast<std::uint8_t>(c));
      if (!std::isfinite(v)) continue;
      INFO("code " << c);
      CHECK(encode(*s, v) == c);
    }
  }
}

TEST_CASE("encode: every midpoint and its neighbouring floats, both signs") {
  for (const auto* s : {&kE4M3, &kE5M2}) {
    const auto table = fp8a::ref::positive_table(*s);
    for (std::size_t i = 0; i + 1 < table.size(); ++i) {
      const auto mid = static_cast<float>((table[i].first + table[i + 1].first) / 2);  // exact
      REQUIRE(static_cast<double>(mid) == (table[i].first + table[i + 1].first) / 2);
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
        check_encode(*s, x);
        check_encode(*s, -x);
      }
    }
  }
}

TEST_CASE("encode: ties go to the even code") {
  // 1.0625 lies halfway between 1.0 (0x38, even) and 1.125 (0x39).
  CHECK(fp8a::encode_e4m3(1.0625f) == 0x38);
  // 1.1875 lies halfway between 1.125 (0x39) and 1.25 (0x3A, even).
  CHECK(fp8a::encode_e4m3(1.1875f) == 0x3A);
  // Half the smallest subnormal rounds to zero, keeping the sign.
  CHECK(fp8a::encode_e4m3(std::ldexp(1.0f, -10)) == 0x00);
  CHECK(fp8a::encode_e4m3(-std::ldexp(1.0f, -10)) == 0x80);
  CHECK(fp8a::encode_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)) == 0x01);
  CHECK(fp8a::encode_e5m2(std::ldexp(1.0f, -17)) == 0x00);
  CHECK(fp8a::encode_e5m2(std::ldexp(3.0f, -17)) == 0x02);  // 1.5 ulp: tie between 1 and 2 -> 2
}

TEST_CASE("encode: saturation boundaries, infinities, NaN and signed zero") {
  // E4M3: 448 is the largest finite value; 464 is the midpoint to the (NaN) code above, 480 the
  // next binade step. Saturating casts clamp all of them to 448.
  for (float x : {448.0f, 449.0f, 463.99f, 464.0f, 464.01f, 480.0f, 1e30f, INFINITY}) {
    INFO("x = " << x);
    CHECK(fp8a::encode_e4m3(x) == 0x7E);
    CHECK(fp8a::encode_e4m3(-x) == 0xFE);
  }
  CHECK(fp8a::encode_e4m3(447.0f) == 0x7E);    // between 416 and 448, nearer 448
  CHECK(fp8a::encode_e4m3(431.99f) == 0x7D);   // just below the 416/448 midpoint
  for (float x : {57344.0f, 61439.0f, 61440.0f, 65536.0f, 3e38f, INFINITY}) {
    INFO("x = " << x);
    CHECK(fp8a::encode_e5m2(x) == 0x7B);
    CHECK(fp8a::encode_e5m2(-x) == 0xFB);
  }
  CHECK(fp8a::encode_e4m3(NAN) == 0x7F);
  CHECK(fp8a::encode_e5m2(NAN) == 0x7F);
  CHECK(fp8a::encode_e4m3(-NAN) == 0x7F);  // CUDA canonicalises float NaN to the positive code
  CHECK(fp8a::encode_e4m3(0.0f) == 0x00);
  CHECK(fp8a::encode_e4m3(-0.0f) == 0x80);
  CHECK(fp8a::encode_e5m2(-0.0f) == 0x80);
  CHECK(fp8a::fp8_is_zero(0x00));
  CHECK(fp8a::fp8_is_zero(0x80));
  CHECK_FALSE(fp8a::fp8_is_zero(0x01));
}

TEST_CASE("encode: float subnormals and tiny values") {
  for (const auto* s : {&kE4M3, &kE5M2}) {
    for (std::uint32_t u : {0x00000001u, 0x00000100u, 0x007FFFFFu, 0x00800000u, 0x30000000u,
                            0x35800000u, 0x36000000u, 0x3A800000u, 0x3A800001u}) {
      check_encode(*s, from_bits(u));
      check_encode(*s, from_bits(u | 0x80000000u));
    }
  }
}

TEST_CASE("encode: random float bit patterns and random in-range values") {
  std::mt19937_64 rng(20261130);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (const auto* s : {&kE4M3, &kE5M2}) {
    int mismatches = 0;
    for (int i = 0; i < kRandomBitPatterns; ++i) {
      const float x = from_bits(bits(rng));
      mismatches += fp8a::ref::encode_ref(*s, x) != encode(*s, x);
    }
    CHECK(mismatches == 0);
    // Log-uniform magnitudes over the format's range and a little beyond.
    const double lo = s->e4m3 ? -12 : -19, hi = s->e4m3 ? 10 : 17;
    std::uniform_real_distribution<double> expo(lo, hi);
    mismatches = 0;
    for (int i = 0; i < kRandomInRange; ++i) {
      const auto x = static_cast<float>(std::exp2(expo(rng)) * ((i & 1) ? -1 : 1));
      mismatches += fp8a::ref::encode_ref(*s, x) != encode(*s, x);
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("bf16 and fp16 decoding, all 65536 codes") {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float bf = fp8a::bf16_to_float(static_cast<std::uint16_t>(h));
    std::uint32_t u;
    std::memcpy(&u, &bf, 4);
    REQUIRE(u == (h << 16));

    // IEEE binary16 by definition.
    const unsigned e = (h >> 10) & 0x1F, m = h & 0x3FF;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    double want;
    if (e == 31) want = m ? NAN : sign * INFINITY;
    else if (e == 0) want = sign * std::ldexp(m, -24);
    else want = sign * std::ldexp(1024.0 + m, static_cast<int>(e) - 25);
    const float got = fp8a::f16_to_float(static_cast<std::uint16_t>(h));
    INFO("f16 code " << h);
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
    } else {
      REQUIRE(static_cast<double>(got) == want);
      REQUIRE(std::signbit(got) == std::signbit(want));
    }
  }
}

TEST_CASE("float to bf16 rounds to nearest even") {
  CHECK(fp8a::float_to_bf16(1.0f) == 0x3F80);
  CHECK(fp8a::float_to_bf16(from_bits(0x3F808000u)) == 0x3F80);  // tie, even stays
  CHECK(fp8a::float_to_bf16(from_bits(0x3F818000u)) == 0x3F82);  // tie, odd rounds up
  CHECK(fp8a::float_to_bf16(from_bits(0x3F808001u)) == 0x3F81);
  CHECK(fp8a::float_to_bf16(from_bits(0x7F7FFFFFu)) == 0x7F80);  // overflows to inf
  CHECK(fp8a::float_to_bf16(NAN) == 0x7FC0);
}

TEST_CASE("round_trip == decode(encode(x)) bit for bit, for every non-NaN x tried") {
  std::mt19937_64 rng(4242);
  std::uniform_int_distribution<std::uint32_t> bits;
  std::vector<float> xs;
  for (const auto* s : {&kE4M3, &kE5M2}) {
    const auto table = fp8a::ref::positive_table(*s);
    for (std::size_t i = 0; i + 1 < table.size(); ++i) {
      const auto mid = static_cast<float>((table[i].first + table[i + 1].first) / 2);
      for (float x : {static_cast<float>(table[i].first), mid, std::nextafter(mid, 0.0f),
                      std::nextafter(mid, INFINITY)}) {
        xs.push_back(x);
        xs.push_back(-x);
      }
    }
  }
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, 448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f,
                  3.4e38f, 1e-45f, -1e-45f})
    xs.push_back(x);
  for (int i = 0; i < kRandomBitPatterns; ++i) xs.push_back(from_bits(bits(rng)));
  int mismatches = 0;
  for (float x : xs) {
    if (std::isnan(x)) {
      mismatches += !std::isnan(fp8a::round_trip_e4m3(x)) + !std::isnan(fp8a::round_trip_e5m2(x));
      continue;
    }
    const float a = fp8a::decode_e4m3(fp8a::encode_e4m3(x)), b = fp8a::round_trip_e4m3(x);
    const float c = fp8a::decode_e5m2(fp8a::encode_e5m2(x)), d = fp8a::round_trip_e5m2(x);
    std::uint32_t ua, ub, uc, ud;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    std::memcpy(&uc, &c, 4);
    std::memcpy(&ud, &d, 4);
    mismatches += (ua != ub) + (uc != ud);
  }
  CHECK(mismatches == 0);
}

// scale_from_amax against values worked out by hand from TE's compute_scale_from_amax.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>

#include "core/scale.hpp"

TEST_CASE("current scaling: fp8_max / amax in fp32") {
  CHECK(fp8a::scale_from_amax(1.0f, 448.0f, false, 0.0f) == 448.0f);
  CHECK(fp8a::scale_from_amax(448.0f, 448.0f, false, 0.0f) == 1.0f);
  CHECK(fp8a::scale_from_amax(3.0f, 448.0f, false, 0.0f) == 448.0f / 3.0f);
  CHECK(fp8a::scale_from_amax(2.0f, 57344.0f, false, 0.0f) == 28672.0f);
}

TEST_CASE("amax 0, inf or NaN gives scale 1") {
  CHECK(fp8a::scale_from_amax(0.0f, 448.0f, false, 0.0f) == 1.0f);
  CHECK(fp8a::scale_from_amax(INFINITY, 448.0f, false, 0.0f) == 1.0f);
  CHECK(fp8a::scale_from_amax(NAN, 448.0f, false, 0.0f) == 1.0f);
  CHECK(fp8a::scale_from_amax(NAN, 448.0f, true, 1.0f) == 1.0f);  // NaN passes the epsilon
}

TEST_CASE("an infinite quotient becomes FLT_MAX") {
  const float tiny = std::ldexp(1.0f, -149);  // smallest float subnormal
  CHECK(fp8a::scale_from_amax(tiny, 448.0f, false, 0.0f) == FLT_MAX);
  // pow2 of FLT_MAX keeps the exponent: 2^127.
  CHECK(fp8a::scale_from_amax(tiny, 448.0f, true, 0.0f) == std::ldexp(1.0f, 127));
}

TEST_CASE("power-of-two scales round down") {
  CHECK(fp8a::scale_from_amax(3.0f, 448.0f, true, 0.0f) == 128.0f);  // 149.33 -> 128
  CHECK(fp8a::scale_from_amax(1.0f, 448.0f, true, 0.0f) == 256.0f);  // 448 -> 256
  CHECK(fp8a::scale_from_amax(448.0f, 448.0f, true, 0.0f) == 1.0f);
  CHECK(fp8a::scale_from_amax(500.0f, 448.0f, true, 0.0f) == 0.5f);  // 0.896 -> 0.5
}

TEST_CASE("epsilon raises a small amax") {
  CHECK(fp8a::scale_from_amax(0.0f, 448.0f, false, 0.5f) == 896.0f);
  CHECK(fp8a::scale_from_amax(0.25f, 448.0f, false, 0.5f) == 896.0f);
  CHECK(fp8a::scale_from_amax(2.0f, 448.0f, false, 0.5f) == 224.0f);
}

TEST_CASE("scale_inv is the correctly rounded reciprocal") {
  CHECK(fp8a::scale_inverse(4.0f) == 0.25f);
  CHECK(fp8a::scale_inverse(448.0f / 3.0f) == static_cast<float>(1.0 / static_cast<double>(448.0f / 3.0f)));
}

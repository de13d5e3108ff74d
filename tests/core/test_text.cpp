// Shapes and quoted names as messages and reports write them (core/text.hpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/text.hpp"

using fp8a::ShapeStyle;

TEST_CASE("shape_text: the three spellings, scalars and 1-D shapes included") {
  const std::vector<std::int64_t> s2{4, 8}, s1{4}, s0{}, s3{2, 0, -1};
  CHECK(fp8a::shape_text(s2) == "[4, 8]");
  CHECK(fp8a::shape_text(s1) == "[4]");
  CHECK(fp8a::shape_text(s0) == "[]");
  CHECK(fp8a::shape_text(s3) == "[2, 0, -1]");
  CHECK(fp8a::shape_text(s2, ShapeStyle::kCrossed) == "[4x8]");
  CHECK(fp8a::shape_text(s1, ShapeStyle::kCrossed) == "[4]");
  CHECK(fp8a::shape_text(s0, ShapeStyle::kCrossed) == "[]");
  CHECK(fp8a::shape_text(s2, ShapeStyle::kTuple) == "(4, 8)");
  CHECK(fp8a::shape_text(s1, ShapeStyle::kTuple) == "(4,)");
  CHECK(fp8a::shape_text(s0, ShapeStyle::kTuple) == "()");
}

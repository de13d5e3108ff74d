#include <doctest/doctest.h>

#include "policies/layer_summary.hpp"
#include "support/rows.hpp"

TEST_CASE("worst metrics per layer and recipe, with where they occurred") {
  auto rows = fp8a::testing::sample_rows();
  const auto s = fp8a::summarize_layers(rows);
  REQUIRE(s.size() == 3);
  CHECK(s[0].layer == "layers.0.fc1");
  CHECK(s[0].recipe == "current");
  CHECK(s[0].evaluations == 4);
  CHECK(s[0].min_sqnr_db.value == 16.75);
  CHECK(s[0].min_sqnr_db.tensor == "gradient");
  CHECK(s[0].min_sqnr_db.step == 20);
  CHECK(s[0].min_cos.value == 0.98);
  CHECK(s[0].max_underflow_pct.value == 12.5);
  CHECK(s[0].max_underflow_pct.step == 10);
  CHECK(s[0].max_overflow_pct.value == 0.0);
  CHECK(s[1].layer == "layers.0.fc1");
  CHECK(s[1].recipe == "current:pow2");
  CHECK(s[1].evaluations == 1);
  CHECK(s[1].max_overflow_pct.value == 3.125);
  CHECK(s[2].layer == "layers.1.fc2");
  CHECK(s[2].max_overflow_pct.value == 6.25);
  CHECK(s[2].max_overflow_pct.tensor == "activation");
}

TEST_CASE("NaN is the worst value; rows a backend could not evaluate are skipped") {
  auto rows = fp8a::testing::sample_rows();
  rows[1].metrics.cos = std::nan("");
  rows[0].applicability = fp8a::Applicability::no("not here");
  rows[0].metrics.sqnr_db = -100;  // would be the worst if it counted
  rows[2].stats.nan_count = 2;
  rows[2].stats.inf_count = 1;
  const auto s = fp8a::summarize_layers(rows);
  CHECK(s[0].evaluations == 3);
  CHECK(std::isnan(s[0].min_cos.value));
  CHECK(s[0].min_cos.tensor == "weight");
  CHECK(s[0].min_sqnr_db.value == 16.75);
  CHECK(s[0].nonfinite_count == 3);
}

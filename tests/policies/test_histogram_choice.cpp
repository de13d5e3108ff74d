// histogram_choices: which step of each operand report.html draws, from a hand-built table.
#include <doctest/doctest.h>

#include "policies/histogram_choice.hpp"
#include "support/rows.hpp"

using namespace fp8a;

TEST_CASE("histogram_choices: the step and candidate leaving the most outside, else the latest step") {
  using testing::make_row;
  std::vector<EvaluationRow> rows{make_row(1, "l", Role::kActivation, "current", 30, 1, 0, 0),
                                  make_row(2, "l", Role::kActivation, "current", 30, 1, 0, 0),
                                  make_row(1, "l", Role::kGradient, "current", 30, 1, 4, 0),
                                  make_row(2, "l", Role::kGradient, "current", 30, 1, 1, 0),
                                  make_row(2, "l", Role::kGradient, "delayed", 30, 1, 1, 0)};
  rows.back().metrics.saturated_pct = 49;
  const auto c = histogram_choices(rows);
  REQUIRE(c.size() == 2);
  CHECK(c[0].key == CaptureKey{2, "l", Role::kActivation});
  CHECK(!c[0].worst);
  CHECK(c[1].key == CaptureKey{2, "l", Role::kGradient});
  REQUIRE(c[1].worst);
  CHECK(c[1].worst->recipe.spec() == "delayed:history=1024:algo=max:margin=0");
  CHECK(c[1].outside_pct == 50);
}


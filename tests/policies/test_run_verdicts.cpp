// The run-level verdicts: the non-finite rule and the summary of nvdlfw_inspect's statistics.
#include <doctest/doctest.h>

#include <cmath>

#include "policies/logged_stats_summary.hpp"
#include "policies/nonfinite.hpp"
#include "support/rows.hpp"

TEST_CASE("non-finite tensors: one warning per tensor by default, the first fails with kFail") {
  auto rows = fp8a::testing::sample_rows();
  // rows 2 and 3 are the same tensor (step 10 fc1 gradient) under two recipes.
  for (int i : {2, 3}) {
    rows[i].stats.nan_count = 2;
    rows[i].stats.inf_count = 1;
  }
  rows[5].stats.inf_count = 4;
  const auto warn = fp8a::judge_nonfinite(rows, fp8a::NonFiniteAction::kWarn);
  CHECK_FALSE(warn.failure.has_value());
  REQUIRE(warn.warnings.size() == 2);
  CHECK(warn.warnings[0] ==
        "caps/step_10.safetensors: tensor 'layers.0.fc1.gradient' holds 2 NaN and 1 Inf elements; "
        "they are counted and left out of the error sums");
  CHECK(warn.warnings[1] ==
        "caps/step_20.safetensors: tensor 'layers.1.fc2.activation' holds 0 NaN and 4 Inf "
        "elements; they are counted and left out of the error sums");
  const auto fail = fp8a::judge_nonfinite(rows, fp8a::NonFiniteAction::kFail);
  CHECK(fail.warnings.empty());
  REQUIRE(fail.failure.has_value());
  CHECK(*fail.failure ==
        "caps/step_10.safetensors: tensor 'layers.0.fc1.gradient' holds 2 NaN and 1 Inf elements "
        "(--fail-on-nonfinite)");
  const auto clean = fp8a::judge_nonfinite(fp8a::testing::sample_rows(), fp8a::NonFiniteAction::kFail);
  CHECK(clean.warnings.empty());
  CHECK_FALSE(clean.failure.has_value());
}

TEST_CASE("logged statistics: counts, names and the largest difference per statistic") {
  using fp8a::LoggedFp8Stat;
  LoggedFp8Stat a{"fc1", fp8a::Role::kActivation, 10, fp8a::LoggedRecipe::kTraining,
                  fp8a::LoggedStatKind::kUnderflowPct, false, 1.5, 0, 3};
  LoggedFp8Stat b = a;
  b.value = 2.0;
  LoggedFp8Stat c = a;
  c.recipe = fp8a::LoggedRecipe::kCurrent;
  c.stat = fp8a::LoggedStatKind::kMse;
  c.columnwise = true;
  CHECK(fp8a::logged_statistic_name(a) == "underflows%");
  CHECK(fp8a::logged_statistic_name(c) == "fp8_current_scaling_mse_columnwise");
  std::vector<fp8a::LoggedComparison> rows(4);
  rows[0] = {&a, "current", fp8a::Orientation::kRowwise, true, 1.25, ""};  // |d| 0.25
  rows[1] = {&b, "current", fp8a::Orientation::kRowwise, true, 2.75, ""};  // |d| 0.75: the max
  rows[2] = {&c, "current", fp8a::Orientation::kColumnwise, true, std::nan(""), ""};
  rows[3] = {&a, "", fp8a::Orientation::kRowwise, false, 0.0, "no capture"};
  const auto s = fp8a::summarize_logged_stats(rows);
  CHECK(s.logged == 4);
  CHECK(s.paired == 3);
  REQUIRE(s.max_abs_difference.size() == 2);
  CHECK(s.max_abs_difference.at("underflows%") == 0.75);
  CHECK(std::isnan(s.max_abs_difference.at("fp8_current_scaling_mse_columnwise")));
}

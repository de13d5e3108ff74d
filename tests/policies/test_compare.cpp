// compare's matching and divergence score (policies/compare.hpp) on hand-built rows: NVIDIA's
// published example ranks first, steps pair with the nearest step, non-finite values.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "policies/compare.hpp"

namespace {

using fp8a::MetricsRecord;
using fp8a::Role;

// The terms are a few float64 operations on the values given: 1e-12 relative.
constexpr double kTol = 1e-12;

MetricsRecord row(std::int64_t step, const char* layer, Role role, double underflow, double mse,
                  double rel_mse, double saturated = 0) {
  MetricsRecord r;
  r.key = {step, layer, role};
  r.recipe = "current";
  r.format = "hybrid";
  r.orientation = "rowwise";
  r.mse = mse;
  r.rel_mse = rel_mse;
  r.sqnr_db = -10 * std::log10(rel_mse);
  r.underflow_pct = underflow;
  r.saturated_pct = saturated;
  return r;
}

}  // namespace

TEST_CASE("compare: NVIDIA's FC2-input example ranks first, driven by underflow") {
  // Good run: 1 % underflow, MSE 1e-2; bad run: 80 %, MSE 1e3 (the tensor 1e5 larger in energy,
  // so rel_mse moves one decade). Beside it: a weight whose SQNR drops 20 dB, and a gradient that
  // saturates 30 % more.
  const std::vector<MetricsRecord> good = {
      row(100, "layers.3.mlp.linear_fc2", Role::kActivation, 1, 1e-2, 1e-3),
      row(100, "layers.3.mlp.linear_fc2", Role::kWeight, 0, 1e-6, 1e-4),
      row(100, "layers.3.mlp.linear_fc2", Role::kGradient, 0, 1e-9, 1e-3, 0)};
  const std::vector<MetricsRecord> bad = {
      row(100, "layers.3.mlp.linear_fc2", Role::kActivation, 80, 1e3, 1e-2),
      row(100, "layers.3.mlp.linear_fc2", Role::kWeight, 0, 1e-4, 1e-2),
      row(100, "layers.3.mlp.linear_fc2", Role::kGradient, 0, 1e-9, 1e-3, 30)};
  const auto res = fp8a::compare_records(good, bad);
  REQUIRE(res.matches.size() == 3);
  const auto& top = res.matches[0];
  CHECK(top.rank == 1);
  CHECK(top.base.key.role == Role::kActivation);
  CHECK(top.score == doctest::Approx(7.9).epsilon(kTol));
  CHECK(std::string(fp8a::kDivergenceTermNames[top.driver]) == "underflow_pct");
  CHECK(top.terms.rel_mse == doctest::Approx(1.0).epsilon(kTol));
  CHECK(top.step_note == "same step");
  CHECK(res.matches[1].base.key.role == Role::kGradient);
  CHECK(res.matches[1].score == doctest::Approx(3.0).epsilon(kTol));
  CHECK(res.matches[2].base.key.role == Role::kWeight);
  CHECK(res.matches[2].score == doctest::Approx(2.0).epsilon(kTol));  // 20 dB
  CHECK(res.same_step_matches == 3);
  for (const auto& m : res.matches) CHECK(m.worse);
  // Swapped sides: the same scores, bit for bit, each one better now.
  const auto back = fp8a::compare_records(bad, good);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(back.matches[i].score == res.matches[i].score);
    CHECK_FALSE(back.matches[i].worse);
  }
}

TEST_CASE("compare: what got worse ranks before larger improvements (the newcomer trial's outlier run)") {
  // The trial: block:fp32's SQNR on the outlier layer rose 31.75 -> 71.19 dB (score 3.9, better),
  // while current scaling's FC2 input underflow rose 0.002 -> 7.1 % (score 0.71, worse): the
  // regression comes first. Its amax grew 2^10 (the outlier channel).
  std::vector<MetricsRecord> base = {row(100, "h.2.mlp.c_fc", Role::kActivation, 0, 1e-4, std::pow(10, -3.175)),
                                     row(100, "h.2.mlp.c_proj", Role::kActivation, 0.002, 1e-4, 1e-3)};
  std::vector<MetricsRecord> cand = {row(100, "h.2.mlp.c_fc", Role::kActivation, 0, 1e-4, std::pow(10, -7.119)),
                                     row(100, "h.2.mlp.c_proj", Role::kActivation, 7.1, 1e-3, 1e-3)};
  base[0].recipe = cand[0].recipe = "block:fp32";
  base[1].amax = 4.0;
  cand[1].amax = 4096.0;
  const auto res = fp8a::compare_records(base, cand);
  REQUIRE(res.matches.size() == 2);
  CHECK(res.matches[0].base.key.layer == "h.2.mlp.c_proj");
  CHECK(res.matches[0].worse);
  CHECK(res.matches[0].score == doctest::Approx(0.7098).epsilon(kTol));
  CHECK(res.matches[0].amax_log2 == 10.0);
  CHECK(res.matches[1].base.key.layer == "h.2.mlp.c_fc");
  CHECK_FALSE(res.matches[1].worse);
  CHECK(res.matches[1].score == doctest::Approx(3.944).epsilon(kTol));
  CHECK(std::isnan(res.matches[1].amax_log2));  // amax 0 on both sides: no growth to state
  // Unchanged: a score of 0 is not worse.
  CHECK_FALSE(fp8a::compare_records(base, base).matches[0].worse);
}

TEST_CASE("compare: delayed scaling under options each run's search chose is matched by kind") {
  std::vector<MetricsRecord> base = {row(100, "l", Role::kActivation, 0, 1e-4, 1e-3),
                                     row(100, "l", Role::kGradient, 1, 1e-4, 1e-3)};
  std::vector<MetricsRecord> cand = {row(100, "l", Role::kActivation, 0, 1e-4, 1e-3),
                                     row(100, "l", Role::kGradient, 40, 1e-4, 1e-3)};
  base[0].recipe = base[1].recipe = "delayed:history=32:algo=max:margin=0";
  cand[0].recipe = cand[1].recipe = "delayed:history=8:algo=max:margin=0";
  const auto res = fp8a::compare_records(base, cand);
  REQUIRE(res.matches.size() == 2);
  CHECK(res.base_only.empty());
  CHECK(res.cand_only.empty());
  CHECK(res.base_unmatched_rows == 0);
  CHECK(res.cand_unmatched_rows == 0);
  const auto& top = res.matches[0];
  CHECK(top.base.key.role == Role::kGradient);
  CHECK(top.worse);
  CHECK(top.score == doctest::Approx(3.9).epsilon(kTol));
  CHECK(top.base.recipe == "delayed:history=32:algo=max:margin=0");
  CHECK(top.cand.recipe == "delayed:history=8:algo=max:margin=0");
  CHECK(top.step_note == "same step; delayed options differ");
  // Another kind is never matched across recipes.
  cand[0].recipe = cand[1].recipe = "current";
  const auto other = fp8a::compare_records(base, cand);
  CHECK(other.matches.empty());
  CHECK(other.base_only.size() == 2);
  CHECK(other.cand_only.size() == 2);
}

TEST_CASE("compare: each step pairs with the same step, else the nearest; groups of one side") {
  const char* l = "layers.0.fc1";
  const std::vector<MetricsRecord> base = {row(100, l, Role::kActivation, 0, 1, 1e-3),
                                           row(200, l, Role::kActivation, 0, 1, 1e-3),
                                           row(300, l, Role::kActivation, 0, 1, 1e-3),
                                           row(1, "only.base", Role::kWeight, 0, 1, 1e-3)};
  const std::vector<MetricsRecord> cand = {row(100, l, Role::kActivation, 10, 1, 1e-3),
                                           row(250, l, Role::kActivation, 20, 1, 1e-3),
                                           row(1, "only.cand", Role::kGradient, 0, 1, 1e-3),
                                           row(2, "only.cand", Role::kGradient, 0, 1, 1e-3)};
  const auto res = fp8a::compare_records(base, cand);
  // 100-100 (same), 200-250 and 300-250 (nearest of cand), 250's nearest base step: 200 (the
  // smaller on a tie), already listed.
  REQUIRE(res.matches.size() == 3);
  CHECK(res.same_step_matches == 1);
  std::vector<std::string> notes;
  for (const auto& m : res.matches) notes.push_back(m.step_note);
  // Ranked: the two nearest pairs (20 pp) before the same-step one (10 pp), in key order.
  CHECK(notes == std::vector<std::string>{"nearest: base 200, cand 250", "nearest: base 300, cand 250",
                                          "same step"});
  CHECK(res.base_unmatched_rows == 1);
  CHECK(res.cand_unmatched_rows == 2);
  REQUIRE(res.base_only.size() == 1);
  CHECK(res.base_only[0].layer == "only.base");
  REQUIRE(res.cand_only.size() == 1);
  CHECK(res.base_steps == std::vector<std::int64_t>{1, 100, 200, 300});
  CHECK(res.cand_steps == std::vector<std::int64_t>{1, 2, 100, 250});
}

TEST_CASE("compare: non-finite and zero values") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto a = row(1, "l", Role::kActivation, 0, 0, 0);
  auto b = a;
  CHECK(fp8a::divergence_score(fp8a::divergence_terms(a, b)) == 0);  // both exact
  b.rel_mse = 1e-6;                                                   // one exact: the floor
  CHECK(fp8a::divergence_terms(a, b).rel_mse == doctest::Approx(24.0).epsilon(kTol));
  a.rel_mse = inf;
  b.rel_mse = inf;
  CHECK(fp8a::divergence_terms(a, b).rel_mse == 0);
  b.rel_mse = 1e-3;
  CHECK(fp8a::divergence_terms(a, b).rel_mse == inf);
  a.underflow_pct = nan;
  b.underflow_pct = nan;
  CHECK(fp8a::divergence_terms(a, b).underflow == 0);
  b.underflow_pct = 1;
  int driver = -1;
  CHECK(fp8a::divergence_score(fp8a::divergence_terms(a, b), &driver) == inf);
  CHECK(driver == 0);  // rel_mse: the first of the equal (inf) terms
}

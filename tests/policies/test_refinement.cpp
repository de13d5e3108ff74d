// Which sampled GEMMs the answer could hang on (policies/refinement.hpp), with a recommender whose
// answer is a simple rule of the rows, so that which estimates lie within two standard errors of
// changing it is worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "policies/refinement.hpp"

namespace {

fp8a::GemmRow row(fp8a::Gemm gemm, double rel, double se) {
  fp8a::GemmRow r;
  r.step = 1;
  r.layer = "l";
  r.gemm = gemm;
  r.recipe = fp8a::parse_recipe("current");
  r.rel_fro_err = rel;
  r.rel_fro_err_se = se;
  r.sampled = !std::isnan(se);
  return r;
}

// Layer "l": a GEMM is FP8 while its rel_fro_err is below `limit`, or, with `total`, every GEMM
// is FP8 while their rel_fro_err add up to less than it.
fp8a::Recommender rule(double limit, bool total) {
  return [=](std::span<const fp8a::GemmRow> rows) {
    fp8a::Recommendation r;
    fp8a::LayerDecision l;
    l.layer = "l";
    double sum = 0;
    for (const auto& g : rows) sum += g.rel_fro_err;
    for (const auto& g : rows) {
      fp8a::GemmDecision& d = l.gemms[static_cast<int>(g.gemm)];
      d.gemm = g.gemm;
      d.judged = true;
      d.precision = (total ? sum < limit : g.rel_fro_err < limit) ? fp8a::Precision::kFp8 : fp8a::Precision::kBf16;
    }
    r.layers.push_back(l);
    return r;
  };
}

std::vector<fp8a::GemmSite> refine(const std::vector<fp8a::GemmRow>& rows, const fp8a::Recommender& rec) {
  return fp8a::gemms_to_refine(rows, rec(rows), rec);
}

}  // namespace

TEST_CASE("gemms_to_refine: the sampled GEMMs within two standard errors of changing the answer") {
  const auto rec = rule(0.05, false);
  // fprop 0.03 +- 0.001 stays below 0.05 either way; dgrad 0.049 + 2 x 0.001 = 0.051 crosses it;
  // wgrad 0.0499 is exact (not sampled): nothing to refine however close.
  const std::vector<fp8a::GemmRow> rows = {row(fp8a::Gemm::kFprop, 0.03, 0.001), row(fp8a::Gemm::kDgrad, 0.049, 0.001),
                                           row(fp8a::Gemm::kWgrad, 0.0499, NAN)};
  const auto sites = refine(rows, rec);
  REQUIRE(sites.size() == 1);
  CHECK(sites[0].gemm == fp8a::Gemm::kDgrad);
  CHECK(sites[0].layer == "l");
  CHECK(sites[0].step == 1);
  // A failing GEMM whose estimate could pass: 0.052 - 2 x 0.002 = 0.048.
  CHECK(refine({row(fp8a::Gemm::kFprop, 0.052, 0.002)}, rec).size() == 1);
  // Far from it both ways: nothing.
  CHECK(refine({row(fp8a::Gemm::kFprop, 0.03, 0.001), row(fp8a::Gemm::kDgrad, 0.07, 0.001)}, rec).empty());
  // An infinite standard error (fewer than two units drawn): always refined.
  CHECK(refine({row(fp8a::Gemm::kFprop, 0.01, INFINITY)}, rec).size() == 1);
}

TEST_CASE("gemms_to_refine: many small moves that change the answer together refine every sampled GEMM") {
  // FP8 while the three errors add up to less than 0.1: 3 x 0.0331 = 0.0993. One moved by 2 x
  // 0.0002 gives 0.0997 (no change), all three 0.1005 (a change): every sampled GEMM.
  const auto rec = rule(0.1, true);
  const std::vector<fp8a::GemmRow> rows = {row(fp8a::Gemm::kFprop, 0.0331, 0.0002),
                                           row(fp8a::Gemm::kDgrad, 0.0331, 0.0002),
                                           row(fp8a::Gemm::kWgrad, 0.0331, 0.0002)};
  CHECK(refine(rows, rec).size() == 3);
  // Moves too small to matter even together.
  const std::vector<fp8a::GemmRow> small = {row(fp8a::Gemm::kFprop, 0.0331, 0.00001),
                                            row(fp8a::Gemm::kDgrad, 0.0331, 0.00001),
                                            row(fp8a::Gemm::kWgrad, 0.0331, 0.00001)};
  CHECK(refine(small, rec).empty());
}

TEST_CASE("shifted: estimates move by two standard errors within their ranges") {
  fp8a::GemmRow r = row(fp8a::Gemm::kWgrad, 0.01, 0.004);
  r.zeroed_pct = 99.0;
  r.zeroed_pct_se = 1.0;
  r.sign_flip_pct = 0.5;
  r.sign_flip_pct_se = 0.5;
  const fp8a::GemmRow worse = fp8a::shifted(r, fp8a::Shift::kWorse), better = fp8a::shifted(r, fp8a::Shift::kBetter);
  CHECK(worse.rel_fro_err == doctest::Approx(0.018));
  CHECK(better.rel_fro_err == doctest::Approx(0.002));
  CHECK(worse.zeroed_pct == 100.0);  // at most every entry
  CHECK(better.zeroed_pct == 97.0);
  CHECK(worse.sign_flip_pct == 1.5);
  CHECK(better.sign_flip_pct == 0.0);
  const fp8a::GemmRow exact = row(fp8a::Gemm::kFprop, 0.01, NAN);
  CHECK(fp8a::shifted(exact, fp8a::Shift::kWorse).rel_fro_err == 0.01);
}

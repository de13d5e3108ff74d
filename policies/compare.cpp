#include "policies/compare.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "datasets/capture.hpp"

namespace fp8a {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Equal values (both inf, both nan) diverge by nothing; one non-finite side by everything.
bool nonfinite_term(double b, double c, double* term) {
  if (std::isfinite(b) && std::isfinite(c)) return false;
  const bool same = (std::isnan(b) && std::isnan(c)) || b == c;
  *term = same ? 0.0 : kInf;
  return true;
}

double log_ratio_term(double b, double c) {
  double t = 0;
  if (nonfinite_term(b, c, &t)) return t;
  // A difference of logs, not the log of a ratio: swapping the sides gives the same bits.
  return std::abs(std::log10(std::max(c, kDivergenceErrorFloor)) -
                  std::log10(std::max(b, kDivergenceErrorFloor)));
}

double pct_term(double b, double c) {
  double t = 0;
  if (nonfinite_term(b, c, &t)) return t;
  return std::abs(c - b) / kDivergencePctPerUnit;
}

// (layer, role, recipe, format, orientation): the key a match shares; layers in natural order.
struct GroupLess {
  bool operator()(const CompareGroup& a, const CompareGroup& b) const {
    if (a.layer != b.layer) return natural_less(a.layer, b.layer);
    return std::tie(a.role, a.recipe, a.format, a.orientation) <
           std::tie(b.role, b.recipe, b.format, b.orientation);
  }
};

CompareGroup group_of(const MetricsRecord& r) {
  return {r.key.layer, r.key.role, r.recipe, r.format, r.orientation};
}

using Groups = std::map<CompareGroup, std::map<std::int64_t, const MetricsRecord*>, GroupLess>;

Groups group_rows(std::span<const MetricsRecord> rows, std::set<std::int64_t>* steps) {
  Groups g;
  for (const auto& r : rows) {
    g[group_of(r)].emplace(r.key.step, &r);
    steps->insert(r.key.step);
  }
  return g;
}

// The step of `steps` nearest to s; the smaller one on a tie.
std::int64_t nearest_step(const std::map<std::int64_t, const MetricsRecord*>& steps, std::int64_t s) {
  auto hi = steps.lower_bound(s);
  if (hi == steps.end()) return std::prev(hi)->first;
  if (hi == steps.begin()) return hi->first;
  const auto lo = std::prev(hi);
  return s - lo->first <= hi->first - s ? lo->first : hi->first;
}

}  // namespace

DivergenceTerms divergence_terms(const MetricsRecord& base, const MetricsRecord& cand) {
  return {log_ratio_term(base.rel_mse, cand.rel_mse),
          pct_term(base.underflow_pct, cand.underflow_pct),
          pct_term(base.saturated_pct, cand.saturated_pct)};
}

double divergence_score(const DivergenceTerms& t, int* driver) {
  const double terms[] = {t.rel_mse, t.underflow, t.saturated};
  int best = 0;
  for (int i = 1; i < 3; ++i)
    if (terms[i] > terms[best]) best = i;
  if (driver != nullptr) *driver = best;
  return terms[best];
}

std::vector<MetricsRecord> metrics_records(std::span<const EvaluationRow> rows) {
  std::vector<MetricsRecord> out;
  for (const auto& r : rows) {
    if (!r.applicability.ok) continue;
    const auto& m = r.metrics;
    out.push_back({r.key, r.recipe.spec(),
                   training_format_name(r.format), orientation_name(r.orientation),
                   static_cast<double>(r.stats.amax), m.mse, m.rel_mse, m.sqnr_db, m.cos,
                   m.underflow_pct, m.overflow_pct, m.saturated_pct});
  }
  return out;
}

CompareResult compare_records(std::span<const MetricsRecord> base, std::span<const MetricsRecord> cand) {
  CompareResult res;
  res.base_rows = base.size();
  res.cand_rows = cand.size();
  std::set<std::int64_t> base_steps, cand_steps;
  const Groups b = group_rows(base, &base_steps);
  const Groups c = group_rows(cand, &cand_steps);
  res.base_steps.assign(base_steps.begin(), base_steps.end());
  res.cand_steps.assign(cand_steps.begin(), cand_steps.end());
  for (const auto& [group, bsteps] : b) {
    const auto it = c.find(group);
    if (it == c.end()) {
      res.base_only.push_back(group);
      res.base_unmatched_rows += bsteps.size();
      continue;
    }
    const auto& csteps = it->second;
    std::set<std::pair<std::int64_t, std::int64_t>> pairs;
    for (const auto& [s, row] : bsteps)
      pairs.emplace(s, csteps.count(s) ? s : nearest_step(csteps, s));
    for (const auto& [s, row] : csteps)
      pairs.emplace(bsteps.count(s) ? s : nearest_step(bsteps, s), s);
    for (const auto& [bs, cs] : pairs) {
      CompareMatch m;
      m.base = *bsteps.at(bs);
      m.cand = *csteps.at(cs);
      m.same_step = bs == cs;
      m.step_note = m.same_step ? "same step"
                                : "nearest: base " + std::to_string(bs) + ", cand " + std::to_string(cs);
      m.terms = divergence_terms(m.base, m.cand);
      m.score = divergence_score(m.terms, &m.driver);
      res.same_step_matches += m.same_step ? 1 : 0;
      res.matches.push_back(std::move(m));
    }
  }
  for (const auto& [group, csteps] : c) {
    if (b.count(group) != 0) continue;
    res.cand_only.push_back(group);
    res.cand_unmatched_rows += csteps.size();
  }
  // Built in key order; the stable sort keeps it among equal scores.
  std::stable_sort(res.matches.begin(), res.matches.end(),
                   [](const CompareMatch& x, const CompareMatch& y) { return x.score > y.score; });
  for (std::size_t i = 0; i < res.matches.size(); ++i) res.matches[i].rank = static_cast<int>(i + 1);
  return res;
}

}  // namespace fp8a

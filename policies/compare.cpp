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

bool is_delayed(const std::string& spec) { return spec.rfind("delayed", 0) == 0; }

// Within one group: each step of either side matched once, with the same step of the other side,
// else its nearest; `note` is appended to each match's step note.
void match_steps(const std::map<std::int64_t, const MetricsRecord*>& bsteps,
                 const std::map<std::int64_t, const MetricsRecord*>& csteps, const std::string& note,
                 CompareResult& res) {
  std::set<std::pair<std::int64_t, std::int64_t>> pairs;
  for (const auto& [s, row] : bsteps) pairs.emplace(s, csteps.count(s) ? s : nearest_step(csteps, s));
  for (const auto& [s, row] : csteps) pairs.emplace(bsteps.count(s) ? s : nearest_step(bsteps, s), s);
  for (const auto& [bs, cs] : pairs) {
    CompareMatch m;
    m.base = *bsteps.at(bs);
    m.cand = *csteps.at(cs);
    m.same_step = bs == cs;
    m.step_note = (m.same_step ? "same step" : "nearest: base " + std::to_string(bs) + ", cand " + std::to_string(cs)) +
                  note;
    m.terms = divergence_terms(m.base, m.cand);
    m.score = divergence_score(m.terms, &m.driver);
    m.worse = m.score > 0 && worse_on(m.base, m.cand, m.driver);
    m.amax_log2 = m.base.amax > 0 && m.cand.amax > 0 && std::isfinite(m.base.amax) && std::isfinite(m.cand.amax)
                      ? std::log2(m.cand.amax / m.base.amax)
                      : std::numeric_limits<double>::quiet_NaN();
    res.same_step_matches += m.same_step ? 1 : 0;
    res.matches.push_back(std::move(m));
  }
}

// Delayed scaling that only one side holds under its options (each run's search picks its own
// history, algo and margin): a base-only delayed group is matched with the cand-only delayed group
// of the same (layer, role, format, orientation), the first of each in key order, and both leave
// the unmatched lists.
void match_delayed_by_kind(const Groups& b, const Groups& c, CompareResult& res) {
  auto same_place = [](const CompareGroup& x, const CompareGroup& y) {
    return x.layer == y.layer && x.role == y.role && x.format == y.format && x.orientation == y.orientation;
  };
  std::vector<bool> cand_used(res.cand_only.size(), false);
  std::vector<CompareGroup> base_left;
  for (const CompareGroup& bg : res.base_only) {
    std::size_t found = res.cand_only.size();
    if (is_delayed(bg.recipe))
      for (std::size_t i = 0; i < res.cand_only.size() && found == res.cand_only.size(); ++i)
        if (!cand_used[i] && is_delayed(res.cand_only[i].recipe) && same_place(bg, res.cand_only[i])) found = i;
    if (found == res.cand_only.size()) {
      base_left.push_back(bg);
      continue;
    }
    cand_used[found] = true;
    const auto& bsteps = b.at(bg);
    const auto& csteps = c.at(res.cand_only[found]);
    res.base_unmatched_rows -= bsteps.size();
    res.cand_unmatched_rows -= csteps.size();
    match_steps(bsteps, csteps, "; delayed options differ", res);
  }
  std::vector<CompareGroup> cand_left;
  for (std::size_t i = 0; i < res.cand_only.size(); ++i)
    if (!cand_used[i]) cand_left.push_back(res.cand_only[i]);
  res.base_only = std::move(base_left);
  res.cand_only = std::move(cand_left);
}

}  // namespace

DivergenceTerms divergence_terms(const MetricsRecord& base, const MetricsRecord& cand) {
  return {log_ratio_term(base.rel_mse, cand.rel_mse),
          pct_term(base.underflow_pct, cand.underflow_pct),
          pct_term(base.saturated_pct, cand.saturated_pct)};
}

bool worse_on(const MetricsRecord& base, const MetricsRecord& cand, int driver) {
  const double b[] = {base.rel_mse, base.underflow_pct, base.saturated_pct};
  const double c[] = {cand.rel_mse, cand.underflow_pct, cand.saturated_pct};
  const double x = b[driver], y = c[driver];
  if (!std::isfinite(x) || !std::isfinite(y)) return std::isfinite(x) && !std::isfinite(y);
  return y > x;
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
    match_steps(bsteps, it->second, "", res);
  }
  for (const auto& [group, csteps] : c) {
    if (b.count(group) != 0) continue;
    res.cand_only.push_back(group);
    res.cand_unmatched_rows += csteps.size();
  }
  match_delayed_by_kind(b, c, res);
  // Built in key order; the stable sort keeps it among equal scores. What got worse first.
  std::stable_sort(res.matches.begin(), res.matches.end(), [](const CompareMatch& x, const CompareMatch& y) {
    if (x.worse != y.worse) return x.worse;
    return x.score > y.score;
  });
  for (std::size_t i = 0; i < res.matches.size(); ++i) res.matches[i].rank = static_cast<int>(i + 1);
  return res;
}

}  // namespace fp8a

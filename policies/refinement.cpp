#include "policies/refinement.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "core/recipe.hpp"

namespace fp8a {

namespace {

bool judged_sample(const GemmRow& r) { return r.sampled && r.engine == "emulated"; }

GemmSite site_of(const GemmRow& r) { return {r.step, r.layer, r.gemm}; }

std::string candidate_of(const GemmRow& r) { return r.recipe.spec() + "/" + training_format_name(r.format); }

// An estimate moved by kRefineSe standard errors (a NaN one, not sampled, unchanged; an infinite
// one to the bound).
double moved(double value, double se, Shift way, double high) {
  if (std::isnan(se)) return value;
  const double v = way == Shift::kWorse ? value + kRefineSe * se : value - kRefineSe * se;
  return std::isnan(v) ? value : std::clamp(v, 0.0, high);
}

}  // namespace

GemmRow shifted(const GemmRow& row, Shift way) {
  GemmRow r = row;
  if (!row.sampled) return r;
  r.rel_fro_err = moved(row.rel_fro_err, row.rel_fro_err_se, way, INFINITY);
  r.zeroed_pct = moved(row.zeroed_pct, row.zeroed_pct_se, way, 100.0);
  r.sign_flip_pct = moved(row.sign_flip_pct, row.sign_flip_pct_se, way, 100.0);
  return r;
}

std::string answer_signature(const Recommendation& r) {
  std::string s = r.chosen ? candidate_name(r.candidates[*r.chosen].candidate) : std::string("(none)");
  for (const LayerDecision& l : r.layers) {
    s += "|" + l.layer + ":";
    for (const GemmDecision& g : l.gemms) s += g.judged ? (g.precision == Precision::kFp8 ? 'f' : 'b') : '-';
  }
  return s;
}

std::vector<GemmSite> gemms_to_refine(std::span<const GemmRow> gemms, const Recommendation& base,
                                      const Recommender& recommend_on) {
  std::set<GemmSite> sampled;
  std::set<std::string> candidates;
  for (const GemmRow& r : gemms)
    if (judged_sample(r)) {
      sampled.insert(site_of(r));
      candidates.insert(candidate_of(r));
    }
  if (sampled.empty()) return {};
  const std::string answer = answer_signature(base);
  // The answer with each sampled row moved by way_of(row) (nullopt: left as it is).
  const auto answer_with = [&](const auto& way_of) {
    std::vector<GemmRow> rows(gemms.begin(), gemms.end());
    for (GemmRow& r : rows)
      if (judged_sample(r))
        if (const std::optional<Shift> way = way_of(r)) r = shifted(r, *way);
    return answer_signature(recommend_on(rows));
  };
  bool changes = false;
  for (const Shift way : {Shift::kWorse, Shift::kBetter})
    changes = changes || answer_with([&](const GemmRow&) { return std::optional<Shift>(way); }) != answer;
  for (auto c = candidates.begin(); !changes && c != candidates.end(); ++c)
    for (const Shift way : {Shift::kWorse, Shift::kBetter}) {
      const Shift other = way == Shift::kWorse ? Shift::kBetter : Shift::kWorse;
      changes = changes || answer_with([&](const GemmRow& r) {
                             return std::optional<Shift>(candidate_of(r) == *c ? way : other);
                           }) != answer;
    }
  if (!changes) return {};
  std::vector<GemmSite> refine;
  for (const GemmSite& s : sampled)
    for (const Shift way : {Shift::kWorse, Shift::kBetter})
      if (answer_with([&](const GemmRow& r) { return site_of(r) == s ? std::optional<Shift>(way) : std::nullopt; }) !=
          answer) {
        refine.push_back(s);
        break;
      }
  if (refine.empty()) refine.assign(sampled.begin(), sampled.end());
  return refine;
}

}  // namespace fp8a

#include "policies/candidate.hpp"

#include <algorithm>
#include <cmath>

namespace fp8a {

namespace {

int kind_rank(RecipeKind kind) {
  int i = 0;
  for (RecipeKind k : kCandidatePreference) {
    if (k == kind) return i;
    ++i;
  }
  return i;
}

}  // namespace

std::string candidate_name(const RunCandidate& c) {
  return c.recipe.spec() + "/" + training_format_name(c.format);
}

std::vector<RunCandidate> index_candidates(const EvaluationIndex& index) {
  std::vector<RunCandidate> out;
  for (const Recipe& r : index.recipes()) {
    if (!is_fp8(r.kind)) continue;
    for (TrainingFormat f : index.formats())
      if (index.has(r, f)) out.push_back({r, f});
  }
  return out;
}

bool risk_tied(double a, double b) {
  return std::fabs(a - b) <= kRiskTieRelative * std::max(std::fabs(a), std::fabs(b));
}

bool preferred_candidate(const RunCandidate& a, std::size_t ia, const RunCandidate& b, std::size_t ib) {
  const int ka = kind_rank(a.recipe.kind), kb = kind_rank(b.recipe.kind);
  if (ka != kb) return ka < kb;
  if (a.format != b.format) return recipe_kind_traits(a.recipe.kind).default_format == a.format;
  return ia < ib;
}

}  // namespace fp8a

// The FP8 candidates of a run and the order that breaks ties between them (advice.hpp's file
// comment says why that order).
#pragma once

#include <string>
#include <vector>

#include "core/recipe.hpp"
#include "engine/evaluation_index.hpp"

namespace fp8a {

// One FP8 candidate for the whole run (TE applies one recipe per autocast region).
struct RunCandidate {
  Recipe recipe;
  TrainingFormat format = TrainingFormat::kHybrid;
  bool operator==(const RunCandidate&) const = default;
};
// "current/hybrid", as the verdicts' reasons name a recipe in a format.
std::string candidate_name(const RunCandidate& c);

// The tie-break order of the recipe kinds, first preferred (see advice.hpp's file comment).
inline constexpr RecipeKind kCandidatePreference[] = {RecipeKind::kPerTensorCurrent, RecipeKind::kBlock,
                                                      RecipeKind::kMx, RecipeKind::kPerTensorDelayed};

// Every non-BF16 recipe of the index in every format the index holds it in, in the index's order
// (recipe, then format). BF16 is never a candidate: it is the fallback.
std::vector<RunCandidate> index_candidates(const EvaluationIndex& index);

// Total risks this close count as a tie, so the preference order decides: a risk is a weighted
// sum of threshold loads over the GEMMs kept in FP8, and a few percent between two recipes that
// keep the same GEMMs is noise (sensitive-ends: 3.588 delayed/e4m3 against 3.616 current/hybrid).
inline constexpr double kRiskTieRelative = 0.10;
// |a - b| <= kRiskTieRelative * max(|a|, |b|).
bool risk_tied(double a, double b);

// The preference order alone: true when candidate a (at input position ia) is preferred to b:
// the earlier kind in kCandidatePreference, then its kind's default_format (core/recipe.hpp), then the earlier position.
bool preferred_candidate(const RunCandidate& a, std::size_t ia, const RunCandidate& b, std::size_t ib);

}  // namespace fp8a

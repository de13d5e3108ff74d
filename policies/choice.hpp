// The choice: the global candidate among the runnable ones, ranked as advice.hpp's file comment
// says (the fastest plan with a cost model; else the most FP8 FLOPs, the lower total risk, the
// preference order), with the runner-up and the sentence saying why.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "policies/fallback_plan.hpp"

namespace fp8a {

// True when candidates[a] ranks before candidates[b]. `costed`: their speedups are set (a cost
// model priced them), and decide first.
bool ranks_before(const std::vector<CandidatePlan>& candidates, std::size_t a, std::size_t b, bool costed);

struct Choice {
  std::optional<std::size_t> chosen;  // into the candidates; unset when none is runnable
  std::optional<std::size_t> next;    // the runner-up, when there is one
  // Every runnable candidate in rank order: chosen, next, then each the best of the rest.
  std::vector<std::size_t> ranking;
};
Choice choose_candidate(const std::vector<CandidatePlan>& candidates, bool costed);

// Recommendation::why: how the choice was made, with numbers and what decided against the
// runner-up; when none is chosen, why not (every candidate's exclusion).
std::string choice_why(const std::vector<CandidatePlan>& candidates, const Choice& choice, bool costed);

}  // namespace fp8a

#include "policies/choice.hpp"

#include "core/text.hpp"

namespace fp8a {

namespace {

// The numerics order: true when candidate a is preferred to b.
bool numerics_better(const CandidatePlan& a, std::size_t ia, const CandidatePlan& b,
                     std::size_t ib) {
  if (a.fp8_flops != b.fp8_flops) return a.fp8_flops > b.fp8_flops;
  if (!risk_tied(a.total_risk, b.total_risk)) return a.total_risk < b.total_risk;
  return preferred_candidate(a.candidate, ia, b.candidate, ib);
}

}  // namespace

bool ranks_before(const std::vector<CandidatePlan>& candidates, std::size_t a, std::size_t b, bool costed) {
  const CandidatePlan& x = candidates[a];
  const CandidatePlan& y = candidates[b];
  if (costed && *x.speedup != *y.speedup) return *x.speedup > *y.speedup;
  // Equally fast (e.g. all BF16 where FP8 pays nowhere): what the numbers allow decides.
  if (costed && x.numerics_fp8_flops != y.numerics_fp8_flops)
    return x.numerics_fp8_flops > y.numerics_fp8_flops;
  return numerics_better(x, a, y, b);
}

Choice choose_candidate(const std::vector<CandidatePlan>& candidates, bool costed) {
  // Selection, one rank at a time: ranks_before tolerates risk ties, so it is not a strict weak
  // order to sort by; each rank is the candidate no other remaining one ranks before, scanned in
  // input order as the first rank always was.
  Choice c;
  std::vector<bool> ranked(candidates.size(), false);
  for (;;) {
    std::optional<std::size_t> best;
    for (std::size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i].runnable && !ranked[i] && (!best || ranks_before(candidates, i, *best, costed))) best = i;
    if (!best) break;
    ranked[*best] = true;
    c.ranking.push_back(*best);
  }
  if (!c.ranking.empty()) c.chosen = c.ranking[0];
  if (c.ranking.size() > 1) c.next = c.ranking[1];
  return c;
}

std::string choice_why(const std::vector<CandidatePlan>& candidates, const Choice& choice, bool costed) {
  if (!choice.chosen) {
    if (candidates.empty()) return "no FP8 candidate was evaluated";
    std::string why = "no FP8 candidate can be chosen:";
    for (const CandidatePlan& c : candidates)
      why += format_text("%s %s: %s", &c == &candidates.front() ? "" : ";",
                         candidate_name(c.candidate).c_str(), c.excluded.c_str());
    return why;
  }
  const CandidatePlan& c = candidates[*choice.chosen];
  std::string why = format_text("%s keeps %.1f %% of the GEMM FLOPs in FP8 with %d GEMMs to BF16",
                                candidate_name(c.candidate).c_str(), 100.0 * c.fp8_flop_share, c.gemms_to_bf16);
  if (c.gemms_not_paying > 0) why += format_text(" and %d where FP8 would not pay", c.gemms_not_paying);
  why += " (" + threshold_load_text(c.total_risk, c.fp8_gemms) + ")";
  if (c.speedup) why += format_text(", predicted GEMM speedup %.3fx", *c.speedup);
  if (choice.next) {
    const CandidatePlan& s = candidates[*choice.next];
    const char* key = costed && *c.speedup != *s.speedup ? "faster"
                      : costed && c.numerics_fp8_flops != s.numerics_fp8_flops
                          ? "as fast, more GEMM FLOPs the numbers allow in FP8"
                      : c.fp8_flops != s.fp8_flops             ? "more FP8 FLOPs"
                      : !risk_tied(c.total_risk, s.total_risk) ? "tied on FLOPs, lower threshold load"
                                                               : "tied, preference order";
    why += format_text("; next %s %.1f %% with %d to BF16", candidate_name(s.candidate).c_str(),
                       100.0 * s.fp8_flop_share, s.gemms_to_bf16);
    if (s.gemms_not_paying > 0) why += format_text(" and %d not paying", s.gemms_not_paying);
    why += " (" + threshold_load_text(s.total_risk, s.fp8_gemms) + ")";
    if (s.speedup) why += format_text(", %.3fx", *s.speedup);
    why += format_text(": %s", key);
  }
  // An evaluation-only candidate (TE cannot train it) that would rank first: say so.
  std::optional<std::size_t> better;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const CandidatePlan& e = candidates[i];
    if (!e.evaluation_only || (costed && (!e.speedup || !c.speedup))) continue;
    if (ranks_before(candidates, i, *choice.chosen, costed) &&
        (!better || ranks_before(candidates, i, *better, costed)))
      better = i;
  }
  if (better) {
    const CandidatePlan& e = candidates[*better];
    why += format_text("; %s would rank first (%.1f %% of the GEMM FLOPs in FP8 with %d to BF16) but is "
                       "evaluation only: %s",
                       candidate_name(e.candidate).c_str(), 100.0 * e.fp8_flop_share, e.gemms_to_bf16,
                       te_cannot_train(e.candidate.recipe).c_str());
  }
  return why;
}

}  // namespace fp8a

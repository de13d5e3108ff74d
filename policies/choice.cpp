#include "policies/choice.hpp"

#include "core/recipe.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

// The BF16 GEMM time a plan's low-precision FLOPs save at the nominal tensor-core rates, in
// BF16-FLOP units: an 8-bit GEMM runs at twice BF16's rate and saves half its time, a 4-bit one
// (NVFP4) at four times and saves three quarters (B200's and GB200's datasheet ratios). Between
// candidates of one width it orders as their FP8 FLOPs do.
double nominal_saving(const CandidatePlan& c, double low_flops) {
  return low_flops * (1.0 - operand_bits(c.candidate.recipe.kind) / 16.0);
}

// The candidate's low-precision GEMMs as the why counts them: "NVFP4 GEMM" at 4 bits, else "FP8 GEMM".
std::string gemm_kind(const CandidatePlan& c) {
  return std::string(low_precision_name(c.candidate.recipe.kind)) + " GEMM";
}

bool same_width(const CandidatePlan& a, const CandidatePlan& b) {
  return operand_bits(a.candidate.recipe.kind) == operand_bits(b.candidate.recipe.kind);
}

// The numerics order: true when candidate a is preferred to b.
bool numerics_better(const CandidatePlan& a, std::size_t ia, const CandidatePlan& b,
                     std::size_t ib) {
  const double sa = nominal_saving(a, a.fp8_flops), sb = nominal_saving(b, b.fp8_flops);
  if (sa != sb) return sa > sb;
  if (!risk_tied(a.total_risk, b.total_risk)) return a.total_risk < b.total_risk;
  return preferred_candidate(a.candidate, ia, b.candidate, ib);
}

}  // namespace

bool ranks_before(const std::vector<CandidatePlan>& candidates, std::size_t a, std::size_t b, bool costed) {
  const CandidatePlan& x = candidates[a];
  const CandidatePlan& y = candidates[b];
  if (costed && *x.speedup != *y.speedup) return *x.speedup > *y.speedup;
  // Equally fast (e.g. all BF16 where FP8 pays nowhere): what the numbers allow decides.
  const double sx = nominal_saving(x, x.numerics_fp8_flops), sy = nominal_saving(y, y.numerics_fp8_flops);
  if (costed && sx != sy) return sx > sy;
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
  std::string why = format_text("%s keeps %.1f %% of the GEMM FLOPs in %s with %d GEMMs to BF16",
                                candidate_name(c.candidate).c_str(), 100.0 * c.fp8_flop_share,
                                low_precision_name(c.candidate.recipe.kind), c.gemms_to_bf16);
  if (c.gemms_not_paying > 0) why += format_text(" and %d where FP8 would not pay", c.gemms_not_paying);
  why += " (" + threshold_load_text(c.total_risk, c.fp8_gemms, gemm_kind(c).c_str()) + ")";
  if (c.speedup) why += format_text(", predicted GEMM speedup %.3fx", *c.speedup);
  if (choice.next) {
    const CandidatePlan& s = candidates[*choice.next];
    // Between widths (NVFP4 and FP8) FLOPs count at their nominal rates.
    const bool mixed = !same_width(c, s);
    const char* key = costed && *c.speedup != *s.speedup ? "faster"
                      : costed && nominal_saving(c, c.numerics_fp8_flops) != nominal_saving(s, s.numerics_fp8_flops)
                          ? (mixed ? "as fast, more BF16 GEMM time the numbers allow saving at nominal rates "
                                     "(4-bit 4x, 8-bit 2x BF16's)"
                                   : "as fast, more GEMM FLOPs the numbers allow in FP8")
                      : nominal_saving(c, c.fp8_flops) != nominal_saving(s, s.fp8_flops)
                          ? (mixed ? "more BF16 GEMM time saved at nominal rates (4-bit 4x, 8-bit 2x BF16's)"
                                   : "more FP8 FLOPs")
                      : !risk_tied(c.total_risk, s.total_risk) ? "tied on FLOPs, lower threshold load"
                                                               : "tied, preference order";
    why += format_text("; next %s %.1f %% with %d to BF16", candidate_name(s.candidate).c_str(),
                       100.0 * s.fp8_flop_share, s.gemms_to_bf16);
    if (s.gemms_not_paying > 0) why += format_text(" and %d not paying", s.gemms_not_paying);
    why += " (" + threshold_load_text(s.total_risk, s.fp8_gemms, gemm_kind(s).c_str()) + ")";
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

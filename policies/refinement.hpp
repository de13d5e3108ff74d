// Decisions that respect the sampling error (issue 54). A sampled GEMM output's estimates —
// rel_fro_err, zeroed_pct and sign_flip_pct — each carry a standard error (METRICS.md). Where
// moving them by kRefineSe standard errors could change the answer (the chosen candidate, or any
// GEMM's precision under it), the answer would hang on which rows and columns happened to be
// drawn: those GEMMs are recomputed exactly (the pipeline's refinement, gemm_error.hpp's
// evaluate_exact_gemms) and the answer is taken on the exact rows. A pure function: it asks a
// recommender for the answers on shifted rows and compares them.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/gemm_row.hpp"
#include "policies/advice.hpp"

namespace fp8a {

// How many standard errors an estimate is moved by: about a 95 % interval's half-width.
inline constexpr double kRefineSe = 2.0;

// Which way the estimates move: toward more error (every criterion is an upper bound, so more
// GEMMs fail and risks grow) or less.
enum class Shift : std::uint8_t { kWorse, kBetter };

// `row` with its sampled estimates moved by kRefineSe standard errors `way` (shares kept in
// [0, 100], errors at or above 0); rows that are not sampled unchanged.
GemmRow shifted(const GemmRow& row, Shift way);

// The answer as the refinement compares it: the chosen candidate and every judged GEMM's
// precision under it.
std::string answer_signature(const Recommendation& r);

// The recommendation on other GEMM rows (the same evaluation rows, layers, policy and GPU).
using Recommender = std::function<Recommendation(std::span<const GemmRow>)>;

// The sampled GEMMs (emulated rows with sampled set) whose sampling error could change the answer
// `base` that recommend_on(gemms) gave, sorted; empty when none could. First the extremes: every
// sampled estimate worse, every one better, and for each candidate (recipe and format) its rows
// worse and the others' better and the reverse. When none changes the answer, nothing is
// refined. Else each GEMM with sampled rows alone, worse and better: those that change the answer
// are refined; if none does alone (many small moves add up), every sampled GEMM is.
std::vector<GemmSite> gemms_to_refine(std::span<const GemmRow> gemms, const Recommendation& base,
                                      const Recommender& recommend_on);

}  // namespace fp8a

// compare: two evaluation tables (a good run and a bad one, or two steps of one run) matched
// tensor by tensor and ranked by how far their metrics diverge.
//
// A match pairs a row of BASE with a row of CAND of the same (layer, role, recipe, format,
// orientation), at the same step, or else at the nearest step the other side has; delayed scaling
// under different options on the two sides (each run's search picks its own) is matched by kind.
// Its divergence score is the largest of three terms (METRICS.md "Divergence score"); the ranking
// puts what got worse first (the term that sets the score grew in CAND), largest score first,
// then what got better. Pure functions: the tables come from engine (a capture evaluated now) or from
// datasets (an earlier run's metrics.csv), and the result is a value that reports/ renders.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "datasets/metrics_table.hpp"
#include "engine/evaluation_row.hpp"

namespace fp8a {

// Floor under rel_mse before its log ratio, so that an exact (zero-error) side gives a large,
// finite term.
inline constexpr double kDivergenceErrorFloor = 1e-30;
// Percentage points of elements that count as one unit of score (underflow, saturation).
inline constexpr double kDivergencePctPerUnit = 10.0;

// The terms of the score, each >= 0 (inf when one side is non-finite and the other is not).
struct DivergenceTerms {
  double rel_mse = 0;    // |log10(cand.rel_mse / base.rel_mse)| = |Δ sqnr_db| / 10, both floored
                         // at kDivergenceErrorFloor
  double underflow = 0;  // |Δ underflow_pct| / kDivergencePctPerUnit
  double saturated = 0;  // |Δ saturated_pct| / kDivergencePctPerUnit
};

// The metric each term stands for, in DivergenceTerms' order, as metrics.csv names it.
inline constexpr const char* kDivergenceTermNames[] = {"rel_mse", "underflow_pct", "saturated_pct"};

DivergenceTerms divergence_terms(const MetricsRecord& base, const MetricsRecord& cand);

// The largest term, and the index into kDivergenceTermNames of the first term that has it.
double divergence_score(const DivergenceTerms& t, int* driver = nullptr);

// Whether cand is worse than base on term `driver`: more error, more underflow, more saturation
// (a non-finite value where the other side is finite counts as worse on that side).
bool worse_on(const MetricsRecord& base, const MetricsRecord& cand, int driver);

struct CompareMatch {
  MetricsRecord base;
  MetricsRecord cand;
  bool same_step = true;
  // "same step", or "nearest: base 100, cand 120" when one side lacks the other's step; a delayed
  // pair matched by kind adds "; delayed options differ".
  std::string step_note;
  DivergenceTerms terms;
  double score = 0;
  int driver = 0;  // index into kDivergenceTermNames
  bool worse = false;  // the driver grew in cand (worse_on); a score of 0 is not worse
  // log2(cand.amax / base.amax): the amax growth in binades (NaN when either is 0 or not finite).
  double amax_log2 = 0;
  int rank = 0;    // 1 = the first: the largest score among the worse ones
};

// A (layer, role, recipe, format, orientation) that only one side holds.
struct CompareGroup {
  std::string layer;
  Role role = Role::kActivation;
  std::string recipe;
  std::string format;
  std::string orientation;
};

struct CompareResult {
  std::vector<CompareMatch> matches;  // ranked: score descending, ties in key order
  std::size_t base_rows = 0;
  std::size_t cand_rows = 0;
  std::size_t same_step_matches = 0;
  // Rows whose group the other side does not hold at any step, and those groups (key order).
  std::size_t base_unmatched_rows = 0;
  std::size_t cand_unmatched_rows = 0;
  std::vector<CompareGroup> base_only;
  std::vector<CompareGroup> cand_only;
  std::vector<std::int64_t> base_steps;  // every step each side holds, ascending
  std::vector<std::int64_t> cand_steps;
};

// The rows of an evaluation table as metrics.csv holds them (evaluated rows only, same order).
std::vector<MetricsRecord> metrics_records(std::span<const EvaluationRow> rows);

// Every match of base and cand, scored and ranked. Within a group each step of either side is
// matched once: with the same step of the other side, else with its nearest step (the smaller one
// on a tie); a pair two steps both reach is listed once.
CompareResult compare_records(std::span<const MetricsRecord> base, std::span<const MetricsRecord> cand);

}  // namespace fp8a

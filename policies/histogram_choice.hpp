// Which step of each captured operand report.html draws as a log2|x| histogram, and the candidate
// drawn there beside the chosen one. Chosen from the evaluation table, so that the histogram pass
// over the tensors (engine/operand_pass.hpp, from pipeline/run_pipeline.cpp) reads only the steps shown.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "engine/evaluation_row.hpp"
#include "engine/histogram.hpp"
#include "policies/candidate.hpp"

namespace fp8a {

// The step and FP8 candidate (rowwise copy) that leave the most elements outside the candidate's
// window (underflow % + saturated %; the first in table order on a tie); the latest captured step,
// with no such candidate, when no candidate leaves any element outside.
struct HistogramChoice {
  CaptureKey key;
  std::optional<RunCandidate> worst;
  double outside_pct = 0;  // worst's underflow % + saturated % at key.step
};
// One per (layer, role) of `rows`, in the rows' order of first appearance.
std::vector<HistogramChoice> histogram_choices(std::span<const EvaluationRow> rows);

// The log2|x| histogram of one captured operand (all its rank shards together) at the step its
// choice names.
struct OperandHistogram {
  HistogramChoice choice;
  Log2Histogram histogram;
};

}  // namespace fp8a

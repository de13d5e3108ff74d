// The rule for tensors that hold NaN or Inf: by default a warning per tensor (its non-finite
// elements are counted and left out of the error sums, METRICS.md); with --fail-on-nonfinite the
// first such tensor fails the run as bad input (fp8a.capture.406).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/evaluation_row.hpp"

namespace fp8a {

enum class NonFiniteAction { kWarn, kFail };

struct NonFiniteVerdict {
  std::vector<std::string> warnings;  // kWarn: one line per tensor, in table order
  std::optional<std::string> failure;  // kFail: the message of the first such tensor
};

// rows: the evaluation table; each tensor (step, layer, role) is judged once, at its first row.
NonFiniteVerdict judge_nonfinite(std::span<const EvaluationRow> rows, NonFiniteAction action);

}  // namespace fp8a

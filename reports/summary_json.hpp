// summary.json: run information (provenance, inputs, recipes, timings) and per-layer worst metrics.
#pragma once

#include <span>
#include <string>

#include "policies/layer_summary.hpp"
#include "reports/answer_text.hpp"
#include "reports/artifact.hpp"
#include "reports/run_info.hpp"

namespace fp8a {

// info.outputs must already list every file of the run, summary.json included. `decision` (the
// advice, or why there is none) becomes the "decision" object; null: no such key.
Artifact render_summary_json(const RunInfo& info, std::span<const EvaluationRow> rows,
                             std::span<const LayerSummary> layers,
                             const AnswerContext* decision = nullptr);

}  // namespace fp8a

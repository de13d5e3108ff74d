// report.md: the run's summary and per-layer decisions as Markdown, for a pull request or an
// issue. Layout only: the recipe, reasons and numbers come from the Recommendation (through the
// answer's context), the per-layer worst metrics from the LayerSummary rows the console table
// shows.
#pragma once

#include <span>
#include <string>

#include "policies/layer_summary.hpp"
#include "reports/answer_text.hpp"
#include "reports/artifact.hpp"
#include "reports/run_info.hpp"

namespace fp8a {

// One Markdown table cell: reports/name_text.hpp markdown_text ('|' escaped as "\|", a newline
// (\n, \r\n or \r) as "<br>", markup characters and control bytes escaped), so any text stays
// inside its cell and shows as it is.
std::string markdown_cell(std::string_view text);

// Sections, in order: the recommendation (TE recipe, why, BF16 fallbacks, cost or "cost: none",
// the per-module plan, advisories, limits, the GPU's exclusions), the run (counts of layers,
// tensors and steps in `rows`, inputs, backend, warnings), the per-layer decisions (layer |
// precision | fp8_safe | fprop | dgrad | wgrad | reasons) and the per-layer worst metrics.
// answer.recommendation null: the recommendation section says answer.skipped.why.
Artifact render_report_md(const RunInfo& info, std::span<const EvaluationRow> rows,
                          std::span<const LayerSummary> layers, const AnswerContext& answer);

}  // namespace fp8a

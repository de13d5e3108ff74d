// report.html: the run for a person to read, one self-contained page (inline CSS and SVG; no
// script, font, image or link to anything outside the file; printable). Sections, in order:
//   Summary    the recommended TE recipe and format, why, the BF16 fallbacks with their reasons,
//              the predicted GEMM speedup and FP8 FLOP share, counts, inputs, backend, warnings
//              and what the advice could not judge, then the answer as `run` printed it
//   Heatmaps   layer x candidate (recipe/format) per role and copy for SQNR, underflow % and
//              saturated % (worst over the captured steps), layers in model order, the chosen
//              candidate's cell outlined; the row labels link to the layer's card
//   Layers     a card per layer: its decision per GEMM with the reasons, each operand's metrics
//              under every recipe (table), the GEMM-output error per GEMM, and the amax trace over
//              the training log's steps per operand with the threshold each delayed recipe's
//              history implies and the advice's forecast, and the log2|x| histogram per operand
//              with the chosen candidate's representable window over it
// Layout only: every decision and reason comes from the Recommendation (policies/advice.hpp).
// Charts come from reports/svg_plot.hpp; the page is well-formed XML as well as HTML5.
#pragma once

#include <optional>
#include <span>

#include "engine/gemm_error.hpp"
#include "engine/histogram.hpp"
#include "engine/logged_rows.hpp"
#include "engine/run.hpp"
#include "policies/advice.hpp"
#include "policies/amax_trend.hpp"
#include "policies/histogram_choice.hpp"
#include "policies/layer_summary.hpp"
#include "reports/answer_text.hpp"
#include "reports/artifact.hpp"
#include "reports/run_info.hpp"

namespace fp8a {

// What command_run has once the run is decided. Pointers are not owned; spans outlive the call.
struct ReportInputs {
  const RunInfo* info = nullptr;                  // never null
  std::span<const EvaluationRow> rows;            // evaluate_captures
  std::span<const GemmRow> gemms;                 // evaluate_gemm_errors (empty with --no-gemms)
  std::span<const LayerSummary> layers;           // summarize_layers
  const Recommendation* recommendation = nullptr; // null: none (answer->skipped says why)
  const AnswerContext* answer = nullptr;          // the answer `run` prints; may be null
  // forecast_delayed_scaling over the training log (empty without one): drawn on the amax traces
  std::span<const DelayedForecast> forecasts = {};
  // histogram_choices' operands (any subset; a missing one is not drawn)
  std::span<const OperandHistogram> histograms = {};
  const TrainingLog* training_log = nullptr;  // the amax traces (--training-log); null: none
  // The logged statistics over every logged step (engine/logged_rows.hpp), drawn per operand.
  std::span<const LoggedSeries> logged_series = {};
};

// Bounds that keep the page a few MB for a 100-layer model; what they leave out the page says.
inline constexpr std::size_t kReportMaxHeatmapRows = 200;        // layers per heatmap
inline constexpr std::size_t kReportCardBytes = 2'500'000;       // all layer cards together
inline constexpr std::size_t kReportMaxInputsListed = 40;        // capture files named

// The page, as Artifact "report.html" (note: its size).
Artifact render_report_html(const ReportInputs& in);

}  // namespace fp8a

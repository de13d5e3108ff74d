// metrics.csv: one row per evaluation (tensor x recipe). Columns are listed in kMetricsCsvColumns;
// the first fourteen are a stable contract, later ones may be appended.
#pragma once

#include <span>
#include <string>

#include "engine/evaluation_row.hpp"
#include "reports/artifact.hpp"

namespace fp8a {

inline constexpr const char* kMetricsCsvColumns[] = {
    "step",          "layer",           "tensor",          "recipe",
    "format",        "dtype",           "scale",           "amax",
    "mse",           "rel_mse",         "sqnr_db",         "cos",
    "underflow_pct", "overflow_pct",    "orientation",     "delayed_vs_current_log2",
    "saturated_pct", "saturated_count", "scale_inv",     "scale_inv_min",   "scale_inv_max",
    "amin",          "dynamic_range_log2", "numel",        "underflow_count",
    "overflow_count", "nan_count",      "inf_count",       "input_dtype",
    "shape",         "ranks",           "replay",          "file",
    "underflow_energy_pct",
};

// The whole file (header line included). Rows that a backend could not evaluate are skipped here
// and listed in summary.json. Note: the number of rows written.
Artifact render_metrics_csv(std::span<const EvaluationRow> rows);

}  // namespace fp8a

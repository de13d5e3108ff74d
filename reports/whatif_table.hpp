// What `whatif` prints: one layer's metrics under every evaluated candidate, in aligned columns,
// the same numbers as metrics.csv and gemms.csv (rounded to the digits below) without a full run.
// Layout only.
#pragma once

#include <span>
#include <string>

#include "engine/gemm_row.hpp"
#include "engine/evaluation_row.hpp"

namespace fp8a {

// Digits of the columns: the numbers of metrics.csv (sqnr_db, rel_mse, underflow_pct,
// saturated_pct, cos) and gemms.csv (rel_fro_err, cos, zeroed_pct, sign_flip_pct) rounded as
// printf "%.2f" (SQNR), "%.3f" (percentages), "%.6f" (cos) and "%.3e" (rel_mse, rel_fro_err);
// "inf", "-inf", "nan" for the non-finite ones.
inline constexpr int kWhatifSqnrDecimals = 2;
inline constexpr int kWhatifPctDecimals = 3;
inline constexpr int kWhatifCosDecimals = 6;
inline constexpr int kWhatifRelErrDigits = 3;

// One layer: a title line, the tensor table (one line per (step, tensor, orientation) x
// (recipe, format): dtype, SQNR dB, rel_mse, underflow %, saturated %, cos, delayed replay), the
// evaluations that were not applicable with their reasons, and the GEMM table (one line per
// (step, GEMM) x (recipe, format): rel_fro_err, cos, zeroed %, sign flip %) or why there is none.
// `rows` and `gemms`: the layer's (others are ignored). highlight: the worst value of each metric
// column (the lowest SQNR and cos, the highest of the others; only where the column's values
// differ) between ANSI bold/reverse codes, for a terminal.
std::string render_whatif_table(const std::string& layer, std::span<const EvaluationRow> rows,
                                std::span<const GemmRow> gemms, bool highlight);

}  // namespace fp8a

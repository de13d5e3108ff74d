// gemms.csv: one row per (step, layer, GEMM, recipe, engine): the error of the GEMM output when its
// operands are quantised by the recipe. Engine "emulated": the dequantised operands multiplied
// with float32 accumulation against a float64 reference (the quantisation error); a real engine
// ("cublaslt"): its low-precision GEMM against its own reference GEMM (quantisation and
// accumulation error), with the dims it ran (padded) and a note saying what ran.
#pragma once

#include <span>
#include <string>

#include "engine/gemm_row.hpp"
#include "reports/artifact.hpp"

namespace fp8a {

// The first thirteen columns are those of earlier versions, in the same order; later ones are
// added at the end.
inline constexpr const char* kGemmsCsvColumns[] = {
    "step", "layer", "gemm", "recipe", "format", "rel_fro_err", "cos", "m", "n", "k",
    "rows_used", "sampled", "engine", "accumulation", "padded_m", "padded_n", "padded_k", "note",
    "zeroed_pct", "sign_flip_pct", "median_rel_err", "noise_sign_flip_pct", "rel_fro_err_se", "cols_used",
    "zeroed_pct_se", "sign_flip_pct_se",
};

// Note: the number of rows.
Artifact render_gemms_csv(std::span<const GemmRow> rows);

}  // namespace fp8a

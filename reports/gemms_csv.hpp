// gemms.csv: one row per (step, layer, GEMM, recipe): the error of the GEMM output when its
// operands are quantised by the recipe.
#pragma once

#include <span>
#include <string>

#include "engine/gemm_error.hpp"

namespace fp8a {

inline constexpr const char* kGemmsCsvColumns[] = {
    "step", "layer", "gemm", "recipe", "format", "rel_fro_err", "cos",
    "m",    "n",     "k",    "rows_used", "sampled", "engine",
};

std::string render_gemms_csv(std::span<const GemmRow> rows);

}  // namespace fp8a

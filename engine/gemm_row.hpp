// The GEMM-error table's row type (evaluate_gemm_errors' result: engine/gemm_error.hpp), in a
// header of its own so that the unit codec and what only reads rows need not include the GEMM
// error computation.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <string>

#include "core/recipe.hpp"
#include "engine/gemm_engine.hpp"

namespace fp8a {

// One GEMM of a layer at a step (its rows under every recipe and format): what a refinement
// recomputes exactly.
struct GemmSite {
  std::int64_t step = 0;
  std::string layer;
  Gemm gemm = Gemm::kFprop;
  auto operator<=>(const GemmSite&) const = default;
  bool operator==(const GemmSite&) const = default;
};

struct GemmRow {
  std::int64_t step = 0;
  std::string layer;
  Gemm gemm = Gemm::kFprop;
  Recipe recipe;
  TrainingFormat format = TrainingFormat::kHybrid;
  std::int64_t m = 0, n = 0, k = 0;  // output [m, n], reduction k
  std::int64_t rows_used = 0;        // output rows used (all m unless sampled): tokens, or dW rows
  std::int64_t cols_used = 0;        // output columns used (all n unless sampled)
  bool sampled = false;              // rows or columns a sample
  double rel_fro_err = 0.0;          // ||Y_q - Y||_F / ||Y||_F
  // Sampled rows: the standard error of rel_fro_err as an estimate of the whole output's, from
  // the sampled output rows and columns (METRICS.md rel_fro_err_se). NaN when not sampled
  // (gemms.csv leaves the field empty).
  double rel_fro_err_se = std::numeric_limits<double>::quiet_NaN();
  // Sampled outputs: the standard errors of zeroed_pct and sign_flip_pct (percentage points) as
  // estimates of the whole output's (METRICS.md). NaN when not sampled.
  double zeroed_pct_se = std::numeric_limits<double>::quiet_NaN();
  double sign_flip_pct_se = std::numeric_limits<double>::quiet_NaN();
  double cos = 0.0;                  // cosine similarity of Y_q and Y
  // Which GEMM: "emulated" (dequantised operands, float32 accumulation, float64 reference) or a
  // GemmEngine's name ("cublaslt": the real low-precision GEMM against its own reference).
  std::string engine = "emulated";
  std::string accumulation = "fp32";  // engine rows: "fast", "split" or "fp32" (GemmRun)
  std::int64_t m_padded = 0, n_padded = 0, k_padded = 0;  // engine rows: the dims it ran; else 0
  std::string note;  // engine rows: what ran; emulated rows: why the engine did not run, if it didn't
  // Per-entry damage of the output against the same reference (METRICS.md, gemms.csv), over all
  // the output's entries (of every rank's part):
  double zeroed_pct = 0.0;      // 100 * #(ref != 0, got == 0) / entries
  double sign_flip_pct = 0.0;   // 100 * #(ref, got != 0 of opposite signs) / entries
  double median_rel_err = 0.0;  // median of |got - ref| / |ref| over ref != 0 (0 if none)
  // wgrad rows: the sign flips independent rounding noise of the measured size would make
  // (METRICS.md): 100 * sum over ref != 0 of erfc(|ref| / sqrt(2 c S)) / 2 / entries, S the
  // output of the squared operands, c = ||got - ref||^2 / sum S. What sign_flip_pct is judged
  // against. NaN for fprop and dgrad rows (not computed: gemms.csv leaves the field empty).
  double noise_sign_flip_pct = 0.0;
};

}  // namespace fp8a

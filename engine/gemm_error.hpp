// GEMM-output error: for a layer with all three operands captured at a step, the three GEMMs of
// a linear layer computed from the recipe's fake-quantised operands against the unquantised ones
// (NVIDIA's "FP8 inputs with a high-precision GEMM" diagnostic):
//   fprop  Y  = X W^T    X rowwise,     W rowwise
//   dgrad  dX = dY W     dY rowwise,    W columnwise
//   wgrad  dW = dY^T X   dY columnwise, X columnwise
// with X [M, K] (activation), W [N, K] (weight), dY [M, N] (gradient). The reference accumulates in
// float64; the quantised GEMM multiplies the dequantised operands with float32 accumulation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "engine/run.hpp"

namespace fp8a {

enum class Gemm : std::uint8_t { kFprop, kDgrad, kWgrad };
inline const char* gemm_name(Gemm g) {
  return g == Gemm::kFprop ? "fprop" : g == Gemm::kDgrad ? "dgrad" : "wgrad";
}

struct GemmRow {
  std::int64_t step = 0;
  std::string layer;
  Gemm gemm = Gemm::kFprop;
  Recipe recipe;
  TrainingFormat format = TrainingFormat::kHybrid;
  std::int64_t m = 0, n = 0, k = 0;  // output [m, n], reduction k
  std::int64_t rows_used = 0;        // token rows used (all M unless sampled)
  bool sampled = false;
  double rel_fro_err = 0.0;          // ||Y_q - Y||_F / ||Y||_F
  double cos = 0.0;                  // cosine similarity of Y_q and Y
};

struct GemmOptions {
  std::int64_t sample_rows = 0;  // 0: all token rows; else this many, evenly spaced
};

// Layers whose operands do not fit together (X [M,K], W [N,K], dY [M,N]) are skipped and named in
// `skipped`. Evaluations that were not applicable (delayed without history) are skipped too.
std::vector<GemmRow> evaluate_gemm_errors(const CaptureSet& captures,
                                          std::span<const EvaluationRow> rows,
                                          const GemmOptions& options,
                                          std::vector<std::string>* skipped);

}  // namespace fp8a

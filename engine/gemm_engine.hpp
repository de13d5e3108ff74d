// A real low-precision GEMM engine (cuBLASLt on a GPU, cuda/cublaslt_gemm.hpp) beside the emulated
// GEMM of gemm_error.hpp. The engine stage knows only this interface; cli/backend_registry.cpp
// creates the implementation, so engine/ never includes cuda/.
//
// The engine gets each GEMM in one canonical form, both operands K-major ("TN", what FP8 tensor
// cores on Hopper require):
//     D [m, n] = a [m, k] * b [n, k]^T,   D[i][j] = sum_l a[i][l] * b[j][l]
// evaluate_gemm_errors lays the three GEMMs of a linear layer out that way:
//     fprop  Y  = X W^T    a = X    [M, K]   b = W    [N, K]
//     dgrad  dX = dY W     a = dY   [M, N]   b = W^T  [K, N]   (W's columnwise copy)
//     wgrad  dW = dY^T X   a = dY^T [N, M]   b = X^T  [K, M]   (the columnwise copies)
// and gives, per operand, the unquantised values and the cast the emulated path applied to them
// (the recipe's QuantSpec, its block shape stated in this K-major layout). The engine quantises
// with exactly that cast, runs its own low-precision GEMM and its own reference GEMM, and returns
// both outputs; the caller computes the error metrics (in float64) as for the emulated rows.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/fake_quant.hpp"

namespace fp8a {

enum class Gemm : std::uint8_t { kFprop, kDgrad, kWgrad };
inline const char* gemm_name(Gemm g) {
  return g == Gemm::kFprop ? "fprop" : g == Gemm::kDgrad ? "dgrad" : "wgrad";
}

// One K-major operand: element (r, l) is values[r * k + l].
struct GemmOperand {
  std::span<const float> values;  // [rows, k], finite (the caller sets NaN/Inf to 0)
  std::int64_t rows = 0;
  QuantSpec spec;                 // the recipe's cast; spec.block in this K-major layout
};

struct GemmProblem {
  Gemm gemm = Gemm::kFprop;
  std::int64_t m = 0, n = 0, k = 0;  // D [m, n], reduction length k
  GemmOperand a;                     // [m, k]
  GemmOperand b;                     // [n, k]
  std::string what;                  // "step 100 layer 'fc1' fprop current", for error messages
};

// What an engine did with one GEMM.
struct GemmRun {
  bool ran = false;          // false: the engine cannot run this GEMM here; `note` says why
  std::string note;          // what ran (operand types, scaling modes, output, reference), or why not
  std::string accumulation;  // "fast" (FP8 fast accumulation), "split" (promoted to FP32), "fp32"
  std::int64_t m_padded = 0, n_padded = 0, k_padded = 0;  // the dims it ran (zero-padded)
  std::vector<float> out;        // [m, n] row-major: the low-precision GEMM
  std::vector<float> reference;  // [m, n] row-major: the engine's reference GEMM of the
                                 // unquantised operands (cuBLASLt: BF16 inputs, FP32 accumulation)
};

class GemmEngine {
 public:
  virtual ~GemmEngine() = default;
  virtual std::string name() const = 0;  // the `engine` column of gemms.csv, e.g. "cublaslt"
  // Must be safe to call from several threads at once (evaluate_gemm_errors runs layers in
  // parallel). Throws fp8a::Error only for failures (a library call failing), never for a GEMM it
  // cannot run: that is a GemmRun with ran = false.
  virtual GemmRun run(const GemmProblem& problem) const = 0;
};

}  // namespace fp8a

// CPU backend: oneTBB for parallelism over chunks of rows, Eigen for the per-chunk float64 sums.
//
// Determinism: the tensor is cut into fixed chunks of whole rows (a multiple of 128 rows, about
// kChunkElements elements, independent of the number of threads), so every block of every recipe
// lies inside one chunk; each chunk's partial sums are computed sequentially and merged in chunk
// order.
#pragma once

#include <cstdint>

#include "engine/backend.hpp"
#include "engine/fake_quant.hpp"

namespace fp8a {

class CpuBackend final : public Backend {
 public:
  static constexpr std::int64_t kChunkElements = 1 << 16;

  std::string name() const override { return "cpu"; }
  std::string device() const override;
  TensorEvaluation evaluate(std::span<const Candidate> candidates,
                            const TensorView& tensor) const override;
};

// Pass 1 alone (amax, counts, sum of squares) on the CPU, used by inspect and the GEMM error.
// It stays with the CPU backend: sum_sq is merged over this backend's chunks, so its rounding is
// the CPU backend's (a backend-neutral caller asks backend.evaluate({}, tensor).stats).
TensorStats compute_tensor_stats(const TensorView& tensor);

// Rows per chunk for a tensor `cols` wide: a multiple of 128 near kChunkElements elements.
std::int64_t rows_per_chunk(std::int64_t cols);

}  // namespace fp8a

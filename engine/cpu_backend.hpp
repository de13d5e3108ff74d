// CPU backend: Eigen for the per-chunk arithmetic, oneTBB for parallelism over chunks.
//
// Determinism: the tensor is cut into fixed chunks of kChunkElements (independent of the number
// of threads); each chunk's partial sums are computed sequentially and merged in chunk order.
#pragma once

#include <cstdint>

#include "engine/backend.hpp"

namespace fp8a {

class CpuBackend final : public Backend {
 public:
  static constexpr std::int64_t kChunkElements = 1 << 16;

  std::string name() const override { return "cpu"; }
  std::string device() const override;
  Applicability supports(const Recipe& recipe) const override;
  TensorEvaluation evaluate(std::span<const Candidate> candidates,
                            const TensorView& tensor) const override;
};

// Pass 1 alone (amax, counts, sum of squares), shared with inspect.
TensorStats compute_tensor_stats(const TensorView& tensor);

}  // namespace fp8a

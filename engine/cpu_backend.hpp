// CPU backend: oneTBB for parallelism over chunks of rows, per-chunk float64 sums in element order.
//
// Determinism: the tensor is cut into fixed chunks of whole rows (a multiple of 128 rows, about
// kChunkElements elements, independent of the number of threads), so every block of every recipe
// lies inside one chunk; each chunk's partial sums are computed sequentially and merged in chunk
// order.
//
// Vector units: the decode, statistics, fake-quantisation and sum loops run on one of the code
// paths of engine/cpu_isa.hpp (baseline SSE2, x86-64-v3 AVX2, x86-64-v4 AVX-512), all giving
// bit-identical results; FP8A_CPU_ISA or the constructor picks one, else the widest the CPU has.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/backend.hpp"
#include "engine/cpu_isa.hpp"
#include "engine/fake_quant.hpp"

namespace fp8a {

class CpuBackend final : public Backend {
 public:
  static constexpr std::int64_t kChunkElements = 1 << 16;

  // isa: the code path; none means default_cpu_isa() (FP8A_CPU_ISA, else the widest). A path the
  // CPU lacks, or a bad FP8A_CPU_ISA, is a usage error (fp8a.usage.227).
  explicit CpuBackend(std::optional<CpuIsa> isa = std::nullopt);

  std::string name() const override { return "cpu"; }
  // "2 threads (oneTBB), AVX-512": the thread count and the code path.
  std::string device() const override;
  CpuIsa isa() const { return isa_; }
  TensorEvaluation evaluate(std::span<const Candidate> candidates,
                            const TensorView& tensor) const override;

 private:
  CpuIsa isa_;
};

// Pass 1 alone (amax, counts, sum of squares) on the CPU, used by inspect and the GEMM error.
// It stays with the CPU backend: sum_sq is merged over this backend's chunks, so its rounding is
// the CPU backend's (a backend-neutral caller asks backend.evaluate({}, tensor).stats).
// On default_cpu_isa(), or on the given path (which must be supported).
TensorStats compute_tensor_stats(const TensorView& tensor);
TensorStats compute_tensor_stats(const TensorView& tensor, CpuIsa isa);

// The amax of the tensor's NVFP4 copy in this orientation after the Hadamard transform
// (nvfp4_copy_amax of the whole tensor), read chunk by chunk (whole 16-row groups): the amax TE's
// level-2 scale of a transformed copy comes from.
float nvfp4_rht_amax(const TensorView& tensor, Orientation orientation);

// Which rows of the tensor the cast flushes (core/metrics.hpp RowFlush; engine/row_flush.hpp): the
// rows whose flushed elements carry more than half their finite energy, cast chunk by chunk as
// evaluate() casts them (the same chunks, so the same NVFP4 stochastic-rounding place).
RowFlush row_flush(const TensorView& tensor, const QuantSpec& spec);

// Rows per chunk for a tensor `cols` wide: a multiple of 128 near kChunkElements elements.
std::int64_t rows_per_chunk(std::int64_t cols);

}  // namespace fp8a

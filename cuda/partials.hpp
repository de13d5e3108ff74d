// Per-thread-block partial results of the CUDA kernels and their reduction on the host.
//
// Determinism: every kernel reduces its elements into one record per thread block (per candidate),
// with a fixed grid for a given chunk shape (never derived from the device), and writes the records
// to global memory; the host adds them in block-index order, chunk after chunk. So a tensor gives
// bit-identical results from run to run and from GPU to GPU. Counts are exact 64-bit integers;
// min/max are order-free; only the float64 sums depend on the (fixed) order.
//
// The records are plain structs shared by nvcc and the host compiler (sizes asserted below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/backend.hpp"
#include "engine/fake_quant.hpp"

namespace fp8a::cuda {

// At most this many thread blocks per launch (so at most this many records per candidate): the
// default of CudaBackendOptions::max_grid_blocks. A constant, not derived from the device's
// multiprocessor count, so that every GPU runs the same grids (see above); CudaBackend lowers it
// only to a device's maximum grid size, which on every CUDA GPU is far larger.
inline constexpr int kMaxGridBlocks = 1024;

// One thread block's share of pass 1 (TensorStats without numel).
struct StatsPartial {
  std::int64_t nan_count;
  std::int64_t inf_count;
  std::int64_t zero_count;
  std::uint32_t amax_bits;          // max |x| over non-NaN elements, as fp32 bits
  std::uint32_t amax_finite_bits;   // max |x| over finite elements
  std::uint32_t amin_nonzero_bits;  // min |x| over finite nonzero elements (+inf bits if none)
  std::uint32_t unused;
  double sum_sq;                    // sum of x^2 over finite elements
};
static_assert(sizeof(StatsPartial) == 48);

// One thread block's share of one candidate in pass 2.
struct MetricPartial {
  double sum_sq_err;
  double sum_x_deq;
  double sum_deq_sq;
  double sum_sq_underflow;  // x^2 over the underflowing elements
  std::int64_t underflow;
  std::int64_t overflow;
  std::int64_t saturated;
  // Range of the blocks' scale_inv (positive; NaN scales left out): +inf / 0 bits when the block
  // saw no quantisation block (and always from the per-tensor kernel).
  std::uint32_t scale_inv_min_bits;
  std::uint32_t scale_inv_max_bits;
};
static_assert(sizeof(MetricPartial) == 64);

// Adds records [0, n) in index order to *total (numel is left alone).
void merge_stats_partials(std::span<const StatsPartial> records, TensorStats* total);

// Adds the records of one launch, laid out [block][j] for the candidates members[j], in block
// order: the four sums to sums[members[j]], the counts and the scale_inv range to
// counts[members[j]] (as the CPU backend splits them between QuantSums and FakeQuantCounts).
void merge_metric_partials(std::span<const MetricPartial> records, std::span<const std::size_t> members,
                           std::span<QuantSums> sums, std::span<FakeQuantCounts> counts);

// The reported metrics of one applicable candidate from the merged sums, exactly as
// CpuBackend::evaluate forms them (per-tensor scale/scale_inv; NaN for blocked and bf16; the
// scale_inv range: per-tensor scale_inv, 1 for bf16, the blocks' range otherwise).
QuantMetrics finalize_candidate(const TensorStats& stats, const QuantSpec& spec, QuantSums sums,
                                FakeQuantCounts counts);

}  // namespace fp8a::cuda

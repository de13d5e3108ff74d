#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/device_load.cuh"
#include "cuda/launch.cuh"
#include "cuda/reduce.cuh"
#include "cuda/stats.cuh"

namespace fp8a::cuda {

namespace {

constexpr int kThreads = 256;

struct StatsAccumulator {
  std::uint32_t nan = 0, inf = 0, zero = 0;
  std::uint32_t amax = 0, amax_finite = 0, amin = kInfBits;
  double sum_sq = 0.0;

  // The bit-pattern trick of cpu_backend.cpp's chunk_stats: for |x| the order of the values is
  // the order of the bits, and NaN patterns lie above +inf.
  __device__ void add(float x) {
    const std::uint32_t b = abs_bits(x);
    nan += b > kInfBits;
    inf += b == kInfBits;
    zero += b == 0;
    amax = max(amax, b > kInfBits ? 0u : b);
    amax_finite = max(amax_finite, b >= kInfBits ? 0u : b);
    amin = min(amin, (b == 0 || b >= kInfBits) ? kInfBits : b);
    const double d = b < kInfBits ? static_cast<double>(x) : 0.0;
    sum_sq += d * d;
  }
};

template <DType D>
__global__ void __launch_bounds__(kThreads) tensor_stats_kernel(const void* x, std::int64_t n,
                                                                StatsPartial* out) {
  StatsAccumulator acc;
  for_each_grid_stride<D>(x, n, [&](const auto& e) {
#pragma unroll
    for (float v : e) acc.add(v);
  });

  using u64 = unsigned long long;
  const u64 nan = block_reduce(static_cast<u64>(acc.nan), SumOp(), u64{0});
  const u64 inf = block_reduce(static_cast<u64>(acc.inf), SumOp(), u64{0});
  const u64 zero = block_reduce(static_cast<u64>(acc.zero), SumOp(), u64{0});
  const std::uint32_t amax = block_reduce(acc.amax, MaxOp(), 0u);
  const std::uint32_t amax_finite = block_reduce(acc.amax_finite, MaxOp(), 0u);
  const std::uint32_t amin = block_reduce(acc.amin, MinOp(), kInfBits);
  const double sum_sq = block_reduce(acc.sum_sq, SumOp(), 0.0);
  if (threadIdx.x == 0) {
    StatsPartial p;
    p.nan_count = static_cast<std::int64_t>(nan);
    p.inf_count = static_cast<std::int64_t>(inf);
    p.zero_count = static_cast<std::int64_t>(zero);
    p.amax_bits = amax;
    p.amax_finite_bits = amax_finite;
    p.amin_nonzero_bits = amin;
    p.unused = 0;
    p.sum_sq = sum_sq;
    out[blockIdx.x] = p;
  }
}

}  // namespace

int launch_tensor_stats(const DeviceMatrix& m, int max_blocks, StatsPartial* out, cudaStream_t stream) {
  const std::int64_t n = m.numel();
  // About 4 vectors per thread before the grid is capped; memory-bound, so a full grid suffices.
  const std::int64_t per_block = kThreads * 8 * 4;
  const int blocks = static_cast<int>(std::clamp<std::int64_t>((n + per_block - 1) / per_block, 1, max_blocks));
  switch (m.dtype) {
    case DType::kBF16: launch_kernel(tensor_stats_kernel<DType::kBF16>, blocks, kThreads, stream, m.data, n, out); break;
    case DType::kF16: launch_kernel(tensor_stats_kernel<DType::kF16>, blocks, kThreads, stream, m.data, n, out); break;
    case DType::kF32: launch_kernel(tensor_stats_kernel<DType::kF32>, blocks, kThreads, stream, m.data, n, out); break;
  }
  FP8A_CUDA_CHECK_LAUNCH();
  return blocks;
}

}  // namespace fp8a::cuda

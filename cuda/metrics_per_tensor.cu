#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/device_load.cuh"
#include "cuda/launch.cuh"
#include "cuda/metrics_per_tensor.cuh"
#include "cuda/reduce.cuh"
#include "core/error.hpp"

namespace fp8a::cuda {

namespace {

constexpr int kThreads = 256;

// Adds N elements to candidate j of the group, two at a time (one FP8 conversion per pair each
// way), in element order, counting against the candidate's limits.
template <Fp8Format F, int N>
__device__ void add_fp8(const float (&xc)[N], const double (&xd)[N], const std::uint32_t (&bits)[N],
                        const PerTensorGroup& g, int j, ElementSums& acc) {
#pragma unroll
  for (int k = 0; k < N; k += 2) {
    const bool pair = k + 1 < N;
    const float xs[2] = {xc[k], pair ? xc[k + 1] : 0.0f};
    const double xds[2] = {xd[k], pair ? xd[k + 1] : 0.0};
    const std::uint32_t bs[2] = {bits[k], pair ? bits[k + 1] : 0u};
    quantize_fp8_x2_counted<F>(acc, xs, xds, bs, g.scale[j], g.scale_inv[j], g.limits[j], pair);
  }
}

// Adds N elements to every candidate of the group (at most G of them). The mode switch sits
// outside the element loop; what depends on the element alone (x with NaN/Inf zeroed, in float64,
// |x|'s bits) is formed once and shared by the candidates.
template <int G, int N>
__device__ void add_elements(const float (&x)[N], const PerTensorGroup& g, ElementSums (&acc)[G]) {
  bool finite[N];
  float xc[N];
  double xd[N];
  std::uint32_t bits[N];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    finite[k] = is_finite_float(x[k]);
    xc[k] = finite[k] ? x[k] : 0.0f;
    xd[k] = static_cast<double>(xc[k]);
    bits[k] = count_bits(x[k]);
  }
#pragma unroll
  for (int j = 0; j < G; ++j) {
    if (j >= g.count) break;
    switch (g.mode[j]) {
      case ElementMode::kE4M3:
        add_fp8<Fp8Format::kE4M3>(xc, xd, bits, g, j, acc[j]);
        break;
      case ElementMode::kE5M2:
        add_fp8<Fp8Format::kE5M2>(xc, xd, bits, g, j, acc[j]);
        break;
      case ElementMode::kBf16:
#pragma unroll
        for (int k = 0; k < N; ++k) quantize_bf16(acc[j], x[k], xd[k], finite[k]);
        break;
    }
  }
}

// G: the group size rounded up to a power of two, so small groups keep fewer accumulators in
// registers (more threads resident per SM).
template <DType D, int G>
__global__ void __launch_bounds__(kThreads) metrics_per_tensor_kernel(const void* x, std::int64_t n,
                                                                      const PerTensorGroup g,
                                                                      MetricPartial* out) {
  ElementSums acc[G];
  for_each_grid_stride<D>(x, n, [&](const auto& e) { add_elements(e, g, acc); });
#pragma unroll
  for (int j = 0; j < G; ++j) {
    if (j >= g.count) break;  // uniform across the block: the reductions' barriers are safe
    write_metric_partial(acc[j], kInfBits, 0u, out + static_cast<std::int64_t>(blockIdx.x) * g.count + j);
  }
}

template <int G>
void launch_group(const DeviceMatrix& m, const PerTensorGroup& g, MetricPartial* out, int blocks,
                  cudaStream_t stream) {
  const std::int64_t n = m.numel();
  switch (m.dtype) {
    case DType::kBF16: launch_kernel(metrics_per_tensor_kernel<DType::kBF16, G>, blocks, kThreads, stream, m.data, n, g, out); break;
    case DType::kF16: launch_kernel(metrics_per_tensor_kernel<DType::kF16, G>, blocks, kThreads, stream, m.data, n, g, out); break;
    case DType::kF32: launch_kernel(metrics_per_tensor_kernel<DType::kF32, G>, blocks, kThreads, stream, m.data, n, g, out); break;
  }
}

}  // namespace

int launch_metrics_per_tensor(const DeviceMatrix& m, const PerTensorGroup& g, int max_blocks,
                              MetricPartial* out, cudaStream_t stream) {
  FP8A_CHECK(g.count >= 1 && g.count <= kGroupSize, "launch_metrics_per_tensor: bad group size");
  const std::int64_t n = m.numel();
  // Compute-bound (float64 sums): one 16-byte vector per thread per grid sweep, grid capped.
  const std::int64_t per_block = kThreads * 8;
  const int blocks = static_cast<int>(std::clamp<std::int64_t>((n + per_block - 1) / per_block, 1, max_blocks));
  if (g.count == 1) launch_group<1>(m, g, out, blocks, stream);
  else if (g.count == 2) launch_group<2>(m, g, out, blocks, stream);
  else if (g.count <= 4) launch_group<4>(m, g, out, blocks, stream);
  else launch_group<kGroupSize>(m, g, out, blocks, stream);
  FP8A_CUDA_CHECK_LAUNCH();
  return blocks;
}

}  // namespace fp8a::cuda

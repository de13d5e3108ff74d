#include <algorithm>

#include "cuda/check.hpp"
#include "cuda/device_load.cuh"
#include "cuda/launch.cuh"
#include "cuda/metrics_blocked.cuh"
#include "cuda/reduce.cuh"
#include "core/error.hpp"

namespace fp8a::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kTileCols = 128;  // a warp tile is BR rows x 128 columns
constexpr int kSlots = kTileCols / 32;

// One warp per tile of BR rows x 128 columns at a time (grid-stride over tiles). Lane l owns
// columns c0 + l + 32 s (s < 4), so each row of a tile is read with four fully coalesced loads,
// and a block's amax is: BC == 1, the lane's own column; BC == 32, one slot across the warp;
// BC == 128, all slots across the warp. The tile is read twice (amax, then the cast); the second
// read mostly hits L1/L2.
template <DType D, int BR, int BC>
__global__ void __launch_bounds__(kThreads) metrics_blocked_kernel(const void* x, std::int64_t rows,
                                                                   std::int64_t cols,
                                                                   const BlockedParams p,
                                                                   MetricPartial* out) {
  static_assert(BC == 1 || BC == 32 || BC == 128, "block width");
  static_assert(kSlots % 2 == 0, "slots are converted in pairs");
  using Loader = ElementLoader<D>;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const std::int64_t warp = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const std::int64_t warps = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  const std::int64_t tile_cols = (cols + kTileCols - 1) / kTileCols;
  const std::int64_t tiles = (rows + BR - 1) / BR * tile_cols;
  const float fp8_max = fp8_max_finite(p.format);
  const bool e4m3 = p.format == Fp8Format::kE4M3;

  ElementSums acc;
  std::uint32_t scale_inv_min = kInfBits, scale_inv_max = 0;
  const auto track = [&](float scale_inv) {
    if (scale_inv == scale_inv) {  // NaN scales (OCP rule past 2^127) are left out, as on the CPU
      const std::uint32_t b = float_bits(scale_inv);
      scale_inv_min = min(scale_inv_min, b);
      scale_inv_max = max(scale_inv_max, b);
    }
  };

  for (std::int64_t t = warp; t < tiles; t += warps) {
    const std::int64_t r0 = t / tile_cols * BR;
    const std::int64_t c0 = t % tile_cols * kTileCols;
    const int nr = static_cast<int>(min(static_cast<std::int64_t>(BR), rows - r0));
    std::int64_t col[kSlots];
    bool valid[kSlots];
    std::uint32_t amax[kSlots];
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      col[s] = c0 + 32 * s + lane;
      valid[s] = col[s] < cols;
      amax[s] = 0;
    }
    for (int r = 0; r < nr; ++r) {
      const std::int64_t row = (r0 + r) * cols;
#pragma unroll
      for (int s = 0; s < kSlots; ++s)
        if (valid[s]) amax[s] = max(amax[s], static_cast<std::uint32_t>(abs_bits_not_nan(Loader::load(x, row + col[s]))));
    }

    float scale[kSlots], scale_inv[kSlots], threshold[kSlots];
    if constexpr (BC == kTileCols) {
      const std::uint32_t a = warp_max_all(max(max(amax[0], amax[1]), max(amax[2], amax[3])));
      const ScalePair sp = block_scale(p, bits_float(a));
      track(sp.scale_inv);
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        scale[s] = sp.scale;
        scale_inv[s] = sp.scale_inv;
        threshold[s] = mul_rn(fp8_max, sp.scale_inv);
      }
    } else {
#pragma unroll
      for (int s = 0; s < kSlots; ++s) {
        const std::uint32_t a = BC == 32 ? warp_max_all(amax[s]) : amax[s];
        const ScalePair sp = block_scale(p, bits_float(a));
        const bool block_exists = BC == 32 ? c0 + 32 * s < cols : valid[s];
        if (block_exists) track(sp.scale_inv);
        scale[s] = sp.scale;
        scale_inv[s] = sp.scale_inv;
        threshold[s] = mul_rn(fp8_max, sp.scale_inv);
      }
    }

    for (int r = 0; r < nr; ++r) {
      const std::int64_t row = (r0 + r) * cols;
      // Slots in pairs, one FP8 conversion each way per pair (element_quant.hpp), in slot order as
      // before. col[s] grows with s, so a valid slot never follows an invalid one.
#pragma unroll
      for (int s = 0; s < kSlots; s += 2) {
        if (!valid[s]) continue;
        const bool second = valid[s + 1];
        float v[2];
        double xd[2];
        bool finite[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          v[i] = i == 0 || second ? Loader::load(x, row + col[s + i]) : 0.0f;
          finite[i] = is_finite_float(v[i]);
          xd[i] = finite[i] ? static_cast<double>(v[i]) : 0.0;
        }
        const float sc[2] = {scale[s], scale[s + 1]};
        const float si[2] = {scale_inv[s], scale_inv[s + 1]};
        const float th[2] = {threshold[s], threshold[s + 1]};
        if (e4m3)
          quantize_fp8_x2<Fp8Format::kE4M3>(acc, v, xd, finite, sc, si, th, second);
        else
          quantize_fp8_x2<Fp8Format::kE5M2>(acc, v, xd, finite, sc, si, th, second);
      }
    }
  }
  write_metric_partial(acc, scale_inv_min, scale_inv_max, out + blockIdx.x);
}

template <int BR, int BC>
void launch_shape(const DeviceMatrix& m, const BlockedParams& p, MetricPartial* out, int blocks,
                  cudaStream_t stream) {
  switch (m.dtype) {
    case DType::kBF16:
      launch_kernel(metrics_blocked_kernel<DType::kBF16, BR, BC>, blocks, kThreads, stream, m.data, m.rows, m.cols, p, out);
      break;
    case DType::kF16:
      launch_kernel(metrics_blocked_kernel<DType::kF16, BR, BC>, blocks, kThreads, stream, m.data, m.rows, m.cols, p, out);
      break;
    case DType::kF32:
      launch_kernel(metrics_blocked_kernel<DType::kF32, BR, BC>, blocks, kThreads, stream, m.data, m.rows, m.cols, p, out);
      break;
  }
}

}  // namespace

int launch_metrics_blocked(const DeviceMatrix& m, const BlockedParams& p, int max_blocks,
                           MetricPartial* out, cudaStream_t stream) {
  const std::int64_t br = p.block_rows, bc = p.block_cols;
  const std::int64_t tiles = (m.rows + br - 1) / br * ((m.cols + kTileCols - 1) / kTileCols);
  const int blocks = static_cast<int>(
      std::clamp<std::int64_t>((tiles + kWarpsPerBlock - 1) / kWarpsPerBlock, 1, max_blocks));
  if (br == 1 && bc == 128) launch_shape<1, 128>(m, p, out, blocks, stream);
  else if (br == 128 && bc == 1) launch_shape<128, 1>(m, p, out, blocks, stream);
  else if (br == 128 && bc == 128) launch_shape<128, 128>(m, p, out, blocks, stream);
  else if (br == 1 && bc == 32) launch_shape<1, 32>(m, p, out, blocks, stream);
  else if (br == 32 && bc == 1) launch_shape<32, 1>(m, p, out, blocks, stream);
  else FP8A_CHECK(false, "launch_metrics_blocked: unsupported block shape");
  FP8A_CUDA_CHECK_LAUNCH();
  return blocks;
}

}  // namespace fp8a::cuda

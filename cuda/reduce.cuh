// Deterministic warp and thread-block reductions: a fixed shuffle tree, then warp 0 over the
// warps' results in warp order. The same inputs give the same bits on every run.
#pragma once

#include <cstdint>

#include "cuda/element_quant.hpp"
#include "cuda/partials.hpp"

namespace fp8a::cuda {

struct SumOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  __device__ std::uint32_t operator()(std::uint32_t a, std::uint32_t b) const { return a > b ? a : b; }
};
struct MinOp {
  __device__ std::uint32_t operator()(std::uint32_t a, std::uint32_t b) const { return a < b ? a : b; }
};

// Lane 0 ends with the reduction of the warp's 32 values.
template <class T, class Op>
__device__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_down_sync(0xFFFFFFFFu, v, offset));
  return v;
}

// Every lane ends with the max of the warp's 32 values (all lanes must take part). The condition is
// the toolkit's own for declaring __reduce_max_sync (crt/sm_80_rt.h): a host compilation of this
// body (the host emulation of tests/cuda_emu) takes the sm_80+ path, as the sm_90 build does.
__device__ inline std::uint32_t warp_max_all(std::uint32_t v) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  return __reduce_max_sync(0xFFFFFFFFu, v);
#else
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  return v;
#endif
}

template <class T>
__device__ T* reduce_scratch() {
  __shared__ T scratch[32];
  return scratch;
}

// Thread 0 ends with the reduction over the thread block (blockDim.x a multiple of 32). Every
// thread must call it; identity fills the missing warps.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
  T* scratch = reduce_scratch<T>();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // the scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : identity;
    v = warp_reduce(v, op);
  }
  return v;
}

// Reduces every thread's sums of one candidate into *out (written by thread 0).
__device__ inline void write_metric_partial(const ElementSums& a, std::uint32_t scale_inv_min_bits,
                                            std::uint32_t scale_inv_max_bits, MetricPartial* out) {
  using u64 = unsigned long long;
  const double e = block_reduce(a.sum_sq_err, SumOp(), 0.0);
  const double xd = block_reduce(a.sum_x_deq, SumOp(), 0.0);
  const double dd = block_reduce(a.sum_deq_sq, SumOp(), 0.0);
  const double uu = block_reduce(a.sum_sq_underflow, SumOp(), 0.0);
  const u64 under = block_reduce(static_cast<u64>(a.underflow), SumOp(), u64{0});
  const u64 over = block_reduce(static_cast<u64>(a.overflow), SumOp(), u64{0});
  const u64 sat = block_reduce(static_cast<u64>(a.saturated), SumOp(), u64{0});
  const std::uint32_t lo = block_reduce(scale_inv_min_bits, MinOp(), kInfBits);
  const std::uint32_t hi = block_reduce(scale_inv_max_bits, MaxOp(), 0u);
  if (threadIdx.x == 0) {
    MetricPartial p;
    p.sum_sq_err = e;
    p.sum_x_deq = xd;
    p.sum_deq_sq = dd;
    p.sum_sq_underflow = uu;
    p.underflow = static_cast<std::int64_t>(under);
    p.overflow = static_cast<std::int64_t>(over);
    p.saturated = static_cast<std::int64_t>(sat);
    p.scale_inv_min_bits = lo;
    p.scale_inv_max_bits = hi;
    *out = p;
  }
}

}  // namespace fp8a::cuda

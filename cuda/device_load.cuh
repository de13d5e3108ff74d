// Device-side reads of the three capture element types as float (exact for all of them): one
// element, or one 16-byte vector (the chunk base is kDeviceAlign-aligned, see chunk_plan.hpp).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "core/tensor_view.hpp"

namespace fp8a::cuda {

template <DType D>
struct ElementLoader;

template <>
struct ElementLoader<DType::kBF16> {
  static constexpr int kVec = 8;
  __device__ static float load(const void* p, std::int64_t i) {
    const unsigned short h = __ldg(static_cast<const unsigned short*>(p) + i);
    return __uint_as_float(static_cast<std::uint32_t>(h) << 16);
  }
  __device__ static void load_vec(const void* p, std::int64_t v, float (&out)[kVec]) {
    const uint4 w = __ldg(static_cast<const uint4*>(p) + v);
    const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      out[2 * k] = __uint_as_float(words[k] << 16);  // little-endian: the low half comes first
      out[2 * k + 1] = __uint_as_float(words[k] & 0xFFFF0000u);
    }
  }
};

template <>
struct ElementLoader<DType::kF16> {
  static constexpr int kVec = 8;
  __device__ static float load(const void* p, std::int64_t i) {
    return __half2float(__ushort_as_half(__ldg(static_cast<const unsigned short*>(p) + i)));
  }
  __device__ static void load_vec(const void* p, std::int64_t v, float (&out)[kVec]) {
    const uint4 w = __ldg(static_cast<const uint4*>(p) + v);
    const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      out[2 * k] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[k] & 0xFFFFu)));
      out[2 * k + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[k] >> 16)));
    }
  }
};

template <>
struct ElementLoader<DType::kF32> {
  static constexpr int kVec = 4;
  __device__ static float load(const void* p, std::int64_t i) {
    return __ldg(static_cast<const float*>(p) + i);
  }
  __device__ static void load_vec(const void* p, std::int64_t v, float (&out)[kVec]) {
    const float4 w = __ldg(static_cast<const float4*>(p) + v);
    out[0] = w.x;
    out[1] = w.y;
    out[2] = w.z;
    out[3] = w.w;
  }
};

// This thread's grid-stride share of x[0, n): whole vectors first (f gets a float array of kVec
// elements), then the tail one element at a time (an array of 1).
template <DType D, class F>
__device__ void for_each_grid_stride(const void* x, std::int64_t n, F&& f) {
  using Loader = ElementLoader<D>;
  const std::int64_t tid = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t vectors = n / Loader::kVec;
  for (std::int64_t v = tid; v < vectors; v += stride) {
    float e[Loader::kVec];
    Loader::load_vec(x, v, e);
    f(static_cast<const float(&)[Loader::kVec]>(e));
  }
  for (std::int64_t i = vectors * Loader::kVec + tid; i < n; i += stride) {
    const float e[1] = {Loader::load(x, i)};
    f(e);
  }
}

}  // namespace fp8a::cuda

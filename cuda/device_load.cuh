// Device-side reads of the three capture element types as float (exact for all of them): one
// element, or one 16-byte vector (the chunk base is kDeviceAlign-aligned, see chunk_plan.hpp).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "engine/core/tensor_view.hpp"

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

}  // namespace fp8a::cuda

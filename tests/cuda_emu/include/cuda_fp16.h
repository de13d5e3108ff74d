// Host emulation of <cuda_fp16.h> (tests/cuda_emu/include/cuda_runtime.h): the half type and the
// conversions the kernels use, exact.
#pragma once

#include <cstdint>
#include <cstring>

struct __half {
  unsigned short x;
};

inline __half __ushort_as_half(unsigned short u) { return __half{u}; }

// IEEE binary16 -> binary32, exact for every code (subnormals normalised, inf/NaN kept).
inline float __half2float(__half h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.x & 0x8000u) << 16;
  std::uint32_t exp = (h.x >> 10) & 0x1Fu;
  std::uint32_t man = h.x & 0x3FFu;
  std::uint32_t bits;
  if (exp == 0x1Fu) {
    bits = sign | 0x7F800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {
    exp = 113u;  // 2^-14 with the leading bit made explicit below
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The per-element and per-block arithmetic of the CUDA metric kernels, written once for host and
// device (FP8A_HD) so the host tests can check it against the CPU backend without a GPU.
//
// Every operation reproduces engine/fake_quant.cpp and engine/cpu_backend.cpp bit for bit:
//   s   = x * scale                        (one fp32 multiply, never fused)
//   deq = fp8(s) * scale_inv               (satfinite round-to-nearest-even; decode is exact)
//   saturated: |s| > 464 (E4M3) / > nextafter(61440, 0) (E5M2)
//   overflow:  |x| > fp8_max * scale_inv   (the threshold is one fp32 multiply)
//   underflow: x != 0 and fp8(s) == 0      (NaN x counts as nonzero; bf16: the BF16 value is 0)
//   sums over finite x only, in float64:   (x - deq)^2, x * deq, deq^2, and x^2 where x underflows
// On sm_89+ the cast is the hardware conversion (cvt.rn.satfinite.e4m3x2.f32 and back through
// f16, both exact); elsewhere, and on the host, the shared software round trip of
// core/fp8_codec.hpp, which equals it for every non-NaN input (tests/cuda/test_cuda_codec).
#pragma once

#include <cstdint>

#include "core/block_scale.hpp"

// FP8A_CUDA_FP8_INTRINSICS: the FP8 conversions go through cuda_fp8.h's intrinsics, which are the
// hardware cvt instructions on sm_89+. FP8A_NV_FP8_ON_HOST compiles the same calls for the host,
// where cuda_fp8.h implements them in software after the instructions' definition: only
// tests/cuda/test_cuda_fp8_host.cpp does, to check this code path against the shared codec
// without a GPU.
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890) || defined(FP8A_NV_FP8_ON_HOST)
#define FP8A_CUDA_FP8_INTRINSICS 1
#else
#define FP8A_CUDA_FP8_INTRINSICS 0
#endif

#if defined(__CUDACC__) || defined(FP8A_NV_FP8_ON_HOST)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace fp8a::cuda {

inline constexpr std::uint32_t kInfBits = 0x7F800000u;

FP8A_HD std::uint32_t abs_bits(float x) { return float_bits(x) & 0x7FFFFFFFu; }
FP8A_HD float abs_float(float x) { return bits_float(abs_bits(x)); }
FP8A_HD bool is_finite_float(float x) { return abs_bits(x) < kInfBits; }

// decode(encode_satfinite(s)).
template <Fp8Format F>
FP8A_HD float fp8_round_trip(float s) {
#if FP8A_CUDA_FP8_INTRINSICS
  constexpr __nv_fp8_interpretation_t kType = F == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  const __nv_fp8_storage_t code = __nv_cvt_float_to_fp8(s, __NV_SATFINITE, kType);
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(code, kType)));
#else
  return F == Fp8Format::kE4M3 ? round_trip_e4m3(s) : round_trip_e5m2(s);
#endif
}

// The same for two values with one conversion each way: on sm_89+ one cvt.rn.satfinite.e4m3x2.f32
// (or e5m2x2) packs both and one cvt.rn.f16x2.e4m3x2 unpacks both, where the scalar form converts
// a pair whose other half is 0. The conversion unit is the scarcest pipe of the metric kernels
// (bench/RESULTS.md, "GPU floors"), so pairs halve its load; the results are those of two scalar
// round trips.
template <Fp8Format F>
FP8A_HD void fp8_round_trip_x2(float s0, float s1, float* q0, float* q1) {
#if FP8A_CUDA_FP8_INTRINSICS
  constexpr __nv_fp8_interpretation_t kType = F == Fp8Format::kE4M3 ? __NV_E4M3 : __NV_E5M2;
  const __nv_fp8x2_storage_t codes = __nv_cvt_float2_to_fp8x2(make_float2(s0, s1), __NV_SATFINITE, kType);
  const float2 q = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(codes, kType)));
  *q0 = q.x;
  *q1 = q.y;
#else
  *q0 = fp8_round_trip<F>(s0);
  *q1 = fp8_round_trip<F>(s1);
#endif
}

// Per-thread partial sums of one candidate. Counts are 32-bit per thread (a thread sees far fewer
// than 2^32 elements); block partials widen them to 64 bits.
struct ElementSums {
  double sum_sq_err = 0.0;
  double sum_x_deq = 0.0;
  double sum_deq_sq = 0.0;
  double sum_sq_underflow = 0.0;  // x^2 of the underflowing elements
  std::uint32_t underflow = 0;
  std::uint32_t overflow = 0;
  std::uint32_t saturated = 0;
};

// xd is x in float64, or 0 when x is not finite (then deq is taken as 0 too, as the CPU backend
// zeroes both sides).
FP8A_HD void add_sums(ElementSums& a, double xd, double dd) {
  const double e = xd - dd;
  a.sum_sq_err += e * e;
  a.sum_x_deq += xd * dd;
  a.sum_deq_sq += dd * dd;
}

FP8A_HD void accumulate(ElementSums& a, double xd, bool finite, float deq, bool underflow,
                        bool saturated, bool overflow) {
  a.underflow += underflow;
  a.sum_sq_underflow += underflow ? xd * xd : 0.0;  // an underflowing x is finite
  a.saturated += saturated;
  a.overflow += overflow;
  add_sums(a, xd, finite ? static_cast<double>(deq) : 0.0);
}

// One element whose scaled value s = x * scale rounded to q: its counts and error terms.
template <Fp8Format F>
FP8A_HD void add_quantized(ElementSums& a, float x, double xd, bool finite, float s, float q,
                           float scale_inv, float overflow_threshold) {
  accumulate(a, xd, finite, mul_rn(q, scale_inv), (x != 0.0f) & (q == 0.0f),
             abs_float(s) > saturation_threshold(F), abs_float(x) > overflow_threshold);
}

template <Fp8Format F>
FP8A_HD void quantize_fp8(ElementSums& a, float x, double xd, bool finite, float scale,
                          float scale_inv, float overflow_threshold) {
  const float s = mul_rn(x, scale);
  add_quantized<F>(a, x, xd, finite, s, fp8_round_trip<F>(s), scale_inv, overflow_threshold);
}

// Two elements (each with its own scale) into one accumulator, in element order, so the sums are
// bit-identical to two quantize_fp8 calls; `second` false leaves element 1 out (a pad).
template <Fp8Format F>
FP8A_HD void quantize_fp8_x2(ElementSums& a, const float (&x)[2], const double (&xd)[2],
                             const bool (&finite)[2], const float (&scale)[2],
                             const float (&scale_inv)[2], const float (&threshold)[2],
                             bool second = true) {
  const float s0 = mul_rn(x[0], scale[0]);
  const float s1 = mul_rn(x[1], scale[1]);
  float q0 = 0.0f, q1 = 0.0f;
  fp8_round_trip_x2<F>(s0, s1, &q0, &q1);
  add_quantized<F>(a, x[0], xd[0], finite[0], s0, q0, scale_inv[0], threshold[0]);
  if (second) add_quantized<F>(a, x[1], xd[1], finite[1], s1, q1, scale_inv[1], threshold[1]);
}

// Per-tensor FP8 candidates count from |x| alone. With one scale for the whole tensor,
// |fp8(RN(x * scale))| never decreases as |x| grows (both roundings are monotone, and symmetric in
// the sign), so "nonzero x whose code is 0", "|x * scale| past the last rounding boundary" and
// "|x| > fp8_max * scale_inv" each hold on one range of |x|. count_limits finds the ranges once on
// the host; the kernel compares the element's abs bits with them (non-negative floats order as
// their bits), NaN mapped to 0, which none of the three counts, as the direct tests do not.
struct CountLimits {
  std::uint32_t underflow_max = 0;            // underflow: 0 < bits <= underflow_max
  std::uint32_t saturated_min = 0xFFFFFFFFu;  // saturated: bits >= saturated_min
  std::uint32_t overflow_above = kInfBits;    // overflow:  bits > overflow_above
};

// |x|'s bits for the counts: NaN -> 0.
FP8A_HD std::uint32_t count_bits(float x) {
  const std::uint32_t b = abs_bits(x);
  return b > kInfBits ? 0u : b;
}

// The limits of a per-tensor candidate (host; 2 x 31 steps of bisection over |x|'s bits).
template <Fp8Format F>
inline CountLimits count_limits(float scale, float overflow_threshold) {
  const auto scaled = [&](std::uint32_t b) { return mul_rn(bits_float(b), scale); };
  const auto underflows = [&](std::uint32_t b) { return fp8_round_trip<F>(scaled(b)) == 0.0f; };
  const auto saturates = [&](std::uint32_t b) { return abs_float(scaled(b)) > saturation_threshold(F); };
  CountLimits l;
  // underflows(b) holds for b in [1, U] and not above: U = the last b where it holds.
  if (underflows(1u)) {
    std::uint32_t lo = 1u, hi = kInfBits + 1u;  // underflows(lo), !underflows(hi) (hi: past inf)
    while (hi - lo > 1u) {
      const std::uint32_t mid = lo + (hi - lo) / 2u;
      (mid <= kInfBits && underflows(mid) ? lo : hi) = mid;
    }
    l.underflow_max = lo;
  }
  // saturates(b) holds for b in [S, inf] (none when scale is 0 or NaN): S = the first b.
  if (saturates(kInfBits)) {
    std::uint32_t lo = 0u, hi = kInfBits;  // !saturates(lo) (x = 0), saturates(hi)
    while (hi - lo > 1u) {
      const std::uint32_t mid = lo + (hi - lo) / 2u;
      (saturates(mid) ? hi : lo) = mid;
    }
    l.saturated_min = hi;
  }
  if (overflow_threshold == overflow_threshold) l.overflow_above = abs_bits(overflow_threshold);
  return l;
}

FP8A_HD void add_counted(ElementSums& a, double xd, float deq, std::uint32_t bits,
                         const CountLimits& lim) {
#if defined(__CUDA_ARCH__)
  // One predicated add per count (the compiler otherwise selects between two sums).
  asm("{\n\t.reg .pred p;\n\t"
      "setp.lt.u32 p, %3, %4;\n\t@p add.u32 %0, %0, 1;\n\t"
      "setp.ge.u32 p, %5, %6;\n\t@p add.u32 %1, %1, 1;\n\t"
      "setp.gt.u32 p, %5, %7;\n\t@p add.u32 %2, %2, 1;\n\t}"
      : "+r"(a.underflow), "+r"(a.saturated), "+r"(a.overflow)
      : "r"(bits - 1u), "r"(lim.underflow_max), "r"(bits), "r"(lim.saturated_min), "r"(lim.overflow_above));
#else
  a.underflow += bits - 1u < lim.underflow_max;
  a.saturated += bits >= lim.saturated_min;
  a.overflow += bits > lim.overflow_above;
#endif
  a.sum_sq_underflow += bits - 1u < lim.underflow_max ? xd * xd : 0.0;
  add_sums(a, xd, static_cast<double>(deq));
}

// Two elements of a per-tensor candidate, counted against its limits: xc is x with NaN/Inf set to
// 0 (their error terms are 0, as accumulate() has them), xd = xc in float64, bits = count_bits(x).
// The same sums and counts as two quantize_fp8 calls (tests/cuda/test_cuda_host.cpp).
template <Fp8Format F>
FP8A_HD void quantize_fp8_x2_counted(ElementSums& a, const float (&xc)[2], const double (&xd)[2],
                                     const std::uint32_t (&bits)[2], float scale, float scale_inv,
                                     const CountLimits& lim, bool second = true) {
  float q0 = 0.0f, q1 = 0.0f;
  fp8_round_trip_x2<F>(mul_rn(xc[0], scale), mul_rn(xc[1], scale), &q0, &q1);
  add_counted(a, xd[0], mul_rn(q0, scale_inv), bits[0], lim);
  if (second) add_counted(a, xd[1], mul_rn(q1, scale_inv), bits[1], lim);
}

// The BF16 round trip: a finite x that rounds to inf counts as saturated and overflowed.
FP8A_HD void quantize_bf16(ElementSums& a, float x, double xd, bool finite) {
  const float d = bf16_to_float(float_to_bf16(x));
  const bool over = abs_bits(d) == kInfBits && abs_bits(x) < kInfBits;
  accumulate(a, xd, finite, d, (x != 0.0f) & (d == 0.0f), over, over);
}

// What a blocked candidate needs to scale its blocks (from QuantSpec, resolved on the host).
struct BlockedParams {
  RecipeKind kind = RecipeKind::kBlock;  // kBlock (TE block scaling) or kMx (E8M0 scales)
  Fp8Format format = Fp8Format::kE4M3;
  bool pow2_scales = true;               // kBlock
  MxScaleRule mx_rule = MxScaleRule::kTeRoundUp;
  float value_for_inf = 3.40282347e38f;  // kBlock: an infinite scale becomes the input type's max
  std::int64_t block_rows = 1, block_cols = 128;
};

// The scale of one block from its amax over non-NaN elements (core/block_scale.hpp).
FP8A_HD ScalePair block_scale(const BlockedParams& p, float amax) {
  return fp8a::block_scale(p.kind, p.format, p.pow2_scales, p.mx_rule, p.value_for_inf, amax);
}

}  // namespace fp8a::cuda

// NVFP4 (TE's NVFP4BlockScaling, from TE 2.8) one block at a time: E2M1 elements, an E4M3 scale
// per 16 elements, an FP32 scale per tensor. The rules, step by step in FP32 with
// round-to-nearest-even, are docs/NVFP4-TE.md §2 (TE common/cast/nvfp4/core_nvfp4.cuh and the
// cast kernels). The recipe kind "nvfp4" casts with it (engine/quant_spec.cpp nvfp4_copy_for,
// engine/fake_quant.cpp).
#pragma once

#include <cfloat>
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/fp8_codec.hpp"
#include "core/host_device.hpp"
#include "core/te_version.hpp"

namespace fp8a {

inline constexpr int kNvfp4Block = 16;  // elements per E4M3 scale (16x16 tiles for weights)
inline constexpr float kE2M1Max = 6.0f;

// x rounded to E2M1 ({0, 0.5, 1, 1.5, 2, 3, 4, 6} with x's sign), nearest-even, saturated at +-6
// (PTX cvt.rn.satfinite.e2m1x2.f32): E2M1 is the 1-mantissa-bit format whose smallest normal is
// 2^0. NaN stays NaN here; what TE's instruction makes of it is not known (docs/NVFP4-TE.md §7).
FP8A_HD float round_trip_e2m1(float x) { return detail::round_trip_fp8<1, 0>(x, kE2M1Max); }

// The level-2 scale that encodes a tensor of this amax: 448 * 6 / amax, at most FLT_MAX, and 1 for
// an amax of 0 or inf (core_nvfp4.cuh compute_global_encode_scaling_factor_FP4).
FP8A_HD float nvfp4_global_encode_scale(float global_amax) {
  float s = 448.0f * kE2M1Max / global_amax;
  s = s < FLT_MAX ? s : FLT_MAX;  // fminf, NaN included: fminf(NaN, FLT_MAX) is FLT_MAX
  return (global_amax == 0.0f || s == 0.0f) ? 1.0f : s;
}

// The level-2 decode factor of a copy whose amax is `amax`: amax / 2688 (= 6 * 448) rounded to
// FP32. TE folds both operands' factors into the GEMM's FP32 alpha, amax_A * amax_B / 2688^2;
// each operand's own FP32 factor differs from that by an FP32 rounding, far below E2M1's.
FP8A_HD float nvfp4_decode_factor(float amax) { return static_cast<float>(static_cast<double>(amax) / 2688.0); }

// How a block's scale is formed from its amax, which changed in TE 2.14.
enum class Nvfp4BlockRule : std::uint8_t {
  kDivideFirst,  // TE 2.8-2.13: RN(RN(block_amax / 6) * S_enc)
  kScaleFirst,   // TE 2.14+: RN(block_amax * RN(S_enc * RN(1 / 6)))
};
inline Nvfp4BlockRule nvfp4_block_rule(TeVersion te) {
  return te >= TeVersion{2, 14} ? Nvfp4BlockRule::kScaleFirst : Nvfp4BlockRule::kDivideFirst;
}

// The block's E4M3 scale (as its value): the rule's FP32 product, at most FLT_MAX, cast to E4M3
// nearest-even with saturation at 448 (__nv_fp8_e4m3, __NV_SATFINITE); 0 for a block whose scale
// is below E4M3's half-smallest subnormal, 2^-10.
FP8A_HD float nvfp4_block_scale(float block_amax, float s_enc, Nvfp4BlockRule rule) {
  const float s = rule == Nvfp4BlockRule::kScaleFirst ? block_amax * (s_enc * (1.0f / kE2M1Max))
                                                      : block_amax / kE2M1Max * s_enc;
  return round_trip_e4m3(s < FLT_MAX ? s : FLT_MAX);
}

// The factor each element of the block is multiplied by before the E2M1 cast:
// min(RN(1 / RN(scale * S_dec)), FLT_MAX) with S_dec = RN(1 / S_enc); FLT_MAX for a zero scale
// (every nonzero element of such a block then saturates to +-6, which decodes to 0).
FP8A_HD float nvfp4_element_factor(float block_scale, float s_enc) {
  const float s_dec = 1.0f / s_enc;
  const float f = 1.0f / (block_scale * s_dec);
  return f < FLT_MAX ? f : FLT_MAX;
}

// One block of n <= 16 values (stride apart) quantised as TE does: codes[i] gets each element's
// E2M1 value (the code's value, sign kept), and the block's E4M3 scale is returned. The value
// the GEMM computes with is codes[i] * scale * global_amax / 2688: cuBLASLt applies the E4M3
// scales, and the per-tensor factor amax_A * amax_B / (36 * 448^2) once to the output.
inline float nvfp4_quantize_block(const float* x, std::int64_t n, std::int64_t stride, float s_enc,
                                  Nvfp4BlockRule rule, float* codes) {
  float amax = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i * stride]));
  const float scale = nvfp4_block_scale(amax, s_enc, rule);
  const float factor = nvfp4_element_factor(scale, s_enc);
  for (std::int64_t i = 0; i < n; ++i) codes[i] = round_trip_e2m1(x[i * stride] * factor);
  return scale;
}

// TE's random Hadamard transform for the wgrad GEMM's NVFP4 operands (the columnwise copies of
// X and dY, 16 consecutive tokens at a time): RHT(v) = (v * s) H16 / 4 with H16 Sylvester's
// Hadamard matrix, s this fixed sign vector (TE get_wgrad_sign_vector, the same since TE 2.8, for
// every layer), each output rounded to BF16 before the amax and the quantisation. TE sums the 16
// exact products in a tensor core's FP32 accumulator in an order it does not document; here the
// sum is exact (double) and then rounded to FP32 and to BF16, which can differ from TE by one
// BF16 unit where the FP32 accumulation itself rounded (docs/NVFP4-TE.md §3, §7).
inline constexpr float kNvfp4RhtSigns[kNvfp4Block] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
namespace detail {
// out = in H16, exactly in double: out[j] = sum_i H16[i][j] in[i], H16[i][j] = (-1)^popcount(i & j)
// (Sylvester's construction). Its own inverse up to a factor 16.
inline void hadamard16(const double* in, double* out) {
  for (int j = 0; j < kNvfp4Block; ++j) {
    double sum = 0.0;
    for (int i = 0; i < kNvfp4Block; ++i)
      sum += (__builtin_popcount(static_cast<unsigned>(i & j)) & 1) != 0 ? -in[i] : in[i];
    out[j] = sum;
  }
}
}  // namespace detail

inline void nvfp4_rht16(const float* v, std::int64_t stride, float* out) {
  double in[kNvfp4Block], h[kNvfp4Block];
  for (int i = 0; i < kNvfp4Block; ++i) in[i] = static_cast<double>(v[i * stride]) * kNvfp4RhtSigns[i];
  detail::hadamard16(in, h);
  for (int j = 0; j < kNvfp4Block; ++j) out[j] = bf16_to_float(float_to_bf16(static_cast<float>(h[j] * 0.25)));
}

// Stochastic rounding of x (already multiplied by its element factor) onto E2M1 with 8 random
// bits, as TE's software rule for cvt.rs.satfinite.e2m1 does (util/ptx.cuh
// stochastic_round_fp4_e2m1, TE main; not verified equal to the instruction bit for bit): the
// magnitude plus u = rbits / 256 of its grid step, truncated to the grid at that sum, at most 6.
// TE applies it to dY's copies only (dgrad and wgrad); its draws come from Philox on the GPU and
// cannot be reproduced here, so a caller draws its own seeded bits: the same distribution.
FP8A_HD float stochastic_round_e2m1(float x, std::uint8_t rbits) {
  const auto step_of = [](float a) { return a < 2.0f ? 0.5f : a < 4.0f ? 1.0f : 2.0f; };
  const float a = std::fabs(x);
  const float t = std::fma(static_cast<float>(rbits) / 256.0f, step_of(a), a);
  const float st = step_of(t);
  float q = std::floor(t / st) * st;
  q = q < kE2M1Max ? q : kE2M1Max;
  return std::copysign(q, x);
}

// How a tensor copy is quantised to NVFP4 (docs/NVFP4-TE.md §1-4): TE gives weights 16x16 tiles
// (both copies then agree), the wgrad GEMM's columnwise copies of X and dY the Hadamard transform,
// and dY's copies stochastic rounding; NVTE_NVFP4_DISABLE_* turn each off.
struct Nvfp4Copy {
  bool columnwise = false;  // blocks run down the columns (the transposed copy wgrad reads)
  bool two_d = false;       // 16x16 tiles (weights), the same for either orientation
  // The 2-D tiles' rows and columns: TE's 16 x 16 (at most that); a GEMM's drawn rows of a weight
  // are cast in tiles 2 rows (or columns) high beside their tile's amaxes (engine/gemm_operands.cpp).
  std::int64_t tile_rows = kNvfp4Block, tile_cols = kNvfp4Block;
  bool rht = false;         // the 16-point Hadamard transform along the blocks first
  bool stochastic = false;  // stochastic rounding, from `seed`
  Nvfp4BlockRule rule = Nvfp4BlockRule::kScaleFirst;
  std::uint64_t seed = 0;
};

namespace detail {
// 8 random bits for element i of a copy: splitmix64 of (seed, i), the same whatever the order of
// the work (a reproducible stream; TE's Philox draws cannot be reproduced off the GPU).
inline std::uint8_t nvfp4_random_bits(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint8_t>((z ^ (z >> 31)) >> 56);
}

// The 1-D blocks of a [rows, cols] row-major copy: f(at, step, count) for each run of up to 16
// consecutive elements along a row (rowwise) or down a column (columnwise), its first element at
// `at`, the next `step` further; only the full runs of 16 where full_only (the transform's).
template <class F>
void for_each_line_block(std::int64_t rows, std::int64_t cols, bool columnwise, bool full_only, const F& f) {
  const std::int64_t lines = columnwise ? cols : rows, length = columnwise ? rows : cols;
  const std::int64_t step = columnwise ? cols : 1, next = columnwise ? 1 : cols;
  for (std::int64_t l = 0; l < lines; ++l)
    for (std::int64_t b = 0; b < length && (!full_only || b + kNvfp4Block <= length); b += kNvfp4Block)
      f(l * next + b * step, step, std::min<std::int64_t>(kNvfp4Block, length - b));
}
}  // namespace detail

// Where a [rows, cols] piece of a tensor lies in the whole tensor, for the stochastic rounding
// stream: piece element (r, c) is tensor element row(r) * tensor_cols + col(c), with row(r) =
// rows[r] (or first_row + r without a list) and col(c) likewise. The default is the whole tensor.
struct Nvfp4Place {
  const std::int64_t* rows = nullptr;
  const std::int64_t* cols = nullptr;
  std::int64_t first_row = 0, first_col = 0;
  std::int64_t tensor_cols = -1;  // -1: the piece's own width
  std::uint64_t element(std::int64_t r, std::int64_t c, std::int64_t piece_cols) const {
    const std::int64_t tr = rows != nullptr ? rows[r] : first_row + r;
    const std::int64_t tc = cols != nullptr ? cols[c] : first_col + c;
    return static_cast<std::uint64_t>(tr * (tensor_cols < 0 ? piece_cols : tensor_cols) + tc);
  }
};

// What a copy's quantisation did besides its values, in the domain it quantised (after the
// transform where applied): elements past 6 after their block's factor (TE's overflow: beyond
// what E2M1 holds; the block's largest lands there when its E4M3 scale rounded down), elements
// past the last rounding boundary, >= 7, where nearest rounding (a tie goes to the 8 E2M1 lacks)
// would saturate (the same boundary under stochastic rounding, which clips everything past 6:
// so only a saturating scale counts, not the scale's own rounding; a block whose scale is 0
// decodes to 0 and counts in neither), and the range of the blocks' decode factors (block scale *
// decode, the value one E2M1 unit is worth).
struct Nvfp4Tally {
  std::int64_t overflow = 0, saturated = 0;
  float decode_min = INFINITY, decode_max = 0.0f;
};

// The amax a copy's level-2 scale comes from: the largest |x| (NaN skipped), or with `rht` the
// largest |RHT(x)| along the copy's blocks (the transformed values, each rounded to BF16, as TE's
// amax kernel after the transform sees them; only whole runs of 16 are transformed).
inline float nvfp4_copy_amax(const float* x, std::int64_t rows, std::int64_t cols, bool columnwise, bool rht) {
  float amax = 0.0f;
  if (!rht) {
    for (std::int64_t i = 0; i < rows * cols; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    return amax;
  }
  detail::for_each_line_block(rows, cols, columnwise, false, [&](std::int64_t at, std::int64_t step, std::int64_t n) {
    float buf[kNvfp4Block];
    if (n == kNvfp4Block) {
      nvfp4_rht16(x + at, step, buf);
    } else {
      for (std::int64_t i = 0; i < n; ++i) buf[i] = x[at + i * step];
    }
    for (std::int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(buf[i]));
  });
  return amax;
}

// A [rows, cols] row-major piece of a tensor quantised as one NVFP4 copy whose level-2 scales
// come from the whole tensor's amax (nvfp4_copy_amax): s_enc = nvfp4_global_encode_scale(amax)
// and decode = nvfp4_decode_factor(amax). Decoded back into `out` in the tensor's own domain (the Hadamard
// transform undone, exactly, where it was applied): each element is code * block scale * decode,
// the value the GEMM multiplies with (cuBLASLt applies the E4M3 scales, the per-tensor factors
// once to the output). The piece holds whole
// blocks along the copy's direction (a last partial block or tile gets its own scale, as at the
// tensor's edge). `place` says where the piece lies, for the stochastic rounding stream.
// With `transformed_domain` a transformed copy stays in the transform's domain (as the GEMM
// multiplies it: wgrad's two operands carry the same transform along the reduction, which cancels
// in their product).
inline void nvfp4_quantize_piece(const float* x, std::int64_t rows, std::int64_t cols, const Nvfp4Copy& copy,
                                 float s_enc, float decode, const Nvfp4Place& place, float* out,
                                 Nvfp4Tally* tally, bool transformed_domain = false) {
  const std::int64_t n = rows * cols;
  // The values the quantiser sees: the input, or its transform (BF16) along the blocks' direction.
  std::vector<float> t;
  const float* v = x;
  if (copy.rht && !copy.two_d) {
    t.assign(x, x + n);
    const auto transform = [&](std::int64_t at, std::int64_t step, std::int64_t) {
      float buf[kNvfp4Block];
      nvfp4_rht16(x + at, step, buf);
      for (int i = 0; i < kNvfp4Block; ++i) t[static_cast<std::size_t>(at + i * step)] = buf[i];
    };
    detail::for_each_line_block(rows, cols, copy.columnwise, true, transform);
    v = t.data();
  }
  // One block (or tile): its elements' indices, its scale from their amax, each element coded.
  std::int64_t idx[kNvfp4Block * kNvfp4Block];
  const auto block = [&](std::int64_t count) {
    float bmax = 0.0f;
    for (std::int64_t k = 0; k < count; ++k) bmax = std::fmax(bmax, std::fabs(v[idx[k]]));
    const float scale = nvfp4_block_scale(bmax, s_enc, copy.rule);
    const float factor = nvfp4_element_factor(scale, s_enc);
    if (tally != nullptr) {
      const auto unit = static_cast<float>(static_cast<double>(scale) * decode);
      tally->decode_min = std::fmin(tally->decode_min, unit);
      tally->decode_max = std::fmax(tally->decode_max, unit);
    }
    for (std::int64_t k = 0; k < count; ++k) {
      const float y = v[idx[k]] * factor;
      float code;
      if (copy.stochastic) {
        const std::uint64_t element = place.element(idx[k] / cols, idx[k] % cols, cols);
        code = stochastic_round_e2m1(y, detail::nvfp4_random_bits(copy.seed, element));
      } else {
        code = round_trip_e2m1(y);
      }
      // A zero block scale (the block's amax below E4M3's range under the tensor's level-2
      // scale) decodes every element to 0: flushed, counted as underflow, not saturated.
      if (tally != nullptr && scale > 0.0f) {
        tally->overflow += std::fabs(y) > kE2M1Max;
        tally->saturated += std::fabs(y) >= 7.0f;
      }
      out[idx[k]] = static_cast<float>(static_cast<double>(code) * scale * decode);
    }
  };
  if (copy.two_d) {
    for (std::int64_t r0 = 0; r0 < rows; r0 += copy.tile_rows)
      for (std::int64_t c0 = 0; c0 < cols; c0 += copy.tile_cols) {
        std::int64_t count = 0;
        for (std::int64_t r = r0; r < std::min(rows, r0 + copy.tile_rows); ++r)
          for (std::int64_t c = c0; c < std::min(cols, c0 + copy.tile_cols); ++c) idx[count++] = r * cols + c;
        block(count);
      }
  } else {
    const auto line_block = [&](std::int64_t at, std::int64_t step, std::int64_t count) {
      for (std::int64_t k = 0; k < count; ++k) idx[k] = at + k * step;
      block(count);
    };
    detail::for_each_line_block(rows, cols, copy.columnwise, false, line_block);
  }
  // Back from the transform's domain: H16 H16 = 16 I, so (y H16 / 4) undoes (v * s) H16 / 4
  // once multiplied by s; exact in double, then rounded to float.
  const auto untransform = [&](std::int64_t at, std::int64_t step, std::int64_t) {
    double y[kNvfp4Block], back[kNvfp4Block];
    for (int i = 0; i < kNvfp4Block; ++i) y[i] = out[at + i * step];
    detail::hadamard16(y, back);
    for (int j = 0; j < kNvfp4Block; ++j)
      out[at + j * step] = static_cast<float>(back[j] * 0.25 * kNvfp4RhtSigns[j]);
  };
  if (v != x && !transformed_domain) detail::for_each_line_block(rows, cols, copy.columnwise, true, untransform);
}

// A whole [rows, cols] row-major tensor quantised as one NVFP4 copy and decoded back into `out`
// (nvfp4_quantize_piece with the tensor's own amax). Returns that amax (after the transform where
// applied).
inline float nvfp4_fake_quantize(const float* x, std::int64_t rows, std::int64_t cols, const Nvfp4Copy& copy,
                                 float* out) {
  const float amax = nvfp4_copy_amax(x, rows, cols, copy.columnwise, copy.rht && !copy.two_d);
  nvfp4_quantize_piece(x, rows, cols, copy, nvfp4_global_encode_scale(amax), nvfp4_decode_factor(amax),
                       Nvfp4Place{}, out, nullptr);
  return amax;
}

}  // namespace fp8a

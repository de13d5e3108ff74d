// Fake quantisation: x -> dequantised FP8 (or BF16) value, exactly as a recipe casts, for a run of
// whole rows of a tensor's 2-D view. One routine for every recipe kind, used by the CPU backend's
// metric pass and by the GEMM-error computation.
#pragma once

#include <cfloat>
#include <cstdint>
#include <limits>

#include "core/nvfp4.hpp"
#include "core/recipe.hpp"
#include "core/tensor_view.hpp"
#include "engine/cpu_isa.hpp"

namespace fp8a {

// Everything the cast needs, resolved: the scale for per-tensor recipes (current from this
// tensor's amax, delayed from the replayed history) or the block rule for blocked ones.
struct QuantSpec {
  RecipeKind kind = RecipeKind::kPerTensorCurrent;
  Fp8Format format = Fp8Format::kE4M3;
  BlockShape block;                // {0,0} for per-tensor and bf16
  float scale = 1.0f;              // per-tensor recipes
  bool pow2_scales = true;         // block
  MxScaleRule mx_rule = MxScaleRule::kTeRoundUp;
  float value_for_inf = FLT_MAX;   // block: an infinite scale becomes the input type's max
  // NVFP4: what the copy gets besides its blocks (the transform, stochastic rounding; its
  // direction and 2-D tiles are the block shape's); its level-2 scales from the whole tensor's
  // amax (nvfp4_copy_amax, or the ranks' reduced one): `scale` is nvfp4_global_encode_scale(amax)
  // and `nvfp4_decode` nvfp4_decode_factor(amax); and where the rows being cast lie in the tensor
  // (the stochastic rounding stream): fake_quantize_rows' callers set `place`.
  Nvfp4Copy nvfp4;
  float nvfp4_decode = std::numeric_limits<float>::quiet_NaN();
  Nvfp4Place place;
};

// Counts and scale range over the fake-quantised rows.
struct FakeQuantCounts {
  std::int64_t underflow = 0;  // x != 0 but the FP8 (or BF16) value is +-0
  std::int64_t saturated = 0;  // |x * scale| beyond the last FP8 rounding boundary (464 / 61440):
                               // clipped by the saturating cast (a non-saturating one gives NaN/inf)
  std::int64_t overflow = 0;   // |x| > fp8_max * scale_inv (TE's overflows% numerator)
  float scale_inv_min = std::numeric_limits<float>::infinity();
  float scale_inv_max = 0.0f;
  void add(std::int64_t underflow_count, std::int64_t saturated_count, std::int64_t overflow_count);
  void merge(const FakeQuantCounts& o);
};

// The largest finite value of a capture's input type (TE's value_for_inf for block scales).
float input_type_max(DType dtype);

// Fake-quantises rows [0, rows) of x (row-major, `cols` wide) into deq. For blocked recipes the
// rows must start at a multiple of the block height; a last partial block (fewer rows or columns)
// is quantised with its own amax, as TE's blockwise reference pads with zeros.
// Runs on default_cpu_isa(), or on the given path (which must be supported); every path gives
// the same bits.
void fake_quantize_rows(const QuantSpec& spec, const float* x, std::int64_t rows,
                        std::int64_t cols, float* deq, FakeQuantCounts* counts);
void fake_quantize_rows(const QuantSpec& spec, const float* x, std::int64_t rows,
                        std::int64_t cols, float* deq, FakeQuantCounts* counts, CpuIsa isa);

// The FP8 values of a blocked cast and its blocks' scale inverses, for a GEMM that applies the
// scales per block: q [rows, cols] (fake_quantize_rows's deq is q * its block's scale_inv),
// scale_inv [ceil(rows / block.rows), ceil(cols / block.cols)] row-major. Rows start at a multiple
// of the block height, as for fake_quantize_rows.
void quantize_block_codes(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, float* q,
                          float* scale_inv);

// An NVFP4 cast as a GEMM multiplies it, as BF16 bits: code * block scale (exactly a BF16 value),
// transformed copies left in the transform's domain; the GEMM's output then carries
// spec.nvfp4_decode once per operand. Rows start at a multiple of 16, as for fake_quantize_rows.
void quantize_nvfp4_codes(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols,
                          std::uint16_t* q);

// Whether a blocked cast's scales are powers of two (MXFP8's E8M0; Float8BlockScaling with
// power-of-two scales): its dequantised values are then BF16 values.
bool has_pow2_block_scales(const QuantSpec& spec);

// Such a cast as a GEMM multiplies it, each block's values in one pass after its amax: the BF16
// bits of (fake_quantize_rows' deq) * 2^-exp2, each value rounded as deq is and then scaled; no
// counts. With 2^exp2 at or below x's largest magnitude (|exp2| <= 126), the products lie far
// from float32's under- and overflow, as normalised GEMM operands' do (a dequantised value is at
// most 2^(exp2 + 2)). False where some value is not a BF16 value (scaled into float's subnormals
// with more bits than BF16 keeps): the caller casts the other way. Rows start at a multiple of
// the block height, as for fake_quantize_rows.
bool quantize_pow2_block_bf16(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, int exp2,
                              std::uint16_t* out);

// The FP8 values of a per-tensor cast before its scale is undone, as BF16 bits: q = the saturating
// cast of x * spec.scale, as fake_quantize_rows rounds it (its deq is q * scale_inverse(spec.scale)).
// Every FP8 value is exactly a BF16 value, so a GEMM on q is a BF16 GEMM with the scales factored
// out. Runs on default_cpu_isa().
void quantize_codes(const QuantSpec& spec, const float* x, std::int64_t n, std::uint16_t* q);

}  // namespace fp8a

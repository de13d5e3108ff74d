#include "engine/fake_quant.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/block_scale.hpp"
#include "core/error.hpp"

namespace fp8a {

namespace {

// The three per-element counts of a run, accumulated in 32 bits (a run is < 2^31 elements).
struct RunCounts {
  std::int32_t underflow = 0, saturated = 0, overflow = 0;
};

template <float (*RoundTrip)(float)>
void quantize_run(const float* x, std::int64_t n, float scale, float scale_inv, float sat,
                  float ovf, float* deq, RunCounts* counts) {
  std::int32_t u_count = 0, s_count = 0, o_count = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float s = v * scale;
    const float q = RoundTrip(s);
    deq[i] = q * scale_inv;
    u_count += (v != 0.0f) & (q == 0.0f);
    s_count += std::fabs(s) > sat;
    o_count += std::fabs(v) > ovf;
  }
  counts->underflow += u_count;
  counts->saturated += s_count;
  counts->overflow += o_count;
}

// Per-element scales (one row of per-column values shared by all rows of a block row).
template <float (*RoundTrip)(float)>
void quantize_row_varying(const float* x, std::int64_t n, const float* scale,
                          const float* scale_inv, const float* ovf, float sat, float* deq,
                          RunCounts* counts) {
  std::int32_t u_count = 0, s_count = 0, o_count = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float s = v * scale[i];
    const float q = RoundTrip(s);
    deq[i] = q * scale_inv[i];
    u_count += (v != 0.0f) & (q == 0.0f);
    s_count += std::fabs(s) > sat;
    o_count += std::fabs(v) > ovf[i];
  }
  counts->underflow += u_count;
  counts->saturated += s_count;
  counts->overflow += o_count;
}

// For each block row [r0, r1) of x [rows, cols] (block.rows rows): the scale pair of each of its
// column blocks (block.cols columns), from the block's amax, to f(r0, r1, pairs). The one rule
// fake_quantize_blocked, block_codes and pow2_block_bf16 (narrow blocks) cast by.
template <class F>
void for_each_block_row(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, const F& f) {
  const std::int64_t br = spec.block.rows, bc = spec.block.cols;
  const std::int64_t col_blocks = (cols + bc - 1) / bc;
  std::vector<std::int32_t> col_amax(static_cast<std::size_t>(cols));
  std::vector<ScalePair> pairs(static_cast<std::size_t>(col_blocks));
  for (std::int64_t r0 = 0; r0 < rows; r0 += br) {
    const std::int64_t r1 = std::min(rows, r0 + br);
    // Per-column amax over the block row, then per block.
    std::fill(col_amax.begin(), col_amax.end(), 0);
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* row = x + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) col_amax[c] = std::max(col_amax[c], abs_bits_not_nan(row[c]));
    }
    for (std::int64_t b = 0; b < col_blocks; ++b) {
      const std::int64_t c0 = b * bc, c1 = std::min(cols, c0 + bc);
      std::int32_t amax_bits = 0;
      for (std::int64_t c = c0; c < c1; ++c) amax_bits = std::max(amax_bits, col_amax[c]);
      pairs[b] = block_scale(spec.kind, spec.format, spec.pow2_scales, spec.mx_rule, spec.value_for_inf,
                             bits_float(static_cast<std::uint32_t>(amax_bits)));
    }
    f(r0, r1, pairs);
  }
}

// Blocks one row high (1 x bc): each block's scale applies to one run, so the run is cast with
// it directly, without the per-column scale rows of the general case (the same operations per
// element, so the same bits).
template <float (*RoundTrip)(float)>
void fake_quantize_row_blocks(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols,
                              float* deq, FakeQuantCounts* counts) {
  const std::int64_t bc = spec.block.cols;
  const float fp8_max = fp8_max_finite(spec.format);
  const float sat = saturation_threshold(spec.format);
  RunCounts run;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c0 = 0; c0 < cols; c0 += bc) {
      const std::int64_t n = std::min(bc, cols - c0);
      const float* v = x + r * cols + c0;
      std::int32_t amax_bits = 0;
      for (std::int64_t i = 0; i < n; ++i) amax_bits = std::max(amax_bits, abs_bits_not_nan(v[i]));
      const ScalePair s = block_scale(spec.kind, spec.format, spec.pow2_scales, spec.mx_rule, spec.value_for_inf,
                                      bits_float(static_cast<std::uint32_t>(amax_bits)));
      counts->scale_inv_min = std::min(counts->scale_inv_min, s.scale_inv);
      counts->scale_inv_max = std::max(counts->scale_inv_max, s.scale_inv);
      quantize_run<RoundTrip>(v, n, s.scale, s.scale_inv, sat, fp8_max * s.scale_inv, deq + r * cols + c0, &run);
    }
  counts->add(run.underflow, run.saturated, run.overflow);
}

template <float (*RoundTrip)(float)>
void fake_quantize_blocked(const QuantSpec& spec, const float* x, std::int64_t rows,
                           std::int64_t cols, float* deq, FakeQuantCounts* counts) {
  if (spec.block.rows == 1) return fake_quantize_row_blocks<RoundTrip>(spec, x, rows, cols, deq, counts);
  const std::int64_t bc = spec.block.cols;
  const float fp8_max = fp8_max_finite(spec.format);
  const float sat = saturation_threshold(spec.format);
  std::vector<float> scale(static_cast<std::size_t>(cols)), scale_inv(scale.size()), ovf(scale.size());
  RunCounts run;
  for_each_block_row(spec, x, rows, cols, [&](std::int64_t r0, std::int64_t r1, const std::vector<ScalePair>& pairs) {
    for (std::size_t b = 0; b < pairs.size(); ++b) {
      const ScalePair& s = pairs[b];
      counts->scale_inv_min = std::min(counts->scale_inv_min, s.scale_inv);
      counts->scale_inv_max = std::max(counts->scale_inv_max, s.scale_inv);
      const float threshold = fp8_max * s.scale_inv;
      const std::int64_t c0 = static_cast<std::int64_t>(b) * bc, c1 = std::min(cols, c0 + bc);
      for (std::int64_t c = c0; c < c1; ++c) {
        scale[c] = s.scale;
        scale_inv[c] = s.scale_inv;
        ovf[c] = threshold;
      }
    }
    for (std::int64_t r = r0; r < r1; ++r)
      quantize_row_varying<RoundTrip>(x + r * cols, cols, scale.data(), scale_inv.data(),
                                      ovf.data(), sat, deq + r * cols, &run);
  });
  counts->add(run.underflow, run.saturated, run.overflow);
}

void fake_quantize_bf16(const float* x, std::int64_t n, float* deq, FakeQuantCounts* counts) {
  std::int32_t underflow = 0, overflow = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float d = bf16_to_float(float_to_bf16(v));
    deq[i] = d;
    underflow += (v != 0.0f) & (d == 0.0f);
    overflow += std::fabs(d) == INFINITY && std::fabs(v) < INFINITY;  // finite x rounded to inf
  }
  counts->add(underflow, overflow, overflow);
  counts->scale_inv_min = std::min(counts->scale_inv_min, 1.0f);
  counts->scale_inv_max = std::max(counts->scale_inv_max, 1.0f);
}

template <float (*RoundTrip)(float)>
void dispatch(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols,
              float* deq, FakeQuantCounts* counts) {
  if (spec.block.rows == 0) {
    const float scale_inv = scale_inverse(spec.scale);
    RunCounts run;
    quantize_run<RoundTrip>(x, rows * cols, spec.scale, scale_inv,
                            saturation_threshold(spec.format),
                            fp8_max_finite(spec.format) * scale_inv, deq, &run);
    counts->add(run.underflow, run.saturated, run.overflow);
    counts->scale_inv_min = std::min(counts->scale_inv_min, scale_inv);
    counts->scale_inv_max = std::max(counts->scale_inv_max, scale_inv);
  } else {
    fake_quantize_blocked<RoundTrip>(spec, x, rows, cols, deq, counts);
  }
}

// NVFP4 (core/nvfp4.hpp): the copy's direction and 2-D tiles from the block shape (so a
// transposed spec casts the transposed piece), its counts in the domain it quantised, and
// underflow where a finite nonzero x decodes to 0 (after the transform is undone: what the
// metrics compare).
Nvfp4Copy nvfp4_copy_of(const QuantSpec& spec) {
  Nvfp4Copy copy = spec.nvfp4;
  copy.two_d = spec.block.rows > 1 && spec.block.cols > 1;
  copy.columnwise = spec.block.rows > 1 && spec.block.cols == 1;
  if (copy.two_d) {
    copy.tile_rows = std::min<std::int64_t>(spec.block.rows, kNvfp4Block);
    copy.tile_cols = std::min<std::int64_t>(spec.block.cols, kNvfp4Block);
  }
  return copy;
}

void fake_quantize_nvfp4(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, float* deq,
                         FakeQuantCounts* counts) {
  Nvfp4Tally tally;
  nvfp4_quantize_piece(x, rows, cols, nvfp4_copy_of(spec), spec.scale, spec.nvfp4_decode, spec.place, deq, &tally);
  std::int64_t underflow = 0;
  for (std::int64_t i = 0; i < rows * cols; ++i)
    underflow += std::isfinite(x[i]) && x[i] != 0.0f && deq[i] == 0.0f;
  counts->add(underflow, tally.saturated, tally.overflow);
  counts->scale_inv_min = std::min(counts->scale_inv_min, tally.decode_min);
  counts->scale_inv_max = std::max(counts->scale_inv_max, tally.decode_max);
}

void fake_quantize_rows_body(const QuantSpec& spec, const float* x, std::int64_t rows,
                             std::int64_t cols, float* deq, FakeQuantCounts* counts) {
  if (!is_fp8(spec.kind)) return fake_quantize_bf16(x, rows * cols, deq, counts);
  if (spec.kind == RecipeKind::kNvfp4) return fake_quantize_nvfp4(spec, x, rows, cols, deq, counts);
  if (spec.format == Fp8Format::kE4M3)
    dispatch<round_trip_e4m3>(spec, x, rows, cols, deq, counts);
  else
    dispatch<round_trip_e5m2>(spec, x, rows, cols, deq, counts);
}

FP8A_CPU_PATHS(void, fake_quantize_rows_on,
               (const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols,
                float* deq, FakeQuantCounts* counts),
               (spec, x, rows, cols, deq, counts), fake_quantize_rows_body)

template <float (*RoundTrip)(float)>
void block_codes(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, float* q,
                 float* block_scale_inv) {
  const std::int64_t br = spec.block.rows, bc = spec.block.cols;
  std::vector<float> scale(static_cast<std::size_t>(cols));
  for_each_block_row(spec, x, rows, cols, [&](std::int64_t r0, std::int64_t r1, const std::vector<ScalePair>& pairs) {
    const auto col_blocks = static_cast<std::int64_t>(pairs.size());
    for (std::int64_t b = 0; b < col_blocks; ++b) {
      block_scale_inv[(r0 / br) * col_blocks + b] = pairs[static_cast<std::size_t>(b)].scale_inv;
      for (std::int64_t c = b * bc; c < std::min(cols, (b + 1) * bc); ++c) scale[c] = pairs[static_cast<std::size_t>(b)].scale;
    }
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t c = 0; c < cols; ++c) q[r * cols + c] = RoundTrip(x[r * cols + c] * scale[c]);
  });
}

void block_codes_body(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, float* q,
                      float* block_scale_inv) {
  if (spec.format == Fp8Format::kE4M3)
    block_codes<round_trip_e4m3>(spec, x, rows, cols, q, block_scale_inv);
  else
    block_codes<round_trip_e5m2>(spec, x, rows, cols, q, block_scale_inv);
}

FP8A_CPU_PATHS(void, block_codes_on,
               (const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, float* q,
                float* block_scale_inv),
               (spec, x, rows, cols, q, block_scale_inv), block_codes_body)

// One run of a power-of-two blocked cast as pow2_block_bf16 writes it: (q * scale_inv) * by, the
// same two roundings as fake_quantize_rows' deq and to_gemm_input's normalising, as BF16 bits;
// the low bits of every result ORed into *low.
template <float (*RoundTrip)(float)>
void pow2_bf16_run(const float* x, std::int64_t n, float scale, float scale_inv, float by, std::uint16_t* out,
                   std::uint32_t* low) {
  std::uint32_t l = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t b = float_bits((RoundTrip(x[i] * scale) * scale_inv) * by);
    l |= b & 0xFFFFu;
    out[i] = static_cast<std::uint16_t>(b >> 16);
  }
  *low |= l;
}

// The same with a scale pair per element (a block row's columns).
template <float (*RoundTrip)(float)>
void pow2_bf16_row(const float* x, std::int64_t n, const float* scale, const float* scale_inv, float by,
                   std::uint16_t* out, std::uint32_t* low) {
  std::uint32_t l = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t b = float_bits((RoundTrip(x[i] * scale[i]) * scale_inv[i]) * by);
    l |= b & 0xFFFFu;
    out[i] = static_cast<std::uint16_t>(b >> 16);
  }
  *low |= l;
}

// pow2_block_bf16 block by block, each block's amax and then its values while they are in cache:
// blocks at least 8 wide one at a time, narrower ones (a column's) a block row at a time.
template <float (*RoundTrip)(float)>
bool pow2_block_bf16(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, int exp2,
                     std::uint16_t* out) {
  const std::int64_t br = spec.block.rows, bc = spec.block.cols;
  const float by = std::ldexp(1.0f, -exp2);
  std::uint32_t low = 0;
  if (bc < 8) {
    thread_local std::vector<float> scale, scale_inv;
    scale.resize(static_cast<std::size_t>(cols));
    scale_inv.resize(scale.size());
    for_each_block_row(spec, x, rows, cols, [&](std::int64_t r0, std::int64_t r1,
                                                 const std::vector<ScalePair>& pairs) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const ScalePair& p = pairs[static_cast<std::size_t>(c / bc)];
        scale[c] = p.scale;
        scale_inv[c] = p.scale_inv;
      }
      for (std::int64_t r = r0; r < r1; ++r)
        pow2_bf16_row<RoundTrip>(x + r * cols, cols, scale.data(), scale_inv.data(), by, out + r * cols, &low);
    });
    return low == 0;
  }
  for (std::int64_t r0 = 0; r0 < rows; r0 += br) {
    const std::int64_t r1 = std::min(rows, r0 + br);
    for (std::int64_t c0 = 0; c0 < cols; c0 += bc) {
      const std::int64_t n = std::min(bc, cols - c0);
      std::int32_t amax_bits = 0;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t i = 0; i < n; ++i)
          amax_bits = std::max(amax_bits, abs_bits_not_nan(x[r * cols + c0 + i]));
      const ScalePair s = block_scale(spec.kind, spec.format, spec.pow2_scales, spec.mx_rule, spec.value_for_inf,
                                      bits_float(static_cast<std::uint32_t>(amax_bits)));
      for (std::int64_t r = r0; r < r1; ++r)
        pow2_bf16_run<RoundTrip>(x + r * cols + c0, n, s.scale, s.scale_inv, by, out + r * cols + c0, &low);
    }
  }
  return low == 0;
}

bool pow2_block_bf16_body(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, int exp2,
                          std::uint16_t* out) {
  if (spec.format == Fp8Format::kE4M3) return pow2_block_bf16<round_trip_e4m3>(spec, x, rows, cols, exp2, out);
  return pow2_block_bf16<round_trip_e5m2>(spec, x, rows, cols, exp2, out);
}

FP8A_CPU_PATHS(bool, pow2_block_bf16_on,
               (const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, int exp2,
                std::uint16_t* out),
               (spec, x, rows, cols, exp2, out), pow2_block_bf16_body)

template <float (*RoundTrip)(float)>
void codes_run(const float* x, std::int64_t n, float scale, std::uint16_t* q) {
  for (std::int64_t i = 0; i < n; ++i) q[i] = static_cast<std::uint16_t>(float_bits(RoundTrip(x[i] * scale)) >> 16);
}

void quantize_codes_body(const QuantSpec& spec, const float* x, std::int64_t n, std::uint16_t* q) {
  if (spec.format == Fp8Format::kE4M3)
    codes_run<round_trip_e4m3>(x, n, spec.scale, q);
  else
    codes_run<round_trip_e5m2>(x, n, spec.scale, q);
}

FP8A_CPU_PATHS(void, quantize_codes_on, (const QuantSpec& spec, const float* x, std::int64_t n, std::uint16_t* q),
               (spec, x, n, q), quantize_codes_body)

}  // namespace

void quantize_block_codes(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, float* q,
                          float* scale_inv) {
  FP8A_CHECK(spec.block.rows >= 1 && spec.block.cols >= 1 && !is_per_tensor(spec.kind) &&
                 !two_level_scale(spec.kind),
             "quantize_block_codes: a blocked FP8 recipe only");
  FP8A_CPU_PICK(default_cpu_isa(), block_codes_on)(spec, x, rows, cols, q, scale_inv);
}

bool has_pow2_block_scales(const QuantSpec& spec) {
  const ScaleType t = recipe_kind_traits(spec.kind).scale_type;  // pow2_scales: the kPow2 kinds' option
  return t == ScaleType::kE8M0 || (t == ScaleType::kPow2 && spec.pow2_scales);
}

bool quantize_pow2_block_bf16(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols, int exp2,
                              std::uint16_t* out) {
  FP8A_CHECK(has_pow2_block_scales(spec) && spec.block.rows >= 1 && spec.block.cols >= 1,
             "quantize_pow2_block_bf16: a blocked recipe with power-of-two scales only");
  FP8A_CHECK(exp2 >= -126 && exp2 <= 126, "quantize_pow2_block_bf16: 2^-exp2 not a normal float");
  return FP8A_CPU_PICK(default_cpu_isa(), pow2_block_bf16_on)(spec, x, rows, cols, exp2, out);
}

void quantize_codes(const QuantSpec& spec, const float* x, std::int64_t n, std::uint16_t* q) {
  FP8A_CHECK(is_per_tensor(spec.kind), "quantize_codes: a per-tensor recipe only");
  FP8A_CPU_PICK(default_cpu_isa(), quantize_codes_on)(spec, x, n, q);
}

void quantize_nvfp4_codes(const QuantSpec& spec, const float* x, std::int64_t rows, std::int64_t cols,
                          std::uint16_t* q) {
  FP8A_CHECK(two_level_scale(spec.kind), "quantize_nvfp4_codes: an NVFP4 recipe only");
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  nvfp4_quantize_piece(x, rows, cols, nvfp4_copy_of(spec), spec.scale, 1.0f, spec.place, v.data(), nullptr, true);
  for (std::size_t i = 0; i < v.size(); ++i) q[i] = static_cast<std::uint16_t>(float_bits(v[i]) >> 16);
}

void FakeQuantCounts::add(std::int64_t u, std::int64_t s, std::int64_t o) {
  underflow += u;
  saturated += s;
  overflow += o;
}

void FakeQuantCounts::merge(const FakeQuantCounts& o) {
  underflow += o.underflow;
  saturated += o.saturated;
  overflow += o.overflow;
  scale_inv_min = std::min(scale_inv_min, o.scale_inv_min);
  scale_inv_max = std::max(scale_inv_max, o.scale_inv_max);
}

float input_type_max(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return bf16_to_float(0x7F7F);  // 3.3895314e38
    case DType::kF16: return 65504.0f;
    case DType::kF32: break;
  }
  return FLT_MAX;
}

void fake_quantize_rows(const QuantSpec& spec, const float* x, std::int64_t rows,
                        std::int64_t cols, float* deq, FakeQuantCounts* counts) {
  fake_quantize_rows(spec, x, rows, cols, deq, counts, default_cpu_isa());
}

void fake_quantize_rows(const QuantSpec& spec, const float* x, std::int64_t rows,
                        std::int64_t cols, float* deq, FakeQuantCounts* counts, CpuIsa isa) {
  FP8A_CHECK(rows * cols < (std::int64_t{1} << 31), "fake_quantize_rows: run too long for 32-bit counts");
  FP8A_CHECK(!is_fp8(spec.kind) || (spec.block.rows == 0) == is_per_tensor(spec.kind),
             "block shape does not fit the recipe");
  FP8A_CHECK(cpu_isa_supported(isa), "fake_quantize_rows: a CPU path this CPU lacks");
  FP8A_CHECK(!two_level_scale(spec.kind) || !std::isnan(spec.nvfp4_decode),
             "NVFP4 cast without its level-2 scales");
  FP8A_CPU_PICK(isa, fake_quantize_rows_on)(spec, x, rows, cols, deq, counts);
}

}  // namespace fp8a

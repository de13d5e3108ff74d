#include "engine/gemm_error.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <cmath>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/cpu_gemm.hpp"
#include "engine/cpu_isa.hpp"
#include "engine/evaluation_index.hpp"
#include "engine/fake_quant.hpp"
#include "engine/gemm_pairing.hpp"
#include "engine/gemm_sampling.hpp"
#include "engine/gemm_stats.hpp"
#include "engine/quant_spec.hpp"
#include "engine/unit_codec.hpp"

namespace fp8a {

namespace {

using Floats = std::vector<float>;

// The spec an evaluation row was computed with (per-tensor scale as evaluated, delayed included).
QuantSpec spec_of(const EvaluationRow& row) {
  QuantSpec s;
  s.kind = row.recipe.kind;
  s.format = row.fp8;
  s.block = block_shape(row.recipe, row.key.role, row.orientation);
  s.scale = row.metrics.scale;
  s.pow2_scales = row.recipe.pow2_scales;
  s.mx_rule = row.recipe.mx_rule;
  s.value_for_inf = input_type_max(row.input_dtype);
  if (row.recipe.kind == RecipeKind::kNvfp4) {  // the level-2 scales as evaluated
    s.nvfp4 = nvfp4_copy_for(row.recipe, row.key.role, row.orientation);
    s.nvfp4_decode = row.metrics.scale_inv;
  }
  return s;
}

// The spec of one rank's shard: the row's, except current scaling and NVFP4 with
// --amax-reduction none, where each shard has the scale of its own amax (the merged row then has
// no single scale).
QuantSpec spec_for(const EvaluationRow& row, const CapturedTensor& shard) {
  QuantSpec s = spec_of(row);
  if (row.ranks > 1 && is_per_tensor(row.recipe.kind) &&
      !replays_history(row.recipe.kind) && std::isnan(s.scale))
    s.scale = per_tensor_scale(row.recipe, row.fp8, compute_tensor_stats(shard.view).amax);
  if (row.ranks > 1 && row.recipe.kind == RecipeKind::kNvfp4 && std::isnan(s.scale))  // each its own
    set_nvfp4_amax(s.nvfp4.rht ? nvfp4_rht_amax(shard.view, row.orientation) : compute_tensor_stats(shard.view).amax,
                   &s);
  return s;
}

// The spec of an operand that a GEMM gets transposed (a columnwise copy, laid out K-major).
QuantSpec transposed(QuantSpec s) {
  s.block = BlockShape{s.block.cols, s.block.rows};
  return s;
}

// view's elements [begin, begin + n) as floats, non-finite ones set to 0 (they would make every
// GEMM NaN), compiled for each CPU path: BF16 widened in vector registers. Returns the largest
// magnitude's bits.
std::uint32_t load_clean_body(const TensorView& view, std::int64_t begin, std::int64_t n, float* out) {
  std::uint32_t m = 0;
  if (view.dtype == DType::kBF16) {
    // In runs copied to an aligned buffer first (the tensor's bytes may lie at any address), so
    // that the loop over them is a vector loop.
    const auto* p = reinterpret_cast<const unsigned char*>(view.data) + 2 * begin;
    constexpr std::int64_t kRun = 1024;
    alignas(64) std::uint16_t h[kRun];
    for (std::int64_t i0 = 0; i0 < n; i0 += kRun) {
      const std::int64_t len = std::min(kRun, n - i0);
      std::memcpy(h, p + 2 * i0, static_cast<std::size_t>(2 * len));
      float* o = out + i0;
      for (std::int64_t i = 0; i < len; ++i) {
        // exponent all ones: inf or NaN
        const std::uint32_t b = (h[i] & 0x7F80u) == 0x7F80u ? 0u : static_cast<std::uint32_t>(h[i]) << 16;
        m = std::max(m, b & 0x7FFFFFFFu);
        o[i] = std::bit_cast<float>(b);
      }
    }
    return m;
  }
  view.load_floats(begin, n, out);
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = std::isfinite(out[i]) ? out[i] : 0.0f;
    m = std::max(m, std::bit_cast<std::uint32_t>(out[i]) & 0x7FFFFFFFu);
  }
  return m;
}
FP8A_CPU_PATHS(std::uint32_t, load_clean_on,
               (const TensorView& view, std::int64_t begin, std::int64_t n, float* out), (view, begin, n, out),
               load_clean_body)

// One operand of a GEMM, read from the capture as it lies there: the GEMM's rows are the
// tensor's rows idx (kKMajor: the tensor's columns are the reduction) or its columns idx
// (kKOuter: its rows are the reduction; wgrad's dY^T and X^T, dgrad's W^T). Loaded so, no copy is
// ever transposed, and the recipe's cast applies with the block shape stated in the tensor's
// layout (spec_of).
struct OperandSource {
  const TensorView* view = nullptr;
  GemmLayout layout = GemmLayout::kKMajor;
  std::vector<std::int64_t> idx;
  std::int64_t rows() const { return static_cast<std::int64_t>(idx.size()); }
  std::int64_t k() const { return layout == GemmLayout::kKMajor ? view->cols : view->rows; }
  // The GEMM's rows [r0, r0 + n) in the tensor's layout: kKMajor [n, k], kKOuter [k, n]. Non-finite
  // elements are set to 0 (they would make every GEMM NaN). Returns their largest magnitude.
  Floats load(std::int64_t r0, std::int64_t n) const {
    Floats out;
    load(r0, n, &out);
    return out;
  }
  float load(std::int64_t r0, std::int64_t n, Floats* buffer) const {
    const std::int64_t kk = k();
    const auto load_clean = FP8A_CPU_PICK(default_cpu_isa(), load_clean_on);
    buffer->resize(static_cast<std::size_t>(n * kk));
    float* out = buffer->data();
    std::uint32_t m = 0;
    if (layout == GemmLayout::kKMajor) {
      for (std::int64_t r = 0; r < n; ++r)
        m = std::max(m, load_clean(*view, idx[r0 + r] * view->cols, kk, out + r * kk));
    } else {
      // Runs of consecutive columns, each read as one span of every tensor row.
      for (std::int64_t c = 0; c < n;) {
        std::int64_t run = 1;
        while (c + run < n && idx[r0 + c + run] == idx[r0 + c] + run) ++run;
        for (std::int64_t t = 0; t < kk; ++t)
          m = std::max(m, load_clean(*view, t * view->cols + idx[r0 + c], run, out + t * n + c));
        c += run;
      }
    }
    return std::bit_cast<float>(m);
  }
  // The quantisation of rows [r0, r0 + n) as loaded: `rows` x `cols` of the tensor's layout.
  std::int64_t layout_rows(std::int64_t n) const { return layout == GemmLayout::kKMajor ? n : k(); }
  std::int64_t layout_cols(std::int64_t n) const { return layout == GemmLayout::kKMajor ? k() : n; }
};

// An operand as cpu_gemm multiplies it: values whose products carry 2^exp2 / divisor (the output
// is the GEMM's times 2^(exp2 of both) / (the product of the divisors, exact in float64)), as BF16
// where every value is one, else as float32; laid out as loaded.
struct GemmInput {
  GemmLayout layout = GemmLayout::kKMajor;
  int exp2 = 0;
  double divisor = 1.0;
  bool is_bf16 = false;
  std::vector<std::uint16_t> bf16;
  Floats f32;
  // Float32 block scales along the reduction (block:fp32), instead of the above: the FP8 values
  // in `blocks` blocks of kKBlock of the reduction, [blocks, rows, kKBlock] (zero-padded), and
  // each row's scale inverse in each block, [blocks, rows].
  std::int64_t blocks = 0, rows = 0;
  std::vector<std::uint16_t> block_codes;
  Floats block_scale_inv;
  // On a CPU without BF16 units (cpu_gemm_native_bf16 false): the BF16 values (bf16 or
  // block_codes) widened to float32 once, for an operand multiplied by many tiles (widen_once);
  // empty otherwise, and each product widens its operands itself.
  Floats wide;
};

// The operand's values as float32, for a CPU without BF16 units: widened once, or now into
// *scratch (its capacity kept, so that no tile zero-fills a new buffer).
const float* wide_values(const GemmInput& x, Floats* scratch) {
  if (!x.wide.empty()) return x.wide.data();
  if (x.blocks == 0 && !x.is_bf16) return x.f32.data();
  const std::vector<std::uint16_t>& codes = x.blocks > 0 ? x.block_codes : x.bf16;
  scratch->resize(codes.size());
  cpu_widen_bf16(codes.data(), static_cast<std::int64_t>(codes.size()), scratch->data());
  return scratch->data();
}

// Widens an operand's BF16 values for every product it takes part in, where the CPU multiplies
// BF16 as float32: the a operand of a part, multiplied by every tile of b, and a tile of b
// multiplied by several a (its buffer's capacity kept).
void widen_once(GemmInput* in) {
  in->wide.clear();
  if (cpu_gemm_native_bf16() || (in->blocks == 0 && !in->is_bf16)) return;  // or float32 already
  const std::vector<std::uint16_t>& codes = in->blocks > 0 ? in->block_codes : in->bf16;
  in->wide.resize(codes.size());
  cpu_widen_bf16(codes.data(), static_cast<std::int64_t>(codes.size()), in->wide.data());
}

// The reduction's block length of the casts whose scales are applied per block.
constexpr std::int64_t kKBlock = 128;

// The elementwise passes over an operand, compiled for each CPU path (cpu_isa.hpp).
float amax_body(const float* y, std::size_t n) {  // y finite: the largest |y| by its bits
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t b;
    std::memcpy(&b, y + i, 4);
    m = std::max(m, b & 0x7FFFFFFFu);
  }
  float f;
  std::memcpy(&f, &m, 4);
  return f;
}
// out = y * by (squared: (y * by)^2), by a power of two.
void scale_body(const float* y, std::size_t n, float by, bool squared, float* out) {
  if (squared)
    for (std::size_t i = 0; i < n; ++i) out[i] = (y[i] * by) * (y[i] * by);
  else
    for (std::size_t i = 0; i < n; ++i) out[i] = y[i] * by;
}
// The BF16 bits of y * by (squared: (y * by)^2); whether every value is a BF16 value (its low 16
// bits 0).
bool bf16_body(const float* y, std::size_t n, float by, bool squared, std::uint16_t* h) {
  std::uint32_t low = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = squared ? (y[i] * by) * (y[i] * by) : y[i] * by;
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    low |= b & 0xFFFFu;
    h[i] = static_cast<std::uint16_t>(b >> 16);
  }
  return low == 0;
}
FP8A_CPU_PATHS(float, amax_on, (const float* y, std::size_t n), (y, n), amax_body)
FP8A_CPU_PATHS(void, scale_on, (const float* y, std::size_t n, float by, bool squared, float* out),
               (y, n, by, squared, out), scale_body)
FP8A_CPU_PATHS(bool, bf16_on, (const float* y, std::size_t n, float by, bool squared, std::uint16_t* h),
               (y, n, by, squared, h), bf16_body)

// The binade of y's largest magnitude (amax where known, else NaN: found here), 0 for all zeros.
int binade_of(const float* y, std::size_t n, float amax) {
  if (std::isnan(amax)) amax = FP8A_CPU_PICK(default_cpu_isa(), amax_on)(y, n);
  return amax > 0.0f ? std::ilogb(amax) : 0;
}

// y [n] as a GEMM operand into *in (its buffers reused): y * 2^-e with 2^e the power of two at or
// below y's largest magnitude (normalise), so that the products lie far from float32's under- and
// overflow (BF16 units flush subnormals: this touches only values 2^-126 below the largest); with
// `squared`, the squares of those (the noise table's S). FP8 values need no normalising. amax:
// y's largest magnitude where known, else NaN.
void to_gemm_input(const float* y, std::size_t n, GemmLayout layout, double divisor, bool normalise, bool squared,
                   float amax, GemmInput* in) {
  const CpuIsa isa = default_cpu_isa();
  in->layout = layout;
  in->divisor = divisor;
  in->blocks = 0;  // *in may have held a block-scaled operand before
  int e = normalise ? binade_of(y, n, amax) : 0;
  in->exp2 = squared ? 2 * e : e;
  Floats wide;  // 2^-e not a normal float (amax beyond 2^126 or below 2^-126): two exact steps
  if (e > 126 || e < -126) {
    const int first = std::clamp(-e, -126, 126);
    wide.resize(n);
    FP8A_CPU_PICK(isa, scale_on)(y, n, std::ldexp(1.0f, first), false, wide.data());
    y = wide.data();
    e += first;
  }
  const float by = std::ldexp(1.0f, -e);
  in->bf16.resize(n);
  in->is_bf16 = FP8A_CPU_PICK(isa, bf16_on)(y, n, by, squared, in->bf16.data());
  if (!in->is_bf16) {
    in->f32.resize(n);
    FP8A_CPU_PICK(isa, scale_on)(y, n, by, squared, in->f32.data());
  }
}

// The cast's block length along the reduction of an operand laid out as `src`.
std::int64_t block_along_k(const OperandSource& src, const QuantSpec& spec) {
  return src.layout == GemmLayout::kKMajor ? spec.block.cols : spec.block.rows;
}

// GEMM rows [0, n) of an operand as loaded, x, under a blocked cast with float32 scales that are
// kKBlock long along the reduction, as its FP8 values and block scales (GemmInput's blocks), so
// that the GEMM is BF16 products of FP8 values within each block, scaled per block and row.
void prepare_block_scaled(const OperandSource& src, const Floats& x, std::int64_t n, const QuantSpec& spec,
                          Floats* work, GemmInput* in) {
  const std::int64_t lr = src.layout_rows(n), lc = src.layout_cols(n), k = src.k();
  const std::int64_t row_blocks = (lr + spec.block.rows - 1) / spec.block.rows;
  const std::int64_t col_blocks = (lc + spec.block.cols - 1) / spec.block.cols;
  work->resize(x.size());
  Floats scale_inv(static_cast<std::size_t>(row_blocks * col_blocks));
  quantize_block_codes(spec, x.data(), lr, lc, work->data(), scale_inv.data());
  const float* q = work->data();
  const std::int64_t blocks = (k + kKBlock - 1) / kKBlock;
  in->layout = src.layout;
  in->blocks = blocks;
  in->rows = n;
  in->block_codes.assign(static_cast<std::size_t>(blocks * n * kKBlock), 0);
  in->block_scale_inv.resize(static_cast<std::size_t>(blocks * n));
  const auto bits = [](float v) { return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) >> 16); };
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t l1 = std::min(kKBlock, k - b * kKBlock);
    for (std::int64_t r = 0; r < n; ++r) {
      std::uint16_t* out = in->block_codes.data() + (b * n + r) * kKBlock;
      if (src.layout == GemmLayout::kKMajor) {  // q [n, k], blocks {rows, kKBlock}
        in->block_scale_inv[static_cast<std::size_t>(b * n + r)] = scale_inv[static_cast<std::size_t>((r / spec.block.rows) * col_blocks + b)];
        for (std::int64_t l = 0; l < l1; ++l) out[l] = bits(q[r * k + b * kKBlock + l]);
      } else {  // q [k, n], blocks {kKBlock, cols}
        in->block_scale_inv[static_cast<std::size_t>(b * n + r)] = scale_inv[static_cast<std::size_t>(b * col_blocks + r / spec.block.cols)];
        for (std::int64_t l = 0; l < l1; ++l) out[l] = bits(q[(b * kKBlock + l) * n + r]);
      }
    }
  }
}

// GEMM rows [r0, r0 + n) of an operand as loaded, x, and their largest magnitude (NaN: not
// known): unquantised (a reference GEMM; `squared`: their squares), or with the cast of `spec`
// (in the tensor's layout) applied, into *in (work: a scratch buffer).
void prepare(const OperandSource& src, const Floats& x, float amax, std::int64_t r0, std::int64_t n,
             const QuantSpec* spec, bool squared, Floats* work, GemmInput* in) {
  in->wide.clear();
  if (spec == nullptr) return to_gemm_input(x.data(), x.size(), src.layout, 1.0, true, squared, amax, in);
  if (is_per_tensor(spec->kind)) {
    // q / scale exactly (the cast's dequantised values are q * scale_inverse(scale) rounded to
    // float: the same to an ulp), q BF16 values that need no normalising.
    in->layout = src.layout;
    in->divisor = static_cast<double>(spec->scale);
    in->blocks = 0;
    in->exp2 = 0;
    in->is_bf16 = true;
    in->bf16.resize(x.size());
    quantize_codes(*spec, x.data(), static_cast<std::int64_t>(x.size()), in->bf16.data());
    return;
  }
  if (spec->kind == RecipeKind::kBlock && !spec->pow2_scales && block_along_k(src, *spec) == kKBlock)
    return prepare_block_scaled(src, x, n, *spec, work, in);
  if (spec->kind == RecipeKind::kNvfp4) {
    // code * block scale, BF16 values, the per-tensor decode factor out of the sum; wgrad's two
    // transformed copies stay in the transform's domain, where their product is the same GEMM.
    QuantSpec placed = *spec;  // the stochastic rounding draws by the elements' places in the tensor
    placed.place.tensor_cols = src.view->cols;
    (src.layout == GemmLayout::kKMajor ? placed.place.rows : placed.place.cols) = src.idx.data() + r0;
    in->layout = src.layout;
    in->divisor = 1.0 / static_cast<double>(spec->nvfp4_decode);
    in->blocks = 0;
    in->exp2 = 0;
    in->is_bf16 = true;
    in->bf16.resize(x.size());
    quantize_nvfp4_codes(placed, x.data(), src.layout_rows(n), src.layout_cols(n), in->bf16.data());
    return;
  }
  if (has_pow2_block_scales(*spec)) {  // BF16 values: cast straight to BF16 bits, normalised by x's amax
    const int e = binade_of(x.data(), x.size(), amax);
    in->layout = src.layout;
    in->divisor = 1.0;
    in->blocks = 0;
    in->exp2 = e;
    in->is_bf16 = true;
    in->bf16.resize(x.size());
    if (e >= -126 && e <= 126 &&
        quantize_pow2_block_bf16(*spec, x.data(), src.layout_rows(n), src.layout_cols(n), e, in->bf16.data()))
      return;
  }
  work->resize(x.size());
  FakeQuantCounts unused;
  fake_quantize_rows(*spec, x.data(), src.layout_rows(n), src.layout_cols(n), work->data(), &unused);
  to_gemm_input(work->data(), x.size(), src.layout, 1.0, true, false, std::nanf(""), in);
}

// out [m, n] += p [m, n] * sa [i] * sb [j] (one block's product and its rows' scale inverses), in
// float64, compiled for each CPU path (the same bits on all).
void add_block_product_body(const float* p, const float* sa, const float* sb, std::int64_t m, std::int64_t n,
                            double* out) {
  for (std::int64_t i = 0; i < m; ++i) {
    const double si = sa[i];
    double* o = out + i * n;
    const float* pi = p + i * n;
    for (std::int64_t j = 0; j < n; ++j) o[j] += static_cast<double>(pi[j]) * (si * static_cast<double>(sb[j]));
  }
}
FP8A_CPU_PATHS(void, add_block_product_on,
               (const float* p, const float* sa, const float* sb, std::int64_t m, std::int64_t n, double* out),
               (p, sa, sb, m, n, out), add_block_product_body)

// out [m, n] (+)= sum over the reduction's blocks e of (a_e * b_e^T) * a's scale inverse of row i in
// block e * b's of row j, in float64: the products of FP8 values exact, summed in float32 within
// a block (c: a scratch buffer). Both operands must be block-scaled alike.
void add_block_scaled_product(const GemmInput& a, const GemmInput& b, std::int64_t m, std::int64_t n,
                              bool accumulate, Floats* c, double* out) {
  FP8A_CHECK(a.blocks > 0 && a.blocks == b.blocks && a.rows == m && b.rows == n,
             "block-scaled GEMM operands do not fit");
  if (!accumulate) std::fill(out, out + m * n, 0.0);
  constexpr std::int64_t kBatch = 16;  // blocks per call: c stays a few MB
  for (std::int64_t e0 = 0; e0 < a.blocks; e0 += kBatch) {
    const std::int64_t batch = std::min(kBatch, a.blocks - e0);
    c->resize(static_cast<std::size_t>(batch * m * n));
    if (cpu_gemm_native_bf16()) {
      cpu_gemm_bf16_batched(a.block_codes.data() + e0 * m * kKBlock, b.block_codes.data() + e0 * n * kKBlock, batch,
                            m, n, kKBlock, c->data());
    } else {
      thread_local Floats wa, wb;
      cpu_gemm_f32_batched(wide_values(a, &wa) + e0 * m * kKBlock, wide_values(b, &wb) + e0 * n * kKBlock, batch, m,
                           n, kKBlock, c->data());
    }
    const auto add_scaled = FP8A_CPU_PICK(default_cpu_isa(), add_block_product_on);
    for (std::int64_t e = 0; e < batch; ++e)
      add_scaled(c->data() + e * m * n, a.block_scale_inv.data() + (e0 + e) * m,
                 b.block_scale_inv.data() + (e0 + e) * n, m, n, out);
  }
}

// out [i] (+)= c [i] * p2 / divisor, in float64, compiled for each CPU path (the same bits on all).
void scale_out_body(const float* c, std::size_t n, double p2, double divisor, bool accumulate, double* out) {
  if (accumulate)
    for (std::size_t i = 0; i < n; ++i) out[i] += static_cast<double>(c[i]) * p2 / divisor;
  else
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<double>(c[i]) * p2 / divisor;
}
FP8A_CPU_PATHS(void, scale_out_on,
               (const float* c, std::size_t n, double p2, double divisor, bool accumulate, double* out),
               (c, n, p2, divisor, accumulate, out), scale_out_body)

// out [m, n] (+)= (a * b^T) * 2^(a.exp2 + b.exp2) / (a.divisor * b.divisor), in float64 (c: a
// scratch buffer).
void add_product(const GemmInput& a, const GemmInput& b, std::int64_t m, std::int64_t n, std::int64_t k,
                 bool accumulate, Floats* c, double* out) {
  if (a.blocks > 0 || b.blocks > 0) return add_block_scaled_product(a, b, m, n, accumulate, c, out);
  c->resize(static_cast<std::size_t>(m * n));
  if (a.is_bf16 && b.is_bf16 && cpu_gemm_native_bf16()) {
    cpu_gemm_bf16(a.bf16.data(), a.layout, b.bf16.data(), b.layout, m, n, k, c->data());
  } else {  // float32 products of the same values: BF16 ones widened exactly
    thread_local Floats wa, wb;
    cpu_gemm_f32(wide_values(a, &wa), a.layout, wide_values(b, &wb), b.layout, m, n, k, c->data());
  }
  FP8A_CPU_PICK(default_cpu_isa(), scale_out_on)(c->data(), c->size(), std::ldexp(1.0, a.exp2 + b.exp2),
                                                 a.divisor * b.divisor, accumulate, out);
}

std::int64_t tile_count(std::int64_t rows) { return (rows + kGemmTileRows - 1) / kGemmTileRows; }

// f(tile) for every tile of `rows` b rows, as tasks, isolated: a thread waiting for the tiles runs
// only tiles, never another job that would hold its own operands meanwhile.
template <class F>
void for_each_tile(std::int64_t rows, const F& f) {
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(std::int64_t{0}, tile_count(rows), [&](std::int64_t t) { f(t); });
  });
}

// One rank's share of a GEMM: the tensors its two operands are read from, and the evaluation rows
// that quantise them.
struct Term {
  OperandSource a, b;
  const CapturedTensor* a_tensor = nullptr;
  const CapturedTensor* b_tensor = nullptr;
  Floats a_raw;  // a's rows, loaded once: shared by the reference and every recipe
};

// A part of a GEMM's output: the sum of its terms' products (one term, or every rank's when the
// GEMM's reduction is split over the ranks), [rows, cols], its rows the units first_unit...
struct Part {
  std::vector<Term> terms;
  std::int64_t rows = 0, cols = 0, first_unit = 0;
  std::vector<double> ref;  // the reference output [rows, cols], float64 sums of the products
};

// Everything a GEMM of a layer needs for every recipe: its parts, with their references, how its
// output's rows and columns were drawn and the noise table (wgrad).
struct GemmCase {
  Gemm gemm = Gemm::kFprop;
  std::vector<Part> parts;
  std::int64_t units = 0;  // output rows computed (every part's)
  // The output's rows (units 0..units-1 of the sums) and columns (b's rows) as drawn
  // (gemm_sampling.hpp); on layers split over ranks the rows evenly spaced per rank and the
  // columns all.
  UnitDraw rows, cols;
  NoiseTable noise;
  bool has_noise = false;
  bool sampled() const { return rows.sampled() || cols.sampled(); }
  // What each computed entry stands for (null: the whole output computed).
  std::optional<SampledOutput> design() const {
    if (!sampled()) return std::nullopt;
    return SampledOutput{&rows, cols.sampled() ? &cols : nullptr};
  }
  // The first column of a tile at c0 in the per-column sums: -1 where the columns are all used.
  std::int64_t first_col(std::int64_t c0) const { return cols.sampled() ? c0 : -1; }
};

// Two casts that give the same values (or both none).
bool same_cast(const std::optional<QuantSpec>& x, const std::optional<QuantSpec>& y) {
  if (!x || !y) return !x && !y;
  return x->kind == y->kind && x->format == y->format && x->block == y->block &&
         std::bit_cast<std::uint32_t>(x->scale) == std::bit_cast<std::uint32_t>(y->scale) &&
         x->pow2_scales == y->pow2_scales && x->mx_rule == y->mx_rule &&
         std::bit_cast<std::uint32_t>(x->value_for_inf) == std::bit_cast<std::uint32_t>(y->value_for_inf) &&
         std::bit_cast<std::uint32_t>(x->nvfp4_decode) == std::bit_cast<std::uint32_t>(y->nvfp4_decode) &&
         x->nvfp4.rht == y->nvfp4.rht && x->nvfp4.stochastic == y->nvfp4.stochastic && x->nvfp4.seed == y->nvfp4.seed;
}

// The GEMMs of a part under several casts (per cast, spec_a and spec_b per term, in the tensors'
// layouts; none: unquantised), tile by tile: f(tile, first b row, rows, cast, out) with out
// [part.rows, rows] in float64. Each tile of b is read once, and cast once per distinct cast of b
// (the formats of a recipe share W's in fprop and dgrad, X's in wgrad).
using TermSpecs = std::vector<std::pair<std::optional<QuantSpec>, std::optional<QuantSpec>>>;
template <class F>
void part_products(const Part& part, const std::vector<TermSpecs>& casts, bool squared, const F& f) {
  const std::size_t nc = casts.size(), nt = part.terms.size();
  std::vector<std::vector<GemmInput>> a_in(nc, std::vector<GemmInput>(nt));
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(std::size_t{0}, nc * nt, [&](std::size_t i) {
      const std::size_t c = i / nt, t = i % nt;
      const Term& term = part.terms[t];
      const auto& spec = casts[c][t].first;
      Floats work;
      prepare(term.a, term.a_raw, std::nanf(""), 0, term.a.rows(), spec ? &*spec : nullptr, squared, &work,
              &a_in[c][t]);
      widen_once(&a_in[c][t]);
    });
  });
  // For each term and cast, the first cast with the same b cast: b is cast once for all of them.
  std::vector<std::vector<std::size_t>> first(nt, std::vector<std::size_t>(nc));
  for (std::size_t t = 0; t < nt; ++t)
    for (std::size_t c = 0; c < nc; ++c) {
      std::size_t same = 0;
      while (same < c && !same_cast(casts[same][t].second, casts[c][t].second)) ++same;
      first[t][c] = same;
    }
  for_each_tile(part.cols, [&](std::int64_t tile) {
    // A thread's buffers, kept from tile to tile: a tile task never waits, so never runs another.
    struct Scratch {
      Floats b, work, c;
      GemmInput b_in;
      std::vector<std::vector<double>> out;
    };
    thread_local Scratch s;
    const std::int64_t r0 = tile * kGemmTileRows, n = std::min(kGemmTileRows, part.cols - r0);
    s.out.resize(nc);
    for (auto& o : s.out) o.resize(static_cast<std::size_t>(part.rows * n));
    for (std::size_t t = 0; t < nt; ++t) {
      const Term& term = part.terms[t];
      const float b_amax = term.b.load(r0, n, &s.b);
      for (std::size_t c = 0; c < nc; ++c) {
        if (first[t][c] != c) continue;  // done with its first
        const auto& spec = casts[c][t].second;
        prepare(term.b, s.b, b_amax, r0, n, spec ? &*spec : nullptr, squared, &s.work, &s.b_in);
        if (std::count(first[t].begin() + static_cast<std::ptrdiff_t>(c), first[t].end(), c) > 1) widen_once(&s.b_in);
        for (std::size_t d = c; d < nc; ++d)
          if (first[t][d] == c)
            add_product(a_in[d][t], s.b_in, part.rows, n, term.b.k(), t > 0, &s.c, s.out[d].data());
      }
    }
    for (std::size_t c = 0; c < nc; ++c) f(tile, r0, n, c, s.out[c]);
  });
}

// Copies a tile [rows, n] of a part's output into columns [c0, c0 + n) of the whole [rows, cols].
void put_tile(const std::vector<double>& tile, std::int64_t rows, std::int64_t c0, std::int64_t n, std::int64_t cols,
              double* whole) {
  for (std::int64_t i = 0; i < rows; ++i)
    std::copy(tile.begin() + i * n, tile.begin() + (i + 1) * n, whole + i * cols + c0);
}

// The GEMM's parts for a layer: the operands of each rank as the GEMM reads them (K-major, the a
// rows sampled, on a single-rank layer the b rows too), grouped into parts by the layer's split;
// the references; wgrad's noise table. group, group_b: the block heights every recipe's a and b
// operands need kept whole.
GemmCase make_case(const GemmLayer& job, const GemmOperandUse& u, const GemmOptions& options, std::int64_t group,
                   std::int64_t group_b) {
  GemmCase c;
  c.gemm = u.gemm;
  const int ia = static_cast<int>(u.a), ib = static_cast<int>(u.b);
  const std::size_t nr = job.ranks.size();
  const bool wgrad = u.gemm == Gemm::kWgrad;
  // a: fprop X, dgrad dY (token rows), wgrad dY^T (dW rows); b: W, W^T, X^T (the output's columns).
  const GemmDims dims = job.dims(u.gemm);
  GemmSample sample_of = gemm_sample_for(options.sample_rows, dims.m, dims.n, dims.k, nr == 1);
  if (options.sample_rows != kGemmRowsAuto && options.sample_cols > 0 && nr == 1)
    sample_of.cols = std::min(options.sample_cols, dims.n);
  const std::int64_t want = sample_of.rows;
  // Whether every rank's a operand is the same tensor (its rows the same units).
  const bool a_shared = nr == 1 || (job.split == Split::kColumn && u.a == Role::kActivation) ||
                        (job.split == Split::kRow && u.a == Role::kGradient);
  const bool summed = output_is_sum(job.split, u.gemm);
  const std::int64_t rank_want =
      a_shared || summed ? want : (want + static_cast<std::int64_t>(nr) - 1) / static_cast<std::int64_t>(nr);
  const GemmLayout a_layout = wgrad ? GemmLayout::kKOuter : GemmLayout::kKMajor;
  const GemmLayout b_layout = u.gemm == Gemm::kFprop ? GemmLayout::kKMajor : GemmLayout::kKOuter;
  const auto gemm_rows = [](const TensorView& v, GemmLayout layout) {
    return layout == GemmLayout::kKMajor ? v.rows : v.cols;
  };
  // A single-rank layer draws its rows and columns by their energies (a certainty stratum and
  // the rest); the ranks of a split layer draw their rows evenly spaced.
  if (nr == 1) {
    const TensorView& av = job.ranks[0][ia]->view;
    const TensorView& bv = job.ranks[0][ib]->view;
    const std::int64_t a_rows = gemm_rows(av, a_layout), b_rows = gemm_rows(bv, b_layout);
    c.rows = want <= 0 || want >= a_rows ? all_units(a_rows) : draw_units(unit_energies(av, a_layout), want, group);
    c.cols = sample_of.cols <= 0 || sample_of.cols >= b_rows
                 ? all_units(b_rows)
                 : draw_units(unit_energies(bv, b_layout), sample_of.cols, group_b);
  }
  std::int64_t next_unit = 0;
  bool rows_sampled = false;
  for (std::size_t r = 0; r < nr; ++r) {
    Term term;
    term.a_tensor = job.ranks[r][ia];
    term.b_tensor = job.ranks[r][ib];
    const TensorView& av = term.a_tensor->view;
    const TensorView& bv = term.b_tensor->view;
    term.a.view = &av;
    term.a.layout = a_layout;
    term.b.view = &bv;
    term.b.layout = b_layout;
    const std::int64_t a_rows = gemm_rows(av, a_layout);
    term.a.idx = nr == 1 ? c.rows.idx : even_units(a_rows, rank_want, group).idx;
    term.b.idx = nr == 1 ? c.cols.idx : all_units(gemm_rows(bv, b_layout)).idx;
    rows_sampled = rows_sampled || term.a.rows() < a_rows;
    term.a_raw = term.a.load(0, term.a.rows());
    if (summed && r > 0) {
      c.parts[0].terms.push_back(std::move(term));
      continue;
    }
    Part p;
    p.rows = term.a.rows();
    p.cols = term.b.rows();
    p.first_unit = a_shared || summed ? 0 : next_unit;
    next_unit += p.rows;
    p.terms.push_back(std::move(term));
    c.parts.push_back(std::move(p));
  }
  c.units = a_shared || summed ? c.parts[0].rows : next_unit;
  if (nr > 1) {
    // The ranks' rows as one evenly spaced sample of the layer's, each standing for as many
    // (every unit a cluster of its own); every column.
    const std::int64_t population = wgrad ? job.n : job.m;
    c.rows = all_units(population);
    if (rows_sampled) {  // the units as numbered in the sums: 0..units-1
      const auto units = static_cast<std::size_t>(c.units);
      c.rows.idx.resize(units);
      c.rows.weight.assign(units, static_cast<double>(population) / static_cast<double>(c.units));
      c.rows.cluster.resize(units);
      std::iota(c.rows.cluster.begin(), c.rows.cluster.end(), 0);
      c.rows.certain = 0;
      c.rows.rest_clusters = population;
      c.rows.drawn_clusters = c.units;
    }
    c.cols = all_units(c.parts[0].cols);
  }
  // The references, and wgrad's S (the product of the squared operands) for the noise table.
  c.has_noise = wgrad;
  for (Part& p : c.parts) {
    const std::vector<TermSpecs> none(1, TermSpecs(p.terms.size()));
    p.ref.assign(static_cast<std::size_t>(p.rows * p.cols), 0.0);
    part_products(p, none, false, [&](std::int64_t, std::int64_t c0, std::int64_t n, std::size_t,
                                      const std::vector<double>& out) {
      put_tile(out, p.rows, c0, n, p.cols, p.ref.data());
    });
    if (!wgrad) continue;
    std::vector<NoiseTable> tiles(static_cast<std::size_t>(tile_count(p.cols)));
    const bool sampled = c.sampled();
    part_products(p, none, true, [&](std::int64_t tile, std::int64_t c0, std::int64_t n, std::size_t,
                                     const std::vector<double>& s) {
      std::vector<double> ref(s.size());
      for (std::int64_t i = 0; i < p.rows; ++i)
        std::copy(p.ref.begin() + i * p.cols + c0, p.ref.begin() + i * p.cols + c0 + n, ref.begin() + i * n);
      NoiseTable& t = tiles[static_cast<std::size_t>(tile)];
      if (sampled)
        t.add_weighted(ref, s, p.rows, n, c.rows.weight.data() + p.first_unit,
                       c.cols.sampled() ? c.cols.weight.data() + c0 : nullptr);
      else
        t.add(ref, s);
    });
    for (const NoiseTable& t : tiles) c.noise.merge(t);
  }
  if (wgrad) c.noise.finish();
  return c;
}

// Whether a use's casts leave both operands of every term as they are: BF16 of BF16 tensors. Its
// GEMM is then the reference GEMM, of the same values in the same order: its output is the
// reference, bit for bit, and no product is computed.
bool leaves_operands(const Part& p, const EvaluationRow& ra, const EvaluationRow& rb) {
  if (ra.recipe.kind != RecipeKind::kBf16 || rb.recipe.kind != RecipeKind::kBf16) return false;
  for (const Term& t : p.terms)
    if (t.a_tensor->view.dtype != DType::kBF16 || t.b_tensor->view.dtype != DType::kBF16) return false;
  return true;
}

// The emulated rows of a GEMM under several casts (a recipe and format each: the evaluation rows
// of its a and b operands): the quantised products against the references, every tile of b read
// once for all of them. rel: a buffer per cast for the entries' relative errors, kept from call
// to call.
std::vector<GemmRow> emulated_rows(const GemmLayer& job, const GemmCase& c,
                                   std::span<const std::pair<const EvaluationRow*, const EvaluationRow*>> uses,
                                   std::vector<std::vector<double>>* rel_buffers) {
  std::vector<ErrorSums> sums(uses.size());
  const std::optional<SampledOutput> design = c.design();
  std::int64_t entries = 0;
  for (const Part& p : c.parts) entries += p.rows * p.cols;
  std::vector<std::vector<double>>& rel = *rel_buffers;
  if (rel.size() < uses.size()) rel.resize(uses.size());
  for (std::size_t u = 0; u < uses.size(); ++u) rel[u].resize(static_cast<std::size_t>(entries));
  std::int64_t offset = 0;  // the part's first entry in rel
  for (const Part& p : c.parts) {
    std::vector<TermSpecs> casts;
    std::vector<std::size_t> computed, same;  // the uses a product is computed for, and the others
    for (std::size_t u = 0; u < uses.size(); ++u) {
      const auto& [ra, rb] = uses[u];
      if (leaves_operands(p, *ra, *rb)) {
        same.push_back(u);
        continue;
      }
      TermSpecs specs;
      for (const Term& t : p.terms) specs.emplace_back(spec_for(*ra, *t.a_tensor), spec_for(*rb, *t.b_tensor));
      casts.push_back(std::move(specs));
      computed.push_back(u);
    }
    std::vector<std::vector<ErrorSums>> tiles(uses.size(), std::vector<ErrorSums>(static_cast<std::size_t>(tile_count(p.cols))));
    const auto add_tile = [&](std::size_t u, std::int64_t tile, std::int64_t c0, std::int64_t n,
                              const std::vector<double>& got) {
      tiles[u][static_cast<std::size_t>(tile)].add(p.ref.data() + c0, p.cols, got.data(), p.rows, n, p.first_unit,
                                                   rel[u].data() + offset + c0, p.cols, c.first_col(c0),
                                                   design ? &*design : nullptr);
    };
    if (!casts.empty())
      part_products(p, casts, false, [&](std::int64_t tile, std::int64_t c0, std::int64_t n, std::size_t cast,
                                         const std::vector<double>& got) { add_tile(computed[cast], tile, c0, n, got); });
    if (!same.empty())
      for_each_tile(p.cols, [&](std::int64_t tile) {
        thread_local std::vector<double> got;
        const std::int64_t c0 = tile * kGemmTileRows, n = std::min(kGemmTileRows, p.cols - c0);
        got.resize(static_cast<std::size_t>(p.rows * n));
        for (std::int64_t i = 0; i < p.rows; ++i)
          std::copy_n(p.ref.begin() + i * p.cols + c0, n, got.begin() + i * n);
        for (std::size_t u : same) add_tile(u, tile, c0, n, got);
      });
    for (std::size_t u = 0; u < uses.size(); ++u)
      for (ErrorSums& t : tiles[u]) sums[u].merge(std::move(t));
    offset += p.rows * p.cols;
  }
  // The statistics of each cast, the casts as tasks (each median and noise sum in blocks as tasks
  // of its own: an output of a million entries is one block).
  std::vector<GemmRow> rows(uses.size());
  const GemmDims dims = job.dims(c.gemm);
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(std::size_t{0}, uses.size(), [&](std::size_t u) {
      GemmRow& row = rows[u];
      row.step = job.step;
      row.layer = job.layer;
      row.gemm = c.gemm;
      row.rows_used = c.units;
      row.cols_used = c.cols.sampled() ? c.cols.size() : dims.n;
      row.sampled = c.sampled();
      row.m = dims.m;
      row.n = dims.n;
      row.k = dims.k;
      sums[u].finish(design ? &*design : nullptr, c.has_noise ? &c.noise : nullptr, rel[u], &row);
    });
  });
  return rows;
}

// All the GEMM rows of an operand as loaded, K-major (the GemmEngine's layout).
Floats k_major(const OperandSource& src, Floats loaded) {
  if (src.layout == GemmLayout::kKMajor) return loaded;
  const std::int64_t n = src.rows(), k = src.k();
  Floats out(loaded.size());
  for (std::int64_t t = 0; t < k; ++t)
    for (std::int64_t r = 0; r < n; ++r) out[static_cast<std::size_t>(r * k + t)] = loaded[static_cast<std::size_t>(t * n + r)];
  return out;
}

// Runs one GEMM of a single-rank layer on the engine: a row of its own, or a note on the emulated
// row saying why not. The engine gets the operands as the emulated GEMM reads them (the a rows
// sampled, b whole), loaded here for it.
void run_on_engine(const GemmEngine& engine, const GemmCase& c, const EvaluationRow& ra, const EvaluationRow& rb,
                   const std::string& what, std::vector<GemmRow>* rows) {
  GemmRow& emulated = rows->back();
  const Term& term = c.parts[0].terms[0];
  const bool fprop = c.gemm == Gemm::kFprop, wgrad = c.gemm == Gemm::kWgrad;
  GemmProblem p;
  p.gemm = c.gemm;
  p.what = what;
  p.m = term.a.rows();
  p.n = term.b.rows();
  p.k = term.a.k();
  const Floats a = k_major(term.a, term.a_raw), b = k_major(term.b, term.b.load(0, p.n));
  const QuantSpec sa = spec_of(ra), sb = spec_of(rb);
  p.a.spec = wgrad ? transposed(sa) : sa;
  p.b.spec = fprop ? sb : transposed(sb);
  p.a.rows = p.m;
  p.b.rows = p.n;
  p.a.values = std::span<const float>(a);
  p.b.values = std::span<const float>(b);
  const GemmRun r = engine.run(p);
  if (!r.ran) {
    emulated.note = engine.name() + " not run: " + r.note;
    return;
  }
  const auto size = static_cast<std::size_t>(p.m * p.n);
  FP8A_CHECK(r.out.size() == size && r.reference.size() == size,
             "GemmEngine::run returned outputs of the wrong size");
  GemmRow row = emulated;
  row.engine = engine.name();
  row.accumulation = r.accumulation;
  row.m_padded = r.m_padded;
  row.n_padded = r.n_padded;
  row.k_padded = r.k_padded;
  row.note = r.note;
  const std::vector<double> ref(r.reference.begin(), r.reference.end()), got(r.out.begin(), r.out.end());
  ErrorSums sums;
  std::vector<double> rel(ref.size());
  const std::optional<SampledOutput> design = c.design();
  sums.add(ref.data(), p.n, got.data(), p.m, p.n, 0, rel.data(), p.n, c.first_col(0), design ? &*design : nullptr);
  sums.finish(design ? &*design : nullptr, c.has_noise ? &c.noise : nullptr, rel, &row);
  rows->push_back(std::move(row));
}

// The key of a (step, layer) job's rows: its operands' identities on every rank, and for every
// recipe, GEMM and format the evaluation rows its operands are quantised by (as spec_of reads
// them), with the options that change the rows.
std::string gemm_unit_key(const GemmLayer& job, const EvaluationIndex& index, const GemmOptions& options) {
  ByteWriter w;
  w.str("GEMM layer 4");
  w.i64(job.step);
  w.str(job.layer);
  w.u8(static_cast<std::uint8_t>(job.split));
  w.u64(job.ranks.size());
  for (const auto& rank : job.ranks)
    for (const CapturedTensor* t : rank) {
      w.str(t->file);
      w.str(t->file_identity);
      w.str(t->tensor_name);
    }
  w.i64(options.sample_rows);
  w.i64(options.sample_cols);
  w.str(options.engine != nullptr ? options.engine->name() : std::string());
  const auto put_row = [&](const EvaluationRow* r) {
    w.u8(r == nullptr ? 0 : r->applicability.ok ? 1 : 2);
    if (r == nullptr || !r->applicability.ok) return;
    const QuantSpec s = spec_of(*r);
    write_recipe(w, r->recipe);
    w.u8(static_cast<std::uint8_t>(s.format));
    w.i64(s.block.rows);
    w.i64(s.block.cols);
    w.f32(s.scale);
    w.f32(s.value_for_inf);
    w.u8(static_cast<std::uint8_t>(r->key.role));
    w.u8(static_cast<std::uint8_t>(r->orientation));
  };
  w.u64(index.formats().size());
  for (const Recipe& recipe : index.recipes())
    for (const GemmOperandUse& u : kGemmOperandUses)
      for (const TrainingFormat f : index.formats()) {
        w.u8(static_cast<std::uint8_t>(f));
        put_row(index.find_for_use(job.ranks[0][static_cast<int>(u.a)]->key, recipe, f, u.a_orientation));
        put_row(index.find_for_use(job.ranks[0][static_cast<int>(u.b)]->key, recipe, f, u.b_orientation));
      }
  return w.take();
}

// How many casts of a GEMM emulated_rows takes at once: as many as keep their buffers (the
// entries' relative errors, the a operand as cast and, on a CPU without BF16 units, widened, a
// tile's output per thread) within kGemmGroupBytes, at least one.
std::size_t uses_per_group(const GemmCase& c) {
  std::int64_t bytes = 0;
  const auto threads = static_cast<std::int64_t>(tbb::this_task_arena::max_concurrency());
  for (const Part& p : c.parts) {
    bytes += p.rows * p.cols * 8 + threads * p.rows * kGemmTileRows * 8;
    for (const Term& t : p.terms) bytes += t.a.rows() * t.a.k() * (cpu_gemm_native_bf16() ? 4 : 8);
  }
  return static_cast<std::size_t>(std::max<std::int64_t>(1, kGemmGroupBytes / std::max<std::int64_t>(1, bytes)));
}

// A layer's rows, one list per format: per recipe, per GEMM, the emulated row (and the engine's).
std::vector<std::vector<GemmRow>> compute_layer(const GemmLayer& job, const EvaluationIndex& index,
                                                const GemmOptions& options) {
  const std::vector<TrainingFormat>& formats = index.formats();
  const std::size_t nrec = index.recipes().size();
  // rows[recipe][gemm][format]: filled GEMM by GEMM (one GEMM's references held at a time).
  std::vector<std::array<std::vector<std::vector<GemmRow>>, 3>> slots(nrec);
  const std::string split_note =
      job.split == Split::kNone ? std::string() : std::to_string(job.ranks.size()) + " ranks, " + split_name(job.split);
  const bool use_engine = options.engine != nullptr && job.ranks.size() == 1;
  for (const GemmOperandUse& u : kGemmOperandUses) {
    const int g = static_cast<int>(u.gemm);
    // The evaluation rows of every recipe and format, and the block heights the a and b rows keep.
    std::int64_t group = 1, group_b = 1;
    std::vector<std::vector<std::pair<const EvaluationRow*, const EvaluationRow*>>> found(nrec);
    for (std::size_t ri = 0; ri < nrec; ++ri) {
      for (const TrainingFormat f : formats) {
        const Recipe& recipe = index.recipes()[ri];
        const EvaluationRow* ra = index.find_for_use(job.ranks[0][static_cast<int>(u.a)]->key, recipe, f, u.a_orientation);
        const EvaluationRow* rb = index.find_for_use(job.ranks[0][static_cast<int>(u.b)]->key, recipe, f, u.b_orientation);
        if (ra == nullptr || rb == nullptr || !ra->applicability.ok || !rb->applicability.ok) ra = rb = nullptr;
        found[ri].emplace_back(ra, rb);
        if (ra != nullptr) {
          const QuantSpec sa = u.gemm == Gemm::kWgrad ? transposed(spec_of(*ra)) : spec_of(*ra);
          const QuantSpec sb = u.gemm == Gemm::kFprop ? spec_of(*rb) : transposed(spec_of(*rb));
          group = std::max(group, sa.block.rows);
          group_b = std::max(group_b, sb.block.rows);
        }
      }
    }
    const GemmCase c = make_case(job, u, options, group, group_b);
    std::vector<std::vector<double>> rel_buffers;  // emulated_rows', one group after another
    // Per recipe, a format whose operands have an earlier format's FP8 types (fprop, whose X and
    // W are E4M3 in every format; BF16) gets copies of that format's rows: computed once. The
    // others of every recipe are computed together, sharing the reads of b and the casts they
    // have in common, in groups whose buffers fit kGemmGroupBytes.
    std::vector<std::vector<std::size_t>> same(nrec, std::vector<std::size_t>(formats.size()));
    std::vector<std::pair<std::size_t, std::size_t>> todo;  // (recipe, format)
    for (std::size_t ri = 0; ri < nrec; ++ri) {
      slots[ri][g].resize(formats.size());
      std::vector<std::size_t> computed;
      for (std::size_t f = 0; f < formats.size(); ++f) {
        const auto [ra, rb] = found[ri][f];
        same[ri][f] = f;
        if (ra == nullptr) continue;
        for (std::size_t e : computed)
          if (found[ri][e].first->fp8 == ra->fp8 && found[ri][e].second->fp8 == rb->fp8) {
            same[ri][f] = e;
            break;
          }
        if (same[ri][f] == f) {
          computed.push_back(f);
          todo.emplace_back(ri, f);
        }
      }
    }
    const std::size_t per_group = uses_per_group(c);
    for (std::size_t g0 = 0; g0 < todo.size(); g0 += per_group) {
      const std::size_t g1 = std::min(todo.size(), g0 + per_group);
      std::vector<std::pair<const EvaluationRow*, const EvaluationRow*>> uses;
      for (std::size_t i = g0; i < g1; ++i) uses.push_back(found[todo[i].first][todo[i].second]);
      std::vector<GemmRow> rows = emulated_rows(job, c, uses, &rel_buffers);
      for (std::size_t i = g0; i < g1; ++i) {
        const auto [ri, f] = todo[i];
        const Recipe& recipe = index.recipes()[ri];
        GemmRow& row = rows[i - g0];
        row.recipe = recipe;
        row.format = formats[f];
        row.note = split_note;
        if (!split_note.empty() && options.engine != nullptr)
          row.note += "; " + options.engine->name() + " not run: rank shards";
        slots[ri][g][f].push_back(std::move(row));
        if (use_engine)
          run_on_engine(*options.engine, c, *uses[i - g0].first, *uses[i - g0].second,
                        "step " + std::to_string(job.step) + " layer '" + job.layer + "' " + gemm_name(u.gemm) + " " +
                            recipe.spec(),
                        &slots[ri][g][f]);
      }
    }
    for (std::size_t ri = 0; ri < nrec; ++ri)
      for (std::size_t f = 0; f < formats.size(); ++f) {
        if (found[ri][f].first == nullptr || same[ri][f] == f) continue;
        slots[ri][g][f] = slots[ri][g][same[ri][f]];
        for (GemmRow& r : slots[ri][g][f]) r.format = formats[f];
      }
  }
  std::vector<std::vector<GemmRow>> results(formats.size());
  for (std::size_t ri = 0; ri < nrec; ++ri)
    for (int g = 0; g < 3; ++g)
      for (std::size_t f = 0; f < formats.size(); ++f)
        for (GemmRow& r : slots[ri][g][f]) results[f].push_back(std::move(r));
  return results;
}

}  // namespace

GemmSample gemm_sample_for(std::int64_t sample_rows, std::int64_t m, std::int64_t n, std::int64_t k, bool cols_too) {
  if (sample_rows != kGemmRowsAuto) return {sample_rows <= 0 ? m : std::min(sample_rows, m), n};
  const std::int64_t nk = std::max<std::int64_t>(1, n * k);
  if (m <= kGemmAutoMacs / nk) return {m, n};
  if (!cols_too) return {std::min(m, std::max(kGemmAutoMinRows, kGemmAutoMacs / nk)), n};
  const std::int64_t entries = kGemmAutoMacs / std::max<std::int64_t>(1, k);  // rows x columns
  const auto side = static_cast<std::int64_t>(std::sqrt(static_cast<double>(entries)));
  const auto share = [&](std::int64_t other) {  // the other dimension's count given this one's
    return std::max(kGemmAutoMinRows, entries / std::max<std::int64_t>(1, other));
  };
  if (m <= side) return {m, std::min(n, share(m))};
  if (n <= side) return {std::min(m, share(n)), n};
  const std::int64_t s = std::max(kGemmAutoMinRows, side);
  return {std::min(m, s), std::min(n, s)};
}

std::vector<GemmRow> evaluate_gemm_errors(const CaptureSet& captures,
                                          std::span<const EvaluationRow> rows,
                                          const GemmOptions& options,
                                          std::vector<std::string>* skipped,
                                          const RunContext& context) {
  return evaluate_gemm_errors(pair_gemm_operands(captures, skipped), rows, options, context);
}

std::vector<GemmRow> evaluate_gemm_errors(std::span<const GemmLayer> jobs,
                                          std::span<const EvaluationRow> rows,
                                          const GemmOptions& options,
                                          const RunContext& context) {
  const EvaluationIndex index(rows);
  const std::vector<TrainingFormat>& formats = index.formats();
  // Each job a unit, shared out over ranks by its m*n*k, kept whole under its key.
  std::vector<Unit> units(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    Unit& u = units[j];
    u.name = jobs[j].layer;
    for (const auto& rank : jobs[j].ranks)
      for (const CapturedTensor* t : rank) u.inputs.push_back(&t->view);
    u.cost = static_cast<std::uint64_t>(jobs[j].m) * static_cast<std::uint64_t>(jobs[j].n) *
             static_cast<std::uint64_t>(jobs[j].k);
    u.kind = UnitKind::kGemmLayer;
    u.keys = {gemm_unit_key(jobs[j], index, options)};
  }
  std::vector<std::vector<std::vector<GemmRow>>> results(jobs.size());  // per job, per format
  UnitWork work;
  work.compute = [&](std::size_t j, UnitStore* store) {
    load_or_compute(
        store, UnitKind::kGemmLayer, units[j].keys.front(),
        [&](std::string_view bytes) {
          auto r = decode_gemm_rows(bytes);
          if (r.size() != formats.size()) return false;
          results[j] = std::move(r);
          return true;
        },
        [&] {
          results[j] = compute_layer(jobs[j], index, options);
          return encode_gemm_rows(results[j]);
        });
  };
  run_units(context, "GEMM layers", units, work);
  std::vector<GemmRow> out;
  for (std::size_t f = 0; f < formats.size(); ++f)
    for (auto& r : results)
      for (auto& g : r[f]) out.push_back(std::move(g));
  return out;
}

}  // namespace fp8a

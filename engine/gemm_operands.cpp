#include "engine/gemm_operands.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "core/error.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/cpu_isa.hpp"
#include "engine/quant_spec.hpp"

namespace fp8a {

namespace {

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

}  // namespace

QuantSpec spec_of(const EvaluationRow& row) {
  QuantSpec s;
  s.kind = row.recipe.kind;
  s.format = row.fp8;
  s.block = block_shape(row.recipe, row.key.role, row.orientation);
  s.scale = row.metrics.scale;
  s.pow2_scales = row.recipe.pow2_scales;
  s.mx_rule = row.recipe.mx_rule;
  s.value_for_inf = input_type_max(row.input_dtype);
  if (two_level_scale(row.recipe.kind)) {  // the level-2 scales as evaluated
    s.nvfp4 = nvfp4_copy_for(row.recipe, row.key.role, row.orientation);
    s.nvfp4_decode = row.metrics.scale_inv;
  }
  return s;
}

QuantSpec spec_for(const EvaluationRow& row, const CapturedTensor& shard) {
  QuantSpec s = spec_of(row);
  if (row.ranks > 1 && is_per_tensor(row.recipe.kind) &&
      !replays_history(row.recipe.kind) && std::isnan(s.scale))
    s.scale = per_tensor_scale(row.recipe, row.fp8, compute_tensor_stats(shard.view).amax);
  if (row.ranks > 1 && two_level_scale(row.recipe.kind) && std::isnan(s.scale))  // each its own
    set_nvfp4_amax(s.nvfp4.rht ? nvfp4_rht_amax(shard.view, row.orientation) : compute_tensor_stats(shard.view).amax,
                   &s);
  return s;
}

QuantSpec transposed(QuantSpec s) {
  s.block = BlockShape{s.block.cols, s.block.rows};
  return s;
}

float OperandSource::load(std::int64_t r0, std::int64_t n, Floats* buffer) const {
  const std::int64_t kk = k();
  const auto clean = FP8A_CPU_PICK(default_cpu_isa(), load_clean_on);
  buffer->resize(static_cast<std::size_t>(n * kk));
  float* out = buffer->data();
  std::uint32_t m = 0;
  if (layout == GemmLayout::kKMajor) {
    for (std::int64_t r = 0; r < n; ++r)
      m = std::max(m, clean(*view, idx[r0 + r] * view->cols, kk, out + r * kk));
  } else {
    // Runs of consecutive columns, each read as one span of every tensor row.
    for (std::int64_t c = 0; c < n;) {
      std::int64_t run = 1;
      while (c + run < n && idx[r0 + c + run] == idx[r0 + c] + run) ++run;
      for (std::int64_t t = 0; t < kk; ++t)
        m = std::max(m, clean(*view, t * view->cols + idx[r0 + c], run, out + t * n + c));
      c += run;
    }
  }
  return std::bit_cast<float>(m);
}

const float* wide_values(const GemmInput& x, Floats* scratch) {
  if (!x.wide.empty()) return x.wide.data();
  if (x.blocks == 0 && !x.is_bf16) return x.f32.data();
  const std::vector<std::uint16_t>& codes = x.blocks > 0 ? x.block_codes : x.bf16;
  scratch->resize(codes.size());
  cpu_widen_bf16(codes.data(), static_cast<std::int64_t>(codes.size()), scratch->data());
  return scratch->data();
}

void widen_once(GemmInput* in) {
  in->wide.clear();
  if (cpu_gemm_native_bf16() || (in->blocks == 0 && !in->is_bf16)) return;  // or float32 already
  const std::vector<std::uint16_t>& codes = in->blocks > 0 ? in->block_codes : in->bf16;
  in->wide.resize(codes.size());
  cpu_widen_bf16(codes.data(), static_cast<std::int64_t>(codes.size()), in->wide.data());
}

namespace {

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

}  // namespace

namespace {

// The cast of rows [r0, r0 + n) as prepare, blocks as they lie in x.
void cast_rows(const OperandSource& src, const Floats& x, float amax, std::int64_t r0, std::int64_t n,
               const QuantSpec* spec, bool squared, Floats* work, GemmInput* in);

// Whether GEMM rows [r0, r0 + n) of src are whole aligned blocks of h rows (the last one may end
// at the operand's end).
bool whole_blocks(const OperandSource& src, std::int64_t r0, std::int64_t n, std::int64_t h) {
  const std::int64_t total = src.layout == GemmLayout::kKMajor ? src.view->rows : src.view->cols;
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int64_t u = src.idx[static_cast<std::size_t>(r0 + t)];
    if (t % h == 0 ? u % h != 0 : u != src.idx[static_cast<std::size_t>(r0 + t - 1)] + 1) return false;
  }
  return n % h == 0 || src.idx[static_cast<std::size_t>(r0 + n - 1)] == total - 1;
}

// Rows [r0, r0 + n) of x cast each beside a row of its block's amaxes (prepare), in blocks of
// two rows, then the amax rows dropped.
void prepare_paired(const OperandSource& src, const Floats& x, std::int64_t r0, std::int64_t n, const QuantSpec& spec,
                    Floats* work, GemmInput* in) {
  const auto found = std::find_if(src.amaxes.begin(), src.amaxes.end(),
                                  [&](const auto& a) { return a->block == spec.block; });
  FP8A_CHECK(found != src.amaxes.end(), "a drawn operand's cast has no block amaxes");
  const BlockAmaxes& g = **found;
  const bool k_major = src.layout == GemmLayout::kKMajor;
  const std::int64_t k = src.k();
  OperandSource two;
  two.view = src.view;
  two.layout = src.layout;
  for (std::int64_t t = 0; t < n; ++t) two.idx.insert(two.idx.end(), 2, src.idx[static_cast<std::size_t>(r0 + t)]);
  QuantSpec paired = spec;
  (k_major ? paired.block.rows : paired.block.cols) = 2;
  Floats x2(static_cast<std::size_t>(2 * n * k), 0.0f);
  if (k_major) {  // x [n, k]: row t to 2t, its amaxes at the start of each block along k in 2t + 1
    for (std::int64_t t = 0; t < n; ++t) {
      std::copy_n(x.begin() + t * k, k, x2.begin() + 2 * t * k);
      const std::int64_t block_row = src.idx[static_cast<std::size_t>(r0 + t)] / spec.block.rows;
      for (std::int64_t c = 0; c * spec.block.cols < k; ++c)
        x2[static_cast<std::size_t>((2 * t + 1) * k + c * spec.block.cols)] = g.at(block_row, c);
    }
  } else {  // x [k, n]: column t to 2t, its amaxes at the start of each block along k in 2t + 1
    for (std::int64_t l = 0; l < k; ++l)
      for (std::int64_t t = 0; t < n; ++t) x2[static_cast<std::size_t>(l * 2 * n + 2 * t)] = x[static_cast<std::size_t>(l * n + t)];
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t block_col = src.idx[static_cast<std::size_t>(r0 + t)] / spec.block.cols;
      for (std::int64_t r = 0; r * spec.block.rows < k; ++r)
        x2[static_cast<std::size_t>(r * spec.block.rows * 2 * n + 2 * t + 1)] = g.at(r, block_col);
    }
  }
  GemmInput both;
  cast_rows(two, x2, std::nanf(""), 0, 2 * n, &paired, false, work, &both);
  // Every other GEMM row of the cast, in place into *in.
  in->layout = both.layout;
  in->exp2 = both.exp2;
  in->divisor = both.divisor;
  in->is_bf16 = both.is_bf16;
  in->blocks = both.blocks;
  in->rows = both.blocks > 0 ? n : 0;
  in->wide.clear();
  const auto even_rows = [&](const auto& from, auto* to, std::int64_t width) {  // [2n, width] -> [n, width]
    to->resize(static_cast<std::size_t>(n * width));
    for (std::int64_t t = 0; t < n; ++t)
      std::copy_n(from.begin() + 2 * t * width, width, to->begin() + t * width);
  };
  const auto even_cols = [&](const auto& from, auto* to) {  // [k, 2n] -> [k, n]
    to->resize(static_cast<std::size_t>(k * n));
    for (std::int64_t l = 0; l < k; ++l)
      for (std::int64_t t = 0; t < n; ++t) (*to)[static_cast<std::size_t>(l * n + t)] = from[static_cast<std::size_t>(l * 2 * n + 2 * t)];
  };
  if (both.blocks > 0) {  // [blocks, 2n, kKBlock] and [blocks, 2n], whatever the layout
    in->block_codes.resize(static_cast<std::size_t>(both.blocks * n * kKBlock));
    in->block_scale_inv.resize(static_cast<std::size_t>(both.blocks * n));
    for (std::int64_t b = 0; b < both.blocks; ++b)
      for (std::int64_t t = 0; t < n; ++t) {
        std::copy_n(both.block_codes.begin() + (b * 2 * n + 2 * t) * kKBlock, kKBlock,
                    in->block_codes.begin() + (b * n + t) * kKBlock);
        in->block_scale_inv[static_cast<std::size_t>(b * n + t)] = both.block_scale_inv[static_cast<std::size_t>(b * 2 * n + 2 * t)];
      }
    return;
  }
  if (both.is_bf16) {
    if (k_major) even_rows(both.bf16, &in->bf16, k);
    else even_cols(both.bf16, &in->bf16);
  } else {
    if (k_major) even_rows(both.f32, &in->f32, k);
    else even_cols(both.f32, &in->f32);
  }
}

}  // namespace

float load_clean(const TensorView& view, std::int64_t begin, std::int64_t n, float* out) {
  return std::bit_cast<float>(FP8A_CPU_PICK(default_cpu_isa(), load_clean_on)(view, begin, n, out));
}

std::int64_t block_height(GemmLayout layout, const QuantSpec& spec) {
  return std::max<std::int64_t>(1, layout == GemmLayout::kKMajor ? spec.block.rows : spec.block.cols);
}

BlockAmaxes block_amaxes(const TensorView& view, BlockShape block) {
  BlockAmaxes g;
  g.block = block;
  const std::int64_t br = std::max<std::int64_t>(1, block.rows), bc = std::max<std::int64_t>(1, block.cols);
  const std::int64_t grid_rows = (view.rows + br - 1) / br;
  g.grid_cols = (view.cols + bc - 1) / bc;
  g.amax.assign(static_cast<std::size_t>(grid_rows * g.grid_cols), 0.0f);
  const auto clean = FP8A_CPU_PICK(default_cpu_isa(), load_clean_on);
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(std::int64_t{0}, grid_rows, [&](std::int64_t gr) {
      Floats row(static_cast<std::size_t>(view.cols));
      for (std::int64_t r = gr * br; r < std::min(view.rows, (gr + 1) * br); ++r) {
        clean(view, r * view.cols, view.cols, row.data());
        for (std::int64_t c = 0; c < view.cols; ++c) {
          float& m = g.amax[static_cast<std::size_t>(gr * g.grid_cols + c / bc)];
          m = std::max(m, std::fabs(row[static_cast<std::size_t>(c)]));
        }
      }
    });
  });
  return g;
}

void prepare(const OperandSource& src, const Floats& x, float amax, std::int64_t r0, std::int64_t n,
             const QuantSpec* spec, bool squared, Floats* work, GemmInput* in) {
  if (spec != nullptr && block_height(src.layout, *spec) > 1 && !whole_blocks(src, r0, n, block_height(src.layout, *spec)))
    return prepare_paired(src, x, r0, n, *spec, work, in);
  cast_rows(src, x, amax, r0, n, spec, squared, work, in);
}

namespace {

void cast_rows(const OperandSource& src, const Floats& x, float amax, std::int64_t r0, std::int64_t n,
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

}  // namespace

bool same_cast(const std::optional<QuantSpec>& x, const std::optional<QuantSpec>& y) {
  if (!x || !y) return !x && !y;
  return x->kind == y->kind && x->format == y->format && x->block == y->block &&
         std::bit_cast<std::uint32_t>(x->scale) == std::bit_cast<std::uint32_t>(y->scale) &&
         x->pow2_scales == y->pow2_scales && x->mx_rule == y->mx_rule &&
         std::bit_cast<std::uint32_t>(x->value_for_inf) == std::bit_cast<std::uint32_t>(y->value_for_inf) &&
         std::bit_cast<std::uint32_t>(x->nvfp4_decode) == std::bit_cast<std::uint32_t>(y->nvfp4_decode) &&
         x->nvfp4.rht == y->nvfp4.rht && x->nvfp4.stochastic == y->nvfp4.stochastic && x->nvfp4.seed == y->nvfp4.seed;
}

}  // namespace fp8a

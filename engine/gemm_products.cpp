#include "engine/gemm_products.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "engine/cpu_gemm.hpp"
#include "engine/cpu_isa.hpp"

namespace fp8a {

namespace {

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

}  // namespace

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

void put_tile(const std::vector<double>& tile, std::int64_t rows, std::int64_t c0, std::int64_t n, std::int64_t cols,
              double* whole) {
  for (std::int64_t i = 0; i < rows; ++i)
    std::copy(tile.begin() + i * n, tile.begin() + (i + 1) * n, whole + i * cols + c0);
}

}  // namespace fp8a

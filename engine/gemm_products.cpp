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

PreparedCasts prepare_casts(const Part& part, const std::vector<TermSpecs>& casts, bool squared) {
  PreparedCasts p;
  p.casts = &casts;
  p.squared = squared;
  const std::size_t nc = casts.size(), nt = part.terms.size();
  p.a_in.assign(nc, std::vector<GemmInput>(nt));
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(std::size_t{0}, nc * nt, [&](std::size_t i) {
      const std::size_t c = i / nt, t = i % nt;
      const Term& term = part.terms[t];
      const auto& spec = casts[c][t].first;
      Floats work;
      prepare(term.a, term.a_raw, std::nanf(""), 0, term.a.rows(), spec ? &*spec : nullptr, squared, &work,
              &p.a_in[c][t]);
      widen_once(&p.a_in[c][t]);
    });
  });
  p.first.assign(nt, std::vector<std::size_t>(nc));
  for (std::size_t t = 0; t < nt; ++t)
    for (std::size_t c = 0; c < nc; ++c) {
      std::size_t same = 0;
      while (same < c && !same_cast(casts[same][t].second, casts[c][t].second)) ++same;
      p.first[t][c] = same;
    }
  return p;
}

void tile_products(const Part& part, const PreparedCasts& prepared, std::int64_t tile,
                   std::vector<std::vector<double>>* out) {
  // A thread's buffers, kept from tile to tile.
  struct Scratch {
    Floats b, work, c;
    GemmInput b_in;
  };
  thread_local Scratch s;
  const std::vector<TermSpecs>& casts = *prepared.casts;
  const std::size_t nc = casts.size(), nt = part.terms.size();
  const std::int64_t r0 = tile * kGemmTileRows, n = std::min(kGemmTileRows, part.cols - r0);
  out->resize(nc);
  for (auto& o : *out) o.resize(static_cast<std::size_t>(part.rows * n));
  for (std::size_t t = 0; t < nt; ++t) {
    const Term& term = part.terms[t];
    const float b_amax = term.b.load(r0, n, &s.b);
    const std::vector<std::size_t>& first = prepared.first[t];
    for (std::size_t c = 0; c < nc; ++c) {
      if (first[c] != c) continue;  // done with its first
      const auto& spec = casts[c][t].second;
      prepare(term.b, s.b, b_amax, r0, n, spec ? &*spec : nullptr, prepared.squared, &s.work, &s.b_in);
      if (std::count(first.begin() + static_cast<std::ptrdiff_t>(c), first.end(), c) > 1) widen_once(&s.b_in);
      for (std::size_t d = c; d < nc; ++d)
        if (first[d] == c)
          add_product(prepared.a_in[d][t], s.b_in, part.rows, n, term.b.k(), t > 0, &s.c, (*out)[d].data());
    }
  }
}

}  // namespace fp8a

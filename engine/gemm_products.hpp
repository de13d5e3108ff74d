// The products of the GEMM-output error's emulated GEMMs (gemm_error.hpp), on cpu_gemm. Internal
// to engine/: only gemm_error.cpp includes it; what lies outside engine/ includes gemm_error.hpp
// alone.
//   - one product of two cast operands (GemmInput, gemm_operands.hpp), added up in float64
//     (add_product);
//   - a GEMM's output in parts (Part: one rank's share, or every rank's summed), each computed
//     tile by tile of the right-hand operand under several casts at once, every tile read once
//     (part_products, a template: it calls back per tile, so that the caller's lambda inlines).
#pragma once

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "datasets/capture.hpp"
#include "engine/fake_quant.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_operands.hpp"

namespace fp8a {

// out [m, n] (+)= (a * b^T) * 2^(a.exp2 + b.exp2) / (a.divisor * b.divisor), in float64 (c: a
// scratch buffer).
void add_product(const GemmInput& a, const GemmInput& b, std::int64_t m, std::int64_t n, std::int64_t k,
                 bool accumulate, Floats* c, double* out);

std::int64_t tile_count(std::int64_t rows);

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
              double* whole);

}  // namespace fp8a

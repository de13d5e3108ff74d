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

// A part's a operands under each cast, prepared once for all tiles, and for each term and cast
// the first cast with the same b cast (b is cast once for all of them).
struct PreparedCasts {
  const std::vector<TermSpecs>* casts = nullptr;
  bool squared = false;
  std::vector<std::vector<GemmInput>> a_in;     // [cast][term]
  std::vector<std::vector<std::size_t>> first;  // [term][cast]
};
PreparedCasts prepare_casts(const Part& part, const std::vector<TermSpecs>& casts, bool squared);

// One tile of b's products under every prepared cast: (*out)[cast] [part.rows, n], n the tile's
// rows of b. Reads and casts the tile of b; the buffers are the calling thread's.
void tile_products(const Part& part, const PreparedCasts& prepared, std::int64_t tile,
                   std::vector<std::vector<double>>* out);

template <class F>
void part_products(const Part& part, const std::vector<TermSpecs>& casts, bool squared, const F& f) {
  const PreparedCasts prepared = prepare_casts(part, casts, squared);
  for_each_tile(part.cols, [&](std::int64_t tile) {
    // A thread's buffer, kept from tile to tile: a tile task never waits, so never runs another.
    thread_local std::vector<std::vector<double>> out;
    tile_products(part, prepared, tile, &out);
    const std::int64_t r0 = tile * kGemmTileRows, n = std::min(kGemmTileRows, part.cols - r0);
    for (std::size_t c = 0; c < casts.size(); ++c) f(tile, r0, n, c, out[c]);
  });
}

// Copies a tile [rows, n] of a part's output into columns [c0, c0 + n) of the whole [rows, cols].
void put_tile(const std::vector<double>& tile, std::int64_t rows, std::int64_t c0, std::int64_t n, std::int64_t cols,
              double* whole);

}  // namespace fp8a

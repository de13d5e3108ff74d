// The operands of the GEMM-output error's emulated GEMMs (gemm_error.hpp). Internal to engine/:
// only the GEMM error's own files include it (gemm_products.hpp, gemm_error.cpp); what lies
// outside engine/ includes gemm_error.hpp alone.
//   - which cast each operand gets: spec_of (an evaluation row's), spec_for (a rank's shard),
//     transposed (a copy the GEMM reads K-major);
//   - a GEMM operand's rows, read from the capture as they lie there (OperandSource);
//   - those rows cast (or left unquantised, for the references) into the values cpu_gemm
//     multiplies (prepare -> GemmInput), each elementwise pass compiled for every CPU path.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/tensor_view.hpp"
#include "datasets/capture.hpp"
#include "engine/cpu_gemm.hpp"
#include "engine/evaluation_row.hpp"
#include "engine/fake_quant.hpp"

namespace fp8a {

using Floats = std::vector<float>;

// The spec an evaluation row was computed with (per-tensor scale as evaluated, delayed included).
QuantSpec spec_of(const EvaluationRow& row);

// The spec of one rank's shard: the row's, except current scaling and NVFP4 with
// --amax-reduction none, where each shard has the scale of its own amax (the merged row then has
// no single scale).
QuantSpec spec_for(const EvaluationRow& row, const CapturedTensor& shard);

// The spec of an operand that a GEMM gets transposed (a columnwise copy, laid out K-major).
QuantSpec transposed(QuantSpec s);

// view's elements [begin, begin + n) as floats into out, non-finite ones set to 0 (they would make
// every GEMM NaN), on the CPU's widest path (BF16 widened in vector registers). Returns the largest
// magnitude.
float load_clean(const TensorView& view, std::int64_t begin, std::int64_t n, float* out);

// The largest magnitude of every block of a tensor (non-finite elements as 0): what a blocked cast
// of a block takes from the whole block. A drawn GEMM row whose block spans several GEMM rows is
// cast with its block's amax without the rest of the block (prepare).
struct BlockAmaxes {
  BlockShape block;            // in the tensor's layout
  std::int64_t grid_cols = 0;  // blocks along the tensor's columns
  std::vector<float> amax;     // [ceil(rows / block.rows), grid_cols], row-major
  float at(std::int64_t block_row, std::int64_t block_col) const {
    return amax[static_cast<std::size_t>(block_row * grid_cols + block_col)];
  }
};
BlockAmaxes block_amaxes(const TensorView& view, BlockShape block);

// One operand of a GEMM, read from the capture as it lies there: the GEMM's rows are the
// tensor's rows idx (kKMajor: the tensor's columns are the reduction) or its columns idx
// (kKOuter: its rows are the reduction; wgrad's dY^T and X^T, dgrad's W^T). Loaded so, no copy is
// ever transposed, and the recipe's cast applies with the block shape stated in the tensor's
// layout (spec_of).
struct OperandSource {
  const TensorView* view = nullptr;
  GemmLayout layout = GemmLayout::kKMajor;
  std::vector<std::int64_t> idx;
  // The block amaxes of the casts whose blocks span several GEMM rows, where idx does not keep
  // such blocks whole (a single-rank layer's drawn rows): one per block shape.
  std::vector<std::shared_ptr<const BlockAmaxes>> amaxes;
  std::int64_t rows() const { return static_cast<std::int64_t>(idx.size()); }
  std::int64_t k() const { return layout == GemmLayout::kKMajor ? view->cols : view->rows; }
  // The GEMM's rows [r0, r0 + n) in the tensor's layout: kKMajor [n, k], kKOuter [k, n]. Non-finite
  // elements are set to 0 (they would make every GEMM NaN). Returns their largest magnitude.
  Floats load(std::int64_t r0, std::int64_t n) const {
    Floats out;
    load(r0, n, &out);
    return out;
  }
  float load(std::int64_t r0, std::int64_t n, Floats* buffer) const;
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
const float* wide_values(const GemmInput& x, Floats* scratch);

// Widens an operand's BF16 values for every product it takes part in, where the CPU multiplies
// BF16 as float32: the a operand of a part, multiplied by every tile of b, and a tile of b
// multiplied by several a (its buffer's capacity kept).
void widen_once(GemmInput* in);

// The reduction's block length of the casts whose scales are applied per block.
inline constexpr std::int64_t kKBlock = 128;

// How many GEMM rows a cast's blocks span in an operand's layout (1: each row has its own blocks).
std::int64_t block_height(GemmLayout layout, const QuantSpec& spec);

// GEMM rows [r0, r0 + n) of an operand as loaded, x, and their largest magnitude (NaN: not
// known): unquantised (a reference GEMM; `squared`: their squares), or with the cast of `spec`
// (in the tensor's layout) applied, into *in (work: a scratch buffer). Rows that do not lie in
// whole aligned blocks of a cast whose blocks span several GEMM rows (block_height > 1) are each
// cast beside a row holding its block's amax in each block of the reduction (src.amaxes), in
// blocks of those two rows: the scales of the whole block, the row's values as the whole
// block's cast gives them.
void prepare(const OperandSource& src, const Floats& x, float amax, std::int64_t r0, std::int64_t n,
             const QuantSpec* spec, bool squared, Floats* work, GemmInput* in);

// Two casts that give the same values (or both none).
bool same_cast(const std::optional<QuantSpec>& x, const std::optional<QuantSpec>& y);

}  // namespace fp8a

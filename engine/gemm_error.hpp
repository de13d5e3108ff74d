// GEMM-output error: for a layer with all three operands captured at a step, the three GEMMs of
// a linear layer computed from the recipe's fake-quantised operands against the unquantised ones
// (NVIDIA's "FP8 inputs with a high-precision GEMM" diagnostic):
//   fprop  Y  = X W^T    X rowwise,     W rowwise
//   dgrad  dX = dY W     dY rowwise,    W columnwise
//   wgrad  dW = dY^T X   dY columnwise, X columnwise
// with X [M, K] (activation), W [N, K] (weight), dY [M, N] (gradient). The reference accumulates in
// float64; the quantised GEMM multiplies the dequantised operands with float32 accumulation
// (engine "emulated": the quantisation error alone).
//
// With a GemmEngine (gemm_engine.hpp; cuBLASLt with --device cuda) each GEMM also runs as a real
// low-precision GEMM, compared with that engine's reference GEMM (cuBLASLt: BF16 inputs, FP32
// accumulation): a second row with engine = the engine's name, quantisation and accumulation error
// together. Where the engine cannot run a GEMM, the emulated row's note says why.
//
// Tensor-parallel layers (X, W and dY captured as the same number of rank shards) are computed per
// rank on that rank's shards, quantised as TE quantises them (each shard; per-tensor scales from
// the reduced amax, or the shard's own with --amax-reduction none), and put together for the
// whole layer: column-parallel (X the same on every rank) has the fprop/wgrad outputs side by side
// and the dgrad outputs summed, row-parallel (dY the same on every rank) the fprop outputs summed
// and the others side by side, data-parallel (W the same on every rank, tokens split) the wgrad
// outputs summed and the others side by side. m/n/k are the whole layer's; `note` names the
// split. The engine is not run on them. Other splits (sequence parallelism splits X by tokens)
// are skipped. The pairing, the splits and the operand copies each GEMM uses: gemm_pairing.hpp.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "engine/gemm_engine.hpp"
#include "engine/gemm_pairing.hpp"
#include "engine/gemm_row.hpp"
#include "engine/run.hpp"
#include "engine/schedule.hpp"

namespace fp8a {

// What --gemm-rows asks for (docs/OPTIONS.md): the output rows (and columns) the GEMM-output error
// is computed on. Single-rank layers take the heaviest rows and columns (by the operands' row
// energies) with certainty and draw the rest systematically by energy; layers split over ranks
// take evenly spaced rows and every column. Sampled entries stand for the ones they represent
// (METRICS.md, gemms.csv: sampled, rows_used, cols_used). One value from the command line to the
// engine and the unit-cache key.
struct GemmSampling {
  enum class Mode : std::uint8_t {
    kAuto,  // `auto`: every entry up to 2^32 multiply-adds, else a sample (gemm_sample_for)
    kAll,   // `0`: every row and column (exact)
    kRows,  // `N`: `rows` rows; every column unless `cols` > 0
  };
  Mode mode = Mode::kAuto;
  // kRows: this many output rows (tokens of fprop and dgrad, dW rows of wgrad), >= 1; all of a
  // GEMM with fewer. Else 0.
  std::int64_t rows = 0;
  // kRows: 0 every output column, else this many (all of a GEMM with fewer), on single-rank
  // layers only; no option sets it (tests do). Else 0.
  std::int64_t cols = 0;

  static constexpr GemmSampling automatic() { return {}; }
  static constexpr GemmSampling all() { return {Mode::kAll, 0, 0}; }
  // FP8A_CHECKs rows >= 1 and cols >= 0.
  static GemmSampling of_rows(std::int64_t rows, std::int64_t cols = 0);
  // As --gemm-rows takes it: "auto", "0" or "N" (cols not shown); the run checkpoint records it.
  std::string text() const;
  bool operator==(const GemmSampling&) const = default;
};

// The rows and columns of one GEMM's output [m, n] (reduction k) whose entries are computed, as
// gemm_sample_for resolves a GemmSampling: rows of the left-hand operand (tokens for fprop and
// dgrad, dW rows for wgrad) and of the right-hand one (W's rows for fprop, its columns for dgrad,
// X's columns for wgrad). rows == m and cols == n: every entry.
struct GemmSampleSize {
  std::int64_t rows = 0, cols = 0;
};
// kAuto: the whole output while m * n * k <= kGemmAutoMacs; else, with `cols_too`, about
// sqrt(kGemmAutoMacs / k) rows and as many columns (each at least kGemmAutoMinRows, at most m or
// n; a dimension that runs out gives the other its share of the budget), without, all n columns
// and the fewest rows r >= kGemmAutoMinRows with r * n * k <= kGemmAutoMacs (not more than m);
// a sample of at least half the m * n entries is the whole output (it would save too little).
// Square samples balance the casts, which scale with the operands' rows (the right-hand operand's
// whole length), against the products, which scale with rows times columns. kAll: everything.
// kRows: min(rows, m) rows and, with `cols_too` and cols > 0, min(cols, n) columns, else every
// column. `cols_too`: the layer is single-rank (a split layer's columns are all used). The
// figures behind the bound: bench/RESULTS.md.
inline constexpr std::int64_t kGemmAutoMacs = std::int64_t{1} << 32;
inline constexpr std::int64_t kGemmAutoMinRows = 256;
GemmSampleSize gemm_sample_for(const GemmSampling& sampling, std::int64_t m, std::int64_t n, std::int64_t k,
                               bool cols_too);

// The products are computed in tiles of this many rows of the right-hand operand (W for fprop,
// W^T for dgrad, X^T for wgrad), each a task: a fixed size, so the numbers do not depend on the
// thread count; a multiple of every recipe's block height (the operands are quantised by tile).
// 128 measured fastest of 128..2048 on one Llama-2-7B layer (bench/RESULTS.md): a tile's casts
// stay in cache.
inline constexpr std::int64_t kGemmTileRows = 128;
// The buffers a GEMM's casts computed together may hold (the entries' relative errors for the
// median, the a operands as cast, a tile's output per thread): all of a GEMM's recipes and formats
// at once when they fit, each tile of b then read once for all; else in groups, b read once per
// group. One cast's buffers are held whatever their size.
inline constexpr std::int64_t kGemmGroupBytes = std::int64_t{256} << 20;

// GemmOptions::stream_entries' default: 2^23 entries, 64 MB a float64 buffer (the shipped
// samples' largest outputs, the README's LM head among them, are held, as before); and
// stream_band_bytes': a streamed GEMM's a operand is loaded and cast about 64 MB of it at a time.
inline constexpr std::int64_t kGemmStreamEntries = std::int64_t{1} << 23;
inline constexpr std::int64_t kGemmStreamBandBytes = std::int64_t{64} << 20;
// And stream_gather: the most relative errors a streamed output's median gathers (32 MB).
inline constexpr std::int64_t kGemmStreamGather = std::int64_t{1} << 22;

struct GemmOptions {
  // The entries each GEMM's error is computed on (--gemm-rows). Default: every entry (exact);
  // the command line's default is auto (RunRequest::gemm_sampling).
  GemmSampling sampling = GemmSampling::all();
  const GemmEngine* engine = nullptr;  // also run every GEMM on this engine (not owned)
  // A whole output (not sampled) of more entries than this, on a single-rank layer, is computed in
  // memory that does not grow with it (the reference and every cast tile by tile, twice: the
  // median and wgrad's noise flips in a second pass; METRICS.md); smaller ones hold their
  // reference and relative errors whole. The same numbers either way, but for the summation
  // order of the noise flips (and, over several bands of a's rows, of the error sums). Tests
  // lower both.
  std::int64_t stream_entries = kGemmStreamEntries;
  std::int64_t stream_band_bytes = kGemmStreamBandBytes;
  std::int64_t stream_gather = kGemmStreamGather;
};

// Rows ordered by format (the table's, EvaluationIndex::formats), then layer job, recipe and GEMM:
// each format's rows are those of a run of that format alone. A GEMM whose operands have the same
// FP8 types in two formats (fprop: X and W are E4M3 in both; BF16) is computed once and its rows
// repeated with the other format.
// Layers whose operands do not fit together (X [M,K], W [N,K], dY [M,N]) are skipped and named in
// `skipped`. Evaluations that were not applicable (delayed without history) are skipped too.
// Its units (run_units, stage "GEMM layers") are the layers at a step, each kept whole in the
// store; the result does not depend on the thread or rank count. Throws StopRequested on a stop
// request.
std::vector<GemmRow> evaluate_gemm_errors(const CaptureSet& captures,
                                          std::span<const EvaluationRow> rows,
                                          const GemmOptions& options,
                                          std::vector<PairingSkip>* skipped,
                                          const RunContext& context = {});
// The same on layers already paired (pair_gemm_operands), for a caller that needs the pairing too.
std::vector<GemmRow> evaluate_gemm_errors(std::span<const GemmLayer> layers,
                                          std::span<const EvaluationRow> rows,
                                          const GemmOptions& options,
                                          const RunContext& context = {});
// The GEMMs `sites` of `layers` computed exactly (every output entry, whatever options'
// sampling), each under every recipe and format, in evaluate_gemm_errors' order: its rows of those
// GEMMs, computed alone (a refinement: policies/refinement.hpp). Sites of no layer are ignored.
std::vector<GemmRow> evaluate_exact_gemms(std::span<const GemmLayer> layers, std::span<const EvaluationRow> rows,
                                          std::span<const GemmSite> sites, const GemmOptions& options,
                                          const RunContext& context = {});

}  // namespace fp8a

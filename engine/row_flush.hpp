// Which rows of a tensor a cast flushes: the share of its rows (the tokens of X and dY, the output
// channels of W: the rows of the captured 2-D view, in every copy) whose flushed elements carry
// more than half of that row's energy. A per-token outlier sets a per-tensor scale that flushes
// every other token whole while the flushed share of the tensor's energy stays tiny; small values
// flushed across all tokens leave each token most of its energy. The element count cannot tell
// the two apart; this can (calibration/RESULTS.md outlier@d512/current: 53.6 % of the FC2 input's
// elements flushed, no token losing half its energy, no harm). METRICS.md "Flushed rows".
//
// A pass after the evaluation on the CPU, for the rows a policy asks about (those whose
// underflow count breaches it): it re-casts each asked copy of the tensor exactly as the
// evaluation did (the same QuantSpec, chunks and NVFP4 stochastic-rounding stream: the CPU
// backend's row_flush, engine/cpu_backend.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "datasets/capture.hpp"
#include "engine/evaluation_row.hpp"
#include "engine/cpu_backend.hpp"

namespace fp8a {

// The cast an evaluation row's copy went through on one shard (the row's scale where the shards
// shared one, else the shard's own); false when it does not resolve (a row not applicable).
bool row_quant_spec(const EvaluationRow& row, const TensorView& shard, QuantSpec* spec);

// Sets row_flush on every captured row (not logged, applicable) that `wanted` picks, each key's
// shards read once for all its rows.
void measure_row_flush(const CaptureSet& captures, std::vector<EvaluationRow>& rows,
                       const std::function<bool(const EvaluationRow&)>& wanted);

}  // namespace fp8a

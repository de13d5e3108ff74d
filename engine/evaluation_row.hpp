// The evaluation table's row type (evaluate_captures' result: engine/run.hpp), in a header of its
// own so that what only reads rows needs neither the run nor its options.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "core/recipe.hpp"
#include "datasets/capture.hpp"
#include "engine/backend.hpp"
#include "engine/delayed_replay.hpp"

namespace fp8a {

// What a row read from a training log's statistics (engine/logged_rows.hpp) determines, where a
// row measured on a captured tensor determines everything. The criteria judge what is determined
// and say "not judged" for the rest (policies/verdict.hpp).
struct LoggedMeasures {
  bool underflow = false;   // underflow_pct: TE's underflows%
  // underflow_energy_pct holds an upper bound (the flush threshold from the logged scale_inv or
  // amax, the mean square from std and mean); false: the log cannot bound it.
  bool energy_bound = false;
  bool rel_mse = false;     // rel_mse = mse / (std^2 + mean^2), each logged precisely enough
  bool saturation = false;  // saturated_pct: 0 by construction, or the delayed run's overflows%
  // The values bound the recipe's from above: TE's fp8_block_scaling what-if casts 128x128 tiles,
  // whose flush threshold is at least that of the recipe's 1x128 blocks for X and dY.
  bool upper_bound = false;
  std::string source;       // the logged statistic's name, e.g. "fp8_current_scaling_underflows%"
};

// One row of the evaluation table: one tensor under one recipe in one format, in one orientation.
// Every format has its complete set of rows; rows of formats that give the tensor the same FP8
// type (and BF16 rows) are copies of one evaluation.
struct EvaluationRow {
  CaptureKey key;
  std::string file;
  std::string tensor_name;
  DType input_dtype = DType::kF32;
  std::vector<std::int64_t> shape;  // of one shard when ranks > 1
  int ranks = 1;                     // shards (tensor-parallel ranks) evaluated as one tensor
  Recipe recipe;
  TrainingFormat format = TrainingFormat::kHybrid;
  Fp8Format fp8 = Fp8Format::kE4M3;  // the FP8 type this role uses under `format`
  Orientation orientation = Orientation::kRowwise;
  TensorStats stats;
  Applicability applicability;
  QuantMetrics metrics;
  // Delayed scaling only: how the scale was replayed, and the current-scaling scale of the same
  // tensor (scale_from_amax(amax), no pow2, no eps) for delayed_vs_current_log2.
  ReplayedScale replay;
  float current_scale = 1.0f;
  // Set on rows from a training log's statistics (run --training-log with no capture).
  std::optional<LoggedMeasures> logged;
  // Measured after the evaluation on the rows a policy asks about (engine/row_flush.hpp); not
  // stored with the evaluation (resume recomputes it).
  std::optional<RowFlush> row_flush;
};

// log2(delayed scale / current scale): negative means headroom, positive means the delayed scale is
// too large and values saturate. NaN for rows that are not delayed.
inline double delayed_vs_current_log2(const EvaluationRow& row) {
  if (!replays_history(row.recipe.kind) || !row.applicability.ok) return std::numeric_limits<double>::quiet_NaN();
  return std::log2(static_cast<double>(row.metrics.scale)) - std::log2(static_cast<double>(row.current_scale));
}

}  // namespace fp8a

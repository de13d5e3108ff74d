// Evaluation rows from a training log's statistics alone (run --training-log with no capture): what
// TE's LogFp8TensorStats logged for each GEMM operand, step and recipe, turned into the rows a
// captured tensor would give, with what the log cannot determine marked (LoggedMeasures).
//
// Per (step, layer, tensor, recipe, copy), from the statistics TE logs
// (transformer_engine/debug/features/utils/stats_computation.py):
//  - underflow_pct = underflows% ((nonzero x) - (nonzero FP8 codes)) / numel x 100, as ours;
//  - rel_mse = mse / (std^2 + mean^2): mse is mean((x - dequant)^2), std and mean LogTensorStats'
//    of the same tensor and step (torch.std is the n-1 estimate: the mean square it gives is high
//    by var/n). Determined only where both are logged and, under nvdlfw's default 4-decimal
//    logger, mse and std are at least 0.005 (a rounding of at most 1 %);
//  - underflow_energy_pct, an upper bound, the smaller of two: every flushed |x| is below half the
//    smallest subnormal times the largest scale_inv (E4M3 2^-10, E5M2 2^-17), so the
//    flushed share of sum x^2 is at most underflows% x that^2 / (std^2 + mean^2), scale_inv from
//    the logged scale_inv_max (MXFP8's as the biased E8M0 exponent), else from cur_amax
//    (per-tensor current scaling amax / fp8_max; power-of-two block scales at most twice that);
//    and every flushed x adds x^2 to the squared
//    error, so the share is at most mse / (std^2 + mean^2) (allowing torch.std's n-1 for 1,000
//    elements or more). Rounded values are moved by 0.00005 the conservative way;
//  - saturated_pct = 0 under current scaling (scale = fp8_max / amax) and block scaling
//    (power-of-two scales rounded down), the delayed run's own overflows% under delayed scaling,
//    and undetermined under MXFP8 (its E8M0 scale can put a block's amax past fp8_max).
// Recipes: fp8_current_scaling = current, mxfp8 = mxfp8, fp8_block_scaling = block (TE's what-if
// casts 128x128 tiles: values bound the block recipe's 1x128 X and dY from above, upper_bound),
// bare names = the training recipe (--training-recipe; exact, so they replace a what-if's), and
// fp8_delayed_scaling only when the run trained under delayed scaling. LogNvfp4TensorStats'
// nvfp4_ statistics judge nothing: TE counts nonzero FP4 codes, and a block whose E4M3 scale is 0
// keeps nonzero codes (+-6) though it decodes to 0, so the count misses those flushes. FP8 types: TE's what-if
// quantisers take the training tensor's, given here as the training format. Several files (one
// per rank): a statistic's values are averaged over the files that log it (tensor-parallel shards
// of equal size then give the whole tensor's underflow %, mse and mean square; data-parallel
// replicas log one value), scale_inv_max is the largest; within a file the first value counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "datasets/training_log.hpp"
#include "engine/evaluation_row.hpp"

namespace fp8a {

// One candidate copy's logged statistics over the logged steps, for the report's charts: at most
// kLoggedSeriesPoints points (past that, each point the worst of a run of consecutive steps, the
// runs of equal length, a power of two, but the last).
inline constexpr std::size_t kLoggedSeriesPoints = 256;
struct LoggedSeries {
  std::string layer;
  Role role = Role::kActivation;
  Recipe recipe;
  TrainingFormat format = TrainingFormat::kHybrid;
  Orientation orientation = Orientation::kRowwise;
  std::vector<std::int64_t> steps;
  std::vector<double> underflow_pct;  // NaN where not logged
  std::vector<double> rel_mse;        // NaN where the log does not determine it
};

// The rows are kept at a bounded set of steps per layer: for every candidate copy of its tensors,
// the steps on the Pareto front of (underflow %, flushed-energy bound) and those of the largest
// rel_mse and saturation (the earliest of equals). A criterion that grows with each of its measures (every criterion of
// the policies) fails at some logged step only if it fails at one of these, and is worst at one
// of them; the run is judged on these steps, and the series keep every step for the charts.
struct LoggedRows {
  std::vector<EvaluationRow> rows;  // ordered by key, then recipe spec, then orientation
  std::vector<std::string> notes;   // statistics left out, and why
  // The logged steps the rows leave out, and why that loses no failure ("" when none is left out):
  // said among what the answer did not judge.
  std::string not_kept;
  std::vector<LoggedSeries> series;
  std::size_t steps_logged = 0;     // distinct steps with an FP8 statistic
  std::size_t steps_kept = 0;       // distinct steps of `rows`
};

// Builds the rows step by step as the log is read (load_training_log's sink), keeping per copy
// only its deciding steps' rows and its thinned series: memory bounded by the layers and copies,
// not the steps. Steps come in increasing order; equal layer names view the same storage.
class LoggedRowsBuilder final : public LoggedStepSink {
 public:
  LoggedRowsBuilder(std::optional<Recipe> training_recipe, TrainingFormat format);
  ~LoggedRowsBuilder() override;
  LoggedRowsBuilder(const LoggedRowsBuilder&) = delete;
  LoggedRowsBuilder& operator=(const LoggedRowsBuilder&) = delete;
  void add_step(const LoggedStep& step) override;
  LoggedRows finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The rows of a log read without a sink (its fp8_stats and tensor_stats in any order; amaxes from
// its series).
LoggedRows rows_from_logged_stats(const TrainingLog& log, const std::optional<Recipe>& training_recipe,
                                  TrainingFormat format);

}  // namespace fp8a

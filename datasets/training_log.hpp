// A training log: what a training run recorded at every step, read from files (--training-log,
// alias --amax-trace): the amax (max |x|) of every GEMM operand, so that Transformer Engine's
// delayed scaling (scale from an amax history of earlier steps) can be replayed exactly, and the
// FP8 statistics nvdlfw_inspect logged, to be shown beside fp8-advisor's own.
//
// Two formats, told apart by content (never by file name):
//  1. CSV from our capture hook. First line exactly "step,tensor,amax"; then rows STEP,TENSOR,AMAX
//     with TENSOR = "<layer>.<role>" (as in captures, see split_tensor_name), RFC 4180 double
//     quotes allowed around any field ("" inside quotes is one quote). \n or \r\n line ends; blank
//     lines are skipped; no byte-order mark.
//  2. nvdlfw_inspect statistics logs written by TE's LogTensorStats feature
//     ({log_dir}/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-{rank}.log): lines
//     "[prefix] <layer>_<tensor>_<stat> \t\t\t\t iteration=NNNNNN \t\t\t\t value=V.VVVV". Its
//     FileLogger puts "%(asctime)s - %(levelname)s - " before every line; the name is the last
//     blank-free token before "iteration=", and any run of blanks separates the parts. The tensor
//     is the last "_" part before "_cur_amax" (layer names may hold "_", tensor names do not).
//     Stat cur_amax of tensors activation, weight and gradient gives the amaxes. The FP8 statistics
//     of TE's LogFp8TensorStats feature, "<layer>_<tensor>_[<recipe>_]<stat>[_columnwise]" with
//     stat underflows%, overflows%, scale_inv_min, scale_inv_max or mse and recipe
//     fp8_delayed_scaling, fp8_current_scaling, fp8_block_scaling or mxfp8 (none: the training
//     run's recipe), and LogNvfp4TensorStats' "<layer>_<tensor>_nvfp4_<stat>" (underflows%,
//     mse), are kept as they are (fp8_stats) to be shown beside fp8-advisor's own
//     numbers and to judge a run from statistics alone; so are LogTensorStats' mean and std
//     (tensor_stats), which give a tensor's mean square. Other statistics and tensors (output,
//     wgrad, dgrad) are skipped and counted in a note. Values carry 4 decimals under nvdlfw's
//     default logger, every digit under fp8a_capture.stats_logger.
//
// Amax values: float32, parsed exactly (std::from_chars); "nan" and "inf" are accepted in any
// case; negative values are refused; -0 is read as 0.
//
// The same (layer, role, step) amax in one file is an error. In several files (one log per rank) the
// values are merged by max, as TE's amax reduction across ranks does; a NaN on any side wins.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/amax_by_step.hpp"
#include "datasets/file_system.hpp"
#include "core/recipe.hpp"

namespace fp8a {

// The recipe an nvdlfw_inspect FP8 statistic was computed for: the training run's own (a stat
// name without a recipe) or one of TE's what-if quantizers (log_fp8_tensor_stats.py
// _get_new_quantizer: current scaling without pow2/eps, 128x128-tile block scaling, MXFP8), or
// the NVFP4 training run's own (LogNvfp4TensorStats: "nvfp4_underflows%", "nvfp4_mse", of the
// rowwise FP4 data; TE 2.12+, log_nvfp4_tensor_stats.py).
enum class LoggedRecipe : std::uint8_t { kTraining, kDelayed, kCurrent, kBlock, kMxfp8, kNvfp4 };
inline constexpr std::size_t kLoggedRecipes = 6;
enum class LoggedStatKind : std::uint8_t { kUnderflowPct, kOverflowPct, kScaleInvMin, kScaleInvMax, kMse };
// TE's names: "fp8_current_scaling" ... ("" for kTraining); "underflows%" ...
const char* logged_recipe_name(LoggedRecipe r);
const char* logged_stat_name(LoggedStatKind s);

// One LogFp8TensorStats value of one tensor at one step, as logged. `layer` views storage that
// lives as long as the TrainingLog that read it (TrainingLog::names).
struct LoggedFp8Stat {
  std::string_view layer;
  Role role = Role::kActivation;
  std::int64_t step = 0;
  LoggedRecipe recipe = LoggedRecipe::kTraining;
  LoggedStatKind stat = LoggedStatKind::kUnderflowPct;
  bool columnwise = false;
  double value = 0.0;
  bool rounded = false;    // printed with exactly 4 decimals (nvdlfw's default logger)
  std::size_t file = 0;    // index into TrainingLog::files
  std::size_t line = 0;
};

// One LogTensorStats value of one tensor at one step: mean and std (torch.mean, torch.std of the
// high-precision tensor; transformer_engine/debug/features/utils/stats_computation.py).
enum class LoggedTensorStatKind : std::uint8_t { kMean, kStd };
struct LoggedTensorStat {
  std::string_view layer;
  Role role = Role::kActivation;
  std::int64_t step = 0;
  LoggedTensorStatKind stat = LoggedTensorStatKind::kMean;
  double value = 0.0;
  bool rounded = false;
  std::size_t file = 0;
  std::size_t line = 0;
};

// One tensor's amax at one step, over every file (merged by max) that logged it.
struct LoggedAmax {
  std::string_view layer;
  Role role = Role::kActivation;
  float amax = 0.0f;
  bool rounded = false;  // printed with 4 decimals in some file
};

// Every statistic of one step, from every file: the FP8 and tensor statistics in file, then line
// order, and the amax of each tensor that has one. Views valid during the call that gives it; the
// layer names of one log view one string per name (equal names, equal data()).
struct LoggedStep {
  std::int64_t step = 0;
  std::span<const LoggedFp8Stat> fp8;
  std::span<const LoggedTensorStat> tensor;
  std::span<const LoggedAmax> amax;
  std::span<const std::string> files;  // the log's files, for LoggedFp8Stat::file
};

// Takes a training log's statistics step by step as they are read, in increasing step order, so
// that a log of any length is reduced in memory bounded by what the sink keeps.
class LoggedStepSink {
 public:
  virtual ~LoggedStepSink() = default;
  virtual void add_step(const LoggedStep& step) = 0;
};

// A sink that lets every step's statistics go: for readers of the amaxes alone.
class DropLoggedSteps final : public LoggedStepSink {
 public:
  void add_step(const LoggedStep&) override {}
};

// The amax of one GEMM operand, by training step (TE's "iteration"). Steps need not be contiguous.
struct AmaxSeries {
  AmaxByStep amax_by_step;
};

// Every file of one --training-log, merged.
struct TrainingLog {
  std::map<std::pair<std::string, Role>, AmaxSeries> series;  // (layer, role) -> series
  std::vector<std::string> files;                             // paths read, in order, each once
  // nvdlfw_inspect FP8 statistics, by step, then in file and line order (several ranks' logs are
  // not merged); empty when a LoggedStepSink took them.
  std::vector<LoggedFp8Stat> fp8_stats;
  std::vector<LoggedTensorStat> tensor_stats;  // mean and std, in the same order
  std::size_t fp8_stat_count = 0;              // FP8 statistics read, kept here or not
  // The layer names the statistics view (shared: a copy of the log keeps them alive).
  std::shared_ptr<const std::deque<std::string>> names;
  // True when any value came from a source that rounds: nvdlfw_inspect's default file logger prints
  // value={:.4f}, so its amaxes are rounded to 0.0001 and an amax below 0.00005 reads as 0 (a
  // cur_amax printed with exactly four decimals counts; fp8a_capture.stats_logger prints every digit).
  bool rounded = false;
  // Human-readable facts about the load, in this order: one line per file (format, values read,
  // lines skipped), paths listed twice, the rounding of nvdlfw_inspect values, the cross-file
  // merge.
  std::vector<std::string> notes;

  const AmaxSeries* find(const std::string& layer, Role role) const;  // nullptr if absent
};

// Reads each file (a path listed twice is read once) and merges them into one log. The format is
// detected from the content: the CSV header on the first line, else any line holding "iteration="
// followed by "value=". The nvdlfw_inspect logs are read together, step by step (each rank's log
// is written in step order); with a sink, each step's statistics go to it and are not kept in the
// log (only the amax series are). Throws input errors (exit 3), messages "path:LINE: ...":
//   fp8a.io.101     path does not exist
//   fp8a.io.102     path is not a regular file, or cannot be read
//   fp8a.trace.501  neither format (the message shows the first line)
//   fp8a.trace.502  malformed line (CSV field count or quotes; nvdlfw line without iteration= or
//                   value=, or text after the value)
//   fp8a.trace.503  bad number (step/iteration not a non-negative integer; amax not a number,
//                   negative, or outside the float32 range; a statistic not a number, a
//                   percentage outside 0..100, a negative std, mse or scale; NaN passes)
//   fp8a.trace.504  CSV tensor name is not <layer>.<role>
//   fp8a.trace.505  the same (layer, role, step) twice in one file (both line numbers named)
//   fp8a.trace.506  the file holds no amax entries (nvdlfw logs: no cur_amax and no FP8 statistic)
//   fp8a.trace.508  an nvdlfw_inspect log's iterations go back (a line of an earlier step after
//                   a later one's)
TrainingLog load_training_log(const std::vector<std::string>& paths, const FileSystem& fs,
                              LoggedStepSink* sink = nullptr);

}  // namespace fp8a

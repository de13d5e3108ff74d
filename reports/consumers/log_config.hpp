// The logging plan for Transformer Engine's debug API (`fp8-advisor log-config`, issue 59): an
// nvdlfw_inspect YAML that asks TE, on every selected layer and every `freq` steps, for
//  - the high-precision statistics fp8-advisor's criteria read (LogTensorStats: cur_amax for the
//    delayed replay and the scales, mean and std for the mean square);
//  - the training recipe's own quantisation statistics (LogFp8TensorStats; LogNvfp4TensorStats
//    under NVFP4), which cost no extra cast;
//  - the what-if statistics of every other candidate recipe TE can log on the same tensor
//    (LogFp8TensorStats' `<recipe>_<stat>[_columnwise]`, TE 2.7+).
// What TE cannot log for this run (an older release, the GPU, delayed scaling as a what-if, BF16
// training) is left out with why, and the file states what the logging costs, derived from TE's
// code path. Facts are TE's: transformer_engine/debug/features/log_fp8_tensor_stats.py
// (check_if_stat_is_supported, update_aux_dict), log_tensor_stats.py, log_nvfp4_tensor_stats.py.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/gpu_target.hpp"
#include "core/recipe.hpp"
#include "core/te_version.hpp"
#include "reports/artifact.hpp"

namespace fp8a {

struct LogRequest {
  TeVersion te = kTeNewest;
  const GpuTarget* gpu = nullptr;  // the GPU the run trains on (TE's what-if casts: block sm_90+, MXFP8 sm_100+)
  Recipe training;                 // the recipe the run trains with; bf16: no FP8 training
  int freq = 10;                   // every freq-th step
  std::int64_t start_step = 0;
  std::int64_t end_step = -1;      // -1: to the end
  std::string layers = ".*";       // nvdlfw_inspect's layer_name_regex_pattern (Python re.search on the name)
};

// One statistic not logged, and why.
struct LeftOut {
  std::string what;
  std::string why;
};

struct LogPlan {
  std::vector<std::string> fp8_stats;     // LogFp8TensorStats; empty: the feature is not written
  std::vector<std::string> nvfp4_stats;   // LogNvfp4TensorStats; empty: not written
  std::vector<std::string> tensor_stats;  // LogTensorStats
  std::vector<LeftOut> left_out;
  // Casts TE adds per tensor and logged step: one per what-if statistic (update_aux_dict
  // re-quantises for every statistic whose recipe is not the training one).
  int what_if_casts = 0;
};

// The tensors every feature logs: X, dY and W.
inline const std::vector<std::string> kLoggedTensors = {"activation", "gradient", "weight"};

LogPlan plan_logging(const LogRequest& request);

// The YAML (one section, the features above), its comments saying what is left out and what it
// costs. Named `name` (the --out file's base name).
Artifact render_log_config(const LogRequest& request, const LogPlan& plan, const std::string& name);

}  // namespace fp8a

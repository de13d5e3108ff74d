// Provenance and run facts recorded in every report: what was run and what it read, as recorded
// (the live configuration a run is computed from is pipeline/run_pipeline.hpp's RunRequest).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "engine/run.hpp"
#include "policies/logged_stats_summary.hpp"

namespace fp8a {

struct RunInfo {
  std::string version;
  std::string git_revision;
  std::vector<std::string> command_line;
  std::string requested_device;  // --device: auto, cpu or cuda
  std::string backend;         // the backend that ran: "cpu" or "cuda"
  std::string device;          // backend's description
  bool cuda_compiled = false;  // whether this build includes the CUDA backend
  int cuda_devices = 0;        // CUDA devices seen (0 without CUDA)
  // Where the GEMM error ran: "emulated on the CPU, N threads" (and "; cuBLASLt rows on the GPU"
  // with its engine); empty with --no-gemms.
  std::string gemm_path;
  std::vector<CaptureFile> inputs;
  // What was evaluated: the recipes and formats in the run's order (formats: those some recipe
  // was evaluated in), --format as given ("auto", "e4m3,hybrid") and for a reader
  // (engine/run.hpp describe_formats), and --amax-reduction.
  std::vector<Recipe> recipes;
  std::vector<TrainingFormat> formats;
  std::string format_option;
  std::string format_description;
  AmaxReduction amax_reduction = AmaxReduction::kTp;
  // The training log, when one was given (--training-log; summary.json's amax_trace* keys).
  std::vector<std::string> log_files;
  bool log_rounded = false;
  std::vector<std::string> log_notes;
  // nvdlfw_inspect FP8 statistics found in the training log, and the recipe the logged run trained
  // with (--training-recipe, "" if not given).
  std::optional<LoggedStatsSummary> logged_stats;
  std::string training_recipe;
  double read_seconds = 0;
  double evaluate_seconds = 0;
  double gemm_seconds = 0;
  std::vector<std::string> outputs;  // file names written to the output directory
  // The consumer files not written, each with why ("te_precision_config.yaml not written: ...").
  std::vector<std::string> not_written;
  std::vector<std::string> warnings;
};

}  // namespace fp8a

// fp8-advisor whatif: one layer's metrics under every candidate, in the terminal, without a run.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <set>

#include "cli/backend_registry.hpp"
#include "cli/layer_match.hpp"
#include "cli/options.hpp"
#include "pipeline/run_pipeline.hpp"
#include "core/error.hpp"
#include "reports/whatif_table.hpp"

namespace fp8a::cli {

namespace {

// The captured layer names in capture order, once each.
std::vector<std::string> layer_names(const CaptureSet& captures) {
  std::vector<std::string> names;
  for (const CapturedTensor& t : captures.tensors)
    if (std::find(names.begin(), names.end(), t.key.layer) == names.end()) names.push_back(t.key.layer);
  return names;
}

}  // namespace

int command_whatif(const Invocation& inv) {
  EvaluationOptions eval;
  std::string layer_pattern;
  std::int64_t step = 0;
  po::options_description desc("Options");
  desc.add_options()
      ("layer", po::value(&layer_pattern)->required(),
       "the layers to show: a regular expression (RE2 syntax: ECMAScript's and Python's without "
       "lookaround or backreferences) searched in each captured layer name")
      ("step", po::value(&step), "show this captured step only (every step is still evaluated, "
                                 "for the delayed replay's history)");
  add_evaluation_options(desc, eval, "recipe");
  po::variables_map vm;
  if (!parse_options(inv, desc, nullptr, &vm,
                     "fp8-advisor whatif --capture PATH [PATH ...] --layer REGEX [--recipe SPEC[,SPEC...]] "
                     "[--step N] [options]",
                     std::cout))
    return kExitOk;
  RunRequest request;
  request.config = evaluation_config(eval);
  request.gemm_sampling = eval.gemm_sampling;
  const EvaluationBackend evaluator = start_backend(eval);

  DiskFileSystem fs;
  const CaptureSet all = load_captures(eval.capture_paths, fs, capture_options(eval.npy_dtype_text));
  const std::vector<std::string> layers = matching_layers(layer_pattern, layer_names(all));
  const std::set<std::string> wanted(layers.begin(), layers.end());
  // Only the matched layers' tensors are evaluated: every step of them, as run evaluates them.
  CaptureSet captures;
  captures.files = all.files;
  captures.mappings = all.mappings;
  std::set<std::int64_t> steps;
  for (const CapturedTensor& t : all.tensors)
    if (wanted.count(t.key.layer) != 0) {
      captures.tensors.push_back(t);
      steps.insert(t.key.step);
    }
  if (vm.count("step") != 0) {
    if (steps.count(step) == 0) {
      std::string list;
      for (std::int64_t s : steps) list += (list.empty() ? "" : ", ") + std::to_string(s);
      throw usage_error("fp8a.usage.217", "--step " + std::to_string(step) +
                                              ": the matched layers were captured at steps " + list);
    }
    request.only_step = step;
  }
  const TrainingLog training_log = load_evaluation_log(eval, fs);
  if (!eval.log_paths.empty()) request.config.training_log = &training_log;
  const auto gemm_engine = make_gemm_engine(*evaluator.backend);
  const RunResult result = run_pipeline(request, captures, *evaluator.backend, gemm_engine.get());
  for (const auto& s : result.skipped_pairings) std::cerr << "fp8-advisor: warning: gemms: " << s.line << "\n";

  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  for (std::size_t i = 0; i < layers.size(); ++i)
    std::cout << (i == 0 ? "" : "\n") << render_whatif_table(layers[i], result.rows, result.gemms, terminal);
  return kExitOk;
}

}  // namespace fp8a::cli

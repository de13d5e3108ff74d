// A capture evaluated as `run` evaluates it, for the policies tests: the rows under a recipe list
// and formats (on the CPU backend, with the capture's training log), the GEMM layers paired once
// with what could not be paired, and their emulated output errors.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "datasets/capture.hpp"
#include "datasets/training_log.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_pairing.hpp"
#include "engine/run.hpp"

namespace fp8a::testing {

struct Evaluated {
  CaptureSet captures;
  TrainingLog log;
  std::vector<EvaluationRow> rows;
  std::vector<GemmRow> gemms;
  std::vector<GemmLayer> layers;
  std::vector<PairingSkip> skipped;
};

inline void evaluate(Evaluated& e, const std::string& recipes, std::vector<TrainingFormat> formats) {
  RunConfig config;
  config.recipes = parse_recipe_list(recipes);
  config.formats = std::move(formats);
  config.training_log = &e.log;
  e.rows = evaluate_captures(e.captures, config, CpuBackend());
  e.layers = pair_gemm_operands(e.captures, &e.skipped);
  e.gemms = evaluate_gemm_errors(e.layers, e.rows, GemmOptions{});
}

}  // namespace fp8a::testing

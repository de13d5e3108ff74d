// Run orchestration: every (captured tensor x recipe) evaluated on a backend, as table rows.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "engine/backend.hpp"

namespace fp8a {

struct RunConfig {
  std::vector<Recipe> recipes;
  TrainingFormat format = TrainingFormat::kHybrid;
};

// One row of the evaluation table: one tensor under one recipe.
struct EvaluationRow {
  CaptureKey key;
  std::string file;
  std::string tensor_name;
  DType input_dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  Recipe recipe;
  TrainingFormat format = TrainingFormat::kHybrid;
  Fp8Format fp8 = Fp8Format::kE4M3;  // the FP8 type this role uses under `format`
  TensorStats stats;
  Applicability applicability;
  QuantMetrics metrics;
};

// Rows ordered by tensor (capture order), then recipe (config order). Tensors are evaluated in
// parallel; the result does not depend on the thread count.
std::vector<EvaluationRow> evaluate_captures(const CaptureSet& captures, const RunConfig& config,
                                             const Backend& backend);

}  // namespace fp8a

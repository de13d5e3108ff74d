// Hand-built evaluation rows for policy and report tests.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "engine/run.hpp"

namespace fp8a::testing {

inline EvaluationRow make_row(std::int64_t step, const std::string& layer, Role role,
                              const std::string& recipe, double sqnr_db, double cos,
                              double underflow_pct, double overflow_pct) {
  EvaluationRow r;
  r.key = {step, layer, role};
  r.file = "caps/step_" + std::to_string(step) + ".safetensors";
  r.tensor_name = layer + "." + role_name(role);
  r.input_dtype = DType::kBF16;
  r.shape = {4, 8};
  r.recipe = parse_recipe(recipe);
  r.format = TrainingFormat::kHybrid;
  r.fp8 = fp8_format_for(r.format, role);
  r.stats.numel = 32;
  r.stats.amax = r.stats.amax_finite = 2.5f;
  r.stats.amin_nonzero = 0.0625f;
  r.stats.sum_sq = 10.0;
  r.metrics.scale = 179.2f;
  r.metrics.scale_inv = r.metrics.scale_inv_min = r.metrics.scale_inv_max = 1.0f / 179.2f;
  r.metrics.sqnr_db = sqnr_db;
  r.metrics.rel_mse = std::pow(10.0, -sqnr_db / 10.0);
  r.metrics.mse = r.metrics.rel_mse * 10.0 / 32;
  r.metrics.cos = cos;
  r.metrics.underflow_pct = underflow_pct;
  r.metrics.overflow_pct = overflow_pct;
  r.metrics.sums.underflow_count = static_cast<std::int64_t>(underflow_pct * 32 / 100);
  r.metrics.sums.overflow_count = static_cast<std::int64_t>(overflow_pct * 32 / 100);
  return r;
}

inline std::vector<EvaluationRow> sample_rows() {
  return {
      make_row(10, "layers.0.fc1", Role::kActivation, "current", 31.5, 0.9996, 0.0, 0.0),
      make_row(10, "layers.0.fc1", Role::kWeight, "current", 30.25, 0.9995, 3.125, 0.0),
      make_row(10, "layers.0.fc1", Role::kGradient, "current", 18.0, 0.99, 12.5, 0.0),
      make_row(10, "layers.0.fc1", Role::kGradient, "current:pow2", 17.5, 0.985, 15.625, 3.125),
      make_row(20, "layers.0.fc1", Role::kGradient, "current", 16.75, 0.98, 9.375, 0.0),
      make_row(20, "layers.1.fc2", Role::kActivation, "current", 25.0, 0.997, 0.0, 6.25),
  };
}

}  // namespace fp8a::testing

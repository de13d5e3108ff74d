// Per-layer worst metrics: for each (layer, recipe, format), the worst value of each metric over the
// layer's tensors (roles) and steps, and where it occurred.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/evaluation_row.hpp"

namespace fp8a {

struct WorstValue {
  double value = 0.0;
  std::string tensor;      // role, with "/col" for a columnwise copy
  std::int64_t step = 0;
};

struct LayerSummary {
  std::string layer;
  std::string recipe;  // canonical spec
  TrainingFormat format = TrainingFormat::kHybrid;
  std::size_t evaluations = 0;
  WorstValue min_sqnr_db;
  WorstValue min_cos;
  WorstValue max_rel_mse;
  WorstValue max_underflow_pct;
  WorstValue max_overflow_pct;
  WorstValue max_saturated_pct;
  std::int64_t nonfinite_count = 0;  // NaN + Inf elements over the layer's tensors and steps
};

// Rows that a backend could not evaluate are skipped. Layers keep the order in which they first
// appear in rows; recipes the order of their first appearance within a layer, and under each
// recipe its formats in the table's order (EvaluationIndex::formats).
std::vector<LayerSummary> summarize_layers(std::span<const EvaluationRow> rows);

}  // namespace fp8a

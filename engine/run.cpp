#include "engine/run.hpp"

#include <tbb/parallel_for.h>

namespace fp8a {

std::vector<EvaluationRow> evaluate_captures(const CaptureSet& captures, const RunConfig& config,
                                             const Backend& backend) {
  const std::size_t k = config.recipes.size();
  std::vector<EvaluationRow> rows(captures.tensors.size() * k);
  tbb::parallel_for(std::size_t{0}, captures.tensors.size(), [&](std::size_t i) {
    const CapturedTensor& t = captures.tensors[i];
    const Fp8Format fp8 = fp8_format_for(config.format, t.key.role);
    std::vector<Candidate> candidates;
    std::vector<std::size_t> slots;  // row index of each supported candidate
    for (std::size_t j = 0; j < k; ++j) {
      EvaluationRow& row = rows[i * k + j];
      row.key = t.key;
      row.file = t.file;
      row.tensor_name = t.tensor_name;
      row.input_dtype = t.view.dtype;
      row.shape = t.view.shape;
      row.recipe = config.recipes[j];
      row.format = config.format;
      row.fp8 = fp8;
      row.applicability = backend.supports(row.recipe);
      if (row.applicability.ok) {
        candidates.push_back({row.recipe, fp8});
        slots.push_back(i * k + j);
      }
    }
    const TensorEvaluation eval = backend.evaluate(candidates, t.view);
    for (std::size_t j = 0; j < k; ++j) rows[i * k + j].stats = eval.stats;
    for (std::size_t c = 0; c < slots.size(); ++c) {
      rows[slots[c]].applicability = eval.results[c].applicability;
      rows[slots[c]].metrics = eval.results[c].metrics;
    }
  });
  return rows;
}

}  // namespace fp8a

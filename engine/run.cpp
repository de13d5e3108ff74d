#include "engine/run.hpp"

#include <tbb/parallel_for.h>

#include <cmath>
#include <limits>
#include <map>

#include "engine/core/scale.hpp"
#include "engine/cpu_backend.hpp"

namespace fp8a {

Applicability recipe_fits(const Recipe& recipe, const TensorView& t) {
  if (recipe.kind != RecipeKind::kMx) return Applicability::yes();
  if (t.shape.size() >= 2 && t.rows % 32 == 0 && t.cols % 32 == 0) return Applicability::yes();
  std::string shape;
  for (std::size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
  return Applicability::no("MXFP8 needs >= 2 dims with the last dim and the product of the others "
                           "divisible by 32 (TE MXFP8Quantizer.is_quantizable); shape is [" + shape + "]");
}

double delayed_vs_current_log2(const EvaluationRow& row) {
  if (row.recipe.kind != RecipeKind::kPerTensorDelayed || !row.applicability.ok)
    return std::numeric_limits<double>::quiet_NaN();
  return std::log2(static_cast<double>(row.metrics.scale)) -
         std::log2(static_cast<double>(row.current_scale));
}

namespace {

using AmaxHistory = std::map<std::int64_t, float>;

// Known amaxes per (layer, role): the trace's, completed with the captured steps' own amaxes.
std::map<std::pair<std::string, Role>, AmaxHistory> known_amaxes(
    const CaptureSet& captures, const std::vector<TensorStats>& stats, const AmaxTrace* trace) {
  std::map<std::pair<std::string, Role>, AmaxHistory> out;
  if (trace != nullptr)
    for (const auto& [key, series] : trace->series) out[key] = series.amax_by_step;
  for (std::size_t i = 0; i < captures.tensors.size(); ++i) {
    const auto& k = captures.tensors[i].key;
    out[{k.layer, k.role}].try_emplace(k.step, stats[i].amax);
  }
  return out;
}

bool needs_history(const RunConfig& config) {
  for (const auto& r : config.recipes)
    if (r.kind == RecipeKind::kPerTensorDelayed) return true;
  return false;
}

}  // namespace

std::vector<EvaluationRow> evaluate_captures(const CaptureSet& captures, const RunConfig& config,
                                             const Backend& backend) {
  const std::size_t n = captures.tensors.size();
  // Pass 0 (only with delayed recipes): every captured tensor's amax feeds the replay.
  std::vector<TensorStats> stats(n);
  std::map<std::pair<std::string, Role>, AmaxHistory> history;
  if (needs_history(config)) {
    tbb::parallel_for(std::size_t{0}, n,
                      [&](std::size_t i) { stats[i] = compute_tensor_stats(captures.tensors[i].view); });
    history = known_amaxes(captures, stats, config.trace);
  }

  std::vector<std::vector<EvaluationRow>> per_tensor(n);
  tbb::parallel_for(std::size_t{0}, n, [&](std::size_t i) {
    const CapturedTensor& t = captures.tensors[i];
    const Fp8Format fp8 = fp8_format_for(config.format, t.key.role);
    std::vector<EvaluationRow>& rows = per_tensor[i];
    std::vector<Candidate> candidates;
    std::vector<std::size_t> slots;  // row index of each candidate sent to the backend
    for (const Recipe& recipe : config.recipes) {
      for (Orientation o : orientations_for(recipe, t.key.role)) {
        EvaluationRow row;
        row.key = t.key;
        row.file = t.file;
        row.tensor_name = t.tensor_name;
        row.input_dtype = t.view.dtype;
        row.shape = t.view.shape;
        row.recipe = recipe;
        row.format = config.format;
        row.fp8 = recipe.kind == RecipeKind::kBf16 ? Fp8Format::kE4M3 : fp8;
        row.orientation = o;
        row.applicability = backend.supports(recipe);
        if (row.applicability.ok) row.applicability = recipe_fits(recipe, t.view);
        Candidate c{recipe, fp8, t.key.role, o};
        if (recipe.kind == RecipeKind::kPerTensorDelayed && row.applicability.ok) {
          row.replay = replay_delayed_scale(history.at({t.key.layer, t.key.role}), t.key.step,
                                            recipe, fp8);
          if (row.replay.mode == ReplayMode::kUnavailable)
            row.applicability = Applicability::no(row.replay.detail);
          else
            c.given_scale = row.replay.scale;
        }
        if (row.applicability.ok) {
          candidates.push_back(c);
          slots.push_back(rows.size());
        }
        rows.push_back(std::move(row));
      }
    }
    const TensorEvaluation eval = backend.evaluate(candidates, t.view);
    for (auto& row : rows) {
      row.stats = eval.stats;
      row.current_scale = scale_from_amax(eval.stats.amax, fp8_max_finite(row.fp8), false, 0.0f);
    }
    for (std::size_t c = 0; c < slots.size(); ++c) {
      rows[slots[c]].applicability = eval.results[c].applicability;
      rows[slots[c]].metrics = eval.results[c].metrics;
    }
  });
  std::vector<EvaluationRow> out;
  for (auto& rows : per_tensor)
    for (auto& r : rows) out.push_back(std::move(r));
  return out;
}

}  // namespace fp8a

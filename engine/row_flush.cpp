#include "engine/row_flush.hpp"

#include <cmath>
#include <map>

#include "core/error.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/quant_spec.hpp"

namespace fp8a {

bool row_quant_spec(const EvaluationRow& row, const TensorView& shard, QuantSpec* spec) {
  Candidate c{row.recipe, row.fp8, row.key.role, row.orientation};
  // The shards shared the row's scale unless it is NaN (each its own: engine/run.cpp).
  const bool shared = !std::isnan(row.metrics.scale);
  if (is_per_tensor(row.recipe.kind) && shared) c.given_scale = row.metrics.scale;
  const bool own_stats = !shared && (is_per_tensor(row.recipe.kind) || two_level_scale(row.recipe.kind));
  const TensorStats stats = own_stats ? compute_tensor_stats(shard) : row.stats;
  if (!make_quant_spec(c, stats, shard.dtype, spec).ok) return false;
  if (two_level_scale(row.recipe.kind)) {
    if (shared) {
      spec->scale = row.metrics.scale;  // the level-2 scales the evaluation used
      spec->nvfp4_decode = row.metrics.scale_inv;
    } else if (std::isnan(spec->nvfp4_decode)) {
      set_nvfp4_amax(nvfp4_rht_amax(shard, row.orientation), spec);
    }
  }
  return true;
}

void measure_row_flush(const CaptureSet& captures, std::vector<EvaluationRow>& rows,
                       const std::function<bool(const EvaluationRow&)>& wanted) {
  std::map<CaptureKey, std::vector<EvaluationRow*>> asked;
  for (EvaluationRow& r : rows)
    if (!r.logged && r.applicability.ok && wanted(r)) asked[r.key].push_back(&r);
  for (const CapturedTensor& t : captures.tensors) {
    const auto found = asked.find(t.key);
    if (found == asked.end()) continue;
    for (EvaluationRow* r : found->second) {
      QuantSpec spec;
      FP8A_CHECK(row_quant_spec(*r, t.view, &spec), "measure_row_flush: an applicable row's cast does not resolve");
      if (!r->row_flush) r->row_flush = RowFlush{};
      r->row_flush->merge(row_flush(t.view, spec));
    }
    t.view.release();  // TensorStorage::release
  }
}

}  // namespace fp8a

#include "engine/row_flush.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/quant_spec.hpp"

namespace fp8a {

namespace {

// Rows [0, rows) of x (`cols` wide) and their cast deq: the rows whose flushed elements carry
// more than half of the row's finite energy.
std::int64_t lost_rows_of(const float* x, const float* deq, std::int64_t rows, std::int64_t cols) {
  std::int64_t lost = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double energy = 0.0, flushed = 0.0;
    for (std::int64_t i = r * cols; i < (r + 1) * cols; ++i) {
      if (!std::isfinite(x[i])) continue;
      const double v = static_cast<double>(x[i]) * x[i];
      energy += v;
      if (x[i] != 0.0f && deq[i] == 0.0f) flushed += v;
    }
    lost += flushed > 0.5 * energy ? 1 : 0;
  }
  return lost;
}

}  // namespace

RowFlush row_flush(const TensorView& t, const QuantSpec& spec) {
  // The CPU backend's chunks: every block lies inside one, and NVFP4's stochastic rounding draws
  // by the element's place in the tensor.
  const std::int64_t chunk_rows = rows_per_chunk(t.cols);
  const std::int64_t chunks = (t.rows + chunk_rows - 1) / chunk_rows;
  std::vector<std::int64_t> lost(static_cast<std::size_t>(chunks), 0);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, chunks, 1), [&](const tbb::blocked_range<std::int64_t>& r) {
    std::vector<float> x, deq;
    for (std::int64_t c = r.begin(); c != r.end(); ++c) {
      const std::int64_t row0 = c * chunk_rows;
      const std::int64_t rows = std::min(chunk_rows, t.rows - row0);
      const auto n = static_cast<std::size_t>(rows * t.cols);
      x.resize(n);
      deq.resize(n);
      t.load_floats(row0 * t.cols, rows * t.cols, x.data());
      QuantSpec s = spec;
      s.place.first_row = row0;
      FakeQuantCounts counts;
      fake_quantize_rows(s, x.data(), rows, t.cols, deq.data(), &counts);
      lost[static_cast<std::size_t>(c)] = lost_rows_of(x.data(), deq.data(), rows, t.cols);
    }
  });
  RowFlush out;
  out.rows = t.rows;
  for (std::int64_t l : lost) out.lost_rows += l;
  return out;
}

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

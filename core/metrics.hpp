// Metric vocabulary shared by every backend. Backends produce raw sums (TensorStats, QuantSums);
// finalize_metrics derives the reported numbers in one place, so all backends agree on them.
// METRICS.md defines every field exactly.
#pragma once

#include <cstdint>
#include <limits>

namespace fp8a {

// Pass 1: properties of the high-precision tensor itself.
struct TensorStats {
  std::int64_t numel = 0;
  std::int64_t nan_count = 0;
  std::int64_t inf_count = 0;
  std::int64_t zero_count = 0;  // exact zeros (+0 and -0)
  // max |x| over non-NaN elements (inf included), as TE's amax kernel sees the tensor.
  float amax = 0.0f;
  // max |x| and min nonzero |x| over finite elements; amin is +inf when there is no such element.
  float amax_finite = 0.0f;
  float amin_nonzero = std::numeric_limits<float>::infinity();
  double sum_sq = 0.0;  // sum of x^2 over finite elements

  std::int64_t finite_count() const { return numel - nan_count - inf_count; }
  // log2(amax_finite / amin_nonzero); 0 when there is no nonzero finite element.
  double dynamic_range_log2() const;

  // Combines two partial results over disjoint parts of a tensor. Counts and max/min are exact;
  // sum_sq depends on the order of merging, so callers merge in a fixed order.
  void merge(const TensorStats& other);
};

// Pass 2: raw sums of one candidate (recipe + FP8 type) over the finite elements.
struct QuantSums {
  std::int64_t underflow_count = 0;  // x != 0 but FP8 code is +-0 (NaN x counts as nonzero)
  std::int64_t overflow_count = 0;   // |x| > fp8_max * scale_inv (TE's overflows% numerator)
  std::int64_t saturated_count = 0;  // |x * scale| past the last rounding boundary (clipped)
  double sum_sq_err = 0.0;           // sum (x - deq)^2
  double sum_x_deq = 0.0;            // sum x * deq
  double sum_deq_sq = 0.0;           // sum deq^2
  double sum_sq_underflow = 0.0;     // sum x^2 over the underflow_count elements (all finite)

  void merge(const QuantSums& other);
};

// Reported numbers of one evaluation.
struct QuantMetrics {
  // Per-tensor recipes: code = fp8(x * scale), deq = fp8_value * scale_inv. NaN for blocked ones.
  float scale = 1.0f;
  float scale_inv = 1.0f;
  // Range of the dequantisation factors over all blocks (equal to scale_inv per tensor).
  float scale_inv_min = 1.0f;
  float scale_inv_max = 1.0f;
  QuantSums sums;
  double mse = 0.0;           // sum_sq_err / finite_count
  double rel_mse = 0.0;       // sum_sq_err / sum_sq (0 when both are 0, inf when only sum_sq is 0)
  double sqnr_db = 0.0;       // -10 log10(rel_mse)
  double cos = 0.0;           // cosine similarity of x and deq (1 if both are 0, 0 if one is)
  double underflow_pct = 0.0; // 100 * underflow_count / numel
  double overflow_pct = 0.0;  // 100 * overflow_count / numel
  double saturated_pct = 0.0; // 100 * saturated_count / numel
  // 100 * sum_sq_underflow / TensorStats::sum_sq: the share of the tensor's energy that flushes to
  // zero (0 when sum_sq is 0).
  double underflow_energy_pct = 0.0;
};

// Which rows of one tensor copy a cast flushes (engine/row_flush.hpp, METRICS.md "Flushed rows"),
// over its rank shards. An element flushes when it is nonzero in x and zero after the cast (as
// underflow_count); a row's energy is sum x^2 over its finite elements.
struct RowFlush {
  std::int64_t rows = 0;       // rows of the 2-D view (all shards)
  std::int64_t lost_rows = 0;  // rows whose flushed elements carry more than half their energy
  double pct() const;          // 100 * lost_rows / rows; 0 without rows
  void merge(const RowFlush& other);
  bool operator==(const RowFlush&) const = default;
};

// scale / scale_inv: the per-tensor values, NaN for blocked recipes (set the range afterwards).
QuantMetrics finalize_metrics(const TensorStats& stats, float scale, float scale_inv,
                              const QuantSums& sums);

}  // namespace fp8a

#include "cuda/partials.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"
#include "core/scale.hpp"

namespace fp8a::cuda {

void merge_stats_partials(std::span<const StatsPartial> records, TensorStats* total) {
  for (const StatsPartial& p : records) {
    total->nan_count += p.nan_count;
    total->inf_count += p.inf_count;
    total->zero_count += p.zero_count;
    total->amax = std::max(total->amax, bits_float(p.amax_bits));
    total->amax_finite = std::max(total->amax_finite, bits_float(p.amax_finite_bits));
    total->amin_nonzero = std::min(total->amin_nonzero, bits_float(p.amin_nonzero_bits));
    total->sum_sq += p.sum_sq;
  }
}

void merge_metric_partials(std::span<const MetricPartial> records, std::span<const std::size_t> members,
                           std::span<QuantSums> sums, std::span<FakeQuantCounts> counts) {
  const std::size_t k = members.size();
  FP8A_CHECK(k > 0 && records.size() % k == 0, "merge_metric_partials: records not [block][member]");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const MetricPartial& p = records[i];
    const std::size_t c = members[i % k];
    FP8A_CHECK(c < sums.size() && c < counts.size(), "merge_metric_partials: member out of range");
    QuantSums& s = sums[c];
    s.sum_sq_err += p.sum_sq_err;
    s.sum_x_deq += p.sum_x_deq;
    s.sum_deq_sq += p.sum_deq_sq;
    s.sum_sq_underflow += p.sum_sq_underflow;
    FakeQuantCounts& f = counts[c];
    f.add(p.underflow, p.saturated, p.overflow);
    f.scale_inv_min = std::min(f.scale_inv_min, bits_float(p.scale_inv_min_bits));
    f.scale_inv_max = std::max(f.scale_inv_max, bits_float(p.scale_inv_max_bits));
  }
}

QuantMetrics finalize_candidate(const TensorStats& stats, const QuantSpec& spec, QuantSums sums,
                                FakeQuantCounts counts) {
  const bool per_tensor = is_per_tensor(spec.kind);
  // The CPU folds these in once per chunk: an empty tensor has no chunk and keeps +inf / 0.
  const bool any = stats.numel > 0;
  if (any && per_tensor) {
    const float scale_inv = scale_inverse(spec.scale);
    counts.scale_inv_min = std::min(counts.scale_inv_min, scale_inv);
    counts.scale_inv_max = std::max(counts.scale_inv_max, scale_inv);
  } else if (any && !is_fp8(spec.kind)) {
    counts.scale_inv_min = std::min(counts.scale_inv_min, 1.0f);
    counts.scale_inv_max = std::max(counts.scale_inv_max, 1.0f);
  }
  sums.underflow_count = counts.underflow;
  sums.overflow_count = counts.overflow;
  sums.saturated_count = counts.saturated;
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  QuantMetrics m = per_tensor ? finalize_metrics(stats, spec.scale, scale_inverse(spec.scale), sums)
                              : finalize_metrics(stats, kNaN, kNaN, sums);
  m.scale_inv_min = counts.scale_inv_min;
  m.scale_inv_max = counts.scale_inv_max;
  return m;
}

}  // namespace fp8a::cuda

#include "core/metrics.hpp"

#include <algorithm>
#include <cmath>

namespace fp8a {

double TensorStats::dynamic_range_log2() const {
  if (!(amin_nonzero < std::numeric_limits<float>::infinity()) || amax_finite == 0.0f) return 0.0;
  return std::log2(static_cast<double>(amax_finite)) - std::log2(static_cast<double>(amin_nonzero));
}

void TensorStats::merge(const TensorStats& o) {
  numel += o.numel;
  nan_count += o.nan_count;
  inf_count += o.inf_count;
  zero_count += o.zero_count;
  amax = std::max(amax, o.amax);
  amax_finite = std::max(amax_finite, o.amax_finite);
  amin_nonzero = std::min(amin_nonzero, o.amin_nonzero);
  sum_sq += o.sum_sq;
}

void QuantSums::merge(const QuantSums& o) {
  underflow_count += o.underflow_count;
  overflow_count += o.overflow_count;
  saturated_count += o.saturated_count;
  sum_sq_err += o.sum_sq_err;
  sum_x_deq += o.sum_x_deq;
  sum_deq_sq += o.sum_deq_sq;
  sum_sq_underflow += o.sum_sq_underflow;
}

QuantMetrics finalize_metrics(const TensorStats& stats, float scale, float scale_inv,
                              const QuantSums& sums) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  QuantMetrics m;
  m.scale = scale;
  m.scale_inv = scale_inv;
  m.scale_inv_min = m.scale_inv_max = scale_inv;
  m.sums = sums;
  const auto finite = static_cast<double>(stats.finite_count());
  m.mse = finite > 0 ? sums.sum_sq_err / finite : std::numeric_limits<double>::quiet_NaN();
  if (stats.sum_sq > 0)
    m.rel_mse = sums.sum_sq_err / stats.sum_sq;
  else
    m.rel_mse = sums.sum_sq_err > 0 ? kInf : 0.0;
  m.sqnr_db = m.rel_mse > 0 ? -10.0 * std::log10(m.rel_mse) : kInf;
  if (stats.sum_sq > 0 && sums.sum_deq_sq > 0)
    m.cos = sums.sum_x_deq / std::sqrt(stats.sum_sq * sums.sum_deq_sq);
  else
    m.cos = (stats.sum_sq == 0 && sums.sum_deq_sq == 0) ? 1.0 : 0.0;
  const auto numel = static_cast<double>(stats.numel);
  m.underflow_pct = numel > 0 ? 100.0 * static_cast<double>(sums.underflow_count) / numel : 0.0;
  m.overflow_pct = numel > 0 ? 100.0 * static_cast<double>(sums.overflow_count) / numel : 0.0;
  m.saturated_pct = numel > 0 ? 100.0 * static_cast<double>(sums.saturated_count) / numel : 0.0;
  m.underflow_energy_pct = stats.sum_sq > 0 ? 100.0 * sums.sum_sq_underflow / stats.sum_sq : 0.0;
  return m;
}

double RowFlush::pct() const {
  return rows > 0 ? 100.0 * static_cast<double>(lost_rows) / static_cast<double>(rows) : 0.0;
}

void RowFlush::merge(const RowFlush& other) {
  rows += other.rows;
  lost_rows += other.lost_rows;
}

}  // namespace fp8a

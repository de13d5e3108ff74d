#include "cuda/metric_jobs.hpp"

#include "cuda/partials.hpp"
#include "core/error.hpp"

namespace fp8a::cuda {

std::vector<MetricJob> plan_metric_jobs(std::span<const QuantSpec> specs,
                                        std::span<const CandidateResult> results) {
  FP8A_CHECK(specs.size() == results.size(), "plan_metric_jobs: one spec per candidate");
  std::vector<MetricJob> jobs;
  MetricJob pending;
  const auto flush = [&] {
    if (pending.group.count > 0) jobs.push_back(std::move(pending));
    pending = MetricJob();
  };
  for (std::size_t j = 0; j < specs.size(); ++j) {
    const QuantSpec& s = specs[j];
    if (!results[j].applicability.ok || s.block.rows != 0) continue;
    PerTensorGroup& g = pending.group;
    const int i = g.count++;
    if (!is_fp8(s.kind)) {
      g.mode[i] = ElementMode::kBf16;
      g.scale[i] = g.scale_inv[i] = 1.0f;
      g.overflow_threshold[i] = 0.0f;
    } else {
      g.mode[i] = s.format == Fp8Format::kE4M3 ? ElementMode::kE4M3 : ElementMode::kE5M2;
      g.scale[i] = s.scale;
      g.scale_inv[i] = scale_inverse(s.scale);
      g.overflow_threshold[i] = fp8_max_finite(s.format) * g.scale_inv[i];
      g.limits[i] = s.format == Fp8Format::kE4M3
                        ? count_limits<Fp8Format::kE4M3>(g.scale[i], g.overflow_threshold[i])
                        : count_limits<Fp8Format::kE5M2>(g.scale[i], g.overflow_threshold[i]);
    }
    pending.members.push_back(j);
    if (g.count == kGroupSize) flush();
  }
  flush();
  for (std::size_t j = 0; j < specs.size(); ++j) {
    const QuantSpec& s = specs[j];
    if (!results[j].applicability.ok || s.block.rows == 0) continue;
    MetricJob job;
    job.blocked = true;
    job.params.kind = s.kind;
    job.params.format = s.format;
    job.params.pow2_scales = s.pow2_scales;
    job.params.mx_rule = s.mx_rule;
    job.params.value_for_inf = s.value_for_inf;
    job.params.block_rows = s.block.rows;
    job.params.block_cols = s.block.cols;
    job.members.push_back(j);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::size_t metric_partial_capacity(std::span<const MetricJob> jobs, int max_blocks) {
  std::size_t records = 0;
  for (const auto& j : jobs) records += static_cast<std::size_t>(max_blocks) * j.members.size();
  return records * sizeof(MetricPartial);
}

}  // namespace fp8a::cuda

#include "engine/cpu_backend.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "engine/fake_quant.hpp"
#include "engine/quant_spec.hpp"
#include "core/scale.hpp"

namespace fp8a {

namespace {

using FloatArray = Eigen::Array<float, Eigen::Dynamic, 1>;
using DoubleArray = Eigen::Array<double, Eigen::Dynamic, 1>;

std::int64_t chunk_count(const TensorView& t) {
  const std::int64_t rows = rows_per_chunk(t.cols);
  return (t.rows + rows - 1) / rows;
}

// Runs fn(chunk_index, x, rows) over every chunk in parallel, x holding the chunk's rows as
// floats (row-major).
template <class Fn>
void for_each_chunk(const TensorView& t, Fn&& fn) {
  const std::int64_t chunk_rows = rows_per_chunk(t.cols);
  tbb::enumerable_thread_specific<FloatArray> buffers(
      [&] { return FloatArray(std::min(chunk_rows, t.rows) * t.cols); });
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, chunk_count(t), 1),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      FloatArray& buf = buffers.local();
                      for (std::int64_t c = r.begin(); c != r.end(); ++c) {
                        const std::int64_t row0 = c * chunk_rows;
                        const std::int64_t rows = std::min(chunk_rows, t.rows - row0);
                        const std::int64_t n = rows * t.cols;
                        t.load_floats(row0 * t.cols, n, buf.data());
                        fn(c, buf.head(n), rows);
                      }
                    });
}

TensorStats chunk_stats(const float* x, std::int64_t n) {
  // For non-negative floats the order of the values is the order of their bit patterns, and NaN
  // patterns lie above +inf; working on |x|'s bits keeps every min/max an integer reduction,
  // which vectorises (float min/max with NaN semantics does not).
  // Masked patterns fit in int32, and signed compares are what SSE2 has.
  constexpr std::int32_t kInfBits = 0x7F800000;
  std::int32_t amax = 0, amax_finite = 0, amin = kInfBits;
  std::int32_t nan = 0, inf = 0, zero = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto b = static_cast<std::int32_t>(float_bits(x[i]) & 0x7FFFFFFFu);
    nan += b > kInfBits;
    inf += b == kInfBits;
    zero += b == 0;
    const std::int32_t not_nan = b > kInfBits ? 0 : b;
    const std::int32_t finite = b >= kInfBits ? 0 : b;
    const std::int32_t finite_nonzero = (b == 0 || b >= kInfBits) ? kInfBits : b;
    amax = std::max(amax, not_nan);
    amax_finite = std::max(amax_finite, finite);
    amin = std::min(amin, finite_nonzero);
  }
  TensorStats s;
  s.numel = n;
  s.nan_count = nan;
  s.inf_count = inf;
  s.zero_count = zero;
  s.amax = bits_float(static_cast<std::uint32_t>(amax));
  s.amax_finite = bits_float(static_cast<std::uint32_t>(amax_finite));
  s.amin_nonzero = bits_float(static_cast<std::uint32_t>(amin));  // +inf when there is no finite nonzero element
  const Eigen::Map<const FloatArray> xa(x, n);
  s.sum_sq = nan + inf == 0 ? xa.cast<double>().square().sum()
                            : xa.isFinite().select(xa, 0.0f).cast<double>().square().sum();
  return s;
}

// One candidate's results over one chunk, or merged in chunk order over the tensor: the counts and
// scale_inv range of fake_quantize_rows and the float64 error sums. Each count is held once, here;
// the QuantSums the metrics read is made from it at the end.
struct CandidateSums {
  FakeQuantCounts counts;
  double sum_sq_err = 0.0, sum_x_deq = 0.0, sum_deq_sq = 0.0, sum_sq_underflow = 0.0;

  void merge(const CandidateSums& o) {
    counts.merge(o.counts);
    sum_sq_err += o.sum_sq_err;
    sum_x_deq += o.sum_x_deq;
    sum_deq_sq += o.sum_deq_sq;
    sum_sq_underflow += o.sum_sq_underflow;
  }
  QuantSums sums() const {
    QuantSums s;
    s.underflow_count = counts.underflow;
    s.overflow_count = counts.overflow;
    s.saturated_count = counts.saturated;
    s.sum_sq_err = sum_sq_err;
    s.sum_x_deq = sum_x_deq;
    s.sum_deq_sq = sum_deq_sq;
    s.sum_sq_underflow = sum_sq_underflow;
    return s;
  }
};

}  // namespace

std::string CpuBackend::device() const {
  return std::to_string(tbb::info::default_concurrency()) + " threads (oneTBB)";
}

std::int64_t rows_per_chunk(std::int64_t cols) {
  const std::int64_t rows = std::max<std::int64_t>(1, CpuBackend::kChunkElements / std::max<std::int64_t>(cols, 1));
  return (rows + 127) / 128 * 128;
}

TensorStats compute_tensor_stats(const TensorView& t) {
  std::vector<TensorStats> parts(static_cast<std::size_t>(chunk_count(t)));
  for_each_chunk(t, [&](std::int64_t c, const auto& x, std::int64_t) {
    parts[c] = chunk_stats(x.data(), x.size());
  });
  TensorStats total;
  for (const auto& p : parts) total.merge(p);
  return total;
}

TensorEvaluation CpuBackend::evaluate(std::span<const Candidate> candidates,
                                      const TensorView& t) const {
  TensorEvaluation out;
  out.stats = compute_tensor_stats(t);
  const bool has_nonfinite = out.stats.nan_count + out.stats.inf_count > 0;
  const std::size_t k = candidates.size();
  if (k == 0) return out;  // statistics only
  out.results.resize(k);
  std::vector<QuantSpec> specs(k);
  for (std::size_t j = 0; j < k; ++j)
    out.results[j].applicability = make_quant_spec(candidates[j], out.stats, t.dtype, &specs[j]);

  const auto chunks = static_cast<std::size_t>(chunk_count(t));
  std::vector<CandidateSums> sums(chunks * k);
  struct Scratch {
    FloatArray deq;
    DoubleArray x;
  };
  tbb::enumerable_thread_specific<Scratch> scratch;
  for_each_chunk(t, [&](std::int64_t c, const auto& x_raw, std::int64_t rows) {
    Scratch& buf = scratch.local();
    const std::int64_t n = x_raw.size();
    if (buf.deq.size() < n) {
      buf.deq.resize(n);
      buf.x.resize(n);
    }
    auto deq = buf.deq.head(n);
    // The error sums run over finite elements only: NaN/Inf are zeroed on both sides (they are
    // still counted in underflow/overflow, as TE counts them). x in double is shared by all
    // candidates of the chunk.
    auto xd = buf.x.head(n);
    if (has_nonfinite)
      xd = x_raw.isFinite().select(x_raw, 0.0f).template cast<double>();
    else
      xd = x_raw.template cast<double>();
    for (std::size_t j = 0; j < k; ++j) {
      if (!out.results[j].applicability.ok) continue;
      const std::size_t slot = static_cast<std::size_t>(c) * k + j;
      CandidateSums& s = sums[slot];
      fake_quantize_rows(specs[j], x_raw.data(), rows, t.cols, deq.data(), &s.counts);
      if (has_nonfinite) deq = x_raw.isFinite().select(deq, 0.0f);
      const auto dd = deq.template cast<double>();
      s.sum_sq_err = (xd - dd).square().sum();
      s.sum_x_deq = (xd * dd).sum();
      s.sum_deq_sq = dd.square().sum();
      // The energy of the underflowing elements, summed as sum_sq is (Eigen over the chunk), only
      // where the chunk has any. An underflow is a finite x != 0 whose FP8 (BF16) value is +-0,
      // and deq = value * scale_inv is 0 exactly then (scale_inv >= 2^-128 keeps the smallest
      // FP8 value nonzero): the check below holds the two definitions together.
      if (s.counts.underflow > 0) {
        const auto flushed = (xd != 0.0) && (deq == 0.0f);
        FP8A_CHECK(flushed.count() == s.counts.underflow,
                   "underflow energy: flushed elements differ from the underflow count");
        s.sum_sq_underflow = flushed.select(xd, 0.0).square().sum();
      }
    }
  });

  for (std::size_t j = 0; j < k; ++j) {
    if (!out.results[j].applicability.ok) continue;
    CandidateSums total;
    for (std::size_t c = 0; c < chunks; ++c) total.merge(sums[c * k + j]);
    const bool per_tensor = is_per_tensor(specs[j].kind);
    constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
    auto& m = out.results[j].metrics;
    if (per_tensor)
      m = finalize_metrics(out.stats, specs[j].scale, scale_inverse(specs[j].scale), total.sums());
    else
      m = finalize_metrics(out.stats, kNaN, kNaN, total.sums());
    m.scale_inv_min = total.counts.scale_inv_min;
    m.scale_inv_max = total.counts.scale_inv_max;
  }
  return out;
}

}  // namespace fp8a

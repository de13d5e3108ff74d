#include "engine/cpu_backend.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/error.hpp"
#include "engine/core/scale.hpp"

namespace fp8a {

namespace {

using FloatArray = Eigen::Array<float, Eigen::Dynamic, 1>;
using DoubleArray = Eigen::Array<double, Eigen::Dynamic, 1>;

std::int64_t chunk_count(const TensorView& t) {
  return (t.numel() + CpuBackend::kChunkElements - 1) / CpuBackend::kChunkElements;
}

// Runs fn(chunk_index, x) over every chunk in parallel, x holding the chunk as floats.
template <class Fn>
void for_each_chunk(const TensorView& t, Fn&& fn) {
  tbb::enumerable_thread_specific<FloatArray> buffers(
      [] { return FloatArray(CpuBackend::kChunkElements); });
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, chunk_count(t), 1),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      FloatArray& buf = buffers.local();
                      for (std::int64_t c = r.begin(); c != r.end(); ++c) {
                        const std::int64_t begin = c * CpuBackend::kChunkElements;
                        const std::int64_t n =
                            std::min(CpuBackend::kChunkElements, t.numel() - begin);
                        t.load_floats(begin, n, buf.data());
                        fn(c, buf.head(n));
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

// Fake-quantises one chunk for one candidate: deq = fp8 round trip of x * scale, times scale_inv.
// Counts in 32 bits: a chunk holds far fewer than 2^31 elements.
template <float (*RoundTrip)(float)>
void quantize_chunk(const float* x, std::int64_t n, float scale, float scale_inv, float threshold,
                    float* deq, QuantSums* sums) {
  std::int32_t under = 0, over = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float q = RoundTrip(v * scale);
    deq[i] = q * scale_inv;
    under += (v != 0.0f) & (q == 0.0f);
    over += std::fabs(v) > threshold;
  }
  sums->underflow_count = under;
  sums->overflow_count = over;
}

}  // namespace

std::string CpuBackend::device() const {
  return std::to_string(tbb::info::default_concurrency()) + " threads (oneTBB)";
}

Applicability CpuBackend::supports(const Recipe& recipe) const {
  if (recipe.kind == RecipeKind::kPerTensorCurrent) return Applicability::yes();
  return Applicability::no("recipe " + recipe.spec() + " is not implemented on the CPU backend");
}

TensorStats compute_tensor_stats(const TensorView& t) {
  std::vector<TensorStats> parts(static_cast<std::size_t>(chunk_count(t)));
  for_each_chunk(t, [&](std::int64_t c, const auto& x) { parts[c] = chunk_stats(x.data(), x.size()); });
  TensorStats total;
  for (const auto& p : parts) total.merge(p);
  return total;
}

TensorEvaluation CpuBackend::evaluate(std::span<const Candidate> candidates,
                                      const TensorView& t) const {
  TensorEvaluation out;
  out.stats = compute_tensor_stats(t);
  const bool has_nonfinite = out.stats.nan_count + out.stats.inf_count > 0;

  struct Plan {
    float scale, scale_inv, overflow_threshold;
  };
  std::vector<Plan> plans;
  for (const auto& c : candidates) {
    FP8A_CHECK(supports(c.recipe).ok, "candidate not supported by the CPU backend");
    const float scale = per_tensor_scale(c.recipe, c.format, out.stats.amax);
    const float scale_inv = scale_inverse(scale);
    plans.push_back({scale, scale_inv, fp8_max_finite(c.format) * scale_inv});
  }

  const std::size_t k = candidates.size();
  std::vector<QuantSums> parts(static_cast<std::size_t>(chunk_count(t)) * k);
  struct Scratch {
    FloatArray deq = FloatArray(CpuBackend::kChunkElements);
    DoubleArray x = DoubleArray(CpuBackend::kChunkElements);
  };
  tbb::enumerable_thread_specific<Scratch> scratch;
  for_each_chunk(t, [&](std::int64_t c, const auto& x_raw) {
    Scratch& buf = scratch.local();
    const std::int64_t n = x_raw.size();
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
      const Plan& p = plans[j];
      QuantSums& s = parts[static_cast<std::size_t>(c) * k + j];
      if (candidates[j].format == Fp8Format::kE4M3)
        quantize_chunk<round_trip_e4m3>(x_raw.data(), n, p.scale, p.scale_inv,
                                        p.overflow_threshold, deq.data(), &s);
      else
        quantize_chunk<round_trip_e5m2>(x_raw.data(), n, p.scale, p.scale_inv,
                                        p.overflow_threshold, deq.data(), &s);
      if (has_nonfinite) deq = x_raw.isFinite().select(deq, 0.0f);
      const auto dd = deq.template cast<double>();
      s.sum_sq_err = (xd - dd).square().sum();
      s.sum_x_deq = (xd * dd).sum();
      s.sum_deq_sq = dd.square().sum();
    }
  });

  out.results.resize(k);
  for (std::size_t j = 0; j < k; ++j) {
    QuantSums total;
    for (std::int64_t c = 0; c < chunk_count(t); ++c)
      total.merge(parts[static_cast<std::size_t>(c) * k + j]);
    out.results[j].metrics =
        finalize_metrics(out.stats, plans[j].scale, plans[j].scale_inv, total);
  }
  return out;
}

}  // namespace fp8a

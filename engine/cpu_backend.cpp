#include "engine/cpu_backend.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "engine/core/error.hpp"
#include "engine/core/scale.hpp"

namespace fp8a {

namespace {

using FloatArray = Eigen::Array<float, Eigen::Dynamic, 1>;

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

TensorStats chunk_stats(const Eigen::Ref<const FloatArray>& x) {
  TensorStats s;
  s.numel = x.size();
  const FloatArray a = x.abs();
  const auto finite = x.isFinite();
  s.nan_count = x.isNaN().count();
  s.inf_count = s.numel - s.nan_count - finite.count();
  s.zero_count = (x == 0.0f).count();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // NaN compares false everywhere, so these selects skip it.
  s.amax = (a == a).select(a, 0.0f).maxCoeff();
  s.amax_finite = finite.select(a, 0.0f).maxCoeff();
  s.amin_nonzero = (finite && a > 0.0f).select(a, kInf).minCoeff();
  s.sum_sq = finite.select(x, 0.0f).cast<double>().square().sum();
  return s;
}

// A 256-entry decode table per FP8 format.
struct DecodeTables {
  std::array<float, 256> e4m3{}, e5m2{};
  DecodeTables() {
    for (int c = 0; c < 256; ++c) {
      e4m3[c] = decode_e4m3(static_cast<std::uint8_t>(c));
      e5m2[c] = decode_e5m2(static_cast<std::uint8_t>(c));
    }
  }
  const std::array<float, 256>& operator[](Fp8Format f) const {
    return f == Fp8Format::kE4M3 ? e4m3 : e5m2;
  }
};

template <std::uint8_t (*Encode)(float)>
void quantize_chunk(const float* x, std::int64_t n, float scale, float scale_inv,
                    const std::array<float, 256>& table, float* deq, std::int64_t* underflow) {
  std::int64_t under = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t code = Encode(x[i] * scale);
    deq[i] = table[code] * scale_inv;
    under += static_cast<std::int64_t>(x[i] != 0.0f && fp8_is_zero(code));
  }
  *underflow = under;
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
  for_each_chunk(t, [&](std::int64_t c, const auto& x) { parts[c] = chunk_stats(x); });
  TensorStats total;
  for (const auto& p : parts) total.merge(p);
  return total;
}

TensorEvaluation CpuBackend::evaluate(std::span<const Candidate> candidates,
                                      const TensorView& t) const {
  static const DecodeTables tables;
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
  tbb::enumerable_thread_specific<FloatArray> deq_buffers(
      [] { return FloatArray(CpuBackend::kChunkElements); });
  for_each_chunk(t, [&](std::int64_t c, const auto& x_raw) {
    FloatArray& deq_buf = deq_buffers.local();
    const std::int64_t n = x_raw.size();
    auto deq = deq_buf.head(n);
    // Sums run over finite elements only: NaN/Inf are zeroed on both sides (and still counted in
    // underflow/overflow as TE counts them).
    FloatArray masked;
    const float* x_finite_ptr = x_raw.data();
    if (has_nonfinite) {
      masked = x_raw.isFinite().select(x_raw, 0.0f);
      x_finite_ptr = masked.data();
    }
    const auto xd = Eigen::Map<const FloatArray>(x_finite_ptr, n).template cast<double>();
    for (std::size_t j = 0; j < k; ++j) {
      const Plan& p = plans[j];
      QuantSums& s = parts[static_cast<std::size_t>(c) * k + j];
      const auto& table = tables[candidates[j].format];
      if (candidates[j].format == Fp8Format::kE4M3)
        quantize_chunk<encode_e4m3>(x_raw.data(), n, p.scale, p.scale_inv, table, deq.data(),
                                    &s.underflow_count);
      else
        quantize_chunk<encode_e5m2>(x_raw.data(), n, p.scale, p.scale_inv, table, deq.data(),
                                    &s.underflow_count);
      s.overflow_count = (x_raw.abs() > p.overflow_threshold).count();
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

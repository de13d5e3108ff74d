#include "engine/cpu_backend.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "engine/cpu_isa.hpp"
#include "engine/fake_quant.hpp"
#include "engine/quant_spec.hpp"
#include "core/scale.hpp"

namespace fp8a {

namespace {

std::int64_t chunk_count(const TensorView& t) {
  const std::int64_t rows = rows_per_chunk(t.cols);
  return (t.rows + rows - 1) / rows;
}

// A float64 sum in index order, ((t0 + t1) + t2) + ..., the same on every CPU path (a lane-wise
// vector sum would round differently per vector width). It is also the order Eigen 3.4's sum()
// took on these (non-vectorised: float -> double casts) expressions before the paths existed,
// so the numbers did not change. Starting from -0.0 makes the first addition exact (t0 itself).
struct SequentialSum {
  double acc = -0.0;
  void add(double t) { acc += t; }
  double value(std::int64_t n) const { return n == 0 ? 0.0 : acc; }
};

bool is_finite(float v) { return (float_bits(v) & 0x7F800000u) != 0x7F800000u; }

TensorStats chunk_stats_body(const float* x, std::int64_t n) {
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
  // One float64 chain in index order, as every sum here (see SequentialSum).
  SequentialSum sum_sq;
  if (nan + inf == 0) {
    for (std::int64_t i = 0; i < n; ++i) sum_sq.add(static_cast<double>(x[i]) * x[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = is_finite(x[i]) ? x[i] : 0.0;
      sum_sq.add(v * v);
    }
  }
  s.sum_sq = sum_sq.value(n);
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

// One candidate's error sums over a chunk: x the chunk (NaN/Inf included), deq its fake
// quantisation. The sums run over finite elements only: NaN/Inf are zeroed on both sides (they
// are still counted in underflow/overflow, as TE counts them). Each sum is one chain in index
// order (SequentialSum); the chains are independent, so one loop runs them side by side.
// kUnderflow adds the energy of the underflowing elements, for chunks that have any. An
// underflow is a finite x != 0 whose FP8 (BF16) value is +-0, and deq = value * scale_inv is 0
// exactly then (scale_inv >= 2^-128 keeps the smallest FP8 value nonzero): the check below holds
// the two definitions together.
template <bool kUnderflow>
void candidate_sums_loop(const float* x, const float* deq, std::int64_t n, CandidateSums* s) {
  SequentialSum err, x_deq, deq_sq, underflow_sq;
  std::int64_t flushed = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const bool finite = is_finite(x[i]);
    const double xd = finite ? x[i] : 0.0;
    const double dd = finite ? deq[i] : 0.0f;
    const double d = xd - dd;
    err.add(d * d);
    x_deq.add(xd * dd);
    deq_sq.add(dd * dd);
    if constexpr (kUnderflow) {
      const bool flush = xd != 0.0 && dd == 0.0;
      flushed += flush;
      const double u = flush ? xd : 0.0;
      underflow_sq.add(u * u);
    }
  }
  s->sum_sq_err = err.value(n);
  s->sum_x_deq = x_deq.value(n);
  s->sum_deq_sq = deq_sq.value(n);
  if constexpr (kUnderflow) {
    FP8A_CHECK(flushed == s->counts.underflow,
               "underflow energy: flushed elements differ from the underflow count");
    s->sum_sq_underflow = underflow_sq.value(n);
  }
}

void candidate_sums_body(const float* x, const float* deq, std::int64_t n, CandidateSums* s) {
  if (s->counts.underflow > 0)
    candidate_sums_loop<true>(x, deq, n, s);
  else
    candidate_sums_loop<false>(x, deq, n, s);
}

void load_floats_body(const TensorView& t, std::int64_t begin, std::int64_t n, float* out) {
  t.load_floats(begin, n, out);
}

FP8A_CPU_PATHS(TensorStats, chunk_stats, (const float* x, std::int64_t n), (x, n), chunk_stats_body)
FP8A_CPU_PATHS(void, candidate_sums, (const float* x, const float* deq, std::int64_t n, CandidateSums* s),
               (x, deq, n, s), candidate_sums_body)
FP8A_CPU_PATHS(void, load_floats, (const TensorView& t, std::int64_t begin, std::int64_t n, float* out),
               (t, begin, n, out), load_floats_body)

// Runs fn(chunk_index, x, n, rows) over every chunk in parallel, x holding the chunk's rows as n
// floats (row-major), converted by the path's decode loop.
template <class Fn>
void for_each_chunk(CpuIsa isa, const TensorView& t, Fn&& fn) {
  const auto load = FP8A_CPU_PICK(isa, load_floats);
  const std::int64_t chunk_rows = rows_per_chunk(t.cols);
  tbb::enumerable_thread_specific<std::vector<float>> buffers(
      [&] { return std::vector<float>(static_cast<std::size_t>(std::min(chunk_rows, t.rows) * t.cols)); });
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, chunk_count(t), 1),
                    [&](const tbb::blocked_range<std::int64_t>& r) {
                      std::vector<float>& buf = buffers.local();
                      for (std::int64_t c = r.begin(); c != r.end(); ++c) {
                        const std::int64_t row0 = c * chunk_rows;
                        const std::int64_t rows = std::min(chunk_rows, t.rows - row0);
                        const std::int64_t n = rows * t.cols;
                        load(t, row0 * t.cols, n, buf.data());
                        fn(c, buf.data(), n, rows);
                      }
                    });
}

}  // namespace

CpuBackend::CpuBackend(std::optional<CpuIsa> isa) : isa_(resolve_cpu_isa(isa)) {}

std::string CpuBackend::device() const {
  return std::to_string(tbb::info::default_concurrency()) + " threads (oneTBB), " +
         std::string(cpu_isa_label(isa_));
}

std::int64_t rows_per_chunk(std::int64_t cols) {
  const std::int64_t rows = std::max<std::int64_t>(1, CpuBackend::kChunkElements / std::max<std::int64_t>(cols, 1));
  return (rows + 127) / 128 * 128;
}

TensorStats compute_tensor_stats(const TensorView& t) { return compute_tensor_stats(t, default_cpu_isa()); }

TensorStats compute_tensor_stats(const TensorView& t, CpuIsa isa) {
  const auto stats = FP8A_CPU_PICK(isa, chunk_stats);
  std::vector<TensorStats> parts(static_cast<std::size_t>(chunk_count(t)));
  for_each_chunk(isa, t, [&](std::int64_t c, const float* x, std::int64_t n, std::int64_t) {
    parts[c] = stats(x, n);
  });
  TensorStats total;
  for (const auto& p : parts) total.merge(p);
  return total;
}

TensorEvaluation CpuBackend::evaluate(std::span<const Candidate> candidates,
                                      const TensorView& t) const {
  TensorEvaluation out;
  out.stats = compute_tensor_stats(t, isa_);
  const std::size_t k = candidates.size();
  if (k == 0) return out;  // statistics only
  out.results.resize(k);
  std::vector<QuantSpec> specs(k);
  for (std::size_t j = 0; j < k; ++j)
    out.results[j].applicability = make_quant_spec(candidates[j], out.stats, t.dtype, &specs[j]);

  const auto chunks = static_cast<std::size_t>(chunk_count(t));
  std::vector<CandidateSums> sums(chunks * k);
  const auto candidate_sums = FP8A_CPU_PICK(isa_, candidate_sums);
  tbb::enumerable_thread_specific<std::vector<float>> scratch;
  for_each_chunk(isa_, t, [&](std::int64_t c, const float* x, std::int64_t n, std::int64_t rows) {
    std::vector<float>& deq = scratch.local();
    if (deq.size() < static_cast<std::size_t>(n)) deq.resize(static_cast<std::size_t>(n));
    for (std::size_t j = 0; j < k; ++j) {
      if (!out.results[j].applicability.ok) continue;
      CandidateSums& s = sums[static_cast<std::size_t>(c) * k + j];
      fake_quantize_rows(specs[j], x, rows, t.cols, deq.data(), &s.counts, isa_);
      candidate_sums(x, deq.data(), n, &s);
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

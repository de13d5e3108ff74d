#include "engine/cpu_backend.hpp"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
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

// The error sums of G candidates over a chunk: x the chunk (NaN/Inf included), deq[g] its fake
// quantisation by candidate g. The sums run over finite elements only: NaN/Inf are zeroed on
// both sides (they are still counted in underflow/overflow, as TE counts them). Each sum is one
// chain in index order (SequentialSum), bound by the latency of its additions; the chains of
// all G candidates are independent, so one loop runs them side by side.
// The underflow energy is kept only for candidates with underflows. An underflow is a finite
// x != 0 whose FP8 (BF16) value is +-0, and deq = value * scale_inv is 0 exactly then
// (scale_inv >= 2^-128 keeps the smallest FP8 value nonzero): the check below holds the two
// definitions together.
template <int G>
void candidate_sums_loop(const float* x, const float* const* deq, std::int64_t n,
                         CandidateSums* const* sums) {
  SequentialSum err[G], x_deq[G], deq_sq[G], underflow_sq[G];
  std::int64_t flushed[G] = {};
  for (std::int64_t i = 0; i < n; ++i) {
    const bool finite = is_finite(x[i]);
    const double xd = finite ? x[i] : 0.0;
    for (int g = 0; g < G; ++g) {
      const double dd = finite ? deq[g][i] : 0.0f;
      const double d = xd - dd;
      err[g].add(d * d);
      x_deq[g].add(xd * dd);
      deq_sq[g].add(dd * dd);
      const bool flush = xd != 0.0 && dd == 0.0;
      flushed[g] += flush;
      const double u = flush ? xd : 0.0;
      underflow_sq[g].add(u * u);
    }
  }
  for (int g = 0; g < G; ++g) {
    CandidateSums* s = sums[g];
    s->sum_sq_err = err[g].value(n);
    s->sum_x_deq = x_deq[g].value(n);
    s->sum_deq_sq = deq_sq[g].value(n);
    if (s->counts.underflow == 0) continue;
    FP8A_CHECK(flushed[g] == s->counts.underflow,
               "underflow energy: flushed elements differ from the underflow count");
    s->sum_sq_underflow = underflow_sq[g].value(n);
  }
}

// Candidates summed in one loop (the group's chains fill the additions' latency).
constexpr int kSumGroup = 4;

void candidate_sums_body(const float* x, const float* const* deq, int count, std::int64_t n,
                         CandidateSums* const* sums) {
  switch (count) {
    case 1: return candidate_sums_loop<1>(x, deq, n, sums);
    case 2: return candidate_sums_loop<2>(x, deq, n, sums);
    case 3: return candidate_sums_loop<3>(x, deq, n, sums);
    default: break;
  }
  static_assert(kSumGroup == 4);
  candidate_sums_loop<4>(x, deq, n, sums);
}

// candidate_sums_loop<4> with one vector lane per candidate, for the v3/v4 paths (AVX's four
// doubles; GCC lowers such vectors to slow code on SSE2): each lane runs the scalar loop's
// chains, operation for operation (IEEE, no contraction), so the bits are the same. Fewer than
// four candidates fill the spare lanes with the first and drop their sums.
void candidate_sums_lanes(const float* x, const float* const* deq, int count, std::int64_t n,
                          CandidateSums* const* sums) {
  using Doubles = double __attribute__((vector_size(32)));
  using Masks = long long __attribute__((vector_size(32)));
  const Doubles kZero = {0.0, 0.0, 0.0, 0.0};
  Doubles err = {-0.0, -0.0, -0.0, -0.0}, x_deq = err, deq_sq = err, underflow_sq = err;
  Masks flushed = {0, 0, 0, 0};
  const float* q[kSumGroup];
  for (int g = 0; g < kSumGroup; ++g) q[g] = deq[g < count ? g : 0];
  for (std::int64_t i = 0; i < n; ++i) {
    const bool finite = is_finite(x[i]);
    const double xs = finite ? x[i] : 0.0;
    const Doubles xd = {xs, xs, xs, xs};
    Doubles dd = {static_cast<double>(q[0][i]), static_cast<double>(q[1][i]),
                  static_cast<double>(q[2][i]), static_cast<double>(q[3][i])};
    if (!finite) dd = kZero;
    const Doubles d = xd - dd;
    err += d * d;
    x_deq += xd * dd;
    deq_sq += dd * dd;
    const Masks flush = (xd != 0.0) & (dd == 0.0);  // -1 in the lanes that flush
    flushed -= flush;
    const Doubles u = flush ? xd : kZero;
    underflow_sq += u * u;
  }
  for (int g = 0; g < count; ++g) {
    CandidateSums* s = sums[g];
    s->sum_sq_err = n == 0 ? 0.0 : err[g];
    s->sum_x_deq = n == 0 ? 0.0 : x_deq[g];
    s->sum_deq_sq = n == 0 ? 0.0 : deq_sq[g];
    if (s->counts.underflow == 0) continue;
    FP8A_CHECK(flushed[g] == s->counts.underflow,
               "underflow energy: flushed elements differ from the underflow count");
    s->sum_sq_underflow = n == 0 ? 0.0 : underflow_sq[g];
  }
}

// One candidate alone runs the scalar loop: a vector with three spare lanes is slower.
void candidate_sums_lanes_body(const float* x, const float* const* deq, int count, std::int64_t n,
                               CandidateSums* const* sums) {
  if (count == 1) return candidate_sums_loop<1>(x, deq, n, sums);
  candidate_sums_lanes(x, deq, count, n, sums);
}

void load_floats_body(const TensorView& t, std::int64_t begin, std::int64_t n, float* out) {
  t.load_floats(begin, n, out);
}

FP8A_CPU_PATHS(TensorStats, chunk_stats, (const float* x, std::int64_t n), (x, n), chunk_stats_body)
FP8A_CPU_PATHS2(void, candidate_sums,
                (const float* x, const float* const* deq, int count, std::int64_t n, CandidateSums* const* s),
                (x, deq, count, n, s), candidate_sums_body, candidate_sums_lanes_body)
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

float nvfp4_rht_amax(const TensorView& t, Orientation orientation) {
  std::vector<float> parts(static_cast<std::size_t>(chunk_count(t)));
  for_each_chunk(default_cpu_isa(), t, [&](std::int64_t c, const float* x, std::int64_t, std::int64_t rows) {
    const bool columnwise = orientation == Orientation::kColumnwise;
    parts[static_cast<std::size_t>(c)] = nvfp4_copy_amax(x, rows, t.cols, columnwise, true);
  });
  float amax = 0.0f;
  for (float a : parts) amax = std::fmax(amax, a);
  return amax;
}

namespace {

// Rows [0, rows) of x (`cols` wide) and their cast deq: the rows whose flushed elements carry
// more than half of the row's finite energy.
std::int64_t lost_rows_of(const float* x, const float* deq, std::int64_t rows, std::int64_t cols) {
  std::int64_t lost = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double energy = 0.0, flushed = 0.0;
    for (std::int64_t i = r * cols; i < (r + 1) * cols; ++i) {
      if (!is_finite(x[i])) continue;
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
  const std::int64_t chunk_rows = rows_per_chunk(t.cols);
  std::vector<std::int64_t> lost(static_cast<std::size_t>(chunk_count(t)), 0);
  tbb::enumerable_thread_specific<std::vector<float>> scratch;
  const CpuIsa isa = default_cpu_isa();
  for_each_chunk(isa, t, [&](std::int64_t c, const float* x, std::int64_t n, std::int64_t rows) {
    std::vector<float>& deq = scratch.local();
    deq.resize(static_cast<std::size_t>(n));
    QuantSpec s = spec;
    s.place.first_row = c * chunk_rows;  // NVFP4's stochastic rounding: the tensor's elements
    FakeQuantCounts counts;
    fake_quantize_rows(s, x, rows, t.cols, deq.data(), &counts, isa);
    lost[static_cast<std::size_t>(c)] = lost_rows_of(x, deq.data(), rows, t.cols);
  });
  RowFlush out;
  out.rows = t.rows;
  for (std::int64_t l : lost) out.lost_rows += l;
  return out;
}

TensorEvaluation CpuBackend::evaluate(std::span<const Candidate> candidates,
                                      const TensorView& t) const {
  TensorEvaluation out;
  out.stats = compute_tensor_stats(t, isa_);
  const std::size_t k = candidates.size();
  if (k == 0) return out;  // statistics only
  out.results.resize(k);
  std::vector<QuantSpec> specs(k);
  // A transformed NVFP4 copy's amax, per orientation: one pass over the tensor for every recipe.
  std::optional<float> rht_amax[2];
  for (std::size_t j = 0; j < k; ++j) {
    out.results[j].applicability = make_quant_spec(candidates[j], out.stats, t.dtype, &specs[j]);
    QuantSpec& s = specs[j];
    if (out.results[j].applicability.ok && two_level_scale(s.kind) && std::isnan(s.nvfp4_decode)) {
      const Orientation o = candidates[j].orientation;
      std::optional<float>& amax = rht_amax[static_cast<int>(o)];
      if (!amax) amax = nvfp4_rht_amax(t, o);
      set_nvfp4_amax(*amax, &s);
    }
  }
  const std::int64_t chunk_rows = rows_per_chunk(t.cols);

  const auto chunks = static_cast<std::size_t>(chunk_count(t));
  std::vector<CandidateSums> sums(chunks * k);
  const auto candidate_sums = FP8A_CPU_PICK(isa_, candidate_sums);
  tbb::enumerable_thread_specific<std::vector<float>> scratch;
  for_each_chunk(isa_, t, [&](std::int64_t c, const float* x, std::int64_t n, std::int64_t rows) {
    std::vector<float>& deq = scratch.local();  // kSumGroup chunks
    const auto chunk_size = static_cast<std::size_t>(n);
    if (deq.size() < kSumGroup * chunk_size) deq.resize(kSumGroup * chunk_size);
    const float* group_deq[kSumGroup];
    CandidateSums* group_sums[kSumGroup];
    int count = 0;
    for (std::size_t j = 0; j < k; ++j) {
      if (!out.results[j].applicability.ok) continue;
      CandidateSums& s = sums[static_cast<std::size_t>(c) * k + j];
      float* d = deq.data() + static_cast<std::size_t>(count) * chunk_size;
      QuantSpec spec = specs[j];
      spec.place.first_row = c * chunk_rows;  // NVFP4's stochastic rounding: the tensor's elements
      fake_quantize_rows(spec, x, rows, t.cols, d, &s.counts, isa_);
      group_deq[count] = d;
      group_sums[count] = &s;
      if (++count == kSumGroup) {
        candidate_sums(x, group_deq, count, n, group_sums);
        count = 0;
      }
    }
    if (count > 0) candidate_sums(x, group_deq, count, n, group_sums);
  });

  for (std::size_t j = 0; j < k; ++j) {
    if (!out.results[j].applicability.ok) continue;
    CandidateSums total;
    for (std::size_t c = 0; c < chunks; ++c) total.merge(sums[c * k + j]);
    const bool per_tensor = is_per_tensor(specs[j].kind);
    constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
    auto& m = out.results[j].metrics;
    if (two_level_scale(specs[j].kind))  // the level-2 scales; the blocks' decode in the range
      m = finalize_metrics(out.stats, specs[j].scale, specs[j].nvfp4_decode, total.sums());
    else if (per_tensor)
      m = finalize_metrics(out.stats, specs[j].scale, scale_inverse(specs[j].scale), total.sums());
    else
      m = finalize_metrics(out.stats, kNaN, kNaN, total.sums());
    m.scale_inv_min = total.counts.scale_inv_min;
    m.scale_inv_max = total.counts.scale_inv_max;
  }
  return out;
}

}  // namespace fp8a

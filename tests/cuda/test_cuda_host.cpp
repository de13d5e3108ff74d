// Host-side pieces of the CUDA backend, checked without a GPU (they still need the CUDA build):
// chunk planning and gathering, the job plan of pass 2, the partial-record reduction and its
// order, the element/block arithmetic the kernels share with the host (run here on the CPU and
// compared with CpuBackend), --device parsing and backend choice, and the cuBLASLt GEMM engine's
// plan (types, scaling modes, padding, accumulation and the reasons for a fallback per recipe,
// GPU and cuBLASLt version) and operand packing (decoded == the emulated path's operands).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>
#include <stdexcept>
#include <vector>

#include "cli/backend_registry.hpp"
#include "cuda/chunk_plan.hpp"
#include "cuda/cublaslt_gemm_plan.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/device_info.hpp"
#include "cuda/element_quant.hpp"
#include "cuda/metric_jobs.hpp"
#include "cuda/partials.hpp"
#include "core/error.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/fake_quant.hpp"
#include "engine/quant_spec.hpp"
#include "tests/cuda/backend_compare.hpp"
#include "tests/support/fills.hpp"

namespace {

using fp8a::cuda::Chunk;
using fp8a::cuda::ChunkPlan;
using fp8a::cuda::MetricPartial;
using fp8a::cuda::StatsPartial;

// Every element of the tensor in exactly one chunk, chunk edges on multiples of 128, offsets
// aligned and increasing, sizes consistent.
void check_plan_covers(const ChunkPlan& p, std::int64_t rows, std::int64_t cols, std::size_t elem) {
  std::vector<int> seen(static_cast<std::size_t>(rows * cols), 0);
  std::size_t max_bytes = 0, offset = 0;
  REQUIRE(p.offsets.size() == p.chunks.size());
  for (std::size_t i = 0; i < p.chunks.size(); ++i) {
    const Chunk& c = p.chunks[i];
    CHECK(c.row0 % fp8a::cuda::kChunkAlign == 0);
    CHECK(c.col0 % fp8a::cuda::kChunkAlign == 0);
    CHECK(c.rows > 0);
    CHECK(c.cols > 0);
    CHECK(p.offsets[i] == offset);
    CHECK(p.offsets[i] % fp8a::cuda::kDeviceAlign == 0);
    const std::size_t bytes = static_cast<std::size_t>(c.numel()) * elem;
    offset += (bytes + fp8a::cuda::kDeviceAlign - 1) / fp8a::cuda::kDeviceAlign * fp8a::cuda::kDeviceAlign;
    max_bytes = std::max(max_bytes, bytes);
    for (std::int64_t r = c.row0; r < c.row0 + c.rows; ++r)
      for (std::int64_t k = c.col0; k < c.col0 + c.cols; ++k) ++seen[static_cast<std::size_t>(r * cols + k)];
  }
  CHECK(p.total_bytes == offset);
  CHECK(p.max_chunk_bytes == max_bytes);
  CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
}

}  // namespace

TEST_CASE("chunk plans: whole-row bands of 128*k rows, column ranges when 128 rows are too many") {
  using fp8a::cuda::plan_chunks;
  // 4000-byte rows, 1 MiB: 262 rows fit, 256 taken.
  auto p = plan_chunks(1000, 1000, 4, 1 << 20);
  REQUIRE(p.chunks.size() == 4);
  CHECK(p.chunks[0] == Chunk{0, 256, 0, 1000});
  CHECK(p.chunks[3] == Chunk{768, 232, 0, 1000});
  check_plan_covers(p, 1000, 1000, 4);
  // Fits whole: one chunk.
  p = plan_chunks(217, 256, 2, 64 << 20);
  REQUIRE(p.chunks.size() == 1);
  CHECK(p.chunks[0] == Chunk{0, 217, 0, 256});
  // 3 rows of 70001 F32 with 64 KiB: 5461 columns fit, 5376 (42 * 128) taken, 14 ranges.
  p = plan_chunks(3, 70001, 4, 64 << 10);
  REQUIRE(p.chunks.size() == 14);
  CHECK(p.chunks[0] == Chunk{0, 3, 0, 5376});
  CHECK(p.chunks[13] == Chunk{0, 3, 13 * 5376, 70001 - 13 * 5376});
  check_plan_covers(p, 3, 70001, 4);
  // Wide and tall: bands of 128 rows, each split into column ranges.
  p = plan_chunks(300, 3000, 2, 128 * 1024 * 2);
  CHECK(p.chunks[0] == Chunk{0, 128, 0, 1024});
  CHECK(p.chunks.size() == 9);  // 3 bands x 3 ranges
  check_plan_covers(p, 300, 3000, 2);
  // A budget below one 128 x 128 tile still makes 128 x 128 chunks.
  p = plan_chunks(300, 300, 4, 1000);
  CHECK(p.chunks[0] == Chunk{0, 128, 0, 128});
  CHECK(p.max_chunk_bytes == 128 * 128 * 4);
  check_plan_covers(p, 300, 300, 4);
  // 1-D [n] is one row.
  p = plan_chunks(1, 100000, 2, 64 << 10);
  CHECK(p.chunks[0] == Chunk{0, 1, 0, 32768});
  check_plan_covers(p, 1, 100000, 2);
  CHECK(plan_chunks(0, 16, 4, 1 << 20).chunks.empty());
  CHECK(fp8a::cuda::plan_whole(7, 9, 2).chunks.at(0) == Chunk{0, 7, 0, 9});
}

TEST_CASE("chunk plans cover odd shapes for every budget") {
  for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 16}, {5, 160}, {217, 256}, {60, 160},
                            {130, 300}, {3, 70001}, {257, 129}, {1000, 1}}) {
    for (std::size_t elem : {2u, 4u}) {
      for (std::size_t budget : {std::size_t{1}, std::size_t{100000}, std::size_t{1} << 20, std::size_t{64} << 20}) {
        INFO(rows << "x" << cols << " elem " << elem << " budget " << budget);
        const auto p = fp8a::cuda::plan_chunks(rows, cols, elem, budget);
        check_plan_covers(p, rows, cols, elem);
        if (budget >= 128 * 128 * elem) CHECK(p.max_chunk_bytes <= budget);
      }
    }
  }
}

TEST_CASE("gather_chunk copies a chunk's rectangle densely, from unaligned memory") {
  const std::int64_t rows = 300, cols = 1000;
  std::vector<std::byte> storage(static_cast<std::size_t>(rows * cols) * 2 + 1);
  std::byte* base = storage.data() + 1;  // odd address, as inside a memory-mapped file
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    const auto v = static_cast<std::uint16_t>(i * 7 + 3);
    std::memcpy(base + 2 * i, &v, 2);
  }
  const auto view = fp8a::make_tensor_view(base, fp8a::DType::kBF16, {rows, cols});
  const auto plan = fp8a::cuda::plan_chunks(rows, cols, 2, 128 * 256 * 2);
  REQUIRE(plan.chunks.size() > 3);
  for (const Chunk& c : plan.chunks) {
    std::vector<std::byte> out(static_cast<std::size_t>(c.numel()) * 2);
    fp8a::cuda::gather_chunk(view, c, out.data());
    for (std::int64_t r = 0; r < c.rows; ++r)
      for (std::int64_t k = 0; k < c.cols; ++k) {
        std::uint16_t got;
        std::memcpy(&got, out.data() + 2 * (r * c.cols + k), 2);
        const std::int64_t i = (c.row0 + r) * cols + c.col0 + k;
        REQUIRE(got == static_cast<std::uint16_t>(i * 7 + 3));
      }
  }
  CHECK_THROWS_AS(fp8a::cuda::gather_chunk(view, Chunk{256, 128, 0, 10}, nullptr), fp8a::Error);
}

TEST_CASE("partial records are reduced in index order") {
  // Three records whose float64 sum depends on the order: (1e16 + 1) + 1 != 1e16 + (1 + 1).
  std::vector<StatsPartial> s(3, StatsPartial{});
  for (auto& p : s) p.amin_nonzero_bits = fp8a::cuda::kInfBits;
  s[0].sum_sq = 1e16;
  s[1].sum_sq = 1.0;
  s[2].sum_sq = 1.0;
  s[0].nan_count = 2;
  s[2].inf_count = 5;
  s[1].zero_count = 7;
  s[1].amax_bits = fp8a::float_bits(3.0f);
  s[2].amax_finite_bits = fp8a::float_bits(2.0f);
  s[2].amin_nonzero_bits = fp8a::float_bits(0.25f);
  fp8a::TensorStats t;
  fp8a::cuda::merge_stats_partials(s, &t);
  CHECK(t.sum_sq == (1e16 + 1.0) + 1.0);
  CHECK(t.nan_count == 2);
  CHECK(t.inf_count == 5);
  CHECK(t.zero_count == 7);
  CHECK(t.amax == 3.0f);
  CHECK(t.amax_finite == 2.0f);
  CHECK(t.amin_nonzero == 0.25f);
  CHECK(t.numel == 0);  // numel is the caller's

  // Two blocks x two members [block][member]; members map to candidates 2 and 0.
  std::vector<MetricPartial> m(4, MetricPartial{});
  for (std::size_t i = 0; i < m.size(); ++i) {
    m[i].sum_sq_err = i < 2 ? 1e16 : 1.0;
    m[i].sum_x_deq = static_cast<double>(i);
    m[i].underflow = 1;
    m[i].overflow = static_cast<std::int64_t>(10 * i);
    m[i].saturated = 3;
    m[i].scale_inv_min_bits = fp8a::cuda::kInfBits;
    m[i].scale_inv_max_bits = 0;
  }
  m[3].scale_inv_min_bits = fp8a::float_bits(0.5f);
  m[3].scale_inv_max_bits = fp8a::float_bits(4.0f);
  std::vector<fp8a::QuantSums> sums(3);
  std::vector<fp8a::FakeQuantCounts> counts(3);
  sums[2].sum_sq_err = 1.0;  // an earlier chunk's total
  const std::vector<std::size_t> members = {2, 0};
  fp8a::cuda::merge_metric_partials(m, members, sums, counts);
  CHECK(sums[2].sum_sq_err == (1.0 + 1e16) + 1.0);
  CHECK(sums[2].sum_x_deq == 0.0 + 2.0);
  CHECK(sums[0].sum_x_deq == 1.0 + 3.0);
  CHECK(counts[2].overflow == 0 + 20);
  CHECK(counts[0].overflow == 10 + 30);
  CHECK(counts[0].underflow == 2);
  CHECK(counts[0].saturated == 6);
  CHECK(counts[0].scale_inv_min == 0.5f);
  CHECK(counts[0].scale_inv_max == 4.0f);
  CHECK(counts[2].scale_inv_min == INFINITY);  // no block seen: stays as the CPU starts it
  CHECK(counts[2].scale_inv_max == 0.0f);
  CHECK(sums[1].sum_sq_err == 0.0);
  const std::vector<std::size_t> three = {0, 1, 2};
  CHECK_THROWS_AS(fp8a::cuda::merge_metric_partials(m, three, sums, counts), fp8a::Error);
}

TEST_CASE("pass 2 jobs: per-tensor and bf16 candidates in groups of eight, then one per blocked") {
  std::vector<fp8a::Candidate> cands;
  for (int i = 0; i < 9; ++i)
    cands.push_back({fp8a::parse_recipe(i % 2 ? "current" : "current:pow2"),
                     i % 3 ? fp8a::Fp8Format::kE4M3 : fp8a::Fp8Format::kE5M2});
  cands.push_back({fp8a::parse_recipe("mxfp8:floor"), fp8a::Fp8Format::kE5M2, fp8a::Role::kWeight,
                   fp8a::Orientation::kColumnwise});
  cands.push_back({fp8a::parse_recipe("bf16")});
  cands.push_back({fp8a::parse_recipe("delayed")});  // no given scale: not applicable
  cands.push_back({fp8a::parse_recipe("block:fp32"), fp8a::Fp8Format::kE4M3, fp8a::Role::kWeight});
  fp8a::TensorStats stats;
  stats.numel = 10;
  stats.amax = 3.7f;
  std::vector<fp8a::QuantSpec> specs(cands.size());
  std::vector<fp8a::CandidateResult> results(cands.size());
  for (std::size_t j = 0; j < cands.size(); ++j)
    results[j].applicability = fp8a::make_quant_spec(cands[j], stats, fp8a::DType::kBF16, &specs[j]);
  const auto jobs = fp8a::cuda::plan_metric_jobs(specs, results);
  REQUIRE(jobs.size() == 4);
  CHECK(!jobs[0].blocked);
  CHECK(jobs[0].group.count == 8);
  CHECK(jobs[0].members == std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(jobs[1].group.count == 2);
  CHECK(jobs[1].members == std::vector<std::size_t>{8, 10});
  CHECK(jobs[1].group.mode[1] == fp8a::cuda::ElementMode::kBf16);
  CHECK(jobs[2].blocked);
  CHECK(jobs[2].members == std::vector<std::size_t>{9});
  CHECK(jobs[2].params.block_rows == 32);
  CHECK(jobs[2].params.block_cols == 1);
  CHECK(jobs[2].params.mx_rule == fp8a::MxScaleRule::kOcpFloor);
  CHECK(jobs[2].params.value_for_inf == fp8a::input_type_max(fp8a::DType::kBF16));
  CHECK(jobs[3].params.block_rows == 128);
  CHECK(jobs[3].params.block_cols == 128);
  CHECK(!jobs[3].params.pow2_scales);
  for (int i = 0; i < 8; ++i) {
    const auto& s = specs[static_cast<std::size_t>(i)];
    const auto& g = jobs[0].group;
    CHECK(g.mode[i] == (s.format == fp8a::Fp8Format::kE4M3 ? fp8a::cuda::ElementMode::kE4M3
                                                           : fp8a::cuda::ElementMode::kE5M2));
    CHECK(g.scale[i] == s.scale);
    CHECK(g.scale_inv[i] == 1.0f / s.scale);
    CHECK(g.overflow_threshold[i] == fp8a::fp8_max_finite(s.format) * (1.0f / s.scale));
  }
  CHECK(fp8a::cuda::metric_partial_capacity(jobs, fp8a::cuda::kMaxGridBlocks) ==
        static_cast<std::size_t>(fp8a::cuda::kMaxGridBlocks) * 12 * sizeof(MetricPartial));
}

TEST_CASE("element arithmetic shared with the kernels: thresholds and block scales") {
  CHECK(fp8a::saturation_threshold(fp8a::Fp8Format::kE4M3) == 464.0f);
  CHECK(fp8a::saturation_threshold(fp8a::Fp8Format::kE5M2) == std::nextafter(61440.0f, 0.0f));
  CHECK(fp8a::abs_bits_not_nan(NAN) == 0);
  CHECK(fp8a::abs_bits_not_nan(-INFINITY) == static_cast<std::int32_t>(fp8a::cuda::kInfBits));
  // A single 1x32 / 1x128 block per candidate: the CPU reports its scale_inv as the range.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> expo(-140.0f, 127.0f);
  for (int i = 0; i < 2000; ++i) {
    const float amax = std::exp2(expo(rng)) * (1.0f + static_cast<float>(i % 7) / 8.0f);
    if (!std::isfinite(amax)) continue;
    std::vector<float> x(128);  // every 1x32 and 1x128 block with this amax
    for (std::size_t e = 0; e < x.size(); ++e) x[e] = (e + static_cast<std::size_t>(i)) % 2 ? amax : -amax;
    const auto view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(x.data()), fp8a::DType::kF32, {1, 128});
    for (const char* spec : {"block", "block:fp32", "mxfp8", "mxfp8:floor"}) {
      for (auto f : {fp8a::Fp8Format::kE4M3, fp8a::Fp8Format::kE5M2}) {
        const fp8a::Candidate c{fp8a::parse_recipe(spec), f};
        const auto eval = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{c}, view);
        fp8a::QuantSpec q;
        REQUIRE(fp8a::make_quant_spec(c, eval.stats, fp8a::DType::kF32, &q).ok);
        const auto jobs = fp8a::cuda::plan_metric_jobs(std::vector<fp8a::QuantSpec>{q}, eval.results);
        const auto s = fp8a::cuda::block_scale(jobs.at(0).params, amax);
        INFO(std::string(spec) << " amax " << amax);
        CHECK(fp8a::cuda_test::same_float(s.scale_inv, eval.results[0].metrics.scale_inv_min));
      }
    }
  }
}

namespace {

// The CUDA backend's computation with the kernels' loops written out on the host: statistics
// records per slice of 1000 elements, pass-2 jobs, one record per slice (per-tensor kernel) or per
// block (blocked kernel) from element_quant.hpp, merged and finalized by partials.hpp. It differs
// from the device only in the cast (the software round trip, equal to cvt.satfinite) and in the
// order of the float64 additions.
fp8a::TensorEvaluation emulate_cuda(const std::vector<fp8a::Candidate>& cands, const fp8a::TensorView& t) {
  using namespace fp8a::cuda;
  const std::int64_t n = t.numel();
  std::vector<float> x(static_cast<std::size_t>(n));
  t.load_floats(0, n, x.data());
  constexpr std::int64_t kSlice = 1000;
  fp8a::TensorEvaluation out;
  out.stats.numel = n;
  std::vector<StatsPartial> stats_records;
  for (std::int64_t i0 = 0; i0 < n; i0 += kSlice) {
    StatsPartial p{};
    p.amin_nonzero_bits = kInfBits;
    for (std::int64_t i = i0; i < std::min(n, i0 + kSlice); ++i) {
      const std::uint32_t b = abs_bits(x[static_cast<std::size_t>(i)]);
      p.nan_count += b > kInfBits;
      p.inf_count += b == kInfBits;
      p.zero_count += b == 0;
      p.amax_bits = std::max(p.amax_bits, b > kInfBits ? 0u : b);
      p.amax_finite_bits = std::max(p.amax_finite_bits, b >= kInfBits ? 0u : b);
      p.amin_nonzero_bits = std::min(p.amin_nonzero_bits, (b == 0 || b >= kInfBits) ? kInfBits : b);
      const double d = b < kInfBits ? static_cast<double>(x[static_cast<std::size_t>(i)]) : 0.0;
      p.sum_sq += d * d;
    }
    stats_records.push_back(p);
  }
  merge_stats_partials(stats_records, &out.stats);

  const std::size_t k = cands.size();
  out.results.resize(k);
  std::vector<fp8a::QuantSpec> specs(k);
  for (std::size_t j = 0; j < k; ++j)
    out.results[j].applicability = fp8a::make_quant_spec(cands[j], out.stats, t.dtype, &specs[j]);
  std::vector<fp8a::QuantSums> sums(k);
  std::vector<fp8a::FakeQuantCounts> counts(k);
  const auto record = [](const ElementSums& a, std::uint32_t lo, std::uint32_t hi) {
    return MetricPartial{a.sum_sq_err, a.sum_x_deq, a.sum_deq_sq, a.sum_sq_underflow, a.underflow, a.overflow, a.saturated, lo, hi};
  };
  for (const MetricJob& job : plan_metric_jobs(specs, out.results)) {
    std::vector<MetricPartial> records;
    if (!job.blocked) {
      const PerTensorGroup& g = job.group;
      for (std::int64_t i0 = 0; i0 < n; i0 += kSlice) {
        std::vector<ElementSums> acc(static_cast<std::size_t>(g.count));
        // In pairs, as the kernel converts them (the last one alone when the slice is odd).
        const std::int64_t i1 = std::min(n, i0 + kSlice);
        for (std::int64_t i = i0; i < i1; i += 2) {
          const bool second = i + 1 < i1;
          const float v[2] = {x[static_cast<std::size_t>(i)], second ? x[static_cast<std::size_t>(i + 1)] : 0.0f};
          const bool finite[2] = {is_finite_float(v[0]), is_finite_float(v[1])};
          const float xc[2] = {finite[0] ? v[0] : 0.0f, finite[1] ? v[1] : 0.0f};
          const double xd[2] = {xc[0], xc[1]};
          const std::uint32_t bits[2] = {count_bits(v[0]), count_bits(v[1])};
          for (int j = 0; j < g.count; ++j) {
            auto& a = acc[static_cast<std::size_t>(j)];
            if (g.mode[j] == ElementMode::kBf16) {
              quantize_bf16(a, v[0], xd[0], finite[0]);
              if (second) quantize_bf16(a, v[1], xd[1], finite[1]);
            } else if (g.mode[j] == ElementMode::kE4M3) {
              quantize_fp8_x2_counted<fp8a::Fp8Format::kE4M3>(a, xc, xd, bits, g.scale[j], g.scale_inv[j], g.limits[j], second);
            } else {
              quantize_fp8_x2_counted<fp8a::Fp8Format::kE5M2>(a, xc, xd, bits, g.scale[j], g.scale_inv[j], g.limits[j], second);
            }
          }
        }
        for (const auto& a : acc) records.push_back(record(a, kInfBits, 0u));
      }
    } else {
      const BlockedParams& p = job.params;
      const float fp8_max = fp8a::fp8_max_finite(p.format);
      for (std::int64_t r0 = 0; r0 < t.rows; r0 += p.block_rows) {
        for (std::int64_t c0 = 0; c0 < t.cols; c0 += p.block_cols) {
          const std::int64_t r1 = std::min(t.rows, r0 + p.block_rows), c1 = std::min(t.cols, c0 + p.block_cols);
          std::uint32_t amax = 0;
          for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t c = c0; c < c1; ++c) amax = std::max(amax, static_cast<std::uint32_t>(fp8a::abs_bits_not_nan(x[static_cast<std::size_t>(r * t.cols + c)])));
          const fp8a::ScalePair s = block_scale(p, fp8a::bits_float(amax));
          const float threshold = fp8a::mul_rn(fp8_max, s.scale_inv);
          ElementSums a;
          for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t c = c0; c < c1; ++c) {
              const float v = x[static_cast<std::size_t>(r * t.cols + c)];
              const bool finite = is_finite_float(v);
              const double xd = finite ? static_cast<double>(v) : 0.0;
              if (p.format == fp8a::Fp8Format::kE4M3)
                quantize_fp8<fp8a::Fp8Format::kE4M3>(a, v, xd, finite, s.scale, s.scale_inv, threshold);
              else
                quantize_fp8<fp8a::Fp8Format::kE5M2>(a, v, xd, finite, s.scale, s.scale_inv, threshold);
            }
          const bool nan_scale = !(s.scale_inv == s.scale_inv);
          records.push_back(record(a, nan_scale ? kInfBits : fp8a::float_bits(s.scale_inv),
                                   nan_scale ? 0u : fp8a::float_bits(s.scale_inv)));
        }
      }
    }
    merge_metric_partials(records, job.members, sums, counts);
  }
  for (std::size_t j = 0; j < k; ++j)
    if (out.results[j].applicability.ok)
      out.results[j].metrics = finalize_candidate(out.stats, specs[j], sums[j], counts[j]);
  return out;
}

}  // namespace

TEST_CASE("the kernels' arithmetic, run on the host, reproduces CpuBackend for every recipe") {
  const std::vector<std::vector<std::int64_t>> shapes = {{1, 16}, {5, 160}, {217, 256}, {5, 4, 3, 160}, {130, 300}, {3, 7001}};
  std::uint32_t seed = 1;
  for (const auto& shape : shapes) {
    const std::size_t n = static_cast<std::size_t>(std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>()));
    for (auto fill : fp8a::cuda_test::kFills) {
      const auto x = fp8a::cuda_test::make_fill(n, fill, seed++);
      for (auto dtype : {fp8a::DType::kBF16, fp8a::DType::kF16, fp8a::DType::kF32}) {
        const auto t = fp8a::cuda_test::store(x, dtype, shape);
        const float amax = fp8a::compute_tensor_stats(t.view).amax;
        for (auto role : {fp8a::Role::kActivation, fp8a::Role::kWeight}) {
          for (auto fmt : {fp8a::Fp8Format::kE4M3, fp8a::Fp8Format::kE5M2}) {
            INFO("shape " << t.view.rows << "x" << t.view.cols << " fill "
                          << std::string(fp8a::cuda_test::fill_name(fill)) << " dtype "
                          << std::string(fp8a::dtype_name(dtype)) << " role " << std::string(fp8a::role_name(role)));
            const auto cands = fp8a::cuda_test::all_candidates(role, fmt, amax);
            fp8a::cuda_test::check_same_evaluation(emulate_cuda(cands, t.view),
                                                   fp8a::CpuBackend().evaluate(cands, t.view), cands);
          }
        }
      }
    }
  }
}

TEST_CASE("a pair through quantize_fp8_x2 == two quantize_fp8, bit for bit, each with its own scale") {
  using namespace fp8a::cuda;
  const auto x = fp8a::cuda_test::make_fill(4096, fp8a::cuda_test::Fill::kNonFinite, 5);
  const auto y = fp8a::cuda_test::make_fill(4096, fp8a::cuda_test::Fill::kWide, 6);
  for (auto fmt : {fp8a::Fp8Format::kE4M3, fp8a::Fp8Format::kE5M2}) {
    ElementSums one, two;
    for (std::size_t i = 0; i + 1 < x.size(); i += 2) {
      const float v[2] = {x[i], y[i + 1]};
      const bool finite[2] = {is_finite_float(v[0]), is_finite_float(v[1])};
      const double xd[2] = {finite[0] ? double(v[0]) : 0.0, finite[1] ? double(v[1]) : 0.0};
      const float sc[2] = {std::ldexp(1.0f, static_cast<int>(i % 40) - 20), 3.0f};
      const float si[2] = {1.0f / sc[0], 1.0f / sc[1]};
      const float th[2] = {fp8a::mul_rn(fp8a::fp8_max_finite(fmt), si[0]), fp8a::mul_rn(fp8a::fp8_max_finite(fmt), si[1])};
      const bool second = i % 6 != 0;  // some pads
      if (fmt == fp8a::Fp8Format::kE4M3) {
        quantize_fp8_x2<fp8a::Fp8Format::kE4M3>(two, v, xd, finite, sc, si, th, second);
        quantize_fp8<fp8a::Fp8Format::kE4M3>(one, v[0], xd[0], finite[0], sc[0], si[0], th[0]);
        if (second) quantize_fp8<fp8a::Fp8Format::kE4M3>(one, v[1], xd[1], finite[1], sc[1], si[1], th[1]);
      } else {
        quantize_fp8_x2<fp8a::Fp8Format::kE5M2>(two, v, xd, finite, sc, si, th, second);
        quantize_fp8<fp8a::Fp8Format::kE5M2>(one, v[0], xd[0], finite[0], sc[0], si[0], th[0]);
        if (second) quantize_fp8<fp8a::Fp8Format::kE5M2>(one, v[1], xd[1], finite[1], sc[1], si[1], th[1]);
      }
    }
    CHECK(one.sum_sq_err == two.sum_sq_err);
    CHECK(one.sum_x_deq == two.sum_x_deq);
    CHECK(one.sum_deq_sq == two.sum_deq_sq);
    CHECK(one.sum_sq_underflow == two.sum_sq_underflow);
    CHECK(one.underflow == two.underflow);
    CHECK(one.overflow == two.overflow);
    CHECK(one.saturated == two.saturated);
    CHECK(one.underflow > 0);
    CHECK(one.saturated > 0);
  }
}

namespace {

// The three counts of one element, tested directly as quantize_fp8 does.
template <fp8a::Fp8Format F>
void direct_counts(float x, float scale, float threshold, bool* under, bool* sat, bool* over) {
  using namespace fp8a::cuda;
  const float s = fp8a::mul_rn(x, scale);
  const float q = fp8_round_trip<F>(s);
  *under = (x != 0.0f) & (q == 0.0f);
  *sat = abs_float(s) > fp8a::saturation_threshold(F);
  *over = abs_float(x) > threshold;
}

template <fp8a::Fp8Format F>
void check_limits(float scale, std::uint64_t seed) {
  using namespace fp8a::cuda;
  const float threshold = fp8a::fp8_max_finite(F) * fp8a::scale_inverse(scale);
  const CountLimits l = count_limits<F>(scale, threshold);
  std::vector<std::uint32_t> bits = {0u, 1u, 2u, 0x7F7FFFFFu, kInfBits, kInfBits + 1u, 0x7FFFFFFFu};
  for (std::uint32_t edge : {l.underflow_max, l.saturated_min, l.overflow_above})
    for (std::int64_t d = -3; d <= 3; ++d) {
      const std::int64_t b = static_cast<std::int64_t>(edge) + d;
      if (b >= 0 && b <= 0x7FFFFFFF) bits.push_back(static_cast<std::uint32_t>(b));
    }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 20000; ++i) bits.push_back(static_cast<std::uint32_t>(rng()) & 0x7FFFFFFFu);
  std::size_t bad = 0;
  for (const std::uint32_t b : bits) {
    for (const std::uint32_t sign : {0u, 0x80000000u}) {
      const float x = fp8a::bits_float(b | sign);
      bool u, s, o;
      direct_counts<F>(x, scale, threshold, &u, &s, &o);
      const std::uint32_t c = count_bits(x);
      const bool ok = u == (c - 1u < l.underflow_max) && s == (c >= l.saturated_min) &&
                      o == (c > l.overflow_above);
      if (!ok && ++bad <= 5)
        MESSAGE("scale " << scale << " x bits " << (b | sign) << ": direct " << u << s << o);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("per-tensor counts as ranges of |x| (count_limits) == the direct tests, every scale kind") {
  std::mt19937_64 rng(11);
  std::vector<float> scales = {1.0f, 0.0f, INFINITY, NAN, FLT_MAX, 1e-30f, 1e-45f, 448.0f / 3.5f,
                               std::ldexp(1.0f, 100), std::ldexp(1.0f, -100), 0.75f};
  std::uniform_real_distribution<float> expo(-120.0f, 120.0f);
  for (int i = 0; i < 40; ++i) scales.push_back(std::exp2(expo(rng)) * (1.0f + static_cast<float>(i) / 64));
  for (const float sc : scales) {
    INFO("scale " << sc);
    check_limits<fp8a::Fp8Format::kE4M3>(sc, 1);
    check_limits<fp8a::Fp8Format::kE5M2>(sc, 2);
  }
}

TEST_CASE("finalize_candidate on an empty tensor keeps the CPU's untouched scale range") {
  fp8a::TensorStats stats;
  fp8a::QuantSpec spec;
  spec.scale = 2.0f;
  const auto m = fp8a::cuda::finalize_candidate(stats, spec, {}, {});
  CHECK(m.scale_inv_min == INFINITY);
  CHECK(m.scale_inv_max == 0.0f);
  CHECK(m.scale == 2.0f);
}

TEST_CASE("--device: parsing, and the backend each choice gives on this machine") {
  using fp8a::cli::DeviceChoice;
  CHECK(fp8a::cli::parse_device_choice("auto") == DeviceChoice::kAuto);
  CHECK(fp8a::cli::parse_device_choice("cpu") == DeviceChoice::kCpu);
  CHECK(fp8a::cli::parse_device_choice("cuda") == DeviceChoice::kCuda);
  CHECK(std::string(fp8a::cli::device_choice_name(DeviceChoice::kCuda)) == "cuda");
  CHECK_THROWS_WITH_AS(fp8a::cli::parse_device_choice("gpu"),
                       "[fp8a.usage.206] --device 'gpu': expected auto, cpu or cuda (did you mean 'cpu'?)",
                       fp8a::Error);
  CHECK(fp8a::cli::make_backend(DeviceChoice::kCpu)->name() == "cpu");
  if (fp8a::cuda::device_count() == 0) {
    CHECK(fp8a::cli::make_backend(DeviceChoice::kAuto)->name() == "cpu");
    try {
      fp8a::cli::make_backend(DeviceChoice::kCuda);
      FAIL("--device cuda without a GPU must be a usage error");
    } catch (const fp8a::Error& e) {
      CHECK(e.exit_code() == fp8a::kExitUsage);
      CHECK(std::string(e.what()).rfind("[fp8a.usage.206] --device cuda: no CUDA device", 0) == 0);
    }
  } else {
    // auto takes the GPU only once the CUDA backend is validated there (backend_registry.hpp).
    CHECK(fp8a::cli::make_backend(DeviceChoice::kAuto)->name() ==
          std::string(fp8a::cli::kCudaValidatedOnGpu ? "cuda" : "cpu"));
    const auto cuda = fp8a::cli::make_backend(DeviceChoice::kCuda);
    CHECK(cuda->name() == "cuda");
    CHECK(fp8a::cli::make_gemm_engine(*cuda)->name() == "cublaslt");
  }
  // The CPU backend has no real GEMM engine: gemms.csv holds the emulated rows only.
  CHECK(fp8a::cli::make_gemm_engine(*fp8a::cli::make_backend(DeviceChoice::kCpu)) == nullptr);
}

// ---- the cuBLASLt GEMM engine's host side (cuda/cublaslt_gemm_plan.hpp) ----------------------

namespace {

using fp8a::cuda::LtCaps;
using fp8a::cuda::LtGemmPlan;
using fp8a::cuda::LtScaleMode;
using fp8a::cuda::LtType;

constexpr LtCaps kHopper{90, 130100};     // H100/H200 with this toolkit's cuBLASLt 13.1.0
constexpr LtCaps kBlackwell{100, 130100};
constexpr LtCaps kAda{89, 130100};

fp8a::QuantSpec per_tensor(fp8a::Fp8Format f, float scale = 2.0f, bool delayed = false) {
  fp8a::QuantSpec s;
  s.kind = delayed ? fp8a::RecipeKind::kPerTensorDelayed : fp8a::RecipeKind::kPerTensorCurrent;
  s.format = f;
  s.scale = scale;
  return s;
}

fp8a::QuantSpec blocked(fp8a::RecipeKind kind, fp8a::BlockShape block,
                        fp8a::Fp8Format f = fp8a::Fp8Format::kE4M3) {
  fp8a::QuantSpec s;
  s.kind = kind;
  s.format = f;
  s.block = block;
  return s;
}

LtGemmPlan plan(fp8a::Gemm g, const fp8a::QuantSpec& a, const fp8a::QuantSpec& b, LtCaps caps,
                std::int64_t m = 100, std::int64_t n = 72, std::int64_t k = 200) {
  return fp8a::cuda::plan_lt_gemm(g, m, n, k, a, b, caps);
}

constexpr fp8a::BlockShape k1x128{1, 128}, k128x128{128, 128}, k1x32{1, 32};

}  // namespace

TEST_CASE("cuBLASLt plan: per-tensor FP8 with TE's accumulation per GEMM, padded to 16") {
  using fp8a::Fp8Format;
  using fp8a::Gemm;
  const auto e4 = per_tensor(Fp8Format::kE4M3), e5 = per_tensor(Fp8Format::kE5M2);
  auto p = plan(Gemm::kFprop, e4, e4, kHopper);
  REQUIRE(p.supported);
  CHECK(p.reason.empty());
  CHECK(p.a.type == LtType::kE4M3);
  CHECK(p.b.type == LtType::kE4M3);
  CHECK(p.a.mode == LtScaleMode::kScalar32F);
  CHECK(p.b.mode == LtScaleMode::kScalar32F);
  CHECK(p.fast_accum);  // TE: fprop without split accumulator
  CHECK(std::string(p.accumulation()) == "fast");
  // M = 100, N = 72, K = 200 -> 112, 80, 208; the operands' rows with them.
  CHECK(p.m_padded == 112);
  CHECK(p.n_padded == 80);
  CHECK(p.k_padded == 208);
  CHECK(p.a.rows == 100);
  CHECK(p.a.rows_padded == 112);
  CHECK(p.b.rows == 72);
  CHECK(p.b.rows_padded == 80);
  CHECK(p.describe() == "X E4M3 SCALAR_32F x W E4M3 SCALAR_32F, fast accumulation, FP32 output; "
                        "reference BF16 x BF16, FP32 accumulation");
  // Already aligned dims stay.
  p = plan(Gemm::kFprop, e4, e4, kHopper, 128, 16, 4096);
  CHECK(p.m_padded == 128);
  CHECK(p.n_padded == 16);
  CHECK(p.k_padded == 4096);
  // Backward GEMMs: split accumulation; under hybrid the gradient (always operand a) is E5M2,
  // which cuBLASLt gets as B, next to an E4M3 A.
  for (Gemm g : {Gemm::kDgrad, Gemm::kWgrad}) {
    p = plan(g, e5, e4, kHopper);
    REQUIRE(p.supported);
    CHECK_FALSE(p.fast_accum);
    CHECK(std::string(p.accumulation()) == "split");
    CHECK(p.a.type == LtType::kE5M2);
    CHECK(p.b.type == LtType::kE4M3);
  }
  CHECK(plan(Gemm::kWgrad, e5, e4, kHopper).describe() ==
        "dY^T E5M2 SCALAR_32F x X^T E4M3 SCALAR_32F, split accumulation, FP32 output; "
        "reference BF16 x BF16, FP32 accumulation");
  CHECK(plan(Gemm::kDgrad, e4, e4, kHopper).describe().rfind("dY E4M3 SCALAR_32F x W^T E4M3", 0) == 0);
  // Delayed scaling is per-tensor too; Ada has FP8 tensor cores, Ampere has none.
  const auto delayed = per_tensor(Fp8Format::kE4M3, 1.0f, true);
  CHECK(plan(Gemm::kFprop, delayed, delayed, kHopper).supported);
  CHECK(plan(Gemm::kFprop, e4, e4, kAda).supported);
  p = plan(Gemm::kFprop, e4, e4, LtCaps{80, 130100});
  CHECK_FALSE(p.supported);
  CHECK(p.reason == "FP8 GEMMs need sm_89+; this GPU is sm_80");
  p = plan(Gemm::kDgrad, e5, e5, kHopper);
  CHECK_FALSE(p.supported);
  CHECK(p.reason == "cuBLASLt has no E5M2 x E5M2 FP8 GEMM");
}

TEST_CASE("cuBLASLt plan: block scaling on Hopper, MXFP8 on Blackwell, otherwise the reason") {
  using fp8a::Gemm;
  using fp8a::RecipeKind;
  const auto x = blocked(RecipeKind::kBlock, k1x128), w = blocked(RecipeKind::kBlock, k128x128);
  // fprop X (1x128) x W (128x128), dgrad dY (1x128) x W^T (128x128), wgrad 1x128 x 1x128.
  auto p = plan(Gemm::kFprop, x, w, kHopper);
  REQUIRE(p.supported);
  CHECK(p.a.mode == LtScaleMode::kVec128_32F);
  CHECK(p.b.mode == LtScaleMode::kBlk128x128_32F);
  CHECK_FALSE(p.fast_accum);  // TE and PyTorch: split accumulation with block scaling
  CHECK(p.k_padded == 256);   // whole 128-element scale blocks
  CHECK(p.m_padded == 112);
  CHECK(p.describe() == "X E4M3 VEC128_32F x W E4M3 BLK128x128_32F, split accumulation, FP32 "
                        "output; reference BF16 x BF16, FP32 accumulation");
  p = plan(Gemm::kWgrad, blocked(RecipeKind::kBlock, k1x128, fp8a::Fp8Format::kE5M2), x, kHopper);
  REQUIRE(p.supported);
  CHECK(p.a.mode == LtScaleMode::kVec128_32F);
  CHECK(p.b.mode == LtScaleMode::kVec128_32F);
  CHECK(p.a.type == LtType::kE5M2);
  // 2-D x 2-D (block:2d activations with 128x128 weights): cuBLASLt and TE take neither.
  p = plan(Gemm::kFprop, w, w, kHopper);
  CHECK_FALSE(p.supported);
  CHECK(p.reason == "cuBLASLt takes at most one 128x128-scaled operand (2D x 2D block scaling; "
                    "TE rejects it too)");
  // Off Hopper, or before cuBLASLt 12.9: the emulated row stands alone, saying why.
  p = plan(Gemm::kFprop, x, w, kBlackwell);
  CHECK_FALSE(p.supported);
  CHECK(p.reason == "1x128/128x128 block scaling (VEC128_32F, BLK128x128_32F) is a Hopper (sm_90) "
                    "mode; this GPU is sm_100");
  p = plan(Gemm::kFprop, x, w, LtCaps{90, 120803});
  CHECK_FALSE(p.supported);
  CHECK(p.reason == "1x128/128x128 block scaling needs cuBLASLt 12.9+; this is 12.8.3");
  CHECK(plan(Gemm::kFprop, x, w, LtCaps{90, 120900}).supported);
  // A block shape that does not run along K has no mode.
  p = plan(Gemm::kWgrad, blocked(RecipeKind::kBlock, {128, 1}), x, kHopper);
  CHECK_FALSE(p.supported);
  CHECK(p.reason == "cuBLASLt has no scaling mode for 128x1 x 1x128 blocks along K");
  // MXFP8: 1x32 E8M0 blocks, sm_100+ and cuBLASLt 12.8+.
  const auto mx = blocked(RecipeKind::kMx, k1x32);
  p = plan(Gemm::kDgrad, mx, mx, kBlackwell);
  REQUIRE(p.supported);
  CHECK(p.a.mode == LtScaleMode::kVec32Ue8m0);
  CHECK(p.b.mode == LtScaleMode::kVec32Ue8m0);
  CHECK(p.k_padded == 256);
  CHECK_FALSE(p.fast_accum);
  p = plan(Gemm::kFprop, mx, mx, kHopper);
  CHECK_FALSE(p.supported);
  CHECK(p.reason == "MXFP8 block scaling (VEC32_UE8M0) needs sm_100+; this GPU is sm_90");
  p = plan(Gemm::kFprop, mx, mx, LtCaps{100, 120703});
  CHECK_FALSE(p.supported);
  CHECK(p.reason == "MXFP8 block scaling (VEC32_UE8M0) needs cuBLASLt 12.8+; this is 12.7.3");
  // bf16: a BF16 GEMM, the same as the reference.
  fp8a::QuantSpec bf16;
  bf16.kind = RecipeKind::kBf16;
  p = plan(Gemm::kFprop, bf16, bf16, kHopper);
  REQUIRE(p.supported);
  CHECK(p.a.type == LtType::kBf16);
  CHECK(p.a.mode == LtScaleMode::kNone);
  CHECK_FALSE(p.fp8());
  CHECK(std::string(p.accumulation()) == "fp32");
  CHECK(p.k_padded == 208);
  CHECK(p.describe() == "X BF16 x W BF16, FP32 accumulation, FP32 output; reference BF16 x BF16, "
                        "FP32 accumulation");
  CHECK(plan(Gemm::kFprop, bf16, bf16, LtCaps{75, 130100}).reason ==
        "BF16 GEMMs need sm_80+; this GPU is sm_75");
}

TEST_CASE("cuBLASLt scale tensor layouts: each block one entry, inside the tensor") {
  using fp8a::cuda::lt_scale_count;
  using fp8a::cuda::lt_scale_index;
  // VEC128_32F: [k/128][rows], rows fastest.
  CHECK(lt_scale_count(LtScaleMode::kVec128_32F, 112, 256) == 224);
  CHECK(lt_scale_index(LtScaleMode::kVec128_32F, 5, 130, 112, 256) == 112 + 5);
  CHECK(lt_scale_index(LtScaleMode::kVec128_32F, 5, 127, 112, 256) == 5);
  // BLK128x128_32F: [ceil(rows/128)][round_up(k/128, 4)], K blocks fastest, padded to 4.
  CHECK(lt_scale_count(LtScaleMode::kBlk128x128_32F, 144, 256) == 2 * 4);
  CHECK(lt_scale_index(LtScaleMode::kBlk128x128_32F, 130, 129, 144, 256) == 4 + 1);
  CHECK(lt_scale_count(LtScaleMode::kBlk128x128_32F, 16, 640) == 8);  // 5 K blocks -> 8
  // VEC32_UE8M0: 128 x 4 tiles, (r % 32) * 16 + (r / 32) * 4 + c inside one (PyTorch's to_blocked).
  CHECK(lt_scale_count(LtScaleMode::kVec32Ue8m0, 16, 128) == 128 * 4);
  CHECK(lt_scale_index(LtScaleMode::kVec32Ue8m0, 0, 0, 16, 128) == 0);
  CHECK(lt_scale_index(LtScaleMode::kVec32Ue8m0, 1, 0, 16, 128) == 16);
  CHECK(lt_scale_index(LtScaleMode::kVec32Ue8m0, 33, 64, 160, 256) == 16 + 4 + 2);
  CHECK(lt_scale_index(LtScaleMode::kVec32Ue8m0, 33, 4 * 32, 160, 256) == 512 + 16 + 4);  // next tile
  CHECK(lt_scale_index(LtScaleMode::kVec32Ue8m0, 130, 0, 160, 256) == 2 * 512 + 2 * 16);  // tile row 1
  CHECK(lt_scale_count(LtScaleMode::kScalar32F, 16, 16) == 1);
  // Every (row, block along K) of every mode gets a distinct entry inside the tensor.
  for (auto mode : {LtScaleMode::kVec128_32F, LtScaleMode::kBlk128x128_32F, LtScaleMode::kVec32Ue8m0}) {
    for (auto [rows, k] : {std::pair<std::int64_t, std::int64_t>{16, 128}, {272, 640}, {128, 384}}) {
      INFO(fp8a::cuda::lt_scale_mode_name(mode) << " " << rows << "x" << k);
      const std::int64_t br = mode == LtScaleMode::kBlk128x128_32F ? 128 : 1;
      const std::int64_t bk = mode == LtScaleMode::kVec32Ue8m0 ? 32 : 128;
      const std::size_t count = lt_scale_count(mode, rows, k);
      std::vector<int> seen(count, 0);
      for (std::int64_t r = 0; r < rows; r += br)
        for (std::int64_t l = 0; l < k; l += bk) {
          const std::size_t at = lt_scale_index(mode, r, l, rows, k);
          REQUIRE(at < count);
          ++seen[at];
          // Every element of the block maps to the block's entry.
          CHECK(lt_scale_index(mode, std::min(rows, r + br) - 1, l + bk - 1, rows, k) == at);
        }
      CHECK(std::count(seen.begin(), seen.end(), 1) ==
            static_cast<std::ptrdiff_t>(((rows + br - 1) / br) * (k / bk)));
      CHECK(std::count(seen.begin(), seen.end(), 2) == 0);
    }
  }
}

TEST_CASE("e8m0_code_of inverts e8m0_value for every code") {
  for (int e = 0; e < 256; ++e) {
    INFO(e);
    CHECK(fp8a::cuda::e8m0_code_of(fp8a::e8m0_value(static_cast<std::uint8_t>(e))) == e);
  }
}

TEST_CASE("packed cuBLASLt operands decode exactly to the emulated path's fake-quantised values") {
  using fp8a::RecipeKind;
  using fp8a::testing::Fill;
  // Rows x K of the K-major operand, padded by the plan: partial blocks and padding everywhere.
  struct Case {
    fp8a::QuantSpec spec;
    LtScaleMode mode;
    const char* what;
  };
  auto with = [](fp8a::QuantSpec s, auto&& edit) {
    edit(s);
    return s;
  };
  const std::vector<Case> cases = {
      {per_tensor(fp8a::Fp8Format::kE4M3, 0.37f), LtScaleMode::kScalar32F, "current E4M3"},
      {per_tensor(fp8a::Fp8Format::kE5M2, 1024.0f), LtScaleMode::kScalar32F, "delayed E5M2"},
      {with(blocked(RecipeKind::kBlock, k1x128), [](auto& s) { s.pow2_scales = true; }),
       LtScaleMode::kVec128_32F, "block 1x128 pow2"},
      {with(blocked(RecipeKind::kBlock, k1x128, fp8a::Fp8Format::kE5M2), [](auto& s) { s.pow2_scales = false; }),
       LtScaleMode::kVec128_32F, "block 1x128 fp32 E5M2"},
      {with(blocked(RecipeKind::kBlock, k128x128), [](auto& s) { s.pow2_scales = false; }),
       LtScaleMode::kBlk128x128_32F, "block 128x128 fp32"},
      {blocked(RecipeKind::kMx, k1x32), LtScaleMode::kVec32Ue8m0, "mxfp8"},
      {with(blocked(RecipeKind::kMx, k1x32), [](auto& s) { s.mx_rule = fp8a::MxScaleRule::kOcpFloor; }),
       LtScaleMode::kVec32Ue8m0, "mxfp8 floor"},
      {with(fp8a::QuantSpec{}, [](auto& s) { s.kind = RecipeKind::kBf16; }), LtScaleMode::kNone, "bf16"},
  };
  std::uint32_t seed = 900;
  for (const Case& c : cases) {
    for (auto [rows, k] : {std::pair<std::int64_t, std::int64_t>{100, 200}, {130, 300}, {16, 128}, {1, 5}}) {
      for (Fill fill : {Fill::kNormal, Fill::kWide, Fill::kSubnormal, Fill::kZeros}) {
        INFO(std::string(c.what) << " " << rows << "x" << k << " " << fp8a::testing::fill_name(fill));
        const auto values = fp8a::testing::make_fill(static_cast<std::size_t>(rows * k), fill, seed++);
        // The other operand only has to make a GEMM cuBLASLt takes: E4M3, 1-D blocks.
        fp8a::QuantSpec other = c.spec;
        other.format = fp8a::Fp8Format::kE4M3;
        if (other.block == k128x128) other.block = k1x128;
        const LtGemmPlan p = fp8a::cuda::plan_lt_gemm(fp8a::Gemm::kWgrad, rows, 16, k, c.spec, other,
                                                      c.spec.kind == RecipeKind::kMx ? kBlackwell : kHopper);
        REQUIRE(p.supported);
        CHECK(p.a.mode == c.mode);
        const auto packed = fp8a::cuda::pack_lt_operand(p.a, k, p.k_padded, values, c.spec);
        CHECK(packed.data_bytes() ==
              static_cast<std::size_t>(p.a.rows_padded * p.k_padded) * (c.mode == LtScaleMode::kNone ? 2 : 1));
        CHECK(packed.scale_bytes() ==
              fp8a::cuda::lt_scale_count(c.mode, p.a.rows_padded, p.k_padded) *
                  (c.mode == LtScaleMode::kVec32Ue8m0 ? 1 : 4));
        const auto got = fp8a::cuda::lt_dequantize(p.a, p.k_padded, packed);
        std::vector<float> want(values.size());
        fp8a::FakeQuantCounts unused;
        fp8a::fake_quantize_rows(c.spec, values.data(), rows, k, want.data(), &unused);
        bool same = true, zero_padding = true;
        for (std::int64_t r = 0; r < p.a.rows_padded; ++r)
          for (std::int64_t l = 0; l < p.k_padded; ++l) {
            const float g = got[static_cast<std::size_t>(r * p.k_padded + l)];
            if (r < rows && l < k)
              same = same && fp8a::float_bits(g) == fp8a::float_bits(want[static_cast<std::size_t>(r * k + l)]);
            else
              zero_padding = zero_padding && g == 0.0f;
          }
        CHECK(same);
        CHECK(zero_padding);
      }
    }
  }
}

TEST_CASE("fit_to_device_memory: the resident budget shrinks first, then the chunks, else a usage error") {
  // Worked by hand from the rule in cuda_backend.hpp: per workspace (two of them) 3/4 of the free
  // memory / 2; partial records for 64 candidates: 1024 blocks x 64 x 56 B = 3.5 MiB, rounded
  // up to 4 MiB, two slots = 8 MiB; chunk buffers rounded up to 2 MiB, two of them.
  constexpr std::size_t MiB = std::size_t{1} << 20;
  const fp8a::cuda::CudaBackendOptions defaults;  // 64 MiB chunks, 2 GiB resident, 2 workspaces
  auto o = fp8a::cuda::fit_to_device_memory(defaults, std::size_t{80} << 30);
  CHECK(o.chunk_bytes == 64 * MiB);
  CHECK(o.resident_bytes == std::size_t{2} << 30);
  CHECK(o.max_concurrent == 2);
  // 1 GiB free: 384 MiB per workspace, 64 + 64 + 8 MiB streaming, 248 MiB left to keep resident.
  o = fp8a::cuda::fit_to_device_memory(defaults, std::size_t{1} << 30);
  CHECK(o.chunk_bytes == 64 * MiB);
  CHECK(o.resident_bytes == 248 * MiB);
  // 100 MiB free: 37.5 MiB per workspace; chunks halve to 8 MiB (8 + 8 + 8 = 24 MiB), 12 MiB
  // (whole granules of the 13.5 left) resident.
  o = fp8a::cuda::fit_to_device_memory(defaults, 100 * MiB);
  CHECK(o.chunk_bytes == 8 * MiB);
  CHECK(o.resident_bytes == 12 * MiB);
  // 20 MiB free: 7.5 MiB per workspace, less than the smallest (2 + 2 + 8 MiB).
  CHECK_THROWS_WITH_AS(fp8a::cuda::fit_to_device_memory(defaults, 20 * MiB),
                       "[fp8a.usage.212] CUDA device 0 has 20 MiB of free memory; the CUDA backend needs at least "
                       "32 MiB free (2 workspaces of two chunk buffers and partial records, in 3/4 of the free "
                       "memory): free some GPU memory, or run on the CPU (--device cpu)",
                       fp8a::Error);
  try {
    fp8a::cuda::fit_to_device_memory(defaults, 20 * MiB);
  } catch (const fp8a::Error& e) {
    CHECK(e.exit_code() == 2);
  }
}

// The CPU backend against a scalar reference written here (double sums, table-search encoder),
// over odd shapes and fill cases, and for thread-count determinism.
#include <doctest/doctest.h>
#include <tbb/global_control.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp8_codec.hpp"
#include "engine/cpu_backend.hpp"
#include "support/close.hpp"
#include "support/fills.hpp"
#include "support/fp8_ref.hpp"

namespace {

using fp8a::testing::check_close;


struct RefResult {
  float scale, scale_inv, amax;
  std::int64_t underflow = 0, overflow = 0, nan = 0, inf = 0;
  double sum_sq = 0, sum_sq_err = 0, sum_x_deq = 0, sum_deq_sq = 0;
  double sum_sq_underflow = 0;  // x^2 of the elements counted in `underflow`
};

RefResult evaluate_ref(const std::vector<float>& x, bool e4m3, bool pow2, float eps) {
  const auto& spec = e4m3 ? fp8a::ref::kE4M3 : fp8a::ref::kE5M2;
  const float fp8_max = e4m3 ? 448.0f : 57344.0f;
  RefResult r{};
  float amax = 0.0f;
  for (float v : x) {
    if (std::isnan(v)) continue;
    amax = std::max(amax, std::fabs(v));
  }
  r.amax = amax;
  // TE compute_scale_from_amax, spelled out.
  float a = amax < eps ? eps : amax;
  float scale;
  if (a == 0.0f || std::isinf(a) || std::isnan(a)) {
    scale = 1.0f;
  } else {
    scale = fp8_max / a;
    if (std::isinf(scale)) scale = FLT_MAX;
    if (pow2) scale = std::ldexp(1.0f, std::ilogb(scale));
  }
  r.scale = scale;
  r.scale_inv = 1.0f / scale;
  const float threshold = fp8_max * r.scale_inv;
  for (float v : x) {
    const unsigned code = fp8a::ref::encode_ref(spec, v * scale);
    const auto deq = static_cast<float>(fp8a::ref::decode_ref(spec, code)) * r.scale_inv;
    if (v != 0.0f && (code & 0x7F) == 0) {
      ++r.underflow;
      r.sum_sq_underflow += double(v) * v;  // such a v is finite
    }
    if (std::fabs(v) > threshold) ++r.overflow;
    if (std::isnan(v)) ++r.nan;
    if (std::isinf(v)) ++r.inf;
    if (!std::isfinite(v)) continue;
    r.sum_sq += double(v) * v;
    r.sum_sq_err += (double(v) - deq) * (double(v) - deq);
    r.sum_x_deq += double(v) * deq;
    r.sum_deq_sq += double(deq) * deq;
  }
  return r;
}


// A tensor stored as F32 bytes, shape as given.
struct OwnedTensor {
  std::vector<float> values;
  fp8a::TensorView view;
};

OwnedTensor make_f32(std::vector<float> values, std::vector<std::int64_t> shape) {
  OwnedTensor t{std::move(values), {}};
  t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(t.values.data()),
                                  fp8a::DType::kF32, std::move(shape));
  return t;
}


void check_against_ref(const fp8a::TensorView& view, const std::vector<float>& x) {
  const fp8a::CpuBackend backend;
  std::vector<fp8a::Candidate> cands;
  for (bool pow2 : {false, true})
    for (auto f : {fp8a::Fp8Format::kE4M3, fp8a::Fp8Format::kE5M2}) {
      fp8a::Candidate c;
      c.recipe.pow2_scales = pow2;
      c.format = f;
      cands.push_back(c);
    }
  fp8a::Candidate eps;
  eps.recipe.amax_epsilon = 1000.0f;
  cands.push_back(eps);
  const auto eval = backend.evaluate(cands, view);
  REQUIRE(eval.results.size() == cands.size());
  for (std::size_t i = 0; i < cands.size(); ++i) {
    const auto& c = cands[i];
    const auto want = evaluate_ref(x, c.format == fp8a::Fp8Format::kE4M3, c.recipe.pow2_scales,
                                   c.recipe.amax_epsilon);
    const auto& m = eval.results[i].metrics;
    INFO("candidate " << i);
    CHECK(eval.stats.amax == want.amax);
    CHECK(eval.stats.nan_count == want.nan);
    CHECK(eval.stats.inf_count == want.inf);
    CHECK(m.scale == want.scale);
    CHECK(m.scale_inv == want.scale_inv);
    CHECK(m.sums.underflow_count == want.underflow);
    CHECK(m.sums.overflow_count == want.overflow);
    check_close(eval.stats.sum_sq, want.sum_sq, "sum_sq");
    check_close(m.sums.sum_sq_err, want.sum_sq_err, "sum_sq_err");
    check_close(m.sums.sum_x_deq, want.sum_x_deq, "sum_x_deq");
    check_close(m.sums.sum_deq_sq, want.sum_deq_sq, "sum_deq_sq");
    check_close(m.sums.sum_sq_underflow, want.sum_sq_underflow, "sum_sq_underflow");
    check_close(m.underflow_energy_pct,
                want.sum_sq > 0 ? 100.0 * want.sum_sq_underflow / want.sum_sq : 0.0,
                "underflow_energy_pct");
  }
}

}  // namespace

TEST_CASE("CPU backend matches the scalar reference over odd shapes and fill cases") {
  std::uint32_t seed = 7;
  const std::vector<std::vector<std::int64_t>> shapes = {
      {1, 16}, {5, 160}, {217, 256}, {5, 4, 3, 160}, {3, 70001}};  // last: several chunks
  for (const auto& shape : shapes) {
    std::size_t n = 1;
    for (auto d : shape) n *= static_cast<std::size_t>(d);
    for (auto kind : fp8a::testing::kFills) {
      INFO("shape rank " << shape.size() << " numel " << n << " fill "
                         << std::string(fp8a::testing::fill_name(kind)));
      auto t = make_f32(fp8a::testing::make_fill(n, kind, seed++), shape);
      check_against_ref(t.view, t.values);
    }
  }
}

TEST_CASE("NaN and Inf are counted, skipped by amax (NaN) and left out of the sums") {
  auto x = fp8a::testing::make_fill(5000, fp8a::testing::Fill::kNormal, 11);
  x[3] = NAN;
  x[100] = INFINITY;
  x[4000] = -INFINITY;
  auto t = make_f32(x, {50, 100});
  check_against_ref(t.view, x);
  const auto eval = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{{}}, t.view);
  CHECK(eval.stats.amax == INFINITY);            // TE's amax kernel sees the inf...
  CHECK(eval.results[0].metrics.scale == 1.0f);  // ...and falls back to scale 1
  CHECK(std::isfinite(eval.results[0].metrics.mse));
  CHECK(eval.results[0].metrics.sums.overflow_count == 2);  // the two infinities
}

TEST_CASE("hand-checked metrics on four elements") {
  // amax 448 -> scale 1. 1.0625 is a tie between 1 and 1.125 -> 1 (even);
  // 2^-10 is half the smallest E4M3 subnormal -> 0 (an underflow).
  auto t = make_f32({448.0f, 1.0625f, 0.0f, std::ldexp(1.0f, -10)}, {4});
  const auto eval = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{{}}, t.view);
  const auto& m = eval.results[0].metrics;
  CHECK(m.scale == 1.0f);
  CHECK(m.sums.sum_sq_err == 0.00390720367431640625);
  CHECK(m.mse == 0.0009768009185791015625);
  CHECK(m.underflow_pct == 25.0);
  CHECK(m.overflow_pct == 0.0);
  CHECK(eval.stats.sum_sq == 200704.0 + 1.12890625 + 9.5367431640625e-07);
  CHECK(eval.stats.zero_count == 1);
  CHECK(eval.stats.amin_nonzero == std::ldexp(1.0f, -10));
  CHECK(eval.stats.dynamic_range_log2() == doctest::Approx(std::log2(448.0) + 10).epsilon(1e-15));
}

TEST_CASE("BF16 and F16 inputs are read exactly") {
  // 1.5 in bf16 = 0x3FC0, -2 = 0xC000; in f16 1.5 = 0x3E00, -2 = 0xC000.
  const std::uint16_t bf[] = {0x3FC0, 0xC000};
  const std::uint16_t hf[] = {0x3E00, 0xC000};
  const auto vb = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(bf), fp8a::DType::kBF16, {2});
  const auto vh = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(hf), fp8a::DType::kF16, {2});
  for (const auto* v : {&vb, &vh}) {
    CHECK(v->load_float(0) == 1.5f);
    CHECK(v->load_float(1) == -2.0f);
    const auto s = fp8a::compute_tensor_stats(*v);
    CHECK(s.amax == 2.0f);
    CHECK(s.sum_sq == 6.25);
  }
}

TEST_CASE("results do not depend on the thread count") {
  auto t = make_f32(fp8a::testing::make_fill(700'000, fp8a::testing::Fill::kWide, 3), {700, 1000});
  std::vector<fp8a::Candidate> cands(2);
  cands[1].format = fp8a::Fp8Format::kE5M2;
  fp8a::TensorEvaluation one, many;
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
    one = fp8a::CpuBackend().evaluate(cands, t.view);
  }
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 4);
    many = fp8a::CpuBackend().evaluate(cands, t.view);
  }
  CHECK(one.stats.sum_sq == many.stats.sum_sq);
  for (std::size_t i = 0; i < cands.size(); ++i) {
    CHECK(one.results[i].metrics.sums.sum_sq_err == many.results[i].metrics.sums.sum_sq_err);
    CHECK(one.results[i].metrics.sums.sum_x_deq == many.results[i].metrics.sums.sum_x_deq);
    CHECK(one.results[i].metrics.cos == many.results[i].metrics.cos);
  }
}

TEST_CASE("underflow_energy_pct: the share of sum x^2 in the elements that flush to zero") {
  // Current scaling, E4M3: amax 448 gives scale 1; the smallest E4M3 subnormal is 2^-9, so
  // |x| < 2^-10 flushes to zero, 2^-10 < |x| does not. NaN and inf are left out of both sums.
  const float tiny = std::ldexp(1.0f, -12), kept = std::ldexp(1.0f, -8);
  const std::vector<float> x = {448.0f, tiny, -tiny, tiny, kept, -kept, 0.0f, NAN, -INFINITY, 3.0f};
  const auto t = make_f32(x, {static_cast<std::int64_t>(x.size())});
  fp8a::Candidate c;  // current, E4M3
  const auto eval = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{c}, t.view);
  REQUIRE(eval.results[0].applicability.ok);
  const auto& m = eval.results[0].metrics;
  CHECK(m.sums.underflow_count == 3);
  const double flushed = 3.0 * std::ldexp(1.0, -24);
  const double total = 448.0 * 448.0 + flushed + 2.0 * std::ldexp(1.0, -16) + 9.0;
  CHECK(m.sums.sum_sq_underflow == flushed);
  CHECK(m.underflow_energy_pct == doctest::Approx(100.0 * flushed / total).epsilon(1e-14));

  // Nothing flushed: 0; an all-zero tensor: 0 (no energy to share).
  const auto none = make_f32({1.0f, -2.0f, 448.0f}, {3});
  CHECK(fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{c}, none.view).results[0].metrics.underflow_energy_pct == 0.0);
  const auto zeros = make_f32({0.0f, -0.0f}, {2});
  CHECK(fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{c}, zeros.view).results[0].metrics.underflow_energy_pct == 0.0);
}

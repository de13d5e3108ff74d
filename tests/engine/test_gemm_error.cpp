// GEMM-output error on operands small enough to work out by hand, and how a GemmEngine (the real
// low-precision GEMM, cuBLASLt with --device cuda) is given each GEMM and reported.
#include <doctest/doctest.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/cpu_backend.hpp"
#include "engine/gemm_error.hpp"
#include "engine/run.hpp"
#include "support/gemm_layer.hpp"

namespace {

struct Layer {
  std::vector<float> x, w, dy;
  fp8a::CaptureSet set;
};

// X [1,2], W [1,2], dY [1,1] of layer "l" at step 3.
void build(Layer* l) {
  auto add = [&](fp8a::Role role, std::vector<float>& data, std::vector<std::int64_t> shape) {
    fp8a::CapturedTensor t;
    t.key = {3, "l", role};
    t.tensor_name = std::string("l.") + fp8a::role_name(role);
    t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(data.data()), fp8a::DType::kF32,
                                    std::move(shape));
    l->set.tensors.push_back(t);
  };
  add(fp8a::Role::kActivation, l->x, {1, 2});
  add(fp8a::Role::kWeight, l->w, {1, 2});
  add(fp8a::Role::kGradient, l->dy, {1, 1});
}

}  // namespace

TEST_CASE("per-tensor current scaling, E4M3: only the 1.0625 tie loses precision") {
  // X: amax 448 -> scale 1; 1.0625 is a tie between 1 and 1.125 and rounds to 1.
  // W: amax 1 -> scale 448, exact. dY: amax 2 -> scale 224, exact.
  Layer l{{448.0f, 1.0625f}, {1.0f, 1.0f}, {2.0f}, {}};
  build(&l);
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("current")};
  config.formats = {fp8a::TrainingFormat::kE4M3};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  const auto g = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{}, &skipped);
  REQUIRE(g.size() == 3);
  CHECK(skipped.empty());
  CHECK(g[0].gemm == fp8a::Gemm::kFprop);  // Y = 449.0625, Yq = 449
  CHECK(g[0].rel_fro_err == doctest::Approx(0.0625 / 449.0625).epsilon(1e-12));
  CHECK(g[0].cos == doctest::Approx(1.0));
  CHECK(g[0].m == 1);
  CHECK(g[0].n == 1);
  CHECK(g[0].k == 2);
  CHECK(g[1].gemm == fp8a::Gemm::kDgrad);  // dX = dY W = [2, 2], exact
  CHECK(g[1].rel_fro_err == 0.0);
  CHECK(g[2].gemm == fp8a::Gemm::kWgrad);  // dW = dY^T X = [896, 2.125] vs [896, 2]
  CHECK(g[2].rel_fro_err == doctest::Approx(0.125 / std::sqrt(896.0 * 896.0 + 2.125 * 2.125)).epsilon(1e-12));
  const double cos = (896.0 * 896.0 + 2.125 * 2.0) /
                     (std::sqrt(896.0 * 896.0 + 2.125 * 2.125) * std::sqrt(896.0 * 896.0 + 4.0));
  CHECK(g[2].cos == doctest::Approx(cos).epsilon(1e-12));
  CHECK_FALSE(g[0].sampled);
  // Per-entry damage: nothing zeroed or flipped; the median of one entry, and of two (their mean).
  for (const auto& r : g) {
    CHECK(r.zeroed_pct == 0.0);
    CHECK(r.sign_flip_pct == 0.0);
  }
  CHECK(g[0].median_rel_err == doctest::Approx(0.0625 / 449.0625).epsilon(1e-15));
  CHECK(g[1].median_rel_err == 0.0);
  CHECK(g[2].median_rel_err == doctest::Approx((0.0 + 0.125 / 2.125) / 2).epsilon(1e-15));
}

namespace {

// zeroed_pct, sign_flip_pct and median_rel_err of got against ref as METRICS.md words them,
// spelled out: counts over all entries, the median of the sorted relative errors of ref != 0.
// noise_sign_flip_pct as well: each entry's noise variance c * sq (sq: the GEMM of the squared
// operands), c = sum (got - ref)^2 / sum sq, and P(flip) = Phi(-|ref| / sd) summed over ref != 0.
struct DamageRef {
  double zeroed_pct = 0, sign_flip_pct = 0, median_rel_err = 0, noise_sign_flip_pct = 0;
};

DamageRef damage_ref(const std::vector<double>& ref, const std::vector<double>& got,
                     const std::vector<double>& sq) {
  DamageRef d;
  double err2 = 0, sq_sum = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err2 += (got[i] - ref[i]) * (got[i] - ref[i]);
    sq_sum += sq[i];
  }
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double var = err2 / sq_sum * sq[i];
    if (ref[i] == 0 || !(var > 0)) continue;
    const double phi = 0.5 * std::erfc(std::fabs(ref[i]) / std::sqrt(var) / std::sqrt(2.0));
    d.noise_sign_flip_pct += 100.0 * phi / static_cast<double>(ref.size());
  }
  std::vector<double> rel;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (ref[i] == 0) continue;
    if (got[i] == 0) d.zeroed_pct += 100.0 / static_cast<double>(ref.size());
    if (got[i] != 0 && (got[i] > 0) != (ref[i] > 0)) d.sign_flip_pct += 100.0 / static_cast<double>(ref.size());
    rel.push_back(std::fabs(got[i] - ref[i]) / std::fabs(ref[i]));
  }
  std::sort(rel.begin(), rel.end());
  const std::size_t n = rel.size();
  if (n > 0) d.median_rel_err = n % 2 == 1 ? rel[n / 2] : (rel[n / 2 - 1] + rel[n / 2]) / 2;
  return d;
}

// C [m, n] = A [m, k] B^T (B [n, k]), row-major, in double.
std::vector<double> matmul_nt(const std::vector<float>& a, const std::vector<float>& b,
                              std::size_t m, std::size_t n, std::size_t k) {
  std::vector<double> c(m * n, 0.0);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t p = 0; p < k; ++p) c[i * n + j] += double(a[i * k + p]) * b[j * k + p];
  return c;
}

std::vector<float> squared(const std::vector<float>& a) {
  std::vector<float> s(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) s[i] = a[i] * a[i];
  return s;
}

std::vector<float> transpose(const std::vector<float>& a, std::size_t rows, std::size_t cols) {
  std::vector<float> t(a.size());
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  return t;
}

}  // namespace

TEST_CASE("per-entry damage: entries flushed to zero, a sign flipped by cancellation, the median") {
  // E4M3 current scaling; X and W hold 448 (scale 1), dY holds 1 (scale 448, exact).
  // X row 2 is 2^-12, below half the smallest E4M3 subnormal 2^-9: it flushes to 0.
  // W: 2.125 is a tie between 2 and 2.25 and rounds to 2; 0.7 rounds to 0.6875. So
  // Y[0,0] = 1 * 2.125 - 3 * 0.7 = +0.025, quantised 1 * 2 - 3 * 0.6875 = -0.0625: a flip.
  const float tiny = std::ldexp(1.0f, -12);
  Layer l{{1.0f, -3.0f, 448.0f, 0.0f, tiny, 0.0f}, {2.125f, 0.7f, 448.0f, 0.0f},
          {1.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f}, {}};
  const std::vector<float> xq = {1.0f, -3.0f, 448.0f, 0.0f, 0.0f, 0.0f}, wq = {2.0f, 0.6875f, 448.0f, 0.0f};
  auto add = [&](fp8a::Role role, std::vector<float>& data, std::vector<std::int64_t> shape) {
    fp8a::CapturedTensor t;
    t.key = {3, "l", role};
    t.tensor_name = std::string("l.") + fp8a::role_name(role);
    t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(data.data()), fp8a::DType::kF32,
                                    std::move(shape));
    l.set.tensors.push_back(t);
  };
  add(fp8a::Role::kActivation, l.x, {3, 2});
  add(fp8a::Role::kWeight, l.w, {2, 2});
  add(fp8a::Role::kGradient, l.dy, {3, 2});
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("current")};
  config.formats = {fp8a::TrainingFormat::kE4M3};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  const auto g = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{}, &skipped);
  REQUIRE(g.size() == 3);
  // Every quantised product and sum here is exact in float32, so the float64 reference of the
  // hand-quantised operands is the engine's float32 output.
  const auto wt = transpose(l.w, 2, 2), wqt = transpose(wq, 2, 2);
  const auto dyt = transpose(l.dy, 3, 2), xt = transpose(l.x, 3, 2), xqt = transpose(xq, 3, 2);
  // (The squared operands: 448^2 and 2^-24 are exact in float32.)
  const auto sq = [](const std::vector<float>& a, const std::vector<float>& b, std::size_t m,
                     std::size_t n, std::size_t k) { return matmul_nt(squared(a), squared(b), m, n, k); };
  const std::vector<DamageRef> want = {
      damage_ref(matmul_nt(l.x, l.w, 3, 2, 2), matmul_nt(xq, wq, 3, 2, 2), sq(l.x, l.w, 3, 2, 2)),
      damage_ref(matmul_nt(l.dy, wt, 3, 2, 2), matmul_nt(l.dy, wqt, 3, 2, 2), sq(l.dy, wt, 3, 2, 2)),
      damage_ref(matmul_nt(dyt, xt, 2, 2, 3), matmul_nt(dyt, xqt, 2, 2, 3), sq(dyt, xt, 2, 2, 3)),
  };  // Y = X W^T, dX = dY W, dW = dY^T X
  for (int i = 0; i < 3; ++i) {
    INFO(fp8a::gemm_name(g[i].gemm));
    CHECK(g[i].zeroed_pct == doctest::Approx(want[i].zeroed_pct).epsilon(1e-15));
    CHECK(g[i].sign_flip_pct == doctest::Approx(want[i].sign_flip_pct).epsilon(1e-15));
    CHECK(g[i].median_rel_err == doctest::Approx(want[i].median_rel_err).epsilon(1e-15));
    // Computed for wgrad only (what the policy judges); NaN for the others.
    if (g[i].gemm == fp8a::Gemm::kWgrad)
      CHECK(g[i].noise_sign_flip_pct == doctest::Approx(want[i].noise_sign_flip_pct).epsilon(1e-12));
    else
      CHECK(std::isnan(g[i].noise_sign_flip_pct));
  }
  // (Here dW has no error, so no noise: 0. tests/policies/test_verdict.cpp checks a real value
  // against the peer's.)
  CHECK(g[2].noise_sign_flip_pct == 0.0);
  // The hand-worked numbers: fprop zeroes row 2 (2 of 6 entries) and flips Y[0,0] (1 of 6).
  CHECK(g[0].zeroed_pct == doctest::Approx(100.0 / 3));
  CHECK(g[0].sign_flip_pct == doctest::Approx(100.0 / 6));
  CHECK(g[2].zeroed_pct == 0.0);  // dW rows add X's rows: 1 + 2^-12 -> 1 is not a zero
}

TEST_CASE("bf16 of BF16-exact values has no error; mismatched shapes are skipped by name") {
  Layer l{{1.5f, -2.0f}, {0.25f, 4.0f}, {3.0f}, {}};
  build(&l);
  fp8a::RunConfig config;
  config.formats = {fp8a::TrainingFormat::kHybrid};
  config.recipes = {fp8a::parse_recipe("bf16")};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  const auto g = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{}, &skipped);
  REQUIRE(g.size() == 3);
  for (const auto& r : g) {
    CHECK(r.rel_fro_err == 0.0);
    CHECK(r.cos == doctest::Approx(1.0).epsilon(1e-15));
  }
  Layer bad{{1.0f, 2.0f}, {1.0f, 2.0f, 3.0f}, {1.0f}, {}};
  build(&bad);
  bad.set.tensors[1].view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(bad.w.data()),
                                                   fp8a::DType::kF32, {1, 3});
  const auto rows2 = fp8a::evaluate_captures(bad.set, config, fp8a::CpuBackend());
  CHECK(fp8a::evaluate_gemm_errors(bad.set, rows2, fp8a::GemmOptions{}, &skipped).empty());
  REQUIRE(skipped.size() == 1);
  CHECK(skipped[0].line == "step 3 layer 'l': operand shapes do not fit X [M,K], W [N,K], dY [M,N] "
                      "(X 1x2, W 1x3, dY 1x1)");
}

TEST_CASE("bf16 of BF16 operands takes the reference: no error anywhere, as the computed GEMM gives") {
  // BF16 captures (a NaN among them, set to 0 in every GEMM): the cast leaves them as they are, so
  // the row is the reference against itself. The same values as F32 go through the bf16 cast and
  // a computed GEMM: the same statistics.
  const std::vector<float> xf = {1.5f, -2.0f, 0.375f, 3.0f, -0.0625f, 1.0f};        // [3, 2]
  const std::vector<float> wf = {0.25f, 4.0f, -1.0f, 0.5f};                         // [2, 2]
  const std::vector<float> dyf = {3.0f, -1.5f, 0.75f, 2.0f, std::nanf(""), -4.0f};  // [3, 2]
  const auto bf16_of = [](const std::vector<float>& v) {
    std::vector<std::uint16_t> h;
    for (float f : v) h.push_back(static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) >> 16));
    return h;
  };
  std::vector<std::uint16_t> xh = bf16_of(xf), wh = bf16_of(wf), dyh = bf16_of(dyf);
  std::vector<float> x32 = xf, w32 = wf, dy32 = dyf;
  const auto capture = [](fp8a::DType dtype, void* x, void* w, void* dy) {
    fp8a::CaptureSet set;
    const std::pair<fp8a::Role, std::pair<void*, std::vector<std::int64_t>>> parts[] = {
        {fp8a::Role::kActivation, {x, {3, 2}}}, {fp8a::Role::kWeight, {w, {2, 2}}}, {fp8a::Role::kGradient, {dy, {3, 2}}}};
    for (const auto& [role, p] : parts) {
      fp8a::CapturedTensor t;
      t.key = {1, "l", role};
      t.tensor_name = std::string("l.") + fp8a::role_name(role);
      t.view = fp8a::make_tensor_view(static_cast<const std::byte*>(p.first), dtype, p.second);
      set.tensors.push_back(t);
    }
    return set;
  };
  fp8a::RunConfig config;
  config.formats = {fp8a::TrainingFormat::kHybrid};
  config.recipes = {fp8a::parse_recipe("bf16")};
  const fp8a::CaptureSet bf = capture(fp8a::DType::kBF16, xh.data(), wh.data(), dyh.data());
  const fp8a::CaptureSet f32 = capture(fp8a::DType::kF32, x32.data(), w32.data(), dy32.data());
  std::vector<fp8a::PairingSkip> skipped;
  const auto taken = fp8a::evaluate_gemm_errors(bf, fp8a::evaluate_captures(bf, config, fp8a::CpuBackend()),
                                                fp8a::GemmOptions{}, &skipped);
  const auto computed = fp8a::evaluate_gemm_errors(f32, fp8a::evaluate_captures(f32, config, fp8a::CpuBackend()),
                                                   fp8a::GemmOptions{}, &skipped);
  REQUIRE(taken.size() == 3);
  REQUIRE(computed.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(fp8a::gemm_name(taken[i].gemm));
    CHECK(taken[i].rel_fro_err == 0.0);
    CHECK(taken[i].cos == doctest::Approx(1.0).epsilon(1e-15));
    CHECK(taken[i].zeroed_pct == 0.0);
    CHECK(taken[i].sign_flip_pct == 0.0);
    CHECK(taken[i].median_rel_err == 0.0);
    CHECK(taken[i].rel_fro_err == computed[i].rel_fro_err);
    CHECK(taken[i].cos == computed[i].cos);
    CHECK(taken[i].median_rel_err == computed[i].median_rel_err);
    if (taken[i].gemm == fp8a::Gemm::kWgrad) CHECK(taken[i].noise_sign_flip_pct == 0.0);
  }
}

TEST_CASE("--gemm-rows samples token rows evenly and says so") {
  std::vector<float> x(8 * 4), w(2 * 4), dy(8 * 2);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i % 3);
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i % 5) - 2.0f;
  Layer l{x, w, dy, {}};
  auto add = [&](fp8a::Role role, std::vector<float>& data, std::vector<std::int64_t> shape) {
    fp8a::CapturedTensor t;
    t.key = {0, "l", role};
    t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(data.data()), fp8a::DType::kF32,
                                    std::move(shape));
    l.set.tensors.push_back(t);
  };
  add(fp8a::Role::kActivation, l.x, {8, 4});
  add(fp8a::Role::kWeight, l.w, {2, 4});
  add(fp8a::Role::kGradient, l.dy, {8, 2});
  fp8a::RunConfig config;
  config.formats = {fp8a::TrainingFormat::kHybrid};
  config.recipes = {fp8a::parse_recipe("current")};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  const auto g = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{fp8a::GemmSampling::of_rows(3)}, &skipped);
  REQUIRE(g.size() == 3);
  for (const auto& r : {g[0], g[1]}) {  // fprop, dgrad: 3 of the 8 tokens
    CHECK(r.sampled);
    CHECK(r.rows_used == 3);
  }
  CHECK_FALSE(g[2].sampled);  // wgrad: dW's rows, of which there are 2 (W [2, 4])
  CHECK(g[2].rows_used == 2);
  CHECK(g[0].m == 8);  // dims are the full GEMM's
  CHECK(g[2].k == 8);
}

namespace {

// One layer "l" at step 0 from row-major float operands X [m, k], W [n, k], dY [m, n].
void add_layer(Layer* l, std::int64_t m, std::int64_t n, std::int64_t k) {
  fp8a::testing::add_float_gemm_layer(l->x, l->w, l->dy, m, n, k, &l->set);
}

// The bits of every number of a row, and its strings.
std::string row_bits(const fp8a::GemmRow& r) {
  std::string s = r.layer + "|" + r.recipe.spec() + "|" + r.note + "|" + std::to_string(r.rows_used);
  for (double v : {r.rel_fro_err, r.rel_fro_err_se, r.cos, r.zeroed_pct, r.sign_flip_pct, r.median_rel_err,
                   r.noise_sign_flip_pct}) {
    std::uint64_t b = 0;
    std::memcpy(&b, &v, sizeof b);
    s += "|" + std::to_string(b);
  }
  return s;
}

}  // namespace

TEST_CASE("GEMM rows are bit-identical with 1, 2 and 4 threads (products in several tiles)") {
  // N = 800 and K = 300: fprop's W rows, dgrad's W^T rows and wgrad's X^T rows all span several
  // tiles (kGemmTileRows = 128), the last one partial; --gemm-rows 700 samples as well.
  const std::int64_t m = 900, n = 800, k = 300;
  static_assert(300 > 2 * fp8a::kGemmTileRows && 800 % fp8a::kGemmTileRows != 0 && 300 % fp8a::kGemmTileRows != 0);
  Layer l;
  std::uint64_t state = 12345;
  const auto next = [&] {  // a fixed LCG: the same operands on every run
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<double>(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  };
  l.x.resize(static_cast<std::size_t>(m * k));
  l.w.resize(static_cast<std::size_t>(n * k));
  l.dy.resize(static_cast<std::size_t>(m * n));
  for (float& v : l.x) v = 4.0f * next();
  for (float& v : l.w) v = 0.02f * next();
  for (float& v : l.dy) v = 1e-4f * next() * next() * next();
  add_layer(&l, m, n, k);
  fp8a::RunConfig config;
  config.recipes = fp8a::parse_recipe_list("current,block,block:fp32,mxfp8");
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  for (const fp8a::GemmSampling& sampling : {fp8a::GemmSampling::all(), fp8a::GemmSampling::of_rows(700)}) {
    std::vector<std::string> first;
    for (const std::size_t threads : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
      const tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
      std::vector<fp8a::PairingSkip> skipped;
      fp8a::GemmOptions options;
      options.sampling = sampling;
      const auto g = fp8a::evaluate_gemm_errors(l.set, rows, options, &skipped);
      REQUIRE(g.size() >= 9);  // not every recipe applies to every operand of these shapes
      std::vector<std::string> bits;
      for (const auto& r : g) bits.push_back(row_bits(r));
      INFO("threads " << threads << ", --gemm-rows " << sampling.text());
      if (first.empty()) first = bits;
      else CHECK(bits == first);
    }
  }
}

namespace {

// rel_fro_err = sqrt(R), R = sum w e / sum w r over the drawn units (squared error e, squared
// reference r and weight w of each: a certain unit 1, a drawn one of the rest rest / drawn), and
// its standard error by METRICS.md's formula: z = e - R r over the drawn units of the rest,
// var T = rest^2 (1 - drawn / rest) s_z^2 / drawn, se(R) = sqrt(var T) / sum w r, and
// rel_fro_err_se = se(R) / (2 sqrt R). certain: whether each unit is.
struct StratifiedSample {
  double rel_fro_err = 0, rel_fro_err_se = 0;
  StratifiedSample(const std::vector<double>& e, const std::vector<double>& r, const std::vector<bool>& certain,
                   double rest) {
    double drawn = 0;
    for (bool c : certain) drawn += c ? 0 : 1;
    double te = 0, tr = 0;
    for (std::size_t i = 0; i < e.size(); ++i) {
      const double w = certain[i] ? 1.0 : rest / drawn;
      te += w * e[i], tr += w * r[i];
    }
    const double ratio = te / tr;
    double mean = 0;
    for (std::size_t i = 0; i < e.size(); ++i)
      if (!certain[i]) mean += (e[i] - ratio * r[i]) / drawn;
    double s2 = 0;
    for (std::size_t i = 0; i < e.size(); ++i)
      if (!certain[i]) s2 += (e[i] - ratio * r[i] - mean) * (e[i] - ratio * r[i] - mean) / (drawn - 1);
    const double var_t = rest * rest * (1.0 - drawn / rest) * s2 / drawn;
    rel_fro_err = std::sqrt(ratio);
    rel_fro_err_se = std::sqrt(var_t) / tr / (2.0 * std::sqrt(ratio));
  }
};

}  // namespace

TEST_CASE("sampled fprop rows carry the stratified estimator's standard error") {
  // E4M3 current scaling, X amax 448 (scale 1): 1.0625 rounds to 1 (a tie), 1.1875 to 1.25 (a
  // tie, to even); everything else is exact, and W = [1, 1], dY = 1 are exact. fprop Y = x0 + x1.
  // X's rows (448, 1), (2, 1), (2, 1.0625), (2, 1), (4, 1.1875), (2, 1), (8, 1.0625), (2, 1) have
  // energies 200705, 5, 5.13, 5, 17.41, 5, 65.13, 5: --gemm-rows 4 takes rows 0 and 6 with
  // certainty (200705 * 4 and 65.13 * 3 exceed the rest; then half the budget is certain) and 2
  // of the other 6 sorted by energy (1, 3, 5, 7, 2, 4), from the middles of 2 intervals
  // (positions 1 and 4): rows 3 and 2, each standing for 3.
  Layer l{{448, 1, 2, 1, 2, 1.0625f, 2, 1, 4, 1.1875f, 2, 1, 8, 1.0625f, 2, 1}, {1, 1},
          {1, 1, 1, 1, 1, 1, 1, 1}, {}};
  add_layer(&l, 8, 1, 2);
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("current")};
  config.formats = {fp8a::TrainingFormat::kE4M3};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  fp8a::GemmOptions options;
  options.sampling = fp8a::GemmSampling::of_rows(4);
  const auto g = fp8a::evaluate_gemm_errors(l.set, rows, options, &skipped);
  REQUIRE(g.size() == 3);
  // Rows 0, 2, 3, 6: squared error e and squared reference r of each output.
  const StratifiedSample want({0, 0.0625 * 0.0625, 0, 0.0625 * 0.0625},
                              {449.0 * 449.0, 3.0625 * 3.0625, 3.0 * 3.0, 9.0625 * 9.0625}, {true, false, false, true},
                              6);
  CHECK(g[0].sampled);
  CHECK(g[0].rows_used == 4);
  CHECK(g[0].rel_fro_err == doctest::Approx(want.rel_fro_err).epsilon(1e-12));
  CHECK(g[0].rel_fro_err_se == doctest::Approx(want.rel_fro_err_se).epsilon(1e-12));
  CHECK(g[1].rel_fro_err == 0.0);  // dgrad dX = dY W: exact
  CHECK(g[1].rel_fro_err_se == 0.0);
  CHECK(std::isnan(g[2].rel_fro_err_se));  // wgrad: dW [1, 2] has one row, all of it used
  // Not sampled: no standard error.
  const auto all = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{}, &skipped);
  for (const auto& row : all) CHECK(std::isnan(row.rel_fro_err_se));
}

namespace {

// A layer of one token, K = 1, N = 8, one operand of which holds 448, 1, 1.0625, 1, 1.1875, 1,
// 1.0625, 1 (the others 1): under E4M3 current scaling (amax 448, scale 1) 1.0625 rounds to 1 and
// 1.1875 to 1.25 (ties, to even), the rest exactly. Sampling 4 of the 8 (energies the values
// squared) takes entry 0 with certainty and 3 of the other 7 sorted by energy (1, 3, 5, 7, 2, 6,
// 4) from the middles of 3 intervals (positions 1, 3, 5): entries 3, 7 and 6, each standing for
// 7/3, whose errors and references are kTies'.
const std::vector<float> kTieValues = {448, 1, 1.0625f, 1, 1.1875f, 1, 1.0625f, 1};
const StratifiedSample kTies({0, 0, 0.0625 * 0.0625, 0}, {448.0 * 448.0, 1, 1.0625 * 1.0625, 1},
                             {true, false, false, false}, 7);
// Their relative errors 0 (weight 1), 0, 0.0625 / 1.0625, 0 (each 7/3): the weighted median is 0.
constexpr double kTiesMedian = 0.0;

// The GEMM rows of such a layer (X, W and dY given) under `current`, E4M3.
std::vector<fp8a::GemmRow> tie_layer_rows(Layer l, const fp8a::GemmOptions& options) {
  add_layer(&l, 1, 8, 1);
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("current")};
  config.formats = {fp8a::TrainingFormat::kE4M3};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  return fp8a::evaluate_gemm_errors(l.set, rows, options, &skipped);
}

}  // namespace

TEST_CASE("sampled wgrad rows are rows of dW, over every token, with the standard error") {
  // dW [8, 1] = dY^T X = dY's column: --gemm-rows 4 of dW's 8 rows.
  fp8a::GemmOptions options;
  options.sampling = fp8a::GemmSampling::of_rows(4);
  const auto g = tie_layer_rows(Layer{{1}, std::vector<float>(8, 1.0f), kTieValues, {}}, options);
  REQUIRE(g.size() == 3);
  const StratifiedSample& want = kTies;
  const fp8a::GemmRow& w = g[2];
  CHECK(w.gemm == fp8a::Gemm::kWgrad);
  CHECK(w.sampled);
  CHECK(w.rows_used == 4);
  CHECK(w.rel_fro_err == doctest::Approx(want.rel_fro_err).epsilon(1e-12));
  CHECK(w.rel_fro_err_se == doctest::Approx(want.rel_fro_err_se).epsilon(1e-12));
  CHECK(w.median_rel_err == kTiesMedian);
  CHECK_FALSE(g[0].sampled);  // fprop and dgrad: one token, all of it
}

TEST_CASE("GemmSampling: --gemm-rows auto, 0 and N, as the option spells them") {
  CHECK(fp8a::GemmSampling{} == fp8a::GemmSampling::automatic());
  CHECK(fp8a::GemmSampling::automatic().text() == "auto");
  CHECK(fp8a::GemmSampling::all().text() == "0");
  CHECK(fp8a::GemmSampling::of_rows(256).text() == "256");
  CHECK(fp8a::GemmSampling::of_rows(256, 64).text() == "256");  // columns: no option sets them
  CHECK_FALSE(fp8a::GemmSampling::of_rows(256) == fp8a::GemmSampling::of_rows(256, 64));
  CHECK(fp8a::GemmOptions{}.sampling == fp8a::GemmSampling::all());  // the engine's default: exact
  CHECK_THROWS(fp8a::GemmSampling::of_rows(0));  // every row is all()
}

TEST_CASE("--gemm-rows auto keeps every entry up to 2^32 multiply-adds, then samples rows and columns") {
  const fp8a::GemmSampling automatic = fp8a::GemmSampling::automatic();
  const auto rows_only = [](const fp8a::GemmSampling& sampling, std::int64_t m, std::int64_t n, std::int64_t k) {
    return fp8a::gemm_sample_for(sampling, m, n, k, false);
  };
  const auto both = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    const fp8a::GemmSampleSize s = fp8a::gemm_sample_for(automatic, m, n, k, true);
    return std::pair{s.rows, s.cols};
  };
  // Layers split over ranks: rows only, every column.
  CHECK(rows_only(automatic, 128, 384, 128).rows == 128);    // the sample captures
  CHECK(rows_only(automatic, 4096, 1024, 1024).rows == 4096);  // 2^32 exactly
  CHECK(rows_only(automatic, 4097, 1024, 1024).rows == 4097);  // 4096 of 4097 would save nothing: all
  CHECK(rows_only(automatic, 8193, 1024, 1024).rows == 4096);  // just under half: a sample
  // Issue 56 item 7: just above 2^32 a square-ish sample took 2045 of 2048 rows; now all of them.
  CHECK(both(2048, 1449, 1449) == std::pair<std::int64_t, std::int64_t>{2048, 1449});
  CHECK(rows_only(automatic, 8192, 4096, 4096).rows == 256);
  CHECK(rows_only(automatic, 8192, 16384, 16384).rows == 256);  // the floor
  CHECK(rows_only(automatic, 100, 16384, 16384).rows == 100);
  CHECK(rows_only(automatic, 8192, 4096, 4096).cols == 4096);
  CHECK(rows_only(fp8a::GemmSampling::all(), 8192, 4096, 4096).rows == 8192);
  CHECK(rows_only(fp8a::GemmSampling::of_rows(300), 8192, 4096, 4096).rows == 300);
  CHECK(rows_only(fp8a::GemmSampling::of_rows(300), 200, 4096, 4096).rows == 200);
  // --gemm-rows N: every column.
  CHECK(fp8a::gemm_sample_for(fp8a::GemmSampling::of_rows(300), 8192, 4096, 4096, true).cols == 4096);
  // Single-rank layers: about sqrt(2^32 / k) of each, at least 256, a short side giving the
  // other its share.
  CHECK(both(128, 384, 128) == std::pair<std::int64_t, std::int64_t>{128, 384});
  CHECK(both(4096, 1024, 1024) == std::pair<std::int64_t, std::int64_t>{4096, 1024});
  CHECK(both(4096, 22016, 4096) == std::pair<std::int64_t, std::int64_t>{1024, 1024});  // Llama-2-7B fc1
  CHECK(both(4096, 4096, 11008) == std::pair<std::int64_t, std::int64_t>{624, 624});    // fc2: 2^32 / 11008
  CHECK(both(200, 16384, 16384) == std::pair<std::int64_t, std::int64_t>{200, 1310});   // 2^18 / 200
  CHECK(both(65536, 200, 65536) == std::pair<std::int64_t, std::int64_t>{327, 200});    // 2^16 / 200
  CHECK(both(1 << 20, 1 << 20, 1 << 20) == std::pair<std::int64_t, std::int64_t>{256, 256});  // the floor
}

TEST_CASE("sampled output columns: the entries of those columns, the rows' and columns' standard errors") {
  // fprop Y [1, 8] = X W^T = W's column (X = 1): 4 of Y's 8 columns are W's rows 0, 3, 6, 7 (as
  // kTies'). The one row is every row (no error from it); the columns are a sample of 8.
  fp8a::GemmOptions options;
  options.sampling = fp8a::GemmSampling::of_rows(8, 4);  // every row (no GEMM here has more) and 4 columns
  const Layer l{{1}, kTieValues, std::vector<float>(8, 1.0f), {}};
  const auto g = tie_layer_rows(l, options);
  REQUIRE(g.size() == 3);
  const StratifiedSample& want = kTies;
  const fp8a::GemmRow& f = g[0];
  CHECK(f.gemm == fp8a::Gemm::kFprop);
  CHECK(f.sampled);
  CHECK(f.rows_used == 1);
  CHECK(f.cols_used == 4);
  CHECK(f.rel_fro_err == doctest::Approx(want.rel_fro_err).epsilon(1e-12));
  CHECK(f.rel_fro_err_se == doctest::Approx(want.rel_fro_err_se).epsilon(1e-12));
  CHECK(f.zeroed_pct == 0.0);
  CHECK(f.median_rel_err == kTiesMedian);
  // dgrad dX [1, 1] = dY W has one column: all of it, every entry.
  CHECK(g[1].cols_used == 1);
  CHECK_FALSE(g[1].sampled);
  // Not sampled: every column, no standard error.
  const auto all = tie_layer_rows(l, fp8a::GemmOptions{});
  CHECK(all[0].cols_used == 8);
  CHECK_FALSE(all[0].sampled);
  CHECK(std::isnan(all[0].rel_fro_err_se));
}

namespace {

// A GemmEngine on the host, for the wiring: it records every problem and returns the product of
// the operands fake-quantised with the specs it was given (in float64, then float) against the
// product of the unquantised ones. With the specs and layouts right, its error equals the emulated
// one to float rounding of the outputs.
class RecordingEngine final : public fp8a::GemmEngine {
 public:
  std::string name() const override { return "fake"; }
  fp8a::GemmRun run(const fp8a::GemmProblem& p) const override {
    problems.push_back(p);
    // The spans point into the caller's matrices, gone after evaluate_gemm_errors: keep copies.
    a_values.emplace_back(p.a.values.begin(), p.a.values.end());
    b_values.emplace_back(p.b.values.begin(), p.b.values.end());
    problems.back().a.values = {};
    problems.back().b.values = {};
    fp8a::GemmRun r;
    if (refuse) {
      r.note = "not on this chip";
      return r;
    }
    auto deq = [&](const fp8a::GemmOperand& o) {
      std::vector<float> out(o.values.size());
      fp8a::FakeQuantCounts unused;
      fp8a::fake_quantize_rows(o.spec, o.values.data(), o.rows, p.k, out.data(), &unused);
      return out;
    };
    const auto a = deq(p.a), b = deq(p.b);
    r.out.resize(static_cast<std::size_t>(p.m * p.n));
    r.reference.resize(r.out.size());
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) {
        double q = 0, e = 0;
        for (std::int64_t l = 0; l < p.k; ++l) {
          const auto ia = static_cast<std::size_t>(i * p.k + l), ib = static_cast<std::size_t>(j * p.k + l);
          q += static_cast<double>(a[ia]) * b[ib];
          e += static_cast<double>(p.a.values[ia]) * p.b.values[ib];
        }
        r.out[static_cast<std::size_t>(i * p.n + j)] = static_cast<float>(q);
        r.reference[static_cast<std::size_t>(i * p.n + j)] = static_cast<float>(e);
      }
    r.ran = true;
    r.note = "ran";
    r.accumulation = "split";
    r.m_padded = p.m + 1;
    r.n_padded = p.n + 2;
    r.k_padded = p.k + 3;
    return r;
  }
  bool refuse = false;
  // The test runs one layer: run() is called from one thread.
  mutable std::vector<fp8a::GemmProblem> problems;
  mutable std::vector<std::vector<float>> a_values, b_values;
};

struct RandomLayer {
  std::vector<float> x, w, dy;
  fp8a::CaptureSet set;
};

// X [160, 224], W [96, 224], dY [160, 96]: partial 1x128 and 128x128 blocks in every direction,
// every dim a multiple of 32 (MXFP8 applies).
void build_random(RandomLayer* l) {
  std::uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<std::int32_t>(state >> 8) - (1 << 23)) / static_cast<float>(1 << 23);
  };
  l->x.resize(160 * 224);
  l->w.resize(96 * 224);
  l->dy.resize(160 * 96);
  for (auto& v : l->x) v = 3.0f * next();
  for (auto& v : l->w) v = 0.05f * next();
  for (auto& v : l->dy) v = 1e-4f * next();
  auto add = [&](fp8a::Role role, std::vector<float>& data, std::vector<std::int64_t> shape) {
    fp8a::CapturedTensor t;
    t.key = {7, "l", role};
    t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(data.data()), fp8a::DType::kF32,
                                    std::move(shape));
    l->set.tensors.push_back(t);
  };
  add(fp8a::Role::kActivation, l->x, {160, 224});
  add(fp8a::Role::kWeight, l->w, {96, 224});
  add(fp8a::Role::kGradient, l->dy, {160, 96});
}

}  // namespace

TEST_CASE("a GemmEngine gets each GEMM K-major with the emulated casts, and its rows follow the emulated ones") {
  RandomLayer l;
  build_random(&l);
  fp8a::RunConfig config;
  // block:fp32 too: its emulated GEMM multiplies FP8 values per 128-long block and scales each
  // block (K = 224, 96 and 160 here: every GEMM ends in a partial block), where the engine below
  // multiplies the dequantised operands in float64.
  config.recipes = {fp8a::parse_recipe("current"), fp8a::parse_recipe("block"), fp8a::parse_recipe("mxfp8"),
                    fp8a::parse_recipe("block:fp32")};
  config.formats = {fp8a::TrainingFormat::kHybrid};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  const auto plain = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{}, &skipped);
  RecordingEngine engine;
  const auto g =
      fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{fp8a::GemmSampling::all(), &engine}, &skipped);
  REQUIRE(plain.size() == 12);
  REQUIRE(g.size() == 24);
  REQUIRE(engine.problems.size() == 12);
  // (m, n, k) of each GEMM in the engine's layout: fprop X W^T, dgrad dY (W^T)^T, wgrad dY^T (X^T)^T.
  const std::int64_t dims[3][3] = {{160, 96, 224}, {160, 224, 96}, {96, 224, 160}};
  // The problem of a GEMM and recipe (the engine is called GEMM by GEMM, not in the rows' order).
  const auto find = [&](const char* gemm, const char* recipe) {
    const std::string what = std::string("step 7 layer 'l' ") + gemm + " " + recipe;
    for (std::size_t j = 0; j < engine.problems.size(); ++j)
      if (engine.problems[j].what == what) return j;
    FAIL("no problem " << what);
    return std::size_t{0};
  };
  for (std::size_t i = 0; i < 12; ++i) {
    const auto& e = g[2 * i];
    const auto& r = g[2 * i + 1];
    const std::size_t pi = find(fp8a::gemm_name(e.gemm), e.recipe.spec().c_str());
    const auto& p = engine.problems[pi];
    INFO("GEMM " << i << " " << fp8a::gemm_name(e.gemm) << " " << e.recipe.spec());
    // The emulated rows are those of a run without an engine, number for number.
    CHECK(e.engine == "emulated");
    CHECK(e.gemm == plain[i].gemm);
    CHECK(e.rel_fro_err == plain[i].rel_fro_err);
    CHECK(e.cos == plain[i].cos);
    CHECK(e.note.empty());
    CHECK(e.m_padded == 0);
    CHECK(r.engine == "fake");
    CHECK(r.gemm == e.gemm);
    CHECK(r.recipe == e.recipe);
    CHECK(r.m == e.m);
    CHECK(r.accumulation == "split");
    CHECK(r.note == "ran");
    const int gi = static_cast<int>(e.gemm);
    CHECK(p.gemm == e.gemm);
    CHECK(p.m == dims[gi][0]);
    CHECK(p.n == dims[gi][1]);
    CHECK(p.k == dims[gi][2]);
    CHECK(r.m_padded == p.m + 1);
    CHECK(r.n_padded == p.n + 2);
    CHECK(r.k_padded == p.k + 3);
    CHECK(p.a.rows == p.m);
    CHECK(p.b.rows == p.n);
    CHECK(engine.a_values[pi].size() == static_cast<std::size_t>(p.m * p.k));
    CHECK(engine.b_values[pi].size() == static_cast<std::size_t>(p.n * p.k));
    // Same operands, same casts: the engine's error is the emulated one up to float rounding of
    // the outputs (float32 accumulation there, float64 here; relative differences ~1e-7).
    CHECK(r.rel_fro_err == doctest::Approx(e.rel_fro_err).epsilon(1e-4));
    CHECK(r.cos == doctest::Approx(e.cos).epsilon(1e-9));
  }
  // Blocks stated in the K-major layout: columnwise copies transposed, along K everywhere.
  const auto& block_fprop = engine.problems[find("fprop", "block")];
  CHECK(block_fprop.a.spec.block == fp8a::BlockShape{1, 128});
  CHECK(block_fprop.b.spec.block == fp8a::BlockShape{128, 128});
  const auto& block_dgrad = engine.problems[find("dgrad", "block")];
  CHECK(block_dgrad.a.spec.block == fp8a::BlockShape{1, 128});    // dgrad dY rowwise
  CHECK(block_dgrad.b.spec.block == fp8a::BlockShape{128, 128});  // W^T
  const auto& block_wgrad = engine.problems[find("wgrad", "block")];
  CHECK(block_wgrad.a.spec.block == fp8a::BlockShape{1, 128});    // dY^T from 128x1
  CHECK(block_wgrad.b.spec.block == fp8a::BlockShape{1, 128});    // X^T from 128x1
  CHECK(engine.problems[find("dgrad", "mxfp8")].b.spec.block == fp8a::BlockShape{1, 32});  // MXFP8 W^T from 32x1
  const auto& mx_wgrad = engine.problems[find("wgrad", "mxfp8")];
  CHECK(mx_wgrad.a.spec.format == fp8a::Fp8Format::kE5M2);  // hybrid: the gradient
  CHECK(mx_wgrad.b.spec.format == fp8a::Fp8Format::kE4M3);
  // wgrad's operands are dY^T and X^T: element (i, l) of a is dY[l][i].
  const std::size_t wgrad = find("wgrad", "current"), dgrad = find("dgrad", "current");
  CHECK(engine.a_values[wgrad][1 * 160 + 5] == l.dy[5 * 96 + 1]);
  CHECK(engine.b_values[wgrad][3 * 160 + 7] == l.x[7 * 224 + 3]);
  CHECK(engine.b_values[dgrad][2 * 96 + 9] == l.w[9 * 224 + 2]);  // dgrad W^T
  CHECK(engine.a_values[find("fprop", "current")] == l.x);       // fprop X as captured
}

TEST_CASE("an engine that cannot run a GEMM leaves a note on the emulated row; sampled GEMMs run whole blocks") {
  RandomLayer l;
  build_random(&l);
  fp8a::RunConfig config;
  config.formats = {fp8a::TrainingFormat::kHybrid};
  config.recipes = {fp8a::parse_recipe("current"), fp8a::parse_recipe("block")};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  RecordingEngine engine;
  engine.refuse = true;
  auto g = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{fp8a::GemmSampling::all(), &engine}, &skipped);
  REQUIRE(g.size() == 6);
  for (const auto& r : g) {
    CHECK(r.engine == "emulated");
    CHECK(r.note == "fake not run: not on this chip");
  }
  // 64 sampled rows: fprop and dgrad keep the 1x128 blocks of X and dY whole; wgrad samples
  // rows of dW and reduces over every token, so its 128-row blocks stay whole too.
  engine.refuse = false;
  engine.problems.clear();
  g = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{fp8a::GemmSampling::of_rows(64), &engine}, &skipped);
  REQUIRE(g.size() == 12);
  CHECK(engine.problems.size() == 6);
  for (const auto& p : engine.problems) {
    INFO(p.what);
    CHECK(p.m == 64);  // fprop, dgrad: 64 of the 160 tokens; wgrad: 64 of dW's 96 rows
    CHECK(p.k == (p.gemm == fp8a::Gemm::kWgrad ? 160 : p.gemm == fp8a::Gemm::kFprop ? 224 : 96));
  }
}

// NVFP4 as a recipe kind in the engine: the CPU backend's metrics and the GEMM-output error of
// each copy, against the whole-tensor quantiser of core/nvfp4.hpp (itself checked against a
// reference written from TE's rules in tests/core/test_nvfp4.cpp) and GEMMs done here in double.
// The engine casts a tensor chunk by chunk and a GEMM operand tile by tile, rows sampled: these
// tests hold that to the whole-tensor cast (the transform's amax over the whole tensor, each
// element's stochastic draw by its place in the tensor).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/nvfp4.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_sampling.hpp"
#include "engine/quant_spec.hpp"
#include "engine/run.hpp"

namespace {

using fp8a::Orientation;
using fp8a::Role;

// [rows, cols] lognormal magnitudes with random signs and a few outliers, as BF16 values.
std::vector<float> tensor(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> t(static_cast<std::size_t>(rows * cols));
  for (float& v : t) v = fp8a::bf16_to_float(fp8a::float_to_bf16(normal(rng) * std::exp(1.5f * normal(rng))));
  for (int k = 0; k < 7; ++k) t[rng() % t.size()] *= 4096.0f;
  return t;
}

// The copy of the whole tensor as core/nvfp4.hpp forms it for this role and orientation.
std::vector<float> copy_ref(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, Role role,
                            Orientation o, float* amax) {
  std::vector<float> out(x.size());
  const fp8a::Nvfp4Copy copy = fp8a::nvfp4_copy_for(fp8a::parse_recipe("nvfp4"), role, o);
  *amax = fp8a::nvfp4_fake_quantize(x.data(), rows, cols, copy, out.data());
  return out;
}

fp8a::TensorView view_of(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
  return fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(x.data()), fp8a::DType::kF32, {rows, cols});
}

// Adds `data` [rows, cols] as layer "l"'s `role` at step 1.
void add_tensor(fp8a::CaptureSet* set, Role role, const std::vector<float>& data, std::int64_t rows, std::int64_t cols) {
  fp8a::CapturedTensor t;
  t.key = {1, "l", role};
  t.tensor_name = std::string("l.") + fp8a::role_name(role);
  t.view = view_of(data, rows, cols);
  set->tensors.push_back(t);
}

// Layer "l" with X [m, k], W [n, k], dY [m, n] evaluated under nvfp4 (E4M3 format), and its
// GEMM errors under `options`.
std::vector<fp8a::GemmRow> nvfp4_gemm_rows(const std::vector<float>& x, const std::vector<float>& w,
                                           const std::vector<float>& dy, std::int64_t m, std::int64_t n,
                                           std::int64_t k, const fp8a::GemmOptions& options) {
  fp8a::CaptureSet set;
  add_tensor(&set, Role::kActivation, x, m, k);
  add_tensor(&set, Role::kWeight, w, n, k);
  add_tensor(&set, Role::kGradient, dy, m, n);
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("nvfp4")};
  config.formats = {fp8a::TrainingFormat::kE4M3};
  const auto rows = fp8a::evaluate_captures(set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  return fp8a::evaluate_gemm_errors(set, rows, options, &skipped);
}

// Element (r, c) of t [.., width] as a double; at_t: of its transpose.
auto at(const std::vector<float>& t, std::int64_t width) {
  return [&t, width](std::int64_t r, std::int64_t c) {
    return static_cast<double>(t[static_cast<std::size_t>(r * width + c)]);
  };
}
auto at_t(const std::vector<float>& t, std::int64_t width) {
  return [&t, width](std::int64_t r, std::int64_t c) {
    return static_cast<double>(t[static_cast<std::size_t>(c * width + r)]);
  };
}

// The relative Frobenius error of the cast product C = sum over t of aq(i, t) bq(j, t) against the
// exact one (a, b), over output rows `which`, each row's sums weighing `weight`, and every column.
template <class A, class B>
double rel_err_of(const std::vector<std::int64_t>& which, const std::vector<double>& weight, std::int64_t cols,
                  std::int64_t red, const A& a, const B& b, const A& aq, const B& bq) {
  double num = 0, den = 0;
  for (std::size_t r = 0; r < which.size(); ++r)
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::int64_t i = which[r];
      double exact = 0, cast = 0;
      for (std::int64_t t = 0; t < red; ++t) {
        exact += a(i, t) * b(j, t);
        cast += aq(i, t) * bq(j, t);
      }
      num += weight[r] * (cast - exact) * (cast - exact);
      den += weight[r] * exact * exact;
    }
  return std::sqrt(num / den);
}

template <class A, class B>
double rel_err(std::int64_t rows, std::int64_t step, std::int64_t cols, std::int64_t red, const A& a, const B& b,
               const A& aq, const B& bq) {
  std::vector<std::int64_t> which;  // rows i = 0, step, 2 step, ... below `rows`
  for (std::int64_t i = 0; i < rows; i += step) which.push_back(i);
  return rel_err_of(which, std::vector<double>(which.size(), 1.0), cols, red, a, b, aq, bq);
}

}  // namespace

TEST_CASE("NVFP4 in the CPU backend: every copy is the whole-tensor cast, chunk by chunk") {
  // 2096 x 64: three chunks of the backend (1024 rows each), so the transform's amax and the
  // stochastic draws must span them.
  const std::int64_t rows = 2096, cols = 64;
  REQUIRE(fp8a::rows_per_chunk(cols) < rows);
  const std::vector<float> x = tensor(rows, cols, 5);
  const fp8a::TensorView v = view_of(x, rows, cols);
  for (const Role role : {Role::kActivation, Role::kWeight, Role::kGradient})
    for (const Orientation o : {Orientation::kRowwise, Orientation::kColumnwise}) {
      INFO(fp8a::role_name(role) << " " << fp8a::orientation_name(o));
      fp8a::Candidate c{fp8a::parse_recipe("nvfp4"), fp8a::Fp8Format::kE4M3, role, o};
      const fp8a::TensorEvaluation e = fp8a::CpuBackend().evaluate({&c, 1}, v);
      REQUIRE(e.results[0].applicability.ok);
      const fp8a::QuantMetrics& m = e.results[0].metrics;
      float amax = 0;
      const std::vector<float> deq = copy_ref(x, rows, cols, role, o, &amax);
      double err = 0, x_deq = 0;
      std::int64_t underflow = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        err += (static_cast<double>(x[i]) - deq[i]) * (static_cast<double>(x[i]) - deq[i]);
        x_deq += static_cast<double>(x[i]) * deq[i];
        underflow += x[i] != 0 && deq[i] == 0;
      }
      CHECK(m.scale == 2688.0f / amax);  // the level-2 scale, from the copy's amax
      CHECK(m.scale_inv == static_cast<float>(static_cast<double>(amax) / 2688.0));
      CHECK(m.sums.underflow_count == underflow);
      CHECK(m.sums.sum_sq_err == doctest::Approx(err).epsilon(1e-12));
      CHECK(m.sums.sum_x_deq == doctest::Approx(x_deq).epsilon(1e-12));
      // The transformed copies' amax is not the tensor's.
      if (o == Orientation::kColumnwise && role != Role::kWeight) CHECK(amax != e.stats.amax);
      else CHECK(amax == e.stats.amax);
    }
}

TEST_CASE("NVFP4 copies follow TE's QParams table, and its three switches turn each part off") {
  // docs/NVFP4-TE.md §1.2 (NVFP4BlockScaling.__post_init__, quantizer.cpp): per role and copy,
  // {16x16 tiles, Hadamard transform, stochastic rounding} with TE's defaults.
  struct Want {
    Role role;
    Orientation o;
    bool two_d, rht, sr;
  };
  const Want defaults[] = {
      {Role::kActivation, Orientation::kRowwise, false, false, false},
      {Role::kActivation, Orientation::kColumnwise, false, true, false},
      {Role::kWeight, Orientation::kRowwise, true, false, false},
      {Role::kWeight, Orientation::kColumnwise, true, false, false},
      {Role::kGradient, Orientation::kRowwise, false, false, true},
      {Role::kGradient, Orientation::kColumnwise, false, true, true},
  };
  for (const char* spec : {"nvfp4", "nvfp4:no_rht", "nvfp4:no_sr", "nvfp4:no_2d", "nvfp4:no_rht:no_sr:no_2d"}) {
    const std::string s = spec;
    const fp8a::Recipe r = fp8a::parse_recipe(spec);
    CHECK(r.spec() == s);
    for (const Want& w : defaults) {
      INFO(spec << " " << fp8a::role_name(w.role) << " " << fp8a::orientation_name(w.o));
      const fp8a::Nvfp4Copy c = fp8a::nvfp4_copy_for(r, w.role, w.o);
      CHECK(c.two_d == (w.two_d && s.find("no_2d") == std::string::npos));
      CHECK(c.rht == (w.rht && s.find("no_rht") == std::string::npos));
      CHECK(c.stochastic == (w.sr && s.find("no_sr") == std::string::npos));
      CHECK(c.columnwise == (w.o == Orientation::kColumnwise));
      CHECK(c.rule == fp8a::Nvfp4BlockRule::kScaleFirst);
      // The block shape the engine casts by: 1x16 along the copy, 16x16 tiles for 2-D weights.
      const fp8a::BlockShape want_block = c.two_d ? fp8a::BlockShape{16, 16}
                                          : w.o == Orientation::kRowwise ? fp8a::BlockShape{1, 16}
                                                                          : fp8a::BlockShape{16, 1};
      CHECK(fp8a::block_shape(r, w.role, w.o) == want_block);
    }
  }
  CHECK(fp8a::orientations_for(fp8a::parse_recipe("nvfp4:no_2d"), Role::kWeight).size() == 2);
  CHECK_THROWS(fp8a::parse_recipe("nvfp4:rht"));
}

TEST_CASE("NVFP4 GEMM errors: fprop, dgrad and wgrad of the whole-tensor casts, wgrad through the transform") {
  // X [64, 48], W [32, 48], dY [64, 32]: wgrad reduces over the 64 tokens, 4 blocks of the
  // transform; fprop and dgrad over 48 and 32.
  const std::int64_t m = 64, n = 32, k = 48;
  std::vector<float> x = tensor(m, k, 1), w = tensor(n, k, 2), dy = tensor(m, n, 3);
  for (float& e : w) e *= 0.02f;
  const auto g = nvfp4_gemm_rows(x, w, dy, m, n, k, fp8a::GemmOptions{});
  REQUIRE(g.size() == 3);
  float amax = 0;
  const auto xr = copy_ref(x, m, k, Role::kActivation, Orientation::kRowwise, &amax);
  const auto xc = copy_ref(x, m, k, Role::kActivation, Orientation::kColumnwise, &amax);
  const auto wq = copy_ref(w, n, k, Role::kWeight, Orientation::kRowwise, &amax);
  const auto dyr = copy_ref(dy, m, n, Role::kGradient, Orientation::kRowwise, &amax);
  const auto dyc = copy_ref(dy, m, n, Role::kGradient, Orientation::kColumnwise, &amax);
  // fprop Y = X W^T; dgrad dX = dY W (W^T's rows: W's columns); wgrad dW = dY^T X.
  const double fprop = rel_err(m, 1, n, k, at(x, k), at(w, k), at(xr, k), at(wq, k));
  const double dgrad = rel_err(m, 1, k, n, at(dy, n), at_t(w, k), at(dyr, n), at_t(wq, k));
  const double wgrad = rel_err(n, 1, k, m, at_t(dy, n), at_t(x, k), at_t(dyc, n), at_t(xc, k));
  CHECK(g[0].gemm == fp8a::Gemm::kFprop);
  CHECK(g[0].rel_fro_err == doctest::Approx(fprop).epsilon(1e-5));
  CHECK(g[1].gemm == fp8a::Gemm::kDgrad);
  CHECK(g[1].rel_fro_err == doctest::Approx(dgrad).epsilon(1e-5));
  CHECK(g[2].gemm == fp8a::Gemm::kWgrad);
  CHECK(g[2].rel_fro_err == doctest::Approx(wgrad).epsilon(1e-5));
  // 4-bit: errors of several per cent, unlike FP8's.
  for (const auto& r : g) CHECK(r.rel_fro_err > 0.01);
}

TEST_CASE("NVFP4 GEMM errors on sampled rows: each sampled element draws as in the whole tensor") {
  // --gemm-rows 16 of 64 tokens (dgrad: dY's rows) and of 32 dW rows (wgrad: dY's columns),
  // drawn by their energies (draw_units): the stochastically rounded copies of dY are cast from
  // the drawn rows alone, and must give each element the draw of its place in the tensor.
  const std::int64_t m = 64, n = 32, k = 48;
  std::vector<float> x = tensor(m, k, 11), w = tensor(n, k, 12), dy = tensor(m, n, 13);
  fp8a::GemmOptions options;
  options.sampling = fp8a::GemmSampling::of_rows(16);
  const auto g = nvfp4_gemm_rows(x, w, dy, m, n, k, options);
  REQUIRE(g.size() == 3);
  float amax = 0;
  const auto xc = copy_ref(x, m, k, Role::kActivation, Orientation::kColumnwise, &amax);
  const auto wq = copy_ref(w, n, k, Role::kWeight, Orientation::kRowwise, &amax);
  const auto dyr = copy_ref(dy, m, n, Role::kGradient, Orientation::kRowwise, &amax);
  const auto dyc = copy_ref(dy, m, n, Role::kGradient, Orientation::kColumnwise, &amax);
  const fp8a::TensorView dy_view = view_of(dy, m, n);
  // dgrad: dX[i, j] = sum_t dY[i, t] W[t, j] over the drawn tokens.
  const fp8a::UnitDraw tokens = fp8a::draw_units(fp8a::unit_energies(dy_view, fp8a::GemmLayout::kKMajor), 16, 1);
  const double dgrad = rel_err_of(tokens.idx, tokens.weight, k, n, at(dy, n), at_t(w, k), at(dyr, n), at_t(wq, k));
  CHECK(g[1].sampled);
  CHECK(g[1].rows_used == 16);
  CHECK(g[1].rel_fro_err == doctest::Approx(dgrad).epsilon(1e-5));
  // wgrad: dW[i, j] = sum_t dY[t, i] X[t, j] over the drawn dW rows (dY's columns).
  const fp8a::UnitDraw dw_rows = fp8a::draw_units(fp8a::unit_energies(dy_view, fp8a::GemmLayout::kKOuter), 16, 1);
  const double wgrad = rel_err_of(dw_rows.idx, dw_rows.weight, k, m, at_t(dy, n), at_t(x, k), at_t(dyc, n), at_t(xc, k));
  CHECK(g[2].sampled);
  CHECK(g[2].rows_used == 16);
  CHECK(g[2].rel_fro_err == doctest::Approx(wgrad).epsilon(1e-5));
}

TEST_CASE("NVFP4: one evaluation serves every format; shapes TE cannot quantise are refused") {
  std::vector<float> x = tensor(32, 24, 7);  // 24 % 16 != 0
  fp8a::CaptureSet set;
  add_tensor(&set, Role::kActivation, x, 32, 24);
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("nvfp4")};
  config.formats = {fp8a::TrainingFormat::kE4M3, fp8a::TrainingFormat::kHybrid};
  const auto rows = fp8a::evaluate_captures(set, config, fp8a::CpuBackend());
  REQUIRE(rows.size() == 4);  // 2 formats x 2 orientations
  for (const auto& r : rows) {
    CHECK(r.fp8 == fp8a::Fp8Format::kE4M3);
    CHECK_FALSE(r.applicability.ok);
    CHECK(r.applicability.reason.find("divisible by 16") != std::string::npos);
    CHECK(r.applicability.reason.find("NVFP4Quantizer") != std::string::npos);
  }
}

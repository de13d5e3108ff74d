// The cuBLASLt GEMM engine on a GPU (ctest label "cuda"; exits 77, skipped, without a device), and
// on the emulated cuBLASLt of tests/cuda_emu as sm_90, sm_100, sm_89 and sm_80 devices (test_cuda_gemm_emu,
// label cuda-emu; it accumulates in FP32, so there the accumulation tolerances below are not
// exercised):
//   (a) operands that are exact in FP8 after power-of-two scaling, with products and sums exact in
//       FP32 (and in the narrower fast-accumulation accumulator): cuBLASLt's fprop, dgrad and wgrad
//       equal the float64 product bit for bit, per-tensor, 1x128/128x128 block scaled (Hopper) and
//       MXFP8 (sm_100+), E4M3 and hybrid, at padded and unpadded shapes — so the TN layout, the
//       scale pointers (scale_inv), the block scale layouts and the padding are right;
//   (b) random operands through evaluate_gemm_errors: every GEMM the plan supports ran, and its
//       rel_fro_err is the emulated one up to the accumulation difference;
//   (c) M = 100, N = 72, K = 200: the padded dims reported, the result that of the unpadded data.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cuda/cublaslt_gemm.hpp"
#include "cuda/device_info.hpp"
#include "tests/cuda/gpu_test_main.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/gemm_error.hpp"
#include "engine/run.hpp"
#include "tests/cuda/backend_compare.hpp"

namespace {

namespace ct = fp8a::cuda_test;
using fp8a::Gemm;

// (b) Both rows quantise identically (tests/cuda/test_cuda_host.cpp checks the packed operands
// decode to the emulated ones bit for bit), so their rel_fro_err differ only by accumulation
// error relative to ||Y||: |rel_cublaslt - rel_emulated| <= ||acc_cublaslt - acc_emulated|| / ||Y||
// (triangle inequality; the inputs are BF16, so the BF16 reference has no input rounding).
// Split accumulation: the tensor cores sum each promotion interval with their narrower
// accumulator (~14 bits, 2^-14 = 6e-5 relative to the interval's partial sum; DeepSeek-V3 promotes
// every 128 elements for that reason), then FP32 takes over; the emulated float32 sums add ~1e-7.
// BF16 GEMMs accumulate in FP32 throughout. 1e-4 bounds both.
constexpr double kSplitAccumTol = 1e-4;
// Fast accumulation keeps about 14 bits in the tensor-core accumulator (DeepSeek-V3 report,
// arXiv 2412.19437: up to ~2% relative error at K = 4096); errors grow about linearly with K, so
// at K <= 512 the output moves by at most ~0.25% of ||Y||: 5e-3.
constexpr double kFastAccumTol = 5e-3;

// ---- (a) exact operands --------------------------------------------------------------------

// Values v * 2^e with v in {-1, 0, 1} and e in {-1, 0} constant over every 128 x 128 tile (so
// over every 1x128, 1x32 and 128x128 block too), different between tiles: each block gets its own
// power-of-two scale, which a wrong scale layout would apply to the wrong elements. Power-of-two
// scales make every value exact in E4M3 and E5M2; products are multiples of 2^-2 below 1 and the
// sums over K <= 256 stay below 2^8: 11 significant bits, exact in any FP8 accumulator.
std::vector<float> exact_matrix(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  std::uint32_t s = seed;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      s = s * 1664525u + 1013904223u;
      const int sign = static_cast<int>((s >> 16) % 3) - 1;
      const float scale = ((r / 128 + c / 128) % 2) ? 0.5f : 1.0f;
      v[static_cast<std::size_t>(r * cols + c)] = static_cast<float>(sign) * scale;
    }
  return v;
}

std::vector<float> transpose(const std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  std::vector<float> t(v.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      t[static_cast<std::size_t>(c * rows + r)] = v[static_cast<std::size_t>(r * cols + c)];
  return t;
}

float amax_of(const std::vector<float>& v) {
  float a = 0.0f;
  for (float x : v) a = std::max(a, std::fabs(x));
  return a;
}

// The spec a recipe gives a K-major operand (blocks along K; W's 128x128 tiles transpose to
// themselves), with TE's power-of-two per-tensor scale for current:pow2.
fp8a::QuantSpec spec_for(const fp8a::Recipe& recipe, fp8a::Fp8Format f, bool weight, float amax) {
  fp8a::QuantSpec s;
  s.kind = recipe.kind;
  s.format = f;
  s.pow2_scales = recipe.pow2_scales;
  s.mx_rule = recipe.mx_rule;
  if (recipe.kind == fp8a::RecipeKind::kPerTensorCurrent) s.scale = fp8a::per_tensor_scale(recipe, f, amax);
  if (recipe.kind == fp8a::RecipeKind::kBlock)
    s.block = weight ? fp8a::BlockShape{128, 128} : fp8a::BlockShape{1, 128};
  if (recipe.kind == fp8a::RecipeKind::kMx) s.block = {1, 32};
  return s;
}

struct Exact {
  std::int64_t m, n, k;
};

}  // namespace

TEST_CASE("(a) exact FP8 operands: cuBLASLt's fprop, dgrad and wgrad equal the float64 product") {
  const fp8a::cuda::CublasltGemm engine;
  MESSAGE("cuBLASLt " << engine.caps().version << " on sm_" << engine.caps().sm);
  std::uint32_t seed = 1;
  for (auto [M, N, K] :
       {Exact{100, 72, 200}, Exact{128, 128, 256}, Exact{16, 16, 16}, Exact{256, 144, 160}}) {
    const auto x = exact_matrix(M, K, seed++), w = exact_matrix(N, K, seed++);
    const auto dy = exact_matrix(M, N, seed++);
    const auto wt = transpose(w, N, K), dyt = transpose(dy, M, N), xt = transpose(x, M, K);
    for (const char* spec : {"current:pow2", "block", "mxfp8", "bf16"}) {
      const fp8a::Recipe recipe = fp8a::parse_recipe(spec);
      for (auto format : {fp8a::TrainingFormat::kE4M3, fp8a::TrainingFormat::kHybrid}) {
        const auto f_xw = fp8a::Fp8Format::kE4M3;
        const auto f_dy = fp8a::fp8_format_for(format, fp8a::Role::kGradient);
        struct Use {
          Gemm gemm;
          const std::vector<float>* a;
          const std::vector<float>* b;
          std::int64_t m, n, k;
          fp8a::QuantSpec sa, sb;
        };
        const auto sx = spec_for(recipe, f_xw, false, amax_of(x));
        const auto sw = spec_for(recipe, f_xw, true, amax_of(w));
        const auto sdy = spec_for(recipe, f_dy, false, amax_of(dy));
        const Use uses[3] = {
            {Gemm::kFprop, &x, &w, M, N, K, sx, sw},
            {Gemm::kDgrad, &dy, &wt, M, K, N, sdy, sw},
            {Gemm::kWgrad, &dyt, &xt, N, K, M, sdy, sx},
        };
        for (const Use& u : uses) {
          INFO(std::string(spec) << " " << std::string(fp8a::training_format_name(format)) << " "
                                 << std::string(fp8a::gemm_name(u.gemm)) << " m " << u.m << " n " << u.n
                                 << " k " << u.k);
          fp8a::GemmProblem p;
          p.gemm = u.gemm;
          p.m = u.m;
          p.n = u.n;
          p.k = u.k;
          p.a = {*u.a, u.m, u.sa};
          p.b = {*u.b, u.n, u.sb};
          p.what = "test";
          const auto plan = fp8a::cuda::plan_lt_gemm(p.gemm, p.m, p.n, p.k, u.sa, u.sb, engine.caps());
          const fp8a::GemmRun r = engine.run(p);
          // It runs exactly when the plan says this GPU and cuBLASLt can (no heuristic surprises).
          CHECK(r.ran == plan.supported);
          if (!r.ran) {
            MESSAGE("not run: " << r.note);
            CHECK(r.note == plan.reason);
            continue;
          }
          CHECK(r.m_padded == plan.m_padded);
          CHECK(r.k_padded == plan.k_padded);
          REQUIRE(r.out.size() == static_cast<std::size_t>(u.m * u.n));
          std::size_t wrong = 0, wrong_ref = 0;
          for (std::int64_t i = 0; i < u.m; ++i)
            for (std::int64_t j = 0; j < u.n; ++j) {
              double exact = 0.0;
              for (std::int64_t l = 0; l < u.k; ++l)
                exact += static_cast<double>((*u.a)[static_cast<std::size_t>(i * u.k + l)]) *
                         (*u.b)[static_cast<std::size_t>(j * u.k + l)];
              const auto at = static_cast<std::size_t>(i * u.n + j);
              wrong += static_cast<double>(r.out[at]) != exact;
              wrong_ref += static_cast<double>(r.reference[at]) != exact;
            }
          CHECK(wrong == 0);
          CHECK(wrong_ref == 0);
        }
      }
    }
  }
}

namespace {

struct Captured {
  std::vector<ct::StoredTensor> stored;
  fp8a::CaptureSet set;
};

// Layers of random BF16 operands with realistic magnitudes (activations ~1, weights ~0.02,
// gradients ~1e-5), captured at step 3.
void add_layer(Captured* c, const std::string& layer, std::int64_t M, std::int64_t N, std::int64_t K,
               std::uint32_t seed) {
  auto add = [&](fp8a::Role role, std::int64_t rows, std::int64_t cols, float scale) {
    auto v = ct::make_fill(static_cast<std::size_t>(rows * cols), ct::Fill::kNormal, seed++);
    for (auto& x : v) x *= scale;
    c->stored.push_back(ct::store(v, fp8a::DType::kBF16, {rows, cols}));
    fp8a::CapturedTensor t;
    t.key = {3, layer, role};
    t.tensor_name = layer + "." + fp8a::role_name(role);
    t.view = c->stored.back().view;
    c->set.tensors.push_back(t);
  };
  add(fp8a::Role::kActivation, M, K, 1.0f);
  add(fp8a::Role::kWeight, N, K, 0.02f);
  add(fp8a::Role::kGradient, M, N, 1e-5f);
}

// Runs every GEMM of the captures on the emulated path and cuBLASLt, and checks each pair.
std::vector<fp8a::GemmRow> check_engine_against_emulated(const Captured& c,
                                                         const fp8a::cuda::CublasltGemm& engine,
                                                         fp8a::TrainingFormat format) {
  fp8a::RunConfig config;
  config.recipes = fp8a::parse_recipe_list("current,current:pow2,block,block:fp32,mxfp8,bf16");
  config.formats = {format};
  const auto rows = fp8a::evaluate_captures(c.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  const auto g =
      fp8a::evaluate_gemm_errors(c.set, rows, fp8a::GemmOptions{fp8a::GemmSampling::all(), &engine}, &skipped);
  CHECK(skipped.empty());
  std::size_t ran = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const auto& e = g[i];
    if (e.engine != "emulated") continue;
    INFO(e.layer << " " << std::string(fp8a::gemm_name(e.gemm)) << " " << e.recipe.spec() << " "
                 << std::string(fp8a::training_format_name(format)) << " note: " << e.note);
    const bool has_engine_row = i + 1 < g.size() && g[i + 1].engine == "cublaslt";
    // Which GEMMs this GPU runs: bf16 on sm_80+, per-tensor FP8 on sm_89+, 1x128/128x128 on sm_90
    // with cuBLASLt 12.9+, MXFP8 on sm_100+ (the host tests pin the plan; here it must hold on a GPU).
    const auto& caps = engine.caps();
    const auto kind = e.recipe.kind;
    const bool expected = kind == fp8a::RecipeKind::kMx      ? caps.sm >= 100
                          : kind == fp8a::RecipeKind::kBlock ? caps.sm / 10 == 9 && caps.version >= 120900
                          : kind == fp8a::RecipeKind::kBf16  ? caps.sm >= 80
                                                             : caps.sm >= 89;
    CHECK(has_engine_row == expected);
    if (!has_engine_row) {
      CHECK(e.note.rfind("cublaslt not run: ", 0) == 0);
      continue;
    }
    ++ran;
    const auto& r = g[i + 1];
    CHECK(r.gemm == e.gemm);
    CHECK(r.recipe == e.recipe);
    CHECK(r.m == e.m);
    CHECK(r.n == e.n);
    CHECK(r.k == e.k);
    const double tol = r.accumulation == "fast" ? kFastAccumTol : kSplitAccumTol;
    // TE: fast accumulation for per-tensor fprop only; the BF16 GEMM accumulates in FP32.
    const bool fast = e.gemm == Gemm::kFprop && fp8a::is_per_tensor(kind);
    CHECK(r.accumulation == (kind == fp8a::RecipeKind::kBf16 ? "fp32" : fast ? "fast" : "split"));
    CHECK(std::fabs(r.rel_fro_err - e.rel_fro_err) <= tol);
    CHECK(std::fabs(r.cos - e.cos) <= tol);
    MESSAGE(e.layer << " " << std::string(fp8a::gemm_name(e.gemm)) << " " << e.recipe.spec() << " emulated "
                    << e.rel_fro_err << " cublaslt " << r.rel_fro_err << " (" << r.accumulation << ")");
  }
  CHECK(ran > 0);
  return g;
}

}  // namespace

TEST_CASE("(b) random operands: cuBLASLt's rel_fro_err is the emulated one up to accumulation") {
  const fp8a::cuda::CublasltGemm engine;
  Captured c;
  // Two layers, so evaluate_gemm_errors calls the engine from two threads at once.
  add_layer(&c, "layers.0.fc1", 256, 384, 512, 10);
  add_layer(&c, "layers.0.fc2", 256, 512, 384, 20);
  for (auto format : {fp8a::TrainingFormat::kE4M3, fp8a::TrainingFormat::kHybrid})
    check_engine_against_emulated(c, engine, format);
}

TEST_CASE("(c) M=100, N=72, K=200: padded dims reported, the result that of the unpadded data") {
  const fp8a::cuda::CublasltGemm engine;
  Captured c;
  add_layer(&c, "odd", 100, 72, 200, 30);
  const auto g = check_engine_against_emulated(c, engine, fp8a::TrainingFormat::kHybrid);
  // (m, n, k) padded to 16, K to 128 for block scaling: fprop 100x72x200, dgrad 100x200x72,
  // wgrad 72x200x100.
  const std::map<std::pair<Gemm, bool>, std::array<std::int64_t, 3>> want = {
      {{Gemm::kFprop, false}, {112, 80, 208}}, {{Gemm::kDgrad, false}, {112, 208, 80}},
      {{Gemm::kWgrad, false}, {80, 208, 112}}, {{Gemm::kFprop, true}, {112, 80, 256}},
      {{Gemm::kDgrad, true}, {112, 208, 128}}, {{Gemm::kWgrad, true}, {80, 208, 128}},
  };
  for (const auto& r : g) {
    if (r.engine != "cublaslt") continue;
    INFO(std::string(fp8a::gemm_name(r.gemm)) << " " << r.recipe.spec());
    const bool blocked = !fp8a::is_per_tensor(r.recipe.kind) && r.recipe.kind != fp8a::RecipeKind::kBf16;
    const auto& d = want.at({r.gemm, blocked});
    CHECK(r.m_padded == d[0]);
    CHECK(r.n_padded == d[1]);
    CHECK(r.k_padded == d[2]);
  }
}

int main(int argc, char** argv) { return fp8a::cuda_test::run_gpu_tests("test_cuda_gemm", argc, argv); }

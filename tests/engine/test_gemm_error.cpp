// GEMM-output error on operands small enough to work out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/cpu_backend.hpp"
#include "engine/gemm_error.hpp"
#include "engine/run.hpp"

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
  config.format = fp8a::TrainingFormat::kE4M3;
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<std::string> skipped;
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
}

TEST_CASE("bf16 of BF16-exact values has no error; mismatched shapes are skipped by name") {
  Layer l{{1.5f, -2.0f}, {0.25f, 4.0f}, {3.0f}, {}};
  build(&l);
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("bf16")};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<std::string> skipped;
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
  CHECK(skipped[0] == "step 3 layer 'l': operand shapes do not fit X [M,K], W [N,K], dY [M,N] "
                      "(X 1x2, W 1x3, dY 1x1)");
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
  config.recipes = {fp8a::parse_recipe("current")};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<std::string> skipped;
  const auto g = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{3}, &skipped);
  REQUIRE(g.size() == 3);
  for (const auto& r : g) {
    CHECK(r.sampled);
    CHECK(r.rows_used == 3);
  }
  CHECK(g[0].m == 8);  // dims are the full GEMM's
  CHECK(g[2].k == 8);
}

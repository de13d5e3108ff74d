// pipeline/run_pipeline (issue 57: tests per stage): run's whole pipeline on captures made here,
// in memory: the evaluation, the GEMM layers and the recommendation one call makes; --price-as's
// pricing reaching both the cost model and the judged FLOPs (the FP8 share the answer states);
// the request without a recommendation (whatif, compare) making none.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/gpu_target.hpp"
#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "datasets/safetensors_writer.hpp"
#include "engine/cpu_backend.hpp"
#include "pipeline/run_pipeline.hpp"
#include "policies/target_model.hpp"
#include "support/layer_capture.hpp"

namespace {

using namespace fp8a;

// A 2-layer capture in memory: a Megatron fc1 (X [128, 256], W [512, 256]) and the LM head
// (W [320, 256]), Gaussian, one step.
struct Capture {
  MemoryFileSystem fs;
  CaptureSet set;
  Capture() {
    std::mt19937 rng(61);
    std::vector<SafetensorsTensorOut> t;
    testing::add_layer(&t, "decoder.layers.0.mlp.linear_fc1", 128, 512, 256, rng);
    testing::add_layer(&t, "output_layer", 128, 320, 256, rng);
    const std::string bytes = safetensors_bytes(t, {{"step", "10"}});
    std::vector<std::byte> b(bytes.size());
    std::memcpy(b.data(), bytes.data(), bytes.size());
    fs.add_file("cap/step_10.safetensors", std::move(b));
    set = load_captures({"cap/step_10.safetensors"}, fs);
  }
};

RunRequest request_for(const char* recipes) {
  RunRequest r;
  r.config.recipes = parse_recipe_list(recipes);
  r.config.formats = {TrainingFormat::kHybrid};
  return r;
}

}  // namespace

TEST_CASE("run_pipeline: evaluation, GEMM layers and the recommendation in one call") {
  const Capture c;
  RunRequest request = request_for("current,bf16");
  request.recommend = RecommendationRequest{default_policy(), find_gpu_target("h100"), std::nullopt};
  const CpuBackend backend;
  const RunResult r = run_pipeline(request, c.set, backend, nullptr);
  // 2 layers x 3 tensors x 2 recipes, one orientation each (per-tensor scales are one copy).
  CHECK(r.rows.size() == 12);
  REQUIRE(r.gemm_layers.size() == 2);
  CHECK(r.skipped_pairings.empty());
  CHECK(r.gemms.size() == 2 * 3 * 2);  // layers x GEMMs x recipes
  REQUIRE(r.recommendation);
  const Recommendation& rec = *r.recommendation;
  REQUIRE(rec.chosen);
  CHECK(rec.candidates[*rec.chosen].candidate.recipe.spec() == "current");
  CHECK(rec.cost_basis == "none (numerics only)");
}

TEST_CASE("run_pipeline: --price-as prices the cost model and the judged FLOPs at the target") {
  const Capture c;
  const TargetModel& llama = *find_target_model("llama-7b");
  std::vector<std::string> layers = {"decoder.layers.0.mlp.linear_fc1", "output_layer"};
  auto pricing = std::make_shared<TargetPricing>(price_at_target(llama, layers, 4194304, "test", nullptr));
  RunRequest request = request_for("current");
  request.recommend = RecommendationRequest{default_policy(), find_gpu_target("h100"),
                                            CostOptions{4194304, "test", pricing}};
  const CpuBackend backend;
  const RunResult r = run_pipeline(request, c.set, backend, nullptr);
  REQUIRE(r.recommendation);
  const Recommendation& rec = *r.recommendation;
  REQUIRE(rec.chosen);
  const CandidatePlan& chosen = rec.candidates[*rec.chosen];
  // By hand: the fc1 stands for Llama-2-7B's 32 fc1 modules (22016 x 4096), the head for its one
  // (32000 x 4096), both at 4194304 tokens; the head stays BF16 (Megatron's output_layer), so the
  // FP8 share is 32 x 22016 of 32 x 22016 + 32000, whatever the captured 512 x 256 and 320 x 256.
  const double fc1 = 32.0 * 22016, head = 32000.0;
  CHECK(chosen.fp8_flop_share == doctest::Approx(fc1 / (fc1 + head)).epsilon(1e-12));
  CHECK(chosen.total_flops == doctest::Approx(3 * 2.0 * 4194304 * 4096 * (fc1 + head)).epsilon(1e-12));
  REQUIRE(chosen.speedup);
  CHECK(*chosen.speedup > 1.5);
  CHECK(rec.cost_basis.starts_with("roofline at llama-7b's shapes, W [n x k] x modules: fc1 22016x4096 x32 (from 1 "
                                   "captured), head 32000x4096 x1 (from 1 captured); not captured, so not priced: "
                                   "qkv, proj, fc2; 4194304 tokens a step (test)"));
}

TEST_CASE("run_pipeline: without a recommendation request (whatif, compare) none is made") {
  const Capture c;
  const RunRequest request = request_for("current");
  const CpuBackend backend;
  const RunResult r = run_pipeline(request, c.set, backend, nullptr);
  CHECK(r.rows.size() == 6);
  CHECK(r.gemm_layers.size() == 2);
  CHECK(!r.recommendation);
  CHECK(r.forecasts.empty());
}

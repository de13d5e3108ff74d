// The run orchestration on the CUDA backend (part of test_cuda_backend, label cuda; and of
// test_cuda_backend_emu, label cuda-emu): evaluate_captures over the repository's captures with
// their amax traces (delayed scaling replayed step by step from the evaluations' own amaxes,
// tensors evaluated concurrently) gives the CPU backend's rows, with chunks small enough that the tensors stream.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "datasets/training_log.hpp"
#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/run.hpp"
#include "tests/cuda/backend_compare.hpp"

namespace {

namespace ct = fp8a::cuda_test;

struct Dataset {
  const char* dir;
  const char* trace;
};

// The captures: under $FP8A_TEST_DATA when set (the GPU bundle carries them there, away from the
// source tree the test was built in), else the source tree's datasets/.
std::string data_root() {
  const char* env = std::getenv("FP8A_TEST_DATA");
  return env != nullptr && *env != '\0' ? std::string(env) + "/" : std::string(FP8A_SOURCE_DIR) + "/datasets/";
}

// Every default recipe and the 128x128-everywhere block recipe, on the CPU and the CUDA backend.
void compare_runs(const fp8a::CaptureSet& set, const fp8a::TrainingLog* trace, fp8a::TrainingFormat format,
                  fp8a::AmaxReduction reduction, std::size_t min_rows) {
  fp8a::RunConfig config;
  config.recipes = fp8a::parse_recipe_list(fp8a::default_recipe_list() + ",block:2d");
  config.formats = {format};
  config.training_log = trace;
  config.amax_reduction = reduction;
  fp8a::cuda::CudaBackendOptions options;
  options.chunk_bytes = 64 << 10;
  const auto want = fp8a::evaluate_captures(set, config, fp8a::CpuBackend());
  const auto got = fp8a::evaluate_captures(set, config, fp8a::cuda::CudaBackend(options));
  REQUIRE(got.size() == want.size());
  CHECK(want.size() >= min_rows);
  int exact_replays = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const fp8a::EvaluationRow& g = got[i];
    const fp8a::EvaluationRow& w = want[i];
    INFO("row " << i << ": step " << w.key.step << " " << w.key.layer << " "
               << std::string(fp8a::role_name(w.key.role)) << " " << w.recipe.spec() << " "
               << fp8a::orientation_name(w.orientation));
    REQUIRE(g.key == w.key);
    REQUIRE(g.recipe.spec() == w.recipe.spec());
    REQUIRE(g.orientation == w.orientation);
    CHECK(g.fp8 == w.fp8);
    CHECK(g.replay.mode == w.replay.mode);
    CHECK(ct::same_float(g.replay.scale, w.replay.scale));
    CHECK(ct::same_float(g.current_scale, w.current_scale));
    exact_replays += w.replay.mode == fp8a::ReplayMode::kExact;
    ct::check_same_stats(g.stats, w.stats);
    ct::check_same_result({g.applicability, g.metrics}, {w.applicability, w.metrics}, w.stats.numel);
  }
  CHECK(exact_replays > 0);
}

}  // namespace

TEST_CASE("evaluate_captures: CUDA backend rows == CPU backend rows on the sample and the real captures") {
  const fp8a::DiskFileSystem fs;
  const std::string root = data_root();
  for (const Dataset& d : {Dataset{"sample", "sample/amax_trace.csv"},
                           Dataset{"real/lm-spike", "real/lm-spike/amax_trace_rank0.csv"}}) {
    const fp8a::CaptureSet set = fp8a::load_captures({root + d.dir}, fs);
    const fp8a::TrainingLog trace = fp8a::load_training_log({root + d.trace}, fs);
    for (auto format : {fp8a::TrainingFormat::kHybrid, fp8a::TrainingFormat::kE4M3}) {
      INFO(d.dir << " format " << (format == fp8a::TrainingFormat::kHybrid ? "hybrid" : "e4m3"));
      compare_runs(set, &trace, format, fp8a::AmaxReduction::kTp, 100);
    }
  }
}

TEST_CASE("evaluate_captures: rank shards over several steps, amax reduced or not, delayed replayed from the captures") {
  // Three steps of layer "l" as two ranks (BF16, 64 x 96 each, the second rank 8x larger) and of
  // layer "m" whole (F32, 96 x 64); no trace, so delayed scaling replays the captured steps.
  std::vector<std::vector<std::byte>> storage;
  fp8a::CaptureSet set;
  std::uint32_t seed = 7;
  for (std::int64_t step = 1; step <= 3; ++step) {
    for (int rank = 0; rank < 2; ++rank) {
      auto x = ct::make_fill(64 * 96, ct::Fill::kNormal, seed++);
      for (float& v : x) v *= rank == 0 ? 1.0f : 8.0f * static_cast<float>(step);
      storage.push_back(ct::store(x, fp8a::DType::kBF16, {64, 96}).bytes);
      fp8a::CapturedTensor t;
      t.key = {step, "l", fp8a::Role::kActivation};
      t.rank = rank;
      t.view = fp8a::make_tensor_view(storage.back().data(), fp8a::DType::kBF16, {64, 96});
      set.tensors.push_back(t);
    }
    storage.push_back(ct::store(ct::make_fill(96 * 64, ct::Fill::kWide, seed++), fp8a::DType::kF32, {96, 64}).bytes);
    fp8a::CapturedTensor t;
    t.key = {step, "m", fp8a::Role::kGradient};
    t.view = fp8a::make_tensor_view(storage.back().data(), fp8a::DType::kF32, {96, 64});
    set.tensors.push_back(t);
  }
  for (auto reduction : {fp8a::AmaxReduction::kTp, fp8a::AmaxReduction::kNone}) {
    INFO("amax reduction " << (reduction == fp8a::AmaxReduction::kTp ? "tp" : "none"));
    compare_runs(set, nullptr, fp8a::TrainingFormat::kHybrid, reduction, 30);
  }
}

// A tensor captured as several rank shards is evaluated as one tensor: with the amax reduced over
// the ranks its metrics equal those of the concatenated tensor (for recipes whose blocks do not
// cross the shard boundary); without reduction each shard keeps its own scale.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/cpu_backend.hpp"
#include "engine/run.hpp"
#include "support/close.hpp"

namespace {

using fp8a::testing::check_close;

struct Fixture {
  std::vector<float> a, b, whole;
  fp8a::CaptureSet set;
};

// Two 32x32 shards (ranks 0 and 1, amax about 1 and 4) of layer "l", and their row-wise
// concatenation as layer "whole".
void build(Fixture* f) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 0.3f);
  for (int i = 0; i < 32 * 32; ++i) f->a.push_back(n(rng));
  for (int i = 0; i < 32 * 32; ++i) f->b.push_back(4.0f * n(rng));
  f->whole = f->a;
  f->whole.insert(f->whole.end(), f->b.begin(), f->b.end());
  auto add = [&](const std::string& layer, int rank, std::vector<float>& data, std::int64_t rows) {
    fp8a::CapturedTensor t;
    t.key = {5, layer, fp8a::Role::kActivation};
    t.rank = rank;
    t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(data.data()), fp8a::DType::kF32,
                                    {rows, 32});
    f->set.tensors.push_back(t);
  };
  add("l", 0, f->a, 32);
  add("l", 1, f->b, 32);
  add("whole", -1, f->whole, 64);
}

}  // namespace

TEST_CASE("--amax-reduction tp: shards evaluate like the concatenated tensor") {
  Fixture f;
  build(&f);
  fp8a::RunConfig config;
  config.recipes = fp8a::parse_recipe_list("current,current:pow2,mxfp8,bf16");
  config.format = fp8a::TrainingFormat::kE4M3;
  const auto rows = fp8a::evaluate_captures(f.set, config, fp8a::CpuBackend());
  // Rows: layer "l" (one per recipe and orientation), then layer "whole", in the same order.
  REQUIRE(rows.size() % 2 == 0);
  const std::size_t half = rows.size() / 2;
  for (std::size_t i = 0; i < half; ++i) {
    const auto& s = rows[i];
    const auto& w = rows[half + i];
    INFO(s.recipe.spec() << " " << std::string(fp8a::orientation_name(s.orientation)));
    REQUIRE(s.key.layer == "l");
    REQUIRE(w.key.layer == "whole");
    CHECK(s.ranks == 2);
    CHECK(s.stats.numel == w.stats.numel);
    CHECK(s.stats.amax == w.stats.amax);
    CHECK((s.metrics.scale == w.metrics.scale || (std::isnan(s.metrics.scale) && std::isnan(w.metrics.scale))));
    CHECK(s.metrics.sums.underflow_count == w.metrics.sums.underflow_count);
    CHECK(s.metrics.sums.overflow_count == w.metrics.sums.overflow_count);
    CHECK(s.metrics.sums.saturated_count == w.metrics.sums.saturated_count);
    CHECK(s.metrics.scale_inv_min == w.metrics.scale_inv_min);
    CHECK(s.metrics.scale_inv_max == w.metrics.scale_inv_max);
    check_close(s.metrics.sums.sum_sq_err, w.metrics.sums.sum_sq_err, "sum_sq_err");
    check_close(s.metrics.mse, w.metrics.mse, "mse");
    check_close(s.metrics.cos, w.metrics.cos, "cos");
  }
}

TEST_CASE("--amax-reduction none: each shard keeps its own current scale") {
  Fixture f;
  build(&f);
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("current")};
  config.format = fp8a::TrainingFormat::kE4M3;
  config.amax_reduction = fp8a::AmaxReduction::kNone;
  const auto rows = fp8a::evaluate_captures(f.set, config, fp8a::CpuBackend());
  REQUIRE(rows.size() == 2);
  const auto& s = rows[0];
  CHECK(std::isnan(s.metrics.scale));  // two scales: none to report
  // Expected: the two shards evaluated alone, their sums added.
  const std::vector<fp8a::Candidate> c(1);
  const auto ea = fp8a::CpuBackend().evaluate(c, f.set.tensors[0].view);
  const auto eb = fp8a::CpuBackend().evaluate(c, f.set.tensors[1].view);
  CHECK(s.metrics.sums.underflow_count ==
        ea.results[0].metrics.sums.underflow_count + eb.results[0].metrics.sums.underflow_count);
  check_close(s.metrics.sums.sum_sq_err,
              ea.results[0].metrics.sums.sum_sq_err + eb.results[0].metrics.sums.sum_sq_err, "sum_sq_err");
  CHECK(s.metrics.scale_inv_min == std::min(ea.results[0].metrics.scale_inv, eb.results[0].metrics.scale_inv));
  CHECK(s.metrics.scale_inv_max == std::max(ea.results[0].metrics.scale_inv, eb.results[0].metrics.scale_inv));
  // And it differs from the reduced evaluation: the small shard gets a finer scale.
  CHECK(s.metrics.sums.sum_sq_err < rows[1].metrics.sums.sum_sq_err);
}

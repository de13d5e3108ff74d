// Delayed-scaling replay on hand-built amax traces, with expected scales worked out from TE's
// rule (TE common/recipe/delayed_scaling.cu, pytorch/quantization.py _default_sf_compute):
// scale(t) = (fp8_max * 2^-margin) / amax over the window before t; amax 0/inf/NaN keeps the
// previous scale; step 0 uses scale 1.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <vector>

#include "engine/cpu_backend.hpp"
#include "engine/delayed_replay.hpp"
#include "engine/run.hpp"

using fp8a::Fp8Format;
using fp8a::ReplayMode;

namespace {

fp8a::AmaxByStep flat_with_spike(int steps, int spike_step, float spike) {
  fp8a::AmaxByStep m;
  for (int s = 0; s < steps; ++s) m[s] = s == spike_step ? spike : 1.0f;
  return m;
}

float scale_at(const fp8a::AmaxByStep& trace, std::int64_t step, const char* recipe,
               Fp8Format f = Fp8Format::kE4M3) {
  const auto r = fp8a::replay_delayed_scale(trace, step, fp8a::parse_recipe(recipe), f);
  REQUIRE(r.mode == ReplayMode::kExact);
  return r.scale;
}

}  // namespace

TEST_CASE("a spike depresses the scale for exactly H steps with algo=max") {
  const auto trace = flat_with_spike(20, 5, 100.0f);
  const char* recipe = "delayed:history=4:algo=max:margin=0";
  CHECK(scale_at(trace, 0, recipe) == 1.0f);  // TE's initial scale
  for (int t = 1; t <= 5; ++t) CHECK(scale_at(trace, t, recipe) == 448.0f);  // spike not seen yet
  for (int t = 6; t <= 9; ++t) CHECK(scale_at(trace, t, recipe) == 448.0f / 100.0f);
  CHECK(scale_at(trace, 10, recipe) == 448.0f);
}

TEST_CASE("... and for one step with most_recent") {
  const auto trace = flat_with_spike(20, 5, 100.0f);
  const char* recipe = "delayed:history=4:algo=most_recent:margin=0";
  CHECK(scale_at(trace, 5, recipe) == 448.0f);
  CHECK(scale_at(trace, 6, recipe) == 448.0f / 100.0f);
  CHECK(scale_at(trace, 7, recipe) == 448.0f);
}

TEST_CASE("margin divides the scale by 2^margin; E5M2 uses 57344") {
  const auto trace = flat_with_spike(10, -1, 0.0f);
  CHECK(scale_at(trace, 3, "delayed:history=4:algo=max:margin=2") == 112.0f);
  CHECK(scale_at(trace, 3, "delayed:history=4:algo=max:margin=0", Fp8Format::kE5M2) == 57344.0f);
}

TEST_CASE("amax 0, NaN or inf keeps the previous scale") {
  fp8a::AmaxByStep trace = {{0, 2.0f}, {1, 4.0f}, {2, 0.0f}, {3, NAN}, {4, INFINITY}, {5, 8.0f}};
  const char* recipe = "delayed:history=1:algo=most_recent:margin=0";
  CHECK(scale_at(trace, 1, recipe) == 224.0f);   // amax(0) = 2
  CHECK(scale_at(trace, 2, recipe) == 112.0f);   // amax(1) = 4
  CHECK(scale_at(trace, 3, recipe) == 112.0f);   // amax(2) = 0: kept
  CHECK(scale_at(trace, 4, recipe) == 112.0f);   // NaN: kept
  CHECK(scale_at(trace, 5, recipe) == 112.0f);   // inf: kept
  CHECK(scale_at(trace, 6, recipe) == 56.0f);    // amax(5) = 8
  // With algo max a NaN anywhere in the window keeps the previous scale too.
  CHECK(scale_at(trace, 4, "delayed:history=3:algo=max:margin=0") == 112.0f);
  // A tiny amax gives FLT_MAX, not inf.
  const fp8a::AmaxByStep tiny = {{0, 1e-45f}};
  CHECK(scale_at(tiny, 1, "delayed:history=1:algo=max:margin=0") == FLT_MAX);
}

TEST_CASE("exact, approximate and unavailable replays") {
  const fp8a::AmaxByStep sparse = {{100, 2.0f}, {200, 4.0f}};
  const auto r = fp8a::parse_recipe("delayed:history=1024:algo=max:margin=0");
  const auto a = fp8a::replay_delayed_scale(sparse, 200, r, Fp8Format::kE4M3);
  CHECK(a.mode == ReplayMode::kApproximate);
  CHECK(a.scale == 224.0f);  // only step 100 is known in [0, 199]
  CHECK(a.detail == "history window [0, 199] has 1 of 200 steps; the known ones were used");
  const auto m = fp8a::replay_delayed_scale(sparse, 200, fp8a::parse_recipe("delayed:algo=most_recent"),
                                            Fp8Format::kE4M3);
  CHECK(m.mode == ReplayMode::kApproximate);
  CHECK(m.scale == 224.0f);
  CHECK(m.detail == "no amax known in the history window [199, 199]; used step 100's amax");
  const auto u = fp8a::replay_delayed_scale(sparse, 100, r, Fp8Format::kE4M3);
  CHECK(u.mode == ReplayMode::kUnavailable);
  CHECK(u.detail == "no amax known before step 100 (capture an earlier step or pass --training-log)");
  CHECK(fp8a::replay_delayed_scale(sparse, 0, r, Fp8Format::kE4M3).mode == ReplayMode::kExact);
}

TEST_CASE("through evaluate_captures: the spike saturates at its step, then underflow rises") {
  // A tensor per step 4..7 of one layer; the trace says amax 1 everywhere except step 5 (100).
  // Step 5's tensor holds the spike 100: with the scale from steps 1..4 (448) it saturates.
  // Steps 6 and 7 cast with 448/100, so 1e-4 * 4.48 falls below E4M3's smallest subnormal / 2.
  std::vector<std::vector<float>> data;
  fp8a::CaptureSet set;
  fp8a::TrainingLog trace;
  for (int s = 0; s < 8; ++s)
    trace.series[{"l", fp8a::Role::kActivation}].amax_by_step[s] = s == 5 ? 100.0f : 1.0f;
  for (int s = 4; s < 8; ++s) data.push_back({1.0f, 0.5f, 1e-4f, s == 5 ? 100.0f : -1.0f});
  for (int s = 4; s < 8; ++s) {
    fp8a::CapturedTensor t;
    t.key = {s, "l", fp8a::Role::kActivation};
    t.file = "f";
    t.tensor_name = "l.activation";
    t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(data[s - 4].data()),
                                    fp8a::DType::kF32, {4});
    set.tensors.push_back(t);
  }
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("delayed:history=2:algo=max:margin=0")};
  config.formats = {fp8a::TrainingFormat::kE4M3};
  config.training_log = &trace;
  const auto rows = fp8a::evaluate_captures(set, config, fp8a::CpuBackend());
  REQUIRE(rows.size() == 4);
  for (const auto& r : rows) {
    INFO("step " << r.key.step);
    REQUIRE(r.applicability.ok);
    CHECK(r.replay.mode == ReplayMode::kExact);
  }
  CHECK(rows[0].metrics.scale == 448.0f);  // step 4
  CHECK(rows[1].metrics.scale == 448.0f);  // step 5: window [3, 4]
  CHECK(rows[1].metrics.sums.saturated_count == 1);
  CHECK(rows[1].metrics.sums.overflow_count == 1);
  CHECK(fp8a::delayed_vs_current_log2(rows[1]) == doctest::Approx(std::log2(100.0)));
  CHECK(rows[2].metrics.scale == 4.48f);   // step 6: window [4, 5] holds the spike
  CHECK(rows[2].metrics.sums.underflow_count == 1);
  CHECK(rows[3].metrics.scale == 4.48f);   // step 7: window [5, 6]
  CHECK(rows[0].metrics.sums.underflow_count == 0);
  CHECK(fp8a::delayed_vs_current_log2(rows[2]) == doctest::Approx(std::log2(4.48 / 448.0)));
}

TEST_CASE("MXFP8 is not applicable where TE's MXFP8Quantizer refuses the shape") {
  std::vector<float> a(64 * 32, 1.0f), b(5 * 160, 1.0f), c(64, 1.0f);
  auto view = [](std::vector<float>& v, std::vector<std::int64_t> shape) {
    return fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(v.data()), fp8a::DType::kF32, std::move(shape));
  };
  const auto mx = fp8a::parse_recipe("mxfp8");
  CHECK(fp8a::recipe_fits(mx, view(a, {2, 32, 32})).ok);
  const auto no = fp8a::recipe_fits(mx, view(b, {5, 160}));
  CHECK_FALSE(no.ok);
  CHECK(no.reason == "MXFP8 needs >= 2 dims with the last dim and the product of the others divisible "
                     "by 32 (TE MXFP8Quantizer.is_quantizable); shape is [5, 160]");
  CHECK_FALSE(fp8a::recipe_fits(mx, view(c, {64})).ok);  // 1-D
  CHECK(fp8a::recipe_fits(fp8a::parse_recipe("block"), view(b, {5, 160})).ok);
}

// The window amax a replayed scale holds (report.html's threshold, the forecast's "held until"):
// the window's maximum, the latest step of equal maxima, the step before's where the window's is
// 0, inf or NaN, none at step 0.
TEST_CASE("the replay names the window amax its scale holds and the step it came from") {
  const fp8a::AmaxByStep trace = {{0, 2.0f}, {1, 4.0f}, {2, 4.0f}, {3, NAN}, {4, 1.0f}, {5, 0.0f}};
  const auto r = fp8a::parse_recipe("delayed:history=3:algo=max:margin=1");
  auto at = [&](std::int64_t t) { return fp8a::replay_delayed_scale(trace, t, r, Fp8Format::kE4M3); };
  CHECK(std::isnan(at(0).amax));
  CHECK(at(0).amax_step == -1);
  CHECK(at(1).amax == 2.0f);
  CHECK(at(1).amax_step == 0);
  CHECK(at(3).amax == 4.0f);
  CHECK(at(3).amax_step == 2);  // steps 1 and 2 tie: the later one
  CHECK(at(3).scale == 448.0f / 2.0f / 4.0f);
  // Windows [1, 3], [2, 4], [3, 5] hold step 3's NaN: each keeps step 3's scale, from [0, 2].
  for (const std::int64_t t : {4, 5, 6}) {
    INFO("step " << t);
    CHECK(at(t).amax == 4.0f);
    CHECK(at(t).amax_step == 2);
  }
  // [4, 6] of steps 4 and 5 (6 unknown: approximate): 1.
  CHECK(at(7).mode == ReplayMode::kApproximate);
  CHECK(at(7).amax == 1.0f);
  CHECK(at(7).amax_step == 4);
}

// DelayedReplay tables the window maxima of a series once (report.html's threshold line reads it
// at every step); it must give replay_delayed_scale's answer, field for field, at every step, on
// traces with NaN, 0, inf, ties and missing steps.
TEST_CASE("DelayedReplay::at is replay_delayed_scale at every step") {
  std::uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  const float values[] = {1.0f, 2.0f, 2.0f, 0.5f, 0.0f, INFINITY, NAN, 3.0f, 1e-30f, 4.0f};
  for (int trial = 0; trial < 24; ++trial) {
    fp8a::AmaxByStep trace;
    const int steps = 20 + static_cast<int>(next() % 200);
    for (int s = trial % 3; s < steps; ++s) {
      if (trial % 2 == 1 && next() % 5 == 0) continue;  // a missing step
      trace[s] = values[(next() >> 8) % std::size(values)];
    }
    for (const char* name : {"delayed", "delayed:history=1", "delayed:history=7:margin=2", "delayed:history=64",
                             "delayed:history=16:algo=most_recent"}) {
      const auto recipe = fp8a::parse_recipe(name);
      for (const Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
        const fp8a::DelayedReplay replay(trace, recipe, f);
        for (std::int64_t t = 0; t <= steps + 3; ++t) {
          INFO("trial " << trial << ", " << name << ", step " << t);
          const auto want = fp8a::replay_delayed_scale(trace, t, recipe, f);
          const auto got = replay.at(t);
          CHECK(got.mode == want.mode);
          CHECK(got.scale == want.scale);
          CHECK(got.detail == want.detail);
          CHECK((got.amax == want.amax || (std::isnan(got.amax) && std::isnan(want.amax))));
          CHECK(got.amax_step == want.amax_step);
        }
      }
    }
  }
  // An empty trace: step 0 exact at scale 1, later steps unavailable.
  const fp8a::DelayedReplay empty({}, fp8a::parse_recipe("delayed"), Fp8Format::kE4M3);
  CHECK(empty.at(0).mode == ReplayMode::kExact);
  CHECK(empty.at(5).mode == ReplayMode::kUnavailable);
}

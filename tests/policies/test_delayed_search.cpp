// The search over delayed scaling's options (policies/delayed_search.hpp) on hand-built traces
// whose answers are worked out in the comments.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "policies/delayed_search.hpp"

namespace {

using namespace fp8a;

// Binades worked out below carry the float32 rounding of each amax (8.6e-8 binades) and the
// Theil-Sen fit's; 1e-4 covers both.
constexpr double kBinadeTol = 1e-4;

Recipe delayed(int history, DelayedAlgo algo, int margin) {
  return delayed_recipe(history, algo, margin);
}

}  // namespace

TEST_CASE("delayed search: a spike favours the shortest history, the clip the largest margin") {
  // log2 amax = 0.01 t for t = 0..99, with a spike of 2^10 at step 50. Every option's step 50
  // jumps 10 - 0.49 = 9.51 binades over its window max (step 49's amax), so the margin-3 options
  // clip least (6.51). Among them history 1 (max) lets the spike go after one step: step 51 sits
  // 9.49 binades below it, every other step 0.01 above its predecessor, so the mean jump over the
  // 99 judged steps is (97 x 0.01 + 9.51 - 9.49) / 99 = 0.01 and the mean headroom 3 - 0.01. Longer
  // histories hold the spike for longer (more headroom, more underflow); most_recent ties with
  // history 1 and comes after it in the search order.
  TrainingLog log;
  auto& series = log.series[{"layers.0.mlp.linear_fc1", Role::kActivation}].amax_by_step;
  for (std::int64_t t = 0; t < 100; ++t) series[t] = static_cast<float>(std::exp2(0.01 * static_cast<double>(t)));
  series[50] = std::exp2(10.0f);
  const TrainingFormat hybrid[] = {TrainingFormat::kHybrid};
  const DelayedSearch s = search_delayed_options(log, hybrid);
  REQUIRE(s.options.size() == 48);  // (11 histories with max + most_recent) x margins 0..3
  const DelayedOption& best = s.options.front();
  CHECK(best.recipe == delayed(1, DelayedAlgo::kMax, 3));
  CHECK(best.series == 1);
  CHECK(best.clipping_series == 1);
  CHECK(best.clip_binades == doctest::Approx(6.51).epsilon(kBinadeTol));
  CHECK(best.mean_headroom_binades == doctest::Approx(2.99).epsilon(kBinadeTol));
  CHECK(s.options[1].recipe == delayed(1024, DelayedAlgo::kMostRecent, 3));
  // The front-runners: the safest, the safest with margin 0 (history 1 again), TE's default.
  CHECK(s.front_runners == std::vector{delayed(1, DelayedAlgo::kMax, 3), delayed(1, DelayedAlgo::kMax, 0),
                                       delayed(1024, DelayedAlgo::kMax, 0)});
  for (const DelayedOption& o : s.options)
    if (o.recipe == delayed(1024, DelayedAlgo::kMax, 0)) CHECK(o.clip_binades == doctest::Approx(9.51).epsilon(kBinadeTol));

  // The run's default list: its delayed recipes give way to the front-runners, in place.
  const auto list = with_front_runners(parse_recipe_list("current,delayed,delayed:history=16:algo=most_recent,bf16"), s);
  REQUIRE(list.size() == 5);
  CHECK(list[0].spec() == "current");
  CHECK(list[1] == s.front_runners[0]);
  CHECK(list[3] == s.front_runners[2]);
  CHECK(list[4].spec() == "bf16");
}

TEST_CASE("delayed search: steady growth needs one binade of margin, TE's default history on ties") {
  // log2 amax = 0.01 t: every option jumps 0.01 a step over its window max (the previous step's
  // amax, whatever the window), so margin 0 clips 0.01 and margin 1 nothing, every history alike:
  // the search order keeps history 1024 (max) first, and the margin-0 front-runner is TE's default.
  TrainingLog log;
  auto& series = log.series[{"layers.0.mlp.linear_fc1", Role::kActivation}].amax_by_step;
  for (std::int64_t t = 0; t < 100; ++t) series[t] = static_cast<float>(std::exp2(0.01 * static_cast<double>(t)));
  const TrainingFormat hybrid[] = {TrainingFormat::kHybrid};
  const DelayedSearch s = search_delayed_options(log, hybrid);
  CHECK(s.options.front().recipe == delayed(1024, DelayedAlgo::kMax, 1));
  CHECK(s.options.front().clip_binades == 0.0);
  CHECK(s.options.front().mean_headroom_binades == doctest::Approx(0.99).epsilon(kBinadeTol));
  CHECK(s.front_runners == std::vector{delayed(1024, DelayedAlgo::kMax, 1), delayed(1024, DelayedAlgo::kMax, 0)});
}

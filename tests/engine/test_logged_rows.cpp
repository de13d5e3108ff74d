// Rows from logged statistics alone, their values worked out here from TE's definitions
// (transformer_engine/debug/features/utils/stats_computation.py) and FP8's flush threshold.
#include <doctest/doctest.h>

#include <cmath>
#include <algorithm>
#include <set>
#include <string>

#include "datasets/file_system.hpp"
#include "engine/logged_rows.hpp"

using namespace fp8a;

namespace {

// engine/logged_rows.cpp's allowance for torch.std's n-1 (tensors of 1,000 elements or more).
constexpr double kStdBias = 1000.0 / 999.0;

void fp8(TrainingLog& log, std::string_view layer, Role role, std::int64_t step, LoggedRecipe recipe,
         LoggedStatKind stat, double value, bool columnwise = false, bool rounded = false, std::size_t file = 0) {
  LoggedFp8Stat s;
  s.layer = layer;
  s.role = role;
  s.step = step;
  s.recipe = recipe;
  s.stat = stat;
  s.value = value;
  s.columnwise = columnwise;
  s.rounded = rounded;
  s.file = file;
  log.fp8_stats.push_back(s);
}

void tensor(TrainingLog& log, std::string_view layer, Role role, std::int64_t step, double mean, double std,
            bool rounded = false, std::size_t file = 0) {
  log.tensor_stats.push_back({layer, role, step, LoggedTensorStatKind::kMean, mean, rounded, file, 0});
  log.tensor_stats.push_back({layer, role, step, LoggedTensorStatKind::kStd, std, rounded, file, 0});
}

const EvaluationRow& row_of(const LoggedRows& r, const std::string& spec, Role role, Orientation o = Orientation::kRowwise) {
  for (const EvaluationRow& row : r.rows)
    if (row.recipe.spec() == spec && row.key.role == role && row.orientation == o) return row;
  FAIL("no row " << spec);
  return r.rows.front();
}

}  // namespace

TEST_CASE("current scaling: underflow, rel_mse from mse and std/mean, the flushed energy bounded") {
  TrainingLog log;
  log.files = {"rank0.log"};
  const std::string fc2 = "decoder.layers.0.mlp.linear_fc2";
  fp8(log, fc2, Role::kActivation, 10, LoggedRecipe::kCurrent, LoggedStatKind::kUnderflowPct, 2.0);
  fp8(log, fc2, Role::kActivation, 10, LoggedRecipe::kCurrent, LoggedStatKind::kMse, 1e-4);
  tensor(log, fc2, Role::kActivation, 10, 0.05, 0.1);
  log.series[{fc2, Role::kActivation}].amax_by_step[10] = 3.0f;
  const LoggedRows r = rows_from_logged_stats(log, std::nullopt, TrainingFormat::kHybrid);
  REQUIRE(r.rows.size() == 1);
  const EvaluationRow& row = r.rows[0];
  CHECK(row.recipe.spec() == "current");
  CHECK(row.fp8 == Fp8Format::kE4M3);
  CHECK(row.key.step == 10);
  CHECK(row.file == "rank0.log");
  REQUIRE(row.logged);
  CHECK(row.logged->underflow);
  CHECK(row.logged->rel_mse);
  CHECK(row.logged->energy_bound);
  CHECK(row.logged->saturation);
  CHECK_FALSE(row.logged->upper_bound);
  CHECK(row.logged->source == "fp8_current_scaling_underflows%");
  const double mean_sq = 0.1 * 0.1 + 0.05 * 0.05;
  CHECK(row.metrics.underflow_pct == 2.0);
  CHECK(row.metrics.rel_mse == doctest::Approx(1e-4 / mean_sq).epsilon(1e-12));
  // E4M3 flushes |x| * 448 / amax below 2^-10: each flushed x^2 is under (2^-10 * 3 / 448)^2.
  const double t = std::ldexp(1.0, -10) * 3.0 / 448.0;
  // Both bounds carry 1000/999: torch.std's n-1 can make the logged mean square high by that much.
  CHECK(row.metrics.underflow_energy_pct == doctest::Approx(2.0 * t * t * kStdBias / mean_sq).epsilon(1e-9).scale(0));
  CHECK(row.metrics.saturated_pct == 0.0);
}

TEST_CASE("gradients are E5M2 under hybrid; MXFP8's E8M0 scale_inv; saturation unknown under MXFP8") {
  TrainingLog log;
  log.files = {"r.log"};
  fp8(log, "l", Role::kGradient, 5, LoggedRecipe::kMxfp8, LoggedStatKind::kUnderflowPct, 60.0, true);
  fp8(log, "l", Role::kGradient, 5, LoggedRecipe::kMxfp8, LoggedStatKind::kScaleInvMax, 130.0, true);
  tensor(log, "l", Role::kGradient, 5, 0.0, 1.0);
  const LoggedRows r = rows_from_logged_stats(log, std::nullopt, TrainingFormat::kHybrid);
  const EvaluationRow& row = row_of(r, "mxfp8", Role::kGradient, Orientation::kColumnwise);
  CHECK(row.fp8 == Fp8Format::kE5M2);
  // E5M2 flushes below 2^-17 times scale_inv = 2^(130 - 127).
  const double t = std::ldexp(1.0, -17) * 8.0;
  CHECK(row.metrics.underflow_energy_pct == doctest::Approx(60.0 * t * t * kStdBias).epsilon(1e-9).scale(0));
  CHECK_FALSE(row.logged->saturation);
  CHECK_FALSE(row.logged->rel_mse);  // no mse logged
  CHECK(std::isnan(row.metrics.rel_mse));
}

TEST_CASE("4-decimal values: rel_mse only when precise enough; the bound moves the conservative way") {
  TrainingLog log;
  log.files = {"r.log"};
  fp8(log, "l", Role::kWeight, 1, LoggedRecipe::kCurrent, LoggedStatKind::kUnderflowPct, 7.0, false, true);
  fp8(log, "l", Role::kWeight, 1, LoggedRecipe::kCurrent, LoggedStatKind::kMse, 0.0001, false, true);
  fp8(log, "l", Role::kWeight, 1, LoggedRecipe::kCurrent, LoggedStatKind::kScaleInvMax, 0.0100, false, true);
  tensor(log, "l", Role::kWeight, 1, 0.0, 0.0200, true);
  const LoggedRows r = rows_from_logged_stats(log, std::nullopt, TrainingFormat::kHybrid);
  const EvaluationRow& row = row_of(r, "current", Role::kWeight);
  CHECK_FALSE(row.logged->rel_mse);  // mse 0.0001 is known to +-50 %
  const double t = std::ldexp(1.0, -10) * 0.01005;
  CHECK(row.metrics.underflow_energy_pct ==
        doctest::Approx(7.00005 * t * t * kStdBias / (0.01995 * 0.01995)).epsilon(1e-9).scale(0));
}

TEST_CASE("block what-ifs bound the recipe from above; the training run's own statistics replace them") {
  TrainingLog log;
  log.files = {"r.log"};
  fp8(log, "l", Role::kActivation, 1, LoggedRecipe::kBlock, LoggedStatKind::kUnderflowPct, 9.0);
  fp8(log, "l", Role::kActivation, 1, LoggedRecipe::kTraining, LoggedStatKind::kUnderflowPct, 4.0);
  fp8(log, "l", Role::kActivation, 1, LoggedRecipe::kDelayed, LoggedStatKind::kOverflowPct, 1.0);
  SUBCASE("without --training-recipe the bare and delayed statistics are left out, and said") {
    const LoggedRows r = rows_from_logged_stats(log, std::nullopt, TrainingFormat::kHybrid);
    REQUIRE(r.rows.size() == 1);
    CHECK(r.rows[0].logged->upper_bound);
    CHECK(r.rows[0].metrics.underflow_pct == 9.0);
    CHECK(r.notes.size() == 2);
  }
  SUBCASE("training under block: its own values, exact") {
    const LoggedRows r = rows_from_logged_stats(log, parse_recipe("block"), TrainingFormat::kHybrid);
    const EvaluationRow& row = row_of(r, "block", Role::kActivation);
    CHECK_FALSE(row.logged->upper_bound);
    REQUIRE(r.series.size() == 1);  // the what-if and the training statistics are one copy's
    CHECK(r.series[0].steps == std::vector<std::int64_t>{1});
    CHECK(r.series[0].underflow_pct == std::vector<double>{4.0});  // the run's own, not the bound
    CHECK(row.metrics.underflow_pct == 4.0);
    CHECK(row.metrics.saturated_pct == 0.0);
  }
  SUBCASE("training under delayed: overflows% is its saturation") {
    const LoggedRows r = rows_from_logged_stats(log, parse_recipe("delayed"), TrainingFormat::kHybrid);
    const EvaluationRow& row = row_of(r, parse_recipe("delayed").spec(), Role::kActivation);
    CHECK(row.metrics.underflow_pct == 4.0);
    CHECK(row.metrics.saturated_pct == 1.0);
    CHECK(row.logged->saturation);
    CHECK_FALSE(row.logged->energy_bound);  // no scale_inv logged, and amax does not give a delayed scale
  }
}

TEST_CASE("rows at the steps that decide each copy's measures; every step in the series") {
  TrainingLog log;
  log.files = {"r.log"};
  // (underflow %, energy-bound-making std, mse) per step of one gradient: the flushed-energy bound
  // falls as std grows (amax 1 fixed, E5M2).
  struct S {
    std::int64_t step;
    double underflow, std, mse;
  };
  const S steps[] = {{1, 60.0, 100.0, 1e-6},  // most flushed, least energy
                     {2, 10.0, 0.01, 1e-6},   // on the front: fewer flushed, more energy
                     {3, 1.0, 0.001, 1e-6},   // the most energy
                     {4, 8.0, 0.02, 1e-6},    // dominated by step 2: not kept
                     {5, 0.5, 1.0, 2.0}};     // the largest rel_mse (step 3's is 1)
  for (const S& s : steps) {
    fp8(log, "l", Role::kGradient, s.step, LoggedRecipe::kCurrent, LoggedStatKind::kUnderflowPct, s.underflow);
    fp8(log, "l", Role::kGradient, s.step, LoggedRecipe::kCurrent, LoggedStatKind::kMse, s.mse);
    fp8(log, "l", Role::kActivation, s.step, LoggedRecipe::kCurrent, LoggedStatKind::kUnderflowPct, 0.0);
    tensor(log, "l", Role::kGradient, s.step, 0.0, s.std);
    log.series[{"l", Role::kGradient}].amax_by_step[s.step] = 1.0f;
  }
  const LoggedRows r = rows_from_logged_stats(log, std::nullopt, TrainingFormat::kHybrid);
  CHECK(r.steps_logged == 5);
  CHECK(r.steps_kept == 4);
  std::set<std::int64_t> kept;
  for (const EvaluationRow& row : r.rows) kept.insert(row.key.step);
  CHECK(kept == std::set<std::int64_t>{1, 2, 3, 5});
  // Both operands of the layer at each kept step, so its GEMMs pair.
  CHECK(r.rows.size() == 8);
  REQUIRE(r.series.size() == 2);
  const LoggedSeries& g = r.series[1].role == Role::kGradient ? r.series[1] : r.series[0];
  CHECK(g.steps == std::vector<std::int64_t>{1, 2, 3, 4, 5});
  CHECK(g.underflow_pct[3] == 8.0);
  CHECK(r.not_kept.rfind("1 of the 5 logged steps: at none is a candidate copy's logged measure worse than at the 4 "
                         "judged", 0) == 0);
}

TEST_CASE("NVFP4 training: LogNvfp4TensorStats judge nothing, and the notes say why") {
  // TE's nvfp4_underflows% counts nonzero FP4 codes; a block whose E4M3 scale rounds to 0 is coded
  // at +-6 (block_scale_inverse = min(1 / 0, FLT_MAX)) though it decodes to 0, so the count
  // misses those flushes: a lower bound, which cannot pass a GEMM.
  TrainingLog log;
  log.files = {"r.log"};
  fp8(log, "l", Role::kActivation, 5, LoggedRecipe::kNvfp4, LoggedStatKind::kUnderflowPct, 3.0);
  fp8(log, "l", Role::kActivation, 5, LoggedRecipe::kNvfp4, LoggedStatKind::kMse, 1e-3);
  fp8(log, "l", Role::kActivation, 5, LoggedRecipe::kMxfp8, LoggedStatKind::kUnderflowPct, 1.0);
  tensor(log, "l", Role::kActivation, 5, 0.0, 0.5);
  const LoggedRows r = rows_from_logged_stats(log, parse_recipe("nvfp4"), TrainingFormat::kE4M3);
  REQUIRE(r.rows.size() == 1);  // the MXFP8 what-if is judged
  CHECK(r.rows[0].recipe.spec() == "mxfp8");
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].rfind("2 logged statistics left out: nvfp4_underflows% (LogNvfp4TensorStats) counts nonzero FP4 "
                         "codes, and a block whose E4M3 scale rounds to 0 keeps nonzero codes", 0) == 0);
}

TEST_CASE("the steps kept as they stream in are those a search over every step keeps") {
  // Random logs of two layers (values from a small grid, so ties and dominated points abound; some
  // statistics missing): the rows kept are those of the steps a brute-force reference picks from
  // every step's measures (each step's rows made alone): per copy, each step no other step
  // matches or beats in both underflow and the energy bound (an equal earlier step wins), the
  // earliest step of the largest rel_mse and of the largest saturation when above 0.
  for (unsigned seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    unsigned x = seed;
    const auto draw = [&](unsigned n) { return (x = x * 1103515245u + 12345u) / 65536u % n; };
    TrainingLog log;
    log.files = {"r.log"};
    const char* layers[] = {"a", "b"};
    const std::int64_t steps = 1 + draw(30);
    for (std::int64_t step = 0; step < steps; ++step)
      for (const char* layer : layers)
        for (const Role role : {Role::kActivation, Role::kGradient}) {
          if (draw(5) != 0) fp8(log, layer, role, step, LoggedRecipe::kCurrent, LoggedStatKind::kUnderflowPct, draw(4) * 2.0);
          if (draw(5) != 0) fp8(log, layer, role, step, LoggedRecipe::kCurrent, LoggedStatKind::kMse, draw(3) * 1e-4);
          if (draw(3) != 0) fp8(log, layer, role, step, LoggedRecipe::kCurrent, LoggedStatKind::kScaleInvMax, (1 + draw(3)) * 0.25);
          if (draw(4) != 0) tensor(log, layer, role, step, 0.0, 0.5 + draw(2));
        }
    const LoggedRows r = rows_from_logged_stats(log, std::nullopt, TrainingFormat::kHybrid);
    // The reference: every step's measures, each from a log of that step alone.
    struct P {
      std::int64_t step;
      double u, e, rel, sat;
    };
    const auto rank_of = [](double v) { return std::isnan(v) ? -1e300 : v; };
    std::map<std::pair<std::string, Role>, std::vector<P>> copies;
    std::set<std::int64_t> logged;
    for (std::int64_t step = 0; step < steps; ++step) {
      TrainingLog one;
      one.files = log.files;
      for (const LoggedFp8Stat& f : log.fp8_stats) if (f.step == step) one.fp8_stats.push_back(f);
      for (const LoggedTensorStat& t : log.tensor_stats) if (t.step == step) one.tensor_stats.push_back(t);
      for (const EvaluationRow& row : rows_from_logged_stats(one, std::nullopt, TrainingFormat::kHybrid).rows) {
        const LoggedMeasures& k = *row.logged;
        const QuantMetrics& m = row.metrics;
        copies[{row.key.layer, row.key.role}].push_back({step, k.underflow ? rank_of(m.underflow_pct) : -1e300,
                                                         k.energy_bound ? m.underflow_energy_pct : -1e300,
                                                         k.rel_mse ? m.rel_mse : -1e300, k.saturation ? m.saturated_pct : -1e300});
        logged.insert(step);
      }
    }
    std::set<std::pair<std::string, std::int64_t>> expected;
    for (const auto& [copy, points] : copies) {
      const P* rel = nullptr;
      const P* sat = nullptr;
      for (const P& p : points) {
        bool beaten = false;
        for (const P& q : points)
          beaten = beaten || (&q != &p && q.u >= p.u && q.e >= p.e && (q.u > p.u || q.e > p.e || q.step < p.step));
        if (!beaten) expected.emplace(copy.first, p.step);
        if (rel == nullptr || p.rel > rel->rel) rel = &p;
        if (sat == nullptr || p.sat > sat->sat) sat = &p;
      }
      if (rel->rel > 0) expected.emplace(copy.first, rel->step);
      if (sat->sat > 0) expected.emplace(copy.first, sat->step);
    }
    std::set<std::pair<std::string, std::int64_t>> kept;
    for (const EvaluationRow& row : r.rows) kept.emplace(row.key.layer, row.key.step);
    CHECK(kept == expected);
    CHECK(r.steps_logged == logged.size());
  }
}

TEST_CASE("a long series is thinned to its worst points, the worst step kept") {
  TrainingLog log;
  log.files = {"r.log"};
  for (std::int64_t s = 0; s < 10000; ++s)
    fp8(log, "l", Role::kWeight, s, LoggedRecipe::kCurrent, LoggedStatKind::kUnderflowPct, s == 7777 ? 90.0 : 0.1);
  const LoggedRows r = rows_from_logged_stats(log, std::nullopt, TrainingFormat::kHybrid);
  REQUIRE(r.series.size() == 1);
  // 10,000 steps in runs of 64 (the smallest power of two that leaves at most 256 runs): 157
  // points, the i-th the worst of steps 64i .. 64i + 63 (the first of equals).
  REQUIRE(r.series[0].steps.size() == 157);
  for (std::size_t i = 0; i < 157; ++i)
    CHECK(r.series[0].steps[i] == (i == 7777 / 64 ? 7777 : static_cast<std::int64_t>(64 * i)));
  CHECK(std::find(r.series[0].steps.begin(), r.series[0].steps.end(), 7777) != r.series[0].steps.end());
  // The rows: the step of the most flushed (and, all energies unknown, nothing else on the front).
  CHECK(r.steps_kept == 1);
  CHECK(r.rows.at(0).key.step == 7777);
}

TEST_CASE("several ranks' logs: tensor-parallel shards of equal size make the whole tensor's values") {
  TrainingLog log;
  log.files = {"rank0.log", "rank1.log"};
  // Two shards: underflow 10 % and 20 %, mse 1e-4 and 3e-4, mean 0 and 1, std 1 and 1; scale_inv
  // 0.5 and 0.25. The whole: underflow 15 %, mse 2e-4, mean 0.5, E[x^2] = (1 + 2) / 2 = 1.5.
  const double u[] = {10.0, 20.0}, mse[] = {1e-4, 3e-4}, mean[] = {0.0, 1.0}, sinv[] = {0.5, 0.25};
  for (std::size_t f = 0; f < 2; ++f) {
    fp8(log, "l", Role::kActivation, 3, LoggedRecipe::kCurrent, LoggedStatKind::kUnderflowPct, u[f], false, false, f);
    fp8(log, "l", Role::kActivation, 3, LoggedRecipe::kCurrent, LoggedStatKind::kMse, mse[f], false, false, f);
    fp8(log, "l", Role::kActivation, 3, LoggedRecipe::kCurrent, LoggedStatKind::kScaleInvMax, sinv[f], false, false, f);
    tensor(log, "l", Role::kActivation, 3, mean[f], 1.0, false, f);
  }
  // A second value of the same statistic in one file (a what-if and the run's own): the first.
  fp8(log, "l", Role::kActivation, 3, LoggedRecipe::kCurrent, LoggedStatKind::kUnderflowPct, 99.0, false, false, 1);
  const LoggedRows r = rows_from_logged_stats(log, std::nullopt, TrainingFormat::kHybrid);
  REQUIRE(r.rows.size() == 1);
  const QuantMetrics& m = r.rows[0].metrics;
  CHECK(m.underflow_pct == doctest::Approx(15.0));
  CHECK(m.mse == doctest::Approx(2e-4));
  CHECK(m.rel_mse == doctest::Approx(2e-4 / 1.5));
  CHECK(m.scale_inv_max == doctest::Approx(0.5));
  const double t = std::ldexp(1.0, -10) * 0.5;  // the largest shard scale bounds every flush
  CHECK(m.underflow_energy_pct == doctest::Approx(15.0 * t * t * kStdBias / 1.5).epsilon(1e-9).scale(0));
}

TEST_CASE("read through the sink: a capture CSV gives the amax a statistics log lacks") {
  // The log has no cur_amax; the capture hook's CSV has the tensor's at step 10. The row's amax
  // (and its amax-based flush bound) comes from it, as it would from the log's own cur_amax.
  const auto bytes = [](std::string_view t) {
    std::vector<std::byte> b(t.size());
    std::transform(t.begin(), t.end(), b.begin(), [](char c) { return static_cast<std::byte>(c); });
    return b;
  };
  const auto line = [](const std::string& name, double v) {
    return name + " \t\t\t\t iteration=000010 \t\t\t\t value=" + std::to_string(v) + "\n";
  };
  MemoryFileSystem fs;
  fs.add_file("trace.csv", bytes("step,tensor,amax\n10,l.activation,3\n11,l.activation,5\n"));
  fs.add_file("r.log", bytes(line("l_activation_fp8_current_scaling_underflows%", 2.0) +
                             line("l_activation_mean", 0.05) + line("l_activation_std", 0.1)));
  LoggedRowsBuilder builder(std::nullopt, TrainingFormat::kHybrid);
  const TrainingLog log = load_training_log({"trace.csv", "r.log"}, fs, &builder);
  CHECK(log.fp8_stats.empty());  // the sink took them
  CHECK(log.fp8_stat_count == 1);
  const LoggedRows r = builder.finish();
  REQUIRE(r.rows.size() == 1);
  CHECK(r.rows[0].stats.amax == 3.0f);
  // 2 % x (2^-10 x 3 / 448)^2 / (0.1^2 + 0.05^2): the amax bound, there being no mse.
  const double t = std::ldexp(1.0, -10) * 3.0 / 448.0;
  CHECK(r.rows[0].metrics.underflow_energy_pct == doctest::Approx(2.0 * t * t * kStdBias / 0.0125).epsilon(1e-9).scale(0));
}

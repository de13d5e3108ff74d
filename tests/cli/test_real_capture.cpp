// End-to-end runs of the fp8-advisor executable on the real captures in datasets/real/: a 4-layer
// byte-level GPT trained on the Python standard library's sources by scripts/make_real_capture.py
// (BF16 autocast, captured by python/fp8a_capture.py), once with a sane learning rate
// (lm-sane) and once with one that makes the loss spike at step 2 (lm-spike). See
// datasets/real/README.md.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_support.hpp"

namespace {

using namespace fp8a::cli_test;

const fs::path kReal = kSource / "datasets/real";

std::string capture(const std::string& run_name) { return shell_quote((kReal / run_name).string()); }
std::string trace(const std::string& run_name) {
  return shell_quote((kReal / run_name / "amax_trace_rank0.csv").string());
}

// max amax over all steps of one tensor in a run's amax trace, and the step where it occurs.
std::pair<double, std::int64_t> trace_max(const std::string& run_name, const std::string& tensor) {
  double best = -1;
  std::int64_t at = -1;
  for (const auto& r : read_csv(slurp(kReal / run_name / "amax_trace_rank0.csv")))
    if (r.at("tensor") == tensor && num(r.at("amax")) > best) {
      best = num(r.at("amax"));
      at = std::stoll(r.at("step"));
    }
  return {best, at};
}

}  // namespace

TEST_CASE("the shipped real captures validate, run end to end, and replay delayed scaling exactly") {
  for (const std::string name : {"lm-sane", "lm-spike"}) {
    INFO(name);
    const auto insp = run("inspect " + capture(name));
    INFO(insp.err);
    CHECK(insp.rc == 0);
    CHECK(insp.out.find("24 tensors in 4 file(s): valid") != std::string::npos);

    TempDir out;
    const auto r = run("run --capture " + capture(name) + " --amax-trace " + trace(name) +
                       " --out " + shell_quote(out.path.string()) + " --format hybrid");
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto summary = nlohmann::json::parse(slurp(out.path / "summary.json"));
    CHECK(summary["inputs"].size() == 4);
    std::vector<std::int64_t> steps;
    for (const auto& in : summary["inputs"]) steps.push_back(in["step"].get<std::int64_t>());
    std::sort(steps.begin(), steps.end());
    CHECK(steps == std::vector<std::int64_t>{1, 2, 3, 299});
    // 3 delayed recipes (the search's front-runners: a trace and no --recipes) x 24 tensors, all
    // replayed from the full trace.
    CHECK(summary["delayed_replay"]["exact"] == 72);
    CHECK(summary["delayed_replay"]["approximate"] == 0);
    CHECK(summary["delayed_replay"]["unavailable"] == 0);
    const auto rows = read_csv(slurp(out.path / "metrics.csv"));
    CHECK(rows.size() == summary["evaluations"].get<std::size_t>());
    std::size_t delayed = 0;
    for (const auto& row : rows) {
      if (row.at("recipe").rfind("delayed", 0) == 0) {
        ++delayed;
        CHECK(row.at("replay") == "exact");
      }
      CHECK(row.at("input_dtype") == "BF16");  // BF16 autocast: X, W and dY as the GEMMs saw them
      CHECK(row.at("nan_count") == "0");
      CHECK(row.at("inf_count") == "0");
    }
    CHECK(delayed == 72);
  }
}

// Golden values from the independent NumPy + ml_dtypes peer (a Python venv with numpy and
// ml_dtypes), one call per file, STEP = 2 and 3:
//   python tests/peers/peer_numpy.py --all --format hybrid --recipes current,delayed
//     --amax-trace datasets/real/lm-spike/amax_trace_rank0.csv
//     datasets/real/lm-spike/rank0_step_00000STEP.safetensors --csv OUT.csv
// Counts are the peer's percentages times numel / 100 (all integral).
struct Golden {
  std::int64_t step;
  const char* layer;
  const char* tensor;
  const char* recipe;
  float scale, amax;
  std::int64_t numel, underflow, overflow, saturated;
  double mse, rel_mse, sqnr_db, cos;
};

TEST_CASE("the loss-spike step of lm-spike matches the independent NumPy peer") {
  constexpr const char* kQkv = "layers.0.self_attention.linear_qkv";
  constexpr const char* kFc2 = "layers.3.mlp.linear_fc2";
  constexpr const char* kDelayed = "delayed:history=1024:algo=max:margin=0";
  const std::vector<Golden> want = {
      {2, kQkv, "gradient", "current", 11184811.0f, 0.005126953125f, 49152, 6318, 0, 0,
       4.759283308813831e-11, 0.0028293235589146627, 25.4831738417396, 0.9985923531164401},
      {2, kQkv, "gradient", kDelayed, 124750088.0f, 0.005126953125f, 49152, 4583, 274, 228,
       1.061917768188587e-08, 0.6312944122494086, 1.9976805470874286, 0.6792662652702045},
      {2, kFc2, "activation", "current", 43.180721282958984f, 10.375f, 65536, 2092, 0, 0,
       0.015393272286255918, 0.000794180544997429, 31.000807560328397, 0.999604610662413},
      {2, kFc2, "activation", kDelayed, 186.18182373046875f, 10.375f, 65536, 1399, 32323, 32171,
       7.788322301521584, 0.4018206093554713, 3.9596779207802157, 0.9608547535880771},
      {3, kQkv, "gradient", "current", 2417267968.0f, 2.372264862060547e-05f, 49152, 23343, 0, 0,
       1.3300653038900275e-15, 0.0028543993281825485, 25.44485269520425, 0.9985791191883652},
      {3, kQkv, "gradient", kDelayed, 686786.625f, 2.372264862060547e-05f, 49152, 32830, 0, 0,
       1.0704102997025372e-15, 0.0022971642305190357, 26.388079548012612, 0.9988556565078903},
  };
  TempDir out;
  const auto r = run("run --capture " + capture("lm-spike") + " --amax-trace " + trace("lm-spike") +
                     " --out " + shell_quote(out.path.string()) +
                     " --format hybrid --recipes current,delayed --no-gemms");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  std::map<std::string, Row> got;
  for (const auto& row : read_csv(slurp(out.path / "metrics.csv")))
    if (row.at("orientation") == "rowwise")
      got[row.at("step") + "|" + row.at("layer") + "|" + row.at("tensor") + "|" + row.at("recipe")] = row;
  for (const auto& w : want) {
    const std::string key = std::to_string(w.step) + "|" + w.layer + "|" + w.tensor + "|" + w.recipe;
    INFO(key);
    REQUIRE(got.count(key) == 1);
    const auto& g = got.at(key);
    CHECK(static_cast<float>(num(g.at("scale"))) == w.scale);
    CHECK(static_cast<float>(num(g.at("amax"))) == w.amax);
    CHECK(std::stoll(g.at("numel")) == w.numel);
    CHECK(std::stoll(g.at("underflow_count")) == w.underflow);
    CHECK(std::stoll(g.at("overflow_count")) == w.overflow);
    CHECK(std::stoll(g.at("saturated_count")) == w.saturated);
    const std::pair<const char*, double> sums[] = {
        {"mse", w.mse}, {"rel_mse", w.rel_mse}, {"sqnr_db", w.sqnr_db}, {"cos", w.cos}};
    for (const auto& [col, v] : sums) {
      INFO(col << " got " << g.at(col) << " want " << v);
      CHECK(std::fabs(num(g.at(col)) - v) <= 1e-12 * std::fabs(v));
    }
  }
}

TEST_CASE("the spike is in the shipped data: loss, amax trace, and delayed scaling around it") {
  // Loss: the spike run's step-2 loss exceeds its step-0 loss by more than 1 nat; the sane run's
  // loss never comes back up to its step-0 value.
  const auto spike_loss = read_csv(slurp(kReal / "lm-spike/loss.csv"));
  const auto sane_loss = read_csv(slurp(kReal / "lm-sane/loss.csv"));
  REQUIRE(spike_loss.size() == 300);
  REQUIRE(sane_loss.size() == 300);
  CHECK(num(spike_loss[2].at("loss")) > num(spike_loss[0].at("loss")) + 1.0);
  for (std::size_t s = 1; s < sane_loss.size(); ++s)
    CHECK(num(sane_loss[s].at("loss")) < num(sane_loss[0].at("loss")));

  // Amax trace: the first layer's gradient peaks at the spike step, far above anything the sane
  // run reaches, and the last FC2's input grows far beyond the sane run's.
  const auto [spike_g, spike_g_step] = trace_max("lm-spike", "layers.0.self_attention.linear_qkv.gradient");
  const auto sane_g = trace_max("lm-sane", "layers.0.self_attention.linear_qkv.gradient").first;
  CHECK(spike_g_step == 2);
  CHECK(spike_g > 5 * sane_g);
  CHECK(trace_max("lm-spike", "layers.3.mlp.linear_fc2.activation").first >
        10 * trace_max("lm-sane", "layers.3.mlp.linear_fc2.activation").first);

  // fp8-advisor: delayed scaling stays above 20 dB SQNR everywhere on the sane run and collapses
  // below 10 dB on the spike run (scales from the pre-spike history), current scaling does not.
  for (const std::string name : {"lm-sane", "lm-spike"}) {
    INFO(name);
    TempDir out;
    const auto r = run("run --capture " + capture(name) + " --amax-trace " + trace(name) + " --out " +
                       shell_quote(out.path.string()) + " --format hybrid --recipes current,delayed --no-gemms");
    REQUIRE(r.rc == 0);
    double min_delayed = 1e9, min_current = 1e9;
    for (const auto& row : read_csv(slurp(out.path / "metrics.csv"))) {
      const double db = num(row.at("sqnr_db"));
      if (row.at("recipe") == "current") min_current = std::min(min_current, db);
      else min_delayed = std::min(min_delayed, db);
    }
    CHECK(min_current > 20.0);
    if (name == "lm-sane") CHECK(min_delayed > 20.0);
    else CHECK(min_delayed < 10.0);
  }
}

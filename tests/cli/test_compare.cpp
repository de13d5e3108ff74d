// End-to-end tests of `fp8-advisor compare`: a planted divergence ranks first with its numbers,
// lm-sane against lm-spike (datasets/real) ranks the spike's first-layer gradient first, a run
// folder compares exactly like the capture it was made from, a side's training log makes its delayed
// rows exact, and the error lines word for word.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cli/cli_support.hpp"
#include "datasets/safetensors_builder.hpp"

namespace {

using namespace fp8a::cli_test;

// Metrics of a capture evaluated here are exact counts over 1000 elements, and MSE sums of a few
// terms: 1e-9 relative covers the float64 rounding of any summation order.
constexpr double kRelTol = 1e-9;

std::string q(const fs::path& p) { return shell_quote(p.string()); }

// A safetensors capture file of 1-D F32 tensors at `step`.
void write_capture(const fs::path& file, std::int64_t step,
                   const std::vector<std::pair<std::string, std::vector<float>>>& tensors) {
  std::vector<fp8a::test::TensorSpec> specs;
  for (const auto& [name, values] : tensors)
    specs.push_back({name, "F32", {static_cast<std::int64_t>(values.size())}, values});
  const auto bytes = fp8a::test::build_file(specs, {{"step", std::to_string(step)}});
  write_bytes(file, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

// 1000 values 1..4 (no tie of E4M3 rounding at scale 448/4), the last `tiny` of them 1e-9: those
// flush to zero under per-tensor current scaling.
std::vector<float> healthy(int tiny, float gain = 1.0f) {
  std::vector<float> v(1000);
  for (int i = 0; i < 1000; ++i) v[i] = gain * (1.0f + 3.0f * static_cast<float>(i % 97) / 97.0f + 1e-3f);
  v[0] = 4.0f * gain;
  for (int i = 0; i < tiny; ++i) v[999 - i] = 1e-9f;
  return v;
}

// NVIDIA's example of a bad run's FC2 input: 80 % of the elements (35) flush to zero because 20 %
// are 2e7 (amax), so scale = 448 / 2e7 puts 35 at 7.8e-4 < 2^-10, half E4M3's smallest
// subnormal; 2e7 * scale = 448 is exact. MSE = 0.8 * 35^2 = 980.
std::vector<float> flushed() {
  std::vector<float> v(1000, 35.0f);
  for (int i = 0; i < 200; ++i) v[i * 5] = 2e7f;
  return v;
}

// The named fields of a compare.csv row.
void check_fields(const Row& row, const std::map<std::string, std::string>& expected) {
  for (const auto& [column, value] : expected) {
    INFO(column);
    CHECK(row.at(column) == value);
  }
}

}  // namespace

TEST_CASE("compare: a planted FC2-input underflow ranks first, at the nearest step") {
  TempDir t;
  fs::create_directories(t.path / "base");
  fs::create_directories(t.path / "cand");
  // Both runs: a healthy first layer; the weights of the bad run twice as large (the same relative
  // error: no divergence); the bad run's FC2 input flushed (NVIDIA's example).
  write_capture(t.path / "base/step_100.safetensors", 100,
                {{"layers.0.fc1.activation", healthy(0)},
                 {"layers.3.mlp.linear_fc2.activation", healthy(10)},
                 {"layers.3.mlp.linear_fc2.weight", healthy(0)}});
  write_capture(t.path / "cand/step_120.safetensors", 120,
                {{"layers.0.fc1.activation", healthy(0)},
                 {"layers.3.mlp.linear_fc2.activation", flushed()},
                 {"layers.3.mlp.linear_fc2.weight", healthy(0, 2.0f)},
                 {"layers.5.only_in_cand.activation", healthy(0)}});
  const auto r = run("compare " + q(t.path / "base") + " " + q(t.path / "cand") + " --out " +
                     q(t.path / "out") + " --recipes current --format e4m3");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  const auto rows = read_csv(slurp(t.path / "out/compare.csv"));
  REQUIRE(rows.size() == 3);
  const Row& top = rows[0];
  check_fields(top, {{"rank", "1"}, {"layer", "layers.3.mlp.linear_fc2"}, {"tensor", "activation"},
                     {"driver", "underflow_pct"}, {"base_step", "100"}, {"cand_step", "120"},
                     {"step_note", "nearest: base 100, cand 120"}});
  CHECK(num(top.at("base_underflow_pct")) == 1.0);
  CHECK(num(top.at("cand_underflow_pct")) == 80.0);
  CHECK(num(top.at("cand_mse")) == doctest::Approx(980.0).epsilon(kRelTol));
  CHECK(num(top.at("base_mse")) < 1e-2);
  CHECK(num(top.at("score")) == doctest::Approx(7.9).epsilon(kRelTol));
  CHECK(num(top.at("term_underflow_pct")) == doctest::Approx(7.9).epsilon(kRelTol));
  // The weight doubled: MSE x4, the relative error and so the score unchanged.
  for (const Row& row : rows)
    if (row.at("tensor") == "weight") {
      CHECK(num(row.at("cand_mse")) == doctest::Approx(4 * num(row.at("base_mse"))).epsilon(kRelTol));
      CHECK(num(row.at("score")) < 1e-12);
    }
  // stdout: the header, the counts, the ranked list (rank 1 first), the files written.
  CHECK(r.out.find("3 matches (0 at the same step), unmatched: 0 base rows, 1 cand rows\n") !=
        std::string::npos);
  const auto list_at = r.out.find("\nrank  change  score  driver");
  REQUIRE(list_at != std::string::npos);
  const std::string first = r.out.substr(r.out.find('\n', list_at + 1) + 1, 80);
  CHECK(first.find("1  worse   7.900  underflow_pct  layers.3.mlp.linear_fc2  activation") != std::string::npos);
  CHECK(r.out.find("wrote " + (t.path / "out").string() + "/compare.csv (3 matches), ") != std::string::npos);
  const std::string md = slurp(t.path / "out/compare.md");
  CHECK(md.find("- matched: 3 (0 at the same step, 3 at the nearest step)\n") != std::string::npos);
  CHECK(md.find("- unmatched: 0 base rows in 0 groups, 1 cand rows in 1 groups\n") != std::string::npos);
  CHECK(md.find("| 1 | worse | 7.900 | underflow_pct | layers.3.mlp.linear_fc2 | activation | current | e4m3 | "
                "rowwise | 100 -> 120 | 1.000 -> 80.000 |") != std::string::npos);
  CHECK(md.find("## Only in cand\n\n- layers.5.only_in_cand activation current e4m3 rowwise\n") !=
        std::string::npos);
  // compare.html beside them, rank 1 the first row of its ranked table.
  CHECK(r.out.find("/compare.md (top 3), " + (t.path / "out").string() + "/compare.html (") != std::string::npos);
  const std::string page = slurp(t.path / "out/compare.html");
  CHECK(page.starts_with("<!DOCTYPE html>"));
  const auto ranking = page.find("<section id=\"ranking\">");
  REQUIRE(ranking != std::string::npos);
  CHECK(page.find("<tr class=\"top\"><td class=\"num\">1</td><td>worse</td><td class=\"num\">7.900</td>"
                  "<td>underflow_pct</td><td>layers.3.mlp.linear_fc2</td><td>activation</td>",
                  ranking) != std::string::npos);
  // --quiet: the ranked list alone.
  const auto quiet = run("compare " + q(t.path / "base") + " " + q(t.path / "cand") + " --out " +
                         q(t.path / "out2") + " --recipes current --format e4m3 --quiet");
  REQUIRE(quiet.rc == 0);
  CHECK(quiet.out.rfind("rank  change  score  driver", 0) == 0);
  CHECK(std::count(quiet.out.begin(), quiet.out.end(), '\n') == 4);
}

TEST_CASE("compare: lm-sane against lm-spike ranks the spike's first-layer gradient first") {
  TempDir t;
  const auto sane = kSource / "datasets/real/lm-sane";
  const auto spike = kSource / "datasets/real/lm-spike";
  // Both formats for every recipe, so that all-E4M3's gradient underflow is among the rows.
  const auto r = run("compare " + q(sane) + " " + q(spike) + " --out " + q(t.path / "out") + " --format e4m3,hybrid");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto rows = read_csv(slurp(t.path / "out/compare.csv"));
  // Both hold steps 1, 2, 3 and 299 of the same two layers: every row matched at its own step
  // (the default 9 recipes x 2 formats, less the delayed rows of step 1, which no earlier step
  // replays).
  CHECK(rows.size() == 568);
  for (const Row& row : rows) CHECK(row.at("step_note") == "same step");
  CHECK(r.out.find("568 matches (568 at the same step), unmatched: 0 base rows, 0 cand rows\n") !=
        std::string::npos);
  // The top: after the spike (step 3) the first layer's gradient spans > 100 binades
  // (datasets/real/README.md), so E4M3 under a per-tensor scale replayed from the captured steps
  // flushes 85.6 % of it, against 0.28 % in the sane run; the SQNR barely moves (the flushed values
  // are tiny). Then current scaling (72 %), then block scaling's columnwise copy (64 %).
  const Row& top = rows[0];
  check_fields(top, {{"layer", "layers.0.self_attention.linear_qkv"}, {"tensor", "gradient"},
                     {"recipe", "delayed:history=16:algo=most_recent:margin=0"}, {"format", "e4m3"},
                     {"base_step", "3"}, {"driver", "underflow_pct"}});
  CHECK(num(top.at("cand_underflow_pct")) == doctest::Approx(85.5937).epsilon(1e-5));
  CHECK(num(top.at("base_underflow_pct")) < 0.3);
  CHECK(num(top.at("score")) == doctest::Approx(8.5313).epsilon(1e-4));
  for (int i = 0; i < 6; ++i) {
    CHECK(rows[i].at("layer") == "layers.0.self_attention.linear_qkv");
    CHECK(rows[i].at("tensor") == "gradient");
    CHECK(rows[i].at("base_step") == "3");
  }
  // Then delayed scaling's FC2 weight at the spike step: 63 % saturated.
  check_fields(rows[6], {{"layer", "layers.3.mlp.linear_fc2"}, {"tensor", "weight"},
                         {"driver", "saturated_pct"}, {"base_step", "2"}});
  // Worse rows first, then better ones; each part by score.
  std::size_t worse = 0;
  while (worse < rows.size() && rows[worse].at("change") == "worse") ++worse;
  for (std::size_t i = worse; i < rows.size(); ++i) CHECK(rows[i].at("change") != "worse");
  for (std::size_t i = 1; i < rows.size(); ++i)
    if (i != worse) CHECK(num(rows[i - 1].at("score")) >= num(rows[i].at("score")));
  CHECK(worse > 0);
  CHECK(worse < rows.size());
  // Reversed sides: the same scores (the terms are symmetric), worse and better swapped.
  const auto back = run("compare " + q(spike) + " " + q(sane) + " --out " + q(t.path / "back") + " --format e4m3,hybrid");
  REQUIRE(back.rc == 0);
  const auto back_rows = read_csv(slurp(t.path / "back/compare.csv"));
  REQUIRE(back_rows.size() == rows.size());
  std::multiset<std::string> scores, back_scores;
  std::size_t back_better = 0, better = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    scores.insert(rows[i].at("score"));
    back_scores.insert(back_rows[i].at("score"));
    better += rows[i].at("change") == "better";
    back_better += back_rows[i].at("change") == "better";
  }
  CHECK(scores == back_scores);
  CHECK(back_better == worse);
  CHECK(std::count_if(back_rows.begin(), back_rows.end(), [](const Row& x) { return x.at("change") == "worse"; }) ==
        static_cast<std::ptrdiff_t>(better));
}

TEST_CASE("compare: a run --out folder gives the scores of the capture it was made from") {
  TempDir t;
  const auto sane = kSource / "datasets/real/lm-sane";
  const auto spike = kSource / "datasets/real/lm-spike";
  const std::string lists = " --recipes current,delayed,block,mxfp8,bf16 --format hybrid";
  const auto made = run("run --capture " + q(sane) + " --out " + q(t.path / "sane-run") + lists +
                        " --no-gemms --quiet");
  INFO(made.err);
  REQUIRE(made.rc == 0);
  const auto direct = run("compare " + q(sane) + " " + q(spike) + " --out " + q(t.path / "a") + lists);
  // The folder's own recipes and formats are used when none are given.
  const auto folder = run("compare " + q(t.path / "sane-run") + " " + q(spike) + " --out " + q(t.path / "b"));
  const auto both = run("compare " + q(t.path / "sane-run") + " " + q(t.path / "sane-run") + " --out " +
                        q(t.path / "c"));
  REQUIRE(direct.rc == 0);
  REQUIRE(folder.rc == 0);
  REQUIRE(both.rc == 0);
  const std::string csv = slurp(t.path / "a/compare.csv");
  CHECK(read_csv(csv).size() == 154);
  CHECK(slurp(t.path / "b/compare.csv") == csv);
  CHECK(folder.out.find("(run folder, 154 rows), cand ") != std::string::npos);
  for (const Row& row : read_csv(slurp(t.path / "c/compare.csv"))) CHECK(row.at("score") == "0");

  // A folder of a --format auto run (the default) is compared under auto: MXFP8 in e4m3 only.
  const auto made_auto = run("run --capture " + q(sane) + " --out " + q(t.path / "auto-run") +
                             " --recipes current,mxfp8 --no-gemms --quiet");
  REQUIRE(made_auto.rc == 0);
  const auto direct_auto = run("compare " + q(sane) + " " + q(spike) + " --out " + q(t.path / "d") + " --recipes current,mxfp8");
  const auto folder_auto = run("compare " + q(t.path / "auto-run") + " " + q(spike) + " --out " + q(t.path / "e"));
  REQUIRE(direct_auto.rc == 0);
  REQUIRE(folder_auto.rc == 0);
  const Table auto_rows = read_csv(slurp(t.path / "d/compare.csv"));
  CHECK(slurp(t.path / "e/compare.csv") == slurp(t.path / "d/compare.csv"));
  REQUIRE(!auto_rows.empty());
  for (const Row& row : auto_rows) CHECK(row.at("format") == (row.at("recipe") == "mxfp8" ? "e4m3" : "hybrid"));
}

TEST_CASE("compare: each side's training log makes its delayed rows exact") {
  TempDir t;
  const auto sane = kSource / "datasets/real/lm-sane";
  const auto spike = kSource / "datasets/real/lm-spike";
  const auto sane_log = sane / "amax_trace_rank0.csv";
  const auto spike_log = spike / "amax_trace_rank0.csv";
  const std::string lists = " --recipes current,delayed:history=16:algo=most_recent --format hybrid";
  const auto plain = run("compare " + q(sane) + " " + q(spike) + " --out " + q(t.path / "plain") + lists);
  const auto logged = run("compare " + q(sane) + " " + q(spike) + " --out " + q(t.path / "logged") + lists +
                          " --base-training-log " + q(sane_log) + " --cand-training-log " + q(spike_log));
  // The reference: run with the same log, whose delayed replay is exact.
  const auto made = run("run --capture " + q(sane) + " --training-log " + q(sane_log) + " --out " +
                        q(t.path / "sane-run") + lists + " --no-gemms --quiet");
  INFO(logged.err);
  REQUIRE(plain.rc == 0);
  REQUIRE(logged.rc == 0);
  REQUIRE(made.rc == 0);
  // Rows by (layer, tensor, recipe, orientation, step).
  const auto by_key = [](const std::vector<Row>& rows, const char* step) {
    std::map<std::string, Row> out;
    for (const Row& r : rows)
      out[r.at("layer") + " " + r.at("tensor") + " " + r.at("recipe") + " " + r.at("orientation") +
          " " + r.at(step)] = r;
    return out;
  };
  const auto without = by_key(read_csv(slurp(t.path / "plain/compare.csv")), "base_step");
  const auto with = by_key(read_csv(slurp(t.path / "logged/compare.csv")), "base_step");
  const auto reference = by_key(read_csv(slurp(t.path / "sane-run/metrics.csv")), "step");
  // The log also replays the first captured step (step 0 precedes it): 2 layers x 3 roles more.
  CHECK(with.size() == without.size() + 6);
  const std::string delayed = " delayed:history=16:algo=most_recent:margin=0 rowwise ";
  // Step 299: without a log its history is steps 1-3 (the last captured), with it steps 283-298.
  const std::string key = "layers.3.mlp.linear_fc2 weight" + delayed + "299";
  REQUIRE(with.count(key) == 1);
  REQUIRE(without.count(key) == 1);
  CHECK(with.at(key).at("score") != without.at(key).at("score"));
  CHECK(with.at(key).at("base_sqnr_db") != without.at(key).at("base_sqnr_db"));
  // Every delayed base row is the exact replay of run --training-log.
  std::size_t delayed_rows = 0;
  for (const auto& [k, row] : with) {
    if (row.at("recipe") == "current") continue;
    ++delayed_rows;
    INFO(k);
    REQUIRE(reference.count(k) == 1);
    for (const char* metric : {"sqnr_db", "underflow_pct", "saturated_pct"})
      CHECK(num(row.at(std::string("base_") + metric)) ==
            doctest::Approx(num(reference.at(k).at(metric))).epsilon(kRelTol));
  }
  CHECK(delayed_rows == 24);
  // Current scaling does not read the log: the same scores.
  std::size_t current_rows = 0;
  for (const auto& [k, row] : without)
    if (row.at("recipe") == "current") {
      ++current_rows;
      INFO(k);
      REQUIRE(with.count(k) == 1);
      CHECK(with.at(k).at("score") == row.at("score"));
    }
  CHECK(current_rows > 0);
  // compare.md names each side's log; the log-less run names none.
  const std::string md = slurp(t.path / "logged/compare.md");
  CHECK(md.find("; training log `" + sane_log.string() + "` (delayed scaling replayed exactly))\n- cand: `") !=
        std::string::npos);
  CHECK(md.find("; training log `" + spike_log.string() + "` (delayed scaling replayed exactly))\n- matched: ") !=
        std::string::npos);
  CHECK(slurp(t.path / "plain/compare.md").find("training log") == std::string::npos);
}

TEST_CASE("compare: errors, word for word") {
  TempDir t;
  const auto sane = (kSource / "datasets/real/lm-sane").string();
  const auto err = [](const Result& r) { return r.err; };
  auto r = run("compare " + shell_quote(sane) + " --out " + q(t.path / "o"));
  CHECK(r.rc == 2);
  CHECK(err(r) == "fp8-advisor: error: [fp8a.usage.218] fp8-advisor compare: expected two inputs, "
                  "BASE and CAND; got 1\n");
  const auto missing = (t.path / "missing").string();
  r = run("compare " + shell_quote(sane) + " " + shell_quote(missing) + " --out " + q(t.path / "o"));
  CHECK(r.rc == 3);
  CHECK(err(r) == "fp8-advisor: error: [fp8a.io.101] " + missing + ": no such file or directory\n");
  // A run folder whose metrics.csv lacks a column, holds a bad number, or holds no rows.
  const fs::path folder = t.path / "run";
  fs::create_directories(folder);
  write_bytes(folder / "summary.json", "{}");
  write_bytes(folder / "metrics.csv", "step,layer,tensor\n1,l,activation\n");
  r = run("compare " + q(folder) + " " + shell_quote(sane) + " --out " + q(t.path / "o"));
  CHECK(r.rc == 3);
  CHECK(err(r) == "fp8-advisor: error: [fp8a.io.105] " + (folder / "metrics.csv").string() +
                      ":1: no column 'recipe' in the header (not a metrics.csv written by "
                      "fp8-advisor run)\n");
  const std::string head = "step,layer,tensor,recipe,format,orientation,amax,mse,rel_mse,sqnr_db,cos,"
                           "underflow_pct,overflow_pct,saturated_pct\n";
  write_bytes(folder / "metrics.csv",
              head + "1,\"l,1\",activation,current,hybrid,rowwise,1,0.5,1e-3,30,1,0,0,0\n"
                     "2,l,activation,current,hybrid,rowwise,1,fast,1e-3,30,1,0,0,0\n");
  r = run("compare " + q(folder) + " " + shell_quote(sane) + " --out " + q(t.path / "o"));
  CHECK(r.rc == 3);
  CHECK(err(r) == "fp8-advisor: error: [fp8a.io.105] " + (folder / "metrics.csv").string() +
                      ":3: column 'mse': 'fast' is not valid there\n");
  // A bad recipe or format cell is this file's line (exit 3), not a --recipes usage error.
  for (const auto& [cells, column, value] :
       {std::tuple<std::string, std::string, std::string>{"curent,hybrid", "recipe", "curent"},
        {"current:x=1,hybrid", "recipe", "current:x=1"},
        {"current,e9m9", "format", "e9m9"}}) {
    write_bytes(folder / "metrics.csv", head + "2,l,activation," + cells + ",rowwise,1,0.5,1e-3,30,1,0,0,0\n");
    r = run("compare " + q(folder) + " " + shell_quote(sane) + " --out " + q(t.path / "o"));
    CHECK(r.rc == 3);
    CHECK(err(r) == "fp8-advisor: error: [fp8a.io.105] " + (folder / "metrics.csv").string() + ":2: column '" +
                        column + "': '" + value + "' is not valid there\n");
  }
  write_bytes(folder / "metrics.csv", head);
  r = run("compare " + q(folder) + " " + shell_quote(sane) + " --out " + q(t.path / "o") +
          " --recipes current --format hybrid");
  CHECK(r.rc == 3);
  CHECK(err(r) == "fp8-advisor: error: [fp8a.compare.101] compare: base " + folder.string() +
                      ": no evaluated tensor under --recipes current --format hybrid\n");
  // A training log for a run folder's side; a missing log file.
  r = run("compare " + q(folder) + " " + shell_quote(sane) + " --out " + q(t.path / "o") +
          " --base-training-log " + shell_quote(sane + "/amax_trace_rank0.csv"));
  CHECK(r.rc == 2);
  CHECK(err(r) == "fp8-advisor: error: [fp8a.usage.219] fp8-advisor compare: --base-training-log is "
                  "for a capture; base " + folder.string() + " is a run folder (its metrics.csv "
                  "holds the replay)\n");
  r = run("compare " + shell_quote(sane) + " " + shell_quote(sane) + " --out " + q(t.path / "o") +
          " --cand-training-log " + shell_quote(missing));
  CHECK(r.rc == 3);
  CHECK(err(r) == "fp8-advisor: error: [fp8a.io.101] " + missing + ": no such file or directory\n");
  // Two captures of different layers.
  fs::create_directories(t.path / "a");
  fs::create_directories(t.path / "b");
  write_capture(t.path / "a/step_1.safetensors", 1, {{"layers.0.fc1.activation", healthy(0)}});
  write_capture(t.path / "b/step_1.safetensors", 1, {{"layers.1.fc1.activation", healthy(0)}});
  r = run("compare " + q(t.path / "a") + " " + q(t.path / "b") + " --out " + q(t.path / "o") +
          " --recipes current");
  CHECK(r.rc == 3);
  CHECK(err(r) == "fp8-advisor: error: [fp8a.compare.102] compare: nothing matched: no (layer, "
                  "tensor, recipe, format, orientation) of base " + (t.path / "a").string() +
                  " is in cand " + (t.path / "b").string() + "\n");
  CHECK(!fs::exists(t.path / "o"));
}

TEST_CASE("compare of run folders in other formats: refused when they share none, said when they share some") {
  // Issue 56 item 7: an e4m3 folder against a hybrid one named a --format e4m3 nobody typed, and
  // e4m3,hybrid against hybrid dropped e4m3 without a word.
  TempDir t;
  REQUIRE(run("synth --preset healthy --out " + q(t.path / "cap")).rc == 0);
  for (const char* f : {"e4m3", "hybrid", "e4m3,hybrid"})
    REQUIRE(run("run --capture " + q(t.path / "cap") + " --out " + q(t.path / (std::string("r_") + f)) +
                " --format " + f + " --no-gemms --quiet")
                .rc == 0);
  auto r = run("compare " + q(t.path / "r_e4m3") + " " + q(t.path / "r_hybrid") + " --out " + q(t.path / "o1"));
  CHECK(r.rc == 3);
  CHECK(r.err == "fp8-advisor: error: [fp8a.compare.102] compare: base " + (t.path / "r_e4m3").string() +
                      " was evaluated in format e4m3 and cand " + (t.path / "r_hybrid").string() +
                      " in hybrid: no format to compare; run both in one (--format)\n");
  r = run("compare " + q(t.path / "r_e4m3,hybrid") + " " + q(t.path / "r_hybrid") + " --out " + q(t.path / "o2"));
  CHECK(r.rc == 0);
  CHECK(r.err.find("fp8-advisor: compare: base was evaluated in format e4m3,hybrid, cand in hybrid: comparing "
                   "hybrid only\n") != std::string::npos);
}

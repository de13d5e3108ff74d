// fp8-advisor whatif end to end: the same numbers as metrics.csv and gemms.csv of a run on the same
// input, the layer regex, --recipe, --step, the usage errors, plain text on a pipe.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <unistd.h>

#include "cli/cli_support.hpp"
#include "core/text.hpp"
#include "reports/whatif_table.hpp"

using namespace fp8a::cli_test;

namespace {

const std::string kSample = (kSource / "datasets/sample").string();
const std::string kRecipes = "current,delayed:history=16:algo=most_recent,block,mxfp8,bf16";
const std::string kFc2 = "layers.1.mlp.linear_fc2";

// A number as whatif prints it: printf with the column's digits, or inf/-inf/nan.
std::string fixed(const std::string& csv_field, int decimals) {
  const double v = num(csv_field);
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
  return fp8a::format_text("%.*f", decimals, v);
}
std::string scientific(const std::string& csv_field) {
  const double v = num(csv_field);
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
  return fp8a::format_text("%.*e", fp8a::kWhatifRelErrDigits, v);
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

bool is_role(const std::string& s) { return s == "activation" || s == "weight" || s == "gradient"; }
bool is_gemm(const std::string& s) { return s == "fprop" || s == "dgrad" || s == "wgrad"; }

// whatif's tensor lines by (step, tensor, orientation, candidate): the printed metrics
// (sqnr, rel_mse, underflow, saturated, cos); its GEMM lines by (step, gemm, candidate).
struct Printed {
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::vector<std::string>> tensors;
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<std::string>> gemms;
  std::vector<std::string> titles;
};

// The lines of layer's section ("" for the first layer's).
Printed parse_whatif(const std::string& out, const std::string& layer = "") {
  Printed p;
  std::istringstream in(out);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    const auto w = words(line);
    if (w.size() >= 2 && w[0] == "layer") {
      p.titles.push_back(w[1]);
      inside = layer.empty() ? p.titles.size() == 1 : w[1] == layer;
    }
    if (!inside) continue;
    if (w.size() >= 10 && is_role(w[1]))
      CHECK(p.tensors.emplace(std::tuple{w[0], w[1], w[2], w[3]},
                              std::vector<std::string>{w[5], w[6], w[7], w[8], w[9]}).second);
    if (w.size() == 8 && is_gemm(w[1]) && w[3] == "emulated")
      CHECK(p.gemms.emplace(std::tuple{w[0], w[1], w[2]},
                            std::vector<std::string>{w[4], w[5], w[6], w[7]}).second);
  }
  return p;
}

// Every metrics.csv / gemms.csv row of `layer` (at `step`, "" for all) printed by whatif with the
// same numbers, and nothing else printed.
void check_same_numbers(const fs::path& out_dir, const Printed& p, const std::string& layer,
                        const std::string& step = "") {
  std::size_t tensors = 0, gemms = 0;
  for (const Row& r : read_csv(slurp(out_dir / "metrics.csv"))) {
    if (r.at("layer") != layer || (!step.empty() && r.at("step") != step)) continue;
    ++tensors;
    const auto key = std::tuple{r.at("step"), r.at("tensor"), r.at("orientation"), r.at("recipe") + "/" + r.at("format")};
    INFO("metrics.csv row ", r.at("step"), " ", r.at("tensor"), " ", r.at("orientation"), " ", std::get<3>(key));
    REQUIRE(p.tensors.count(key) == 1);
    const auto& got = p.tensors.at(key);
    CHECK(got[0] == fixed(r.at("sqnr_db"), fp8a::kWhatifSqnrDecimals));
    CHECK(got[1] == scientific(r.at("rel_mse")));
    CHECK(got[2] == fixed(r.at("underflow_pct"), fp8a::kWhatifPctDecimals));
    CHECK(got[3] == fixed(r.at("saturated_pct"), fp8a::kWhatifPctDecimals));
    CHECK(got[4] == fixed(r.at("cos"), fp8a::kWhatifCosDecimals));
  }
  for (const Row& r : read_csv(slurp(out_dir / "gemms.csv"))) {
    if (r.at("layer") != layer || r.at("engine") != "emulated" || (!step.empty() && r.at("step") != step))
      continue;
    ++gemms;
    const auto key = std::tuple{r.at("step"), r.at("gemm"), r.at("recipe") + "/" + r.at("format")};
    INFO("gemms.csv row ", r.at("step"), " ", r.at("gemm"), " ", std::get<2>(key));
    REQUIRE(p.gemms.count(key) == 1);
    const auto& got = p.gemms.at(key);
    CHECK(got[0] == scientific(r.at("rel_fro_err")));
    CHECK(got[1] == fixed(r.at("cos"), fp8a::kWhatifCosDecimals));
    CHECK(got[2] == fixed(r.at("zeroed_pct"), fp8a::kWhatifPctDecimals));
    CHECK(got[3] == fixed(r.at("sign_flip_pct"), fp8a::kWhatifPctDecimals));
  }
  CHECK(tensors > 0);
  CHECK(gemms > 0);
  CHECK(p.tensors.size() == tensors);
  CHECK(p.gemms.size() == gemms);
}

}  // namespace

TEST_CASE("whatif prints the same numbers as metrics.csv and gemms.csv of a run, in plain text on a pipe") {
  TempDir out;
  const std::string common = "--capture " + kSample + " --training-log " + kSample + "/amax_trace.csv";
  const Result ran = run("run " + common + " --recipes " + kRecipes + " --cost none --out " + out.path.string());
  REQUIRE(ran.rc == 0);
  const Result w = run("whatif " + common + " --recipe " + kRecipes + " --layer '^layers\\.1\\.mlp\\.linear_fc2$'");
  REQUIRE(w.rc == 0);
  CHECK(w.err.empty());
  CHECK(w.out.find('\x1b') == std::string::npos);  // a pipe: no terminal codes
  const Printed p = parse_whatif(w.out);
  CHECK(p.titles == std::vector<std::string>{kFc2});
  check_same_numbers(out.path, p, kFc2);

  SUBCASE("--step: the step alone, the delayed replay still from every step (the same numbers)") {
    const Result s = run("whatif " + common + " --recipe " + kRecipes + " --layer " + kFc2 + "$ --step 200");
    REQUIRE(s.rc == 0);
    const Printed ps = parse_whatif(s.out);
    for (const auto& [key, values] : ps.tensors) CHECK(std::get<0>(key) == "200");
    check_same_numbers(out.path, ps, kFc2, "200");
  }
}

TEST_CASE("whatif: the layer regex, --recipe, --format") {
  const Result w = run("whatif --capture " + kSample + " --layer 'fc2$' --recipe block --format hybrid");
  REQUIRE(w.rc == 0);
  CHECK(parse_whatif(w.out).titles == std::vector<std::string>{"layers.0.mlp.linear_fc2", kFc2});
  for (const std::string& layer : {std::string("layers.0.mlp.linear_fc2"), kFc2}) {
    const Printed p = parse_whatif(w.out, layer);
    CHECK(p.tensors.size() == 10);  // 2 steps x (X, W, dY rowwise; X, dY columnwise; 128x128 W once)
    CHECK(p.gemms.size() == 6);     // 2 steps x 3 GEMMs
    for (const auto& [key, values] : p.tensors) CHECK(std::get<3>(key) == "block/hybrid");
    for (const auto& [key, values] : p.gemms) CHECK(std::get<2>(key) == "block/hybrid");
  }
  CHECK(w.out.find("linear_qkv") == std::string::npos);
}

TEST_CASE("whatif usage errors: an unknown layer gets did you mean, a bad regex is named, a step not captured") {
  Result r = run("whatif --capture " + kSample + " --layer layers.1.mlp.linear_fc3");
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(r.err ==
        "fp8-advisor: error: [fp8a.usage.216] --layer 'layers.1.mlp.linear_fc3' matches no captured layer "
        "(did you mean 'layers.1.mlp.linear_fc2' or 'layers.0.mlp.linear_fc2'?); 4 captured, "
        "'fp8-advisor inspect' lists them\n");
  r = run("whatif --capture " + kSample + " --layer '(fc2'");
  CHECK(r.rc == 2);
  CHECK(r.err.starts_with("fp8-advisor: error: [fp8a.usage.216] --layer '(fc2' is not a valid regular expression: "));
  r = run("whatif --capture " + kSample + " --layer fc2 --step 7");
  CHECK(r.rc == 2);
  CHECK(r.err == "fp8-advisor: error: [fp8a.usage.217] --step 7: the matched layers were captured at steps 100, 200\n");
  r = run("whatif --capture " + kSample);
  CHECK(r.rc == 2);
  CHECK(r.err.find("[fp8a.usage.203]") != std::string::npos);
}

TEST_CASE("whatif on a terminal: the worst value of each metric column highlighted") {
  // util-linux script gives the command a pseudo-terminal; its output (the terminal's) is kept.
  if (::access("/usr/bin/script", X_OK) != 0) {
    MESSAGE("no /usr/bin/script: the terminal case is not tested");
    return;
  }
  TempDir t;
  const std::string inner = shell_quote(kBinary) + " whatif --capture " + shell_quote(kSample) +
                            " --layer layers.1.mlp.linear_fc2 --recipe current,delayed";
  const std::string cmd = "/usr/bin/script -qec " + shell_quote(inner) + " /dev/null > " +
                          shell_quote((t.path / "tty.txt").string()) + " 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string tty = slurp(t.path / "tty.txt");
  // ANSI bold + reverse on, then reset: at least one highlighted cell per metric column of the
  // tensor table and of the GEMM table.
  std::size_t marks = 0;
  for (auto p = tty.find("\x1b["); p != std::string::npos; p = tty.find("\x1b[", p + 1)) ++marks;
  CHECK(marks >= 2 * 5);
  CHECK(tty.find("\x1b[0m") != std::string::npos);
  // The same numbers as on a pipe, once the codes are gone.
  std::string plain;
  for (std::size_t i = 0; i < tty.size();) {
    if (tty[i] == '\x1b') {
      i = tty.find('m', i) + 1;
      continue;
    }
    if (tty[i] != '\r') plain += tty[i];
    ++i;
  }
  const auto piped = run("whatif --capture " + shell_quote(kSample) +
                         " --layer layers.1.mlp.linear_fc2 --recipe current,delayed");
  REQUIRE(piped.rc == 0);
  CHECK(plain == piped.out);
}

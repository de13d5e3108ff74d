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
#include "cli/layer_match.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "datasets/safetensors_builder.hpp"
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

// The usage error matching_layers throws for `pattern` over `names` (exit code 2 checked).
std::string match_error(const std::string& pattern, const std::vector<std::string>& names) {
  try {
    (void)fp8a::cli::matching_layers(pattern, names);
  } catch (const fp8a::Error& e) {
    CHECK(e.exit_code() == 2);
    return e.what();
  }
  FAIL("no error for --layer " << fp8a::quoted_input(pattern));
  return {};
}

// A safetensors capture holding one 1-D F32 activation per layer name (<layer>.activation).
void write_activations(const fs::path& file, const std::vector<std::string>& layers) {
  std::vector<fp8a::test::TensorSpec> specs;
  std::vector<float> values(256);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + static_cast<float>(i % 13) / 13.0f;
  for (const std::string& layer : layers) specs.push_back({layer + ".activation", "F32", {256}, values});
  const auto bytes = fp8a::test::build_file(specs, {{"step", "5"}});
  write_bytes(file, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

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

TEST_CASE("--layer matching is RE2: linear in the name, bounded stack, and its refusals are usage errors") {
  // 50 kB names: std::regex recursed once per character here (a segfault on 'M+') and took
  // exponential time on (L*)*X; RE2 is linear in the name whatever the pattern.
  constexpr std::size_t kLong = 50'000;
  const std::string ms(kLong, 'M');
  const std::string ls(kLong, 'L');
  const std::vector<std::string> names = {"layers.0.mlp.linear_fc1", ms, ls, ls + "X"};
  CHECK(fp8a::cli::matching_layers("M+", names) == std::vector<std::string>{ms});
  CHECK(fp8a::cli::matching_layers("^M+$", names) == std::vector<std::string>{ms});
  CHECK(fp8a::cli::matching_layers("(L*)*X", names) == std::vector<std::string>{ls + "X"});
  CHECK(match_error("(L*)*X", {ls}) ==
        "[fp8a.usage.216] --layer '(L*)*X' matches no captured layer; 1 captured, 'fp8-advisor inspect' lists them");
  // The documented syntax for the usual patterns: a search, \d and escapes as in ECMAScript/Python.
  CHECK(fp8a::cli::matching_layers("fc\\d$", names) == std::vector<std::string>{"layers.0.mlp.linear_fc1"});
  CHECK(fp8a::cli::matching_layers("mlp\\.", names) == std::vector<std::string>{"layers.0.mlp.linear_fc1"});

  // Lookaround and backreferences: RE2 has none; the error names the pattern and RE2's reason.
  CHECK(match_error("fc(?=1)", names) ==
        "[fp8a.usage.216] --layer 'fc(?=1)' is not a valid regular expression: invalid perl operator '(?=' "
        "(RE2 syntax: no lookaround, no backreferences)");
  CHECK(match_error("(?<!x)fc1", names) ==
        "[fp8a.usage.216] --layer '(?<!x)fc1' is not a valid regular expression: invalid perl operator '(?<' "
        "(RE2 syntax: no lookaround, no backreferences)");
  CHECK(match_error("(fc)\\1", names) ==
        "[fp8a.usage.216] --layer '(fc)\\\\1' is not a valid regular expression: invalid escape sequence '\\\\1' "
        "(RE2 syntax: no lookaround, no backreferences)");
  // A pattern whose compiled form exceeds the memory budget: refused, shown cut to 200 characters.
  const std::string huge(std::size_t{1} << 20, 'a');
  CHECK(match_error(huge, names) ==
        "[fp8a.usage.216] --layer '" + std::string(200, 'a') + "...' (1048576 bytes) is not a valid regular "
        "expression: its compiled form exceeds RE2's memory budget of 8 MiB (RE2 syntax: no "
        "lookaround, no backreferences)");
  // Deep nesting: no recursion on the call stack.
  const std::string deep = std::string(60'000, '(') + "M" + std::string(60'000, ')');
  CHECK(fp8a::cli::matching_layers(deep, names) == std::vector<std::string>{ms});
  // Bytes that are not UTF-8, and terminal escapes, are shown escaped in the one-line message.
  CHECK(match_error("\xff", names) ==
        "[fp8a.usage.216] --layer '\\xff' is not a valid regular expression: invalid UTF-8 "
        "(RE2 syntax: no lookaround, no backreferences)");
  CHECK(match_error("\x1bM", names) ==
        "[fp8a.usage.216] --layer '\\x1bM' matches no captured layer; 4 captured, 'fp8-advisor inspect' lists them");
}

TEST_CASE("whatif --layer on a capture of long layer names: the match and exit 0, a no-match promptly") {
  // 3,990-byte names (within any limit on name length at read time, 4096 bytes), built here.
  TempDir t;
  const std::string ms(3990, 'M');
  const std::string ls(3990, 'L');
  write_activations(t.path / "long.safetensors", {"layers.0.mlp.linear_fc1", ms, ls});
  const std::string capture = shell_quote((t.path / "long.safetensors").string());
  Result r = run("whatif --capture " + capture + " --recipe current --layer 'M+'");
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  const Printed p = parse_whatif(r.out);
  CHECK(p.titles == std::vector<std::string>{ms});
  CHECK(p.tensors.size() == 1);  // step 5, the activation, rowwise, current/hybrid (--format auto)
  r = run("whatif --capture " + capture + " --recipe current --layer '(L*)*X'");
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(r.err ==
        "fp8-advisor: error: [fp8a.usage.216] --layer '(L*)*X' matches no captured layer; 3 captured, "
        "'fp8-advisor inspect' lists them\n");
  r = run("whatif --capture " + capture + " --recipe current --layer 'M(?=M)'");
  CHECK(r.rc == 2);
  CHECK(r.err ==
        "fp8-advisor: error: [fp8a.usage.216] --layer 'M(?=M)' is not a valid regular expression: invalid perl "
        "operator '(?=' (RE2 syntax: no lookaround, no backreferences)\n");
}

TEST_CASE("--layer matching no name among thousands of 50 kB names: did you mean skips names far longer") {
  // edit_distance is |pattern| x |name|; names whose length alone puts them out of reach are not
  // compared (the distance is at least the difference in length), so this returns at once.
  std::vector<std::string> names(2000, std::string(50'000, 'n'));
  names.push_back("layers.0.mlp.linear_fc1");
  CHECK(match_error(std::string(200, 'q') + "layers.0.mlp.linear_fc1", names) ==
        "[fp8a.usage.216] --layer '" + std::string(200, 'q') + "...' (223 bytes) matches no captured layer; "
        "2001 captured, 'fp8-advisor inspect' lists them");
  CHECK(match_error("layers.0.mlp.linear_fc3", names) ==
        "[fp8a.usage.216] --layer 'layers.0.mlp.linear_fc3' matches no captured layer (did you mean "
        "'layers.0.mlp.linear_fc1'?); 2001 captured, 'fp8-advisor inspect' lists them");
}

TEST_CASE("whatif prints a layer name with terminal escapes escaped: no ESC on stdout") {
  TempDir t;
  const std::string evil = "layers.0.evil\x1b[31mred\x1b]0;title\x07";
  write_activations(t.path / "evil.safetensors", {evil});
  const Result r = run("whatif --capture " + shell_quote((t.path / "evil.safetensors").string()) +
                       " --recipe current --layer evil");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\x07') == std::string::npos);
  CHECK(r.out.starts_with("layer layers.0.evil\\x1b[31mred\\x1b]0;title\\x07 (step 5)\n"));
}

TEST_CASE("inspect lists a layer name with terminal escapes escaped: no ESC on stdout") {
  TempDir t;
  write_activations(t.path / "evil.safetensors", {"layers.0.evil\x1b[31mred\rX"});
  const Result r = run("inspect --capture " + shell_quote((t.path / "evil.safetensors").string()));
  REQUIRE(r.rc == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\r') == std::string::npos);
  CHECK(r.out.find("layers.0.evil\\x1b[31mred\\rX  activation") != std::string::npos);
}

// Hostile option values: floating-point options that parse but mean nothing (inf, nan), and bytes
// that a terminal acts on (ESC, C1 controls) or that are not UTF-8, in every option value an
// error echoes: each gives one readable line with its id and exit code 2.
#include <doctest/doctest.h>

#include <string>

#include "cli/cli_support.hpp"
#include "core/text.hpp"

using namespace fp8a::cli_test;

namespace {

// stderr is exactly one line of printable ASCII or valid UTF-8: no control byte but its final
// newline, no invalid byte.
void check_one_readable_line(const std::string& err) {
  INFO(fp8a::quoted_input(err, 400));
  REQUIRE(!err.empty());
  CHECK(err.back() == '\n');
  const std::string line = err.substr(0, err.size() - 1);
  CHECK(!fp8a::first_invalid_utf8(line).has_value());
  for (const char c : line) CHECK((static_cast<unsigned char>(c) >= 0x20 && c != 0x7F));
}

// `run` with the options given, on a capture and --out that are never reached (the options are
// checked first).
Result run_with(const std::string& options) { return run("run --capture no-such-capture --out no-such-out " + options); }

const std::string kEsc = "\x1b[31m";  // SGR red: a terminal acts on it
const std::string kBad = "a\xff\xfe" "b";   // not UTF-8

}  // namespace

TEST_CASE("floating-point options: finite and >= 0, else a usage error naming the option and the value") {
  for (const std::string v : {"inf", "-inf", "nan", "infinity", "-1"}) {
    Result r = run_with("--tokens-per-step=" + v);
    CHECK(r.rc == 2);
    const std::string shown = v == "infinity" ? "inf" : v;
    CHECK(r.err == "fp8-advisor: error: [fp8a.usage.215] --tokens-per-step " + shown +
                       ": expected a finite number >= 0 and <= 1e+12\n");
    r = run_with("--progress-every=" + v);
    CHECK(r.rc == 2);
    CHECK(r.err == "fp8-advisor: error: [fp8a.usage.205] --progress-every " + shown +
                       ": expected a finite number >= 0\n");
  }
  // Finite but beyond any run: 1e305 printed "speedup -nanx", 1e308 changed the choice.
  for (const std::string v : {"1e305", "1e308", "1.000001e12"}) {
    const Result big = run_with("--tokens-per-step " + v);
    CHECK(big.rc == 2);
    CHECK(big.err.find("[fp8a.usage.215] --tokens-per-step ") != std::string::npos);
    CHECK(big.err.find(": expected a finite number >= 0 and <= 1e+12\n") != std::string::npos);
  }
  // Beyond a double: Boost refuses the text itself.
  const Result r = run_with("--tokens-per-step 1e400");
  CHECK(r.rc == 2);
  CHECK(r.err == "fp8-advisor: error: [fp8a.usage.203] fp8-advisor run: the argument ('1e400') for option "
                 "'--tokens-per-step' is invalid\n");
  // The recipe option that takes a number: eps.
  const Result eps = run_with("--recipes current:eps=inf");
  CHECK(eps.rc == 2);
  CHECK(eps.err == "fp8-advisor: error: [fp8a.usage.201] --recipes: bad recipe 'current:eps=inf': eps must be "
                   "a finite number >= 0, got 'inf'\n");
}

TEST_CASE("option values with terminal escapes or bytes that are not UTF-8 are echoed escaped, on one line") {
  struct Case {
    std::string args, err;
  };
  const std::string q_esc = shell_quote(kEsc), q_bad = shell_quote(kBad);
  const Case cases[] = {
      {"run --capture x --out y --recipes " + q_esc,
       "[fp8a.usage.201] --recipes: bad recipe '\\x1b[31m': unknown kind '\\x1b[31m'"},
      {"run --capture x --out y --recipes current:" + q_bad,
       "[fp8a.usage.201] --recipes: bad recipe 'current:a\\xff\\xfeb': unknown option 'a\\xff\\xfeb' for current "
       "(takes pow2, eps=V)"},
      {"run --capture x --out y --recipes delayed:algo=" + q_esc,
       "[fp8a.usage.201] --recipes: bad recipe 'delayed:algo=\\x1b[31m': algo must be max or most_recent, got "
       "'\\x1b[31m'"},
      {"run --capture x --out y --format " + q_esc, "[fp8a.usage.202] --format '\\x1b[31m': expected auto, or e4m3 and/or hybrid"},
      {"run --capture x --out y --gpu " + q_bad,
       "[fp8a.usage.214] --gpu: unknown GPU 'a\\xff\\xfeb'; known: a100, l4, l40s, rtx4090, h100, h200, b200, "
       "gb200, b300, gb300, rtx5090"},
      {"run --capture x --out y --cost " + q_esc, "[fp8a.usage.215] --cost '\\x1b[31m': expected roofline or none"},
      {"run --capture x --out y --device " + q_esc, "[fp8a.usage.206] --device '\\x1b[31m': expected auto, cpu or cuda"},
      {"run --capture x --out y --npy-dtype " + q_bad, "[fp8a.usage.207] --npy-dtype 'a\\xff\\xfeb': the only value is bf16"},
      {"run --capture x --out y --amax-reduction " + q_esc,
       "[fp8a.usage.208] --amax-reduction '\\x1b[31m': expected tp or none"},
      {"run --capture x --out y --gemm-rows " + q_bad,
       "[fp8a.usage.225] --gemm-rows 'a\\xff\\xfeb': expected auto, 0 (all rows) or a number of rows (tokens; dW rows for wgrad)"},
      {"run --capture x --out y --threads " + q_esc,
       "[fp8a.usage.203] fp8-advisor run: the argument ('\\x1b[31m') for option '--threads' is invalid"},
      {"run --capture x --out y " + shell_quote("--" + kEsc),
       "[fp8a.usage.203] fp8-advisor run: unknown option '--\\x1b[31m'"},
      {shell_quote(kBad), "[fp8a.usage.204] unknown command 'a\\xff\\xfeb'; try 'fp8-advisor --help'"},
      {"synth --out y --preset " + q_esc,
       "[fp8a.usage.209] unknown preset '\\x1b[31m'; presets: outlier-growth, wide-gradient, sensitive-ends, "
       "healthy, all, sample, model"},
      {"synth --out y --preset healthy --steps 1," + q_esc,
       "[fp8a.usage.210] --steps: '\\x1b[31m' is not a step number (comma-separated integers 0..10000000)"},
      {"whatif --capture x --layer fc2 --recipe " + shell_quote("\xc2\x9b" "31m"),
       "[fp8a.usage.201] --recipes: bad recipe '\\xc2\\x9b31m': unknown kind '\\xc2\\x9b31m'"},
  };
  for (const Case& c : cases) {
    INFO(fp8a::quoted_input(c.args, 200));
    const Result r = run(c.args);
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    check_one_readable_line(r.err);
    CHECK(r.err == "fp8-advisor: error: " + c.err + "\n");
  }
}

TEST_CASE("whatever an error line holds, main prints it readable: a capture path with ESC and 0xFF") {
  // The path is echoed by the reader; main's last step escapes what reached it raw.
  TempDir out;
  const std::string sample = shell_quote((kSource / "datasets/sample").string());
  for (const std::string& option : {std::string("--capture "), "--capture " + sample + " --training-log "}) {
    const Result r = run("run " + option + shell_quote("/nonexistent/" + kEsc + "x\xff") + " --out " +
                         shell_quote(out.path.string()));
    CHECK(r.rc == 3);
    check_one_readable_line(r.err);
    CHECK(r.err.find("[fp8a.io.101]") != std::string::npos);
    CHECK(r.err.find("\\x1b[31mx\\xff") != std::string::npos);
  }
}

TEST_CASE("--recipes and --recipe are one option in run, compare and whatif; --gpu ignores case") {
  const std::string sample = shell_quote(std::string(FP8A_SOURCE_DIR) + "/datasets/sample");
  TempDir a, b;
  // run --recipe (whatif's spelling), with Megatron's name for current scaling, on "H100".
  const Result r = run("run --capture " + sample + " --out " + shell_quote(a.path.string()) +
                       " --recipe tensorwise --format hybrid --gpu H100 --quiet");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out.rfind("answer: Float8CurrentScaling(fp8_format=Format.HYBRID)  [current/hybrid]\n", 0) == 0);
  // whatif --recipes (run's spelling).
  const Result w = run("whatif --capture " + sample + " --layer layers.0.mlp.linear_fc2 --recipes blockwise --step 100");
  INFO(w.err);
  REQUIRE(w.rc == 0);
  CHECK(w.out.find(" block/hybrid ") != std::string::npos);
  // Both spellings at once: one usage error.
  const Result both = run_with("--recipe current --recipes block");
  CHECK(both.rc == 2);
  CHECK(both.err == "fp8-advisor: error: [fp8a.usage.201] --recipes and --recipe are one option: give it once\n");
}

// Hostile layer names through `fp8-advisor run` and `compare` (issue 25): each name the issue
// found breaking an output, made here byte by byte, and every output read back by a strict
// parser (tests/fuzz/name_outputs.hpp says what each must give back).
#include <doctest/doctest.h>

#include <string>

#include "fuzz/name_outputs.hpp"

using fp8a::cli_test::run;
using fp8a::cli_test::shell_quote;
using fp8a::cli_test::slurp;
using fp8a::cli_test::TempDir;
using fp8a::name_test::check_name;

namespace {

std::string bytes(const char* s, std::size_t n) { return std::string(s, n); }

// Runs `run` on a capture of the name; the out folder's path.
fp8a::cli_test::Result run_on(const TempDir& t, const std::string& name) {
  const auto cap = fp8a::name_test::write_capture(t.path / "cap", name);
  return run("run --capture " + shell_quote(cap.string()) + " --out " + shell_quote((t.path / "out").string()) +
             " --cost none");
}

}  // namespace

TEST_CASE("names: a CR, NEL or U+2028 in a name adds no YAML key (item 1)") {
  check_name("x\rinjected: {enabled: false}");
  // An nvdlfw_inspect section, as a name would smuggle it in after a CR.
  check_name("m\r\rlayer_all:\r  enabled: true\r  layers:\r    layer_name_regex_pattern: '.*'\r"
             "  transformer_engine:\r    DisableQuantizationLayer:\r      enabled: true");
  check_name("a\xC2\x85" "b: c");            // NEL, a YAML 1.1 line break
  check_name("a\xE2\x80\xA8" "b: c");        // LINE SEPARATOR
  check_name("a\xE2\x80\xA9" "b: c");        // PARAGRAPH SEPARATOR
  check_name("a\nmatchers: null");
  check_name("it's \"quoted\" ['x'] {y} #z & *w");
}

TEST_CASE("names: a NUL neither truncates the YAML files nor reaches stdout raw (item 2)") {
  const std::string name = bytes("lay\0er", 6);
  check_name(name);
  TempDir t;
  const auto r = run_on(t, name);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("lay\\x00er") != std::string::npos);
  const std::string html = slurp(t.path / "out/report.html");
  CHECK(html.find("lay\\x00er") != std::string::npos);
  // The YAML files end as a YAML file does, after the NUL's layer.
  CHECK(slurp(t.path / "out/nvdlfw_inspect.yaml").find("lay\\x00er") != std::string::npos);
  CHECK(slurp(t.path / "out/te_precision_config.yaml").ends_with("    enabled: true\n"));
}

TEST_CASE("names: HTML, Markdown and ANSI escapes stay text (item 3)") {
  check_name("<script>alert(1)</script>");
  check_name("<img src=x onerror=alert(1)>");
  check_name("a|b*c*_d_`e`[f](http://g)~h~ &amp; <br>");
  check_name("\x1b[31mred\x1b[0m\x1b]0;title\x07");
  check_name("# heading");
  TempDir t;
  const auto r = run_on(t, "\x1b[2Jwipe");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find("\\x1b[2Jwipe") != std::string::npos);
  const std::string md = slurp(t.path / "out/report.md");
  CHECK(md.find('\x1b') == std::string::npos);
  CHECK(md.find("\\\\x1b\\[2Jwipe") != std::string::npos);  // \x1b[2Jwipe, \ and [ escaped
}

TEST_CASE("names: CSV formula cells get a leading ' that compare reads back (item 4)") {
  for (const char* name : {"=cmd|' /C calc'!A0", "+1+1", "-2", "@SUM(A1)", "\tx", "\rx", "'already"})
    check_name(name);
  TempDir t;
  REQUIRE(run_on(t, "=HYPERLINK(\"http://x\")").rc == 0);
  const std::string csv = slurp(t.path / "out/metrics.csv");
  CHECK(csv.find(",\"'=HYPERLINK(\"\"http://x\"\")\",") != std::string::npos);
}

TEST_CASE("names: over 4096 bytes refused when the capture is read, up to it accepted (item 5)") {
  check_name(std::string(4096 - std::string(".activation").size(), 'n'));
  TempDir t;
  const std::string name(1 << 20, 'L');  // the 1 MB name
  const auto r = run_on(t, name);
  CHECK(r.rc == 3);
  const std::string file = (t.path / "cap/step_1.safetensors").string();
  CHECK(r.err == "fp8-advisor: error: [fp8a.capture.410] " + file + ": tensor '" + std::string(80, 'L') + "...' (" +
                     std::to_string(name.size() + 11) + " bytes): name longer than 4096 bytes (real module names "
                     "are under 300)\n");
}

TEST_CASE("names: bytes outside UTF-8 and backslashes in JSON, losslessly (item 6)") {
  check_name("caf\xE9");           // Latin-1
  check_name("\xFF\xFE" "x");
  check_name("a\\xffb");           // a real backslash: \\ in JSON, so it is not read as a byte
  check_name("bad\xC0\xAF" "seq");  // overlong
  TempDir t;
  REQUIRE(run_on(t, "w\xFFx").rc == 0);
  const std::string json = slurp(t.path / "out/recipe.json");
  CHECK(json.find("\"layer\": \"w\\\\xffx\"") != std::string::npos);
}

TEST_CASE("names: compare refuses a metrics.csv layer over 4096 bytes (item 5)") {
  TempDir t;
  REQUIRE(run_on(t, "short").rc == 0);
  std::string csv = slurp(t.path / "out/metrics.csv");
  const std::string long_name(5000, 'L');
  for (std::size_t at = csv.find(",short,"); at != std::string::npos; at = csv.find(",short,", at))
    csv.replace(at + 1, 5, long_name);
  fp8a::cli_test::write_bytes(t.path / "out/metrics.csv", csv);
  std::filesystem::remove(t.path / "out/.fp8-advisor-outputs-run.json");  // edited by hand: no manifest
  const auto r = run("compare " + shell_quote((t.path / "out").string()) + " " + shell_quote((t.path / "out").string()) +
                     " --out " + shell_quote((t.path / "cmp").string()));
  CHECK(r.rc == 3);
  CHECK(r.err == "fp8-advisor: error: [fp8a.io.105] " + (t.path / "out/metrics.csv").string() +
                     ":2: column 'layer': '" + std::string(80, 'L') + "...' (5000 bytes) is not valid there\n");
}

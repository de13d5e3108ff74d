// The policy file: the presets, the shipped JSON files, custom files, and every error path with
// its exact message.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.hpp"
#include "core/text.hpp"
#include "policies/policy.hpp"

namespace {

namespace fs = std::filesystem;

const fs::path kPolicies = fs::path(FP8A_SOURCE_DIR) / "policies";

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> b(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) b[i] = static_cast<std::byte>(s[i]);
  return b;
}

// The message of the error that parsing `text` as policy file "p.json" throws.
std::string parse_error(const std::string& text) {
  try {
    (void)fp8a::parse_policy(text, "p.json");
  } catch (const fp8a::Error& e) {
    CHECK(e.exit_code() == 3);
    return e.what();
  }
  FAIL("no error for " << text);
  return {};
}

}  // namespace

TEST_CASE("the shipped policy files are the presets: default in full, te-autoswitch over its base") {
  // The presets are these files, built in (policies/policy_files.hpp). default_policy.json is
  // policy_to_json's form of the whole policy (FP8A_UPDATE_POLICY_FILES=1 rewrites it, e.g. after
  // a format change; on purpose only, like tests/golden/).
  const std::string want = fp8a::policy_to_json(fp8a::default_policy());
  if (std::getenv("FP8A_UPDATE_POLICY_FILES") != nullptr)
    std::ofstream(kPolicies / "default_policy.json", std::ios::binary) << want;
  CHECK(read_text(kPolicies / "default_policy.json") == want);
  // te_autoswitch_policy.json names its base and only what AutoswitchGemm changes.
  const std::string te = read_text(kPolicies / "te_autoswitch_policy.json");
  CHECK(te.rfind("{\n  \"base\": \"default\",\n", 0) == 0);
  CHECK(te.size() < want.size());
  for (const auto& [file, policy] :
       {std::pair{"default_policy.json", fp8a::default_policy()},
        std::pair{"te_autoswitch_policy.json", fp8a::te_autoswitch_policy()}}) {
    INFO(file);
    // The file read back is the preset, and so is its text given as a file.
    const std::string text = read_text(kPolicies / file);
    CHECK(fp8a::parse_policy(text, file) == policy);
    fp8a::MemoryFileSystem mfs;
    mfs.add_file(std::string("dir/") + file, bytes_of(text));
    CHECK(fp8a::load_policy(std::string("dir/") + file, mfs) == policy);
    // policy_to_json's full form of either reads back as the same preset.
    CHECK(fp8a::parse_policy(fp8a::policy_to_json(policy), file) == policy);
  }
  // No training number or threshold in policies/*.cpp string literals: the files hold them.
  const std::string cpp = read_text(kPolicies / "policy.cpp");
  for (const char* evidence : {"calibration/RESULTS.md", "outlier20x2", "PR #2883", "lm-spike"})
    CHECK_MESSAGE(cpp.find(evidence) == std::string::npos, evidence);
}

TEST_CASE("presets by name; the rounding floors are 2^(-2m)/(32 ln 2)") {
  fp8a::MemoryFileSystem none;
  const auto d = fp8a::load_policy("default", none);
  CHECK(d == fp8a::default_policy());
  CHECK(d.name == "default");
  CHECK(d.scope == fp8a::FallbackScope::kGemm);
  CHECK(d.underflow.max_pct == 5.0);
  CHECK(d.underflow.max_energy_pct == 1.0);
  CHECK_FALSE(d.mse.enabled);
  CHECK(d.rel_mse_floor.k == 4.0);
  // E4M3 7.04e-4 (31.52 dB), E5M2 2.82e-3 (25.50 dB): see METRICS.md "Policy criteria".
  CHECK(d.rel_mse_floor.floor_e4m3 == doctest::Approx(0.0007044409379340642).epsilon(1e-15));
  CHECK(d.rel_mse_floor.floor_e5m2 == doctest::Approx(0.0028177637517362566).epsilon(1e-15));
  CHECK(d.rel_mse_floor.floor_bf16 == doctest::Approx(2.751722413804938e-06).epsilon(1e-15));
  // E2M1 (NVFP4's elements, m = 1): 2^-2 / (32 ln 2) = 0.25 / 22.18071 = 1.127e-2 (19.48 dB).
  CHECK(d.rel_mse_floor.floor_e2m1 == doctest::Approx(0.011271055006945026).epsilon(1e-15));
  CHECK(d.saturation.max_pct == 0.05);
  // The calibration table's (calibration/RESULTS.md): amplification fails from 8x (harmful
  // outlier20x2 17.1-17.4x, harmless runs up to 4.7x), flushes that take over half their energy
  // from over half a tensor's tokens fail whatever the whole loses (outlier20x2/current; the
  // element count, 50 % before, failed outlier@d512/current), and the criteria with false alarms
  // and no detection watch.
  CHECK(d.gemm_amplification.factor == 8.0);
  CHECK_FALSE(d.underflow.max_pct_any_energy);
  CHECK(d.underflow.max_lost_rows_pct == 50.0);
  CHECK(d.underflow.action == fp8a::CriterionAction::kFail);
  CHECK(d.gemm_amplification.action == fp8a::CriterionAction::kFail);
  CHECK(d.rel_mse_floor.action == fp8a::CriterionAction::kWatch);
  CHECK(d.saturation.action == fp8a::CriterionAction::kWatch);
  CHECK(d.wgrad_damage.action == fp8a::CriterionAction::kWatch);
  CHECK(d.delayed_forecast.action == fp8a::CriterionAction::kWatch);
  CHECK(d.gemm_amplification.min_rel_fro_err == std::ldexp(1.0, -9));
  CHECK(d.wgrad_damage.max_zeroed_pct == 1.0);
  CHECK(d.wgrad_damage.sign_flip_factor == 2.0);
  CHECK(d.delayed_forecast.horizon_steps == 10000);
  for (const auto* src : {&d.underflow.source, &d.mse.source, &d.rel_mse_floor.source,
                          &d.saturation.source, &d.gemm_amplification.source,
                          &d.wgrad_damage.source, &d.delayed_forecast.source, &d.scope_source})
    CHECK_FALSE(src->empty());

  // TE PR #2883's AutoswitchGemm defaults and nothing else.
  const auto t = fp8a::load_policy("te-autoswitch", none);
  CHECK(t == fp8a::te_autoswitch_policy());
  CHECK(t.scope == fp8a::FallbackScope::kGlobal);
  CHECK(t.underflow.enabled);
  CHECK(t.underflow.max_pct == 5.0);
  CHECK_FALSE(t.underflow.max_energy_pct.has_value());
  CHECK(t.mse.enabled);
  CHECK(t.mse.max == 1e-4);
  CHECK_FALSE(t.rel_mse_floor.enabled);
  CHECK_FALSE(t.saturation.enabled);
  CHECK_FALSE(t.gemm_amplification.enabled);
  CHECK_FALSE(t.wgrad_damage.enabled);
  CHECK_FALSE(t.delayed_forecast.enabled);
}

TEST_CASE("a custom file changes what it names over its base") {
  const auto p = fp8a::parse_policy(R"({
    "name": "strict",
    "criteria": {
      "saturation": {"max_pct": 0.001, "source": "ours"},
      "underflow": {"max_energy_pct": null, "max_pct": 1},
      "delayed_forecast": {"horizon_steps": 50000, "weight": 2.5, "action": "fail"}
    }
  })", "strict.json");
  fp8a::Policy want = fp8a::default_policy();
  want.name = "strict";
  want.saturation.max_pct = 0.001;
  want.saturation.source = "ours";
  want.underflow.max_energy_pct.reset();
  want.underflow.max_pct = 1.0;
  want.delayed_forecast.horizon_steps = 50000;
  want.delayed_forecast.weight = 2.5;
  want.delayed_forecast.action = fp8a::CriterionAction::kFail;
  want.calibration.reset();  // changed criteria: the default's record is not this policy's
  CHECK(p == want);
  CHECK(fp8a::calibration_text(p) ==
        "policy 'strict' has no calibration record: its criteria are not validated against training");

  // A record of its own; counts that cannot be are refused.
  const auto own = fp8a::parse_policy(R"({"criteria": {"saturation": {"max_pct": 1}},
    "calibration": {"table": "t.md", "cases": 3, "runs": 7, "harmful": 2, "detected": 1,
                    "false_alarms": 0}})", "own.json");
  REQUIRE(own.calibration.has_value());
  CHECK(fp8a::calibration_text(own) ==
        "validated on 3 training cases (7 FP8 runs, t.md): 1 of 2 harmful runs fail, 0 false alarms "
        "in 5 harmless ones");
  // The widths the runs trained at, sorted and said once each.
  const auto wide = fp8a::parse_policy(R"({"criteria": {"saturation": {"max_pct": 1}},
    "calibration": {"table": "t.md", "cases": 3, "runs": 7, "harmful": 2, "detected": 1,
                    "false_alarms": 0, "widths": [512, 64, 256, 64]}})", "wide.json");
  REQUIRE(wide.calibration.has_value());
  CHECK(wide.calibration->widths == std::vector<int>{64, 256, 512});
  CHECK(fp8a::calibration_text(wide) ==
        "validated on 3 training cases at d_model 64, 256 and 512 (7 FP8 runs, t.md): 1 of 2 harmful runs fail, "
        "0 false alarms in 5 harmless ones");
  CHECK(parse_error(R"({"calibration": {"widths": [64, "x"]}})").find("[fp8a.policy.9") == 0);
  CHECK(parse_error(R"({"calibration": {"widths": [0]}})").find("expected integers in [1, 1000000]") !=
        std::string::npos);
  // The default's record says the widths of calibration/RESULTS.md's judged runs.
  CHECK(fp8a::calibration_text(fp8a::default_policy()).find(" at d_model 64, 256 and 512 (") != std::string::npos);
  CHECK(parse_error(R"({"calibration": {"runs": 1, "harmful": 2}})") ==
                    "[fp8a.policy.904] policy file 'p.json': calibration counts do not add up "
                    "(detected <= harmful <= runs, false_alarms <= runs - harmful)");
  // Untouched criteria keep the base's record.
  CHECK(fp8a::parse_policy(R"({"name": "renamed"})", "r.json").calibration ==
        fp8a::default_policy().calibration);

  const auto t = fp8a::parse_policy(R"({"base": "te-autoswitch", "scope": "gemm",
                                        "criteria": {"mse": {"enabled": false}}})", "t.json");
  fp8a::Policy want_t = fp8a::te_autoswitch_policy();
  want_t.scope = fp8a::FallbackScope::kGemm;
  want_t.mse.enabled = false;
  CHECK(t == want_t);
  CHECK(fp8a::parse_policy("{}", "empty.json") == fp8a::default_policy());
}

TEST_CASE("bad policy files: input errors naming the key") {
  CHECK(parse_error("{\"criteria\": ") ==
        "[fp8a.policy.901] policy file 'p.json' is not valid JSON: parse error at line 1, column "
        "14: syntax error while parsing value - unexpected end of input; expected '[', '{', or a "
        "literal");
  CHECK(parse_error("[1, 2]") == "[fp8a.policy.901] policy file 'p.json' is not a JSON object");
  CHECK(parse_error(R"({"critera": {}})") ==
        "[fp8a.policy.902] policy file 'p.json': unknown key 'critera' (did you mean 'criteria'?)");
  CHECK(parse_error(R"({"criteria": {"saturaton": {}}})") ==
        "[fp8a.policy.902] policy file 'p.json': unknown key 'criteria.saturaton' (did you mean "
        "'saturation'?)");
  CHECK(parse_error(R"({"criteria": {"underflow": {"max_pc": 3}}})") ==
        "[fp8a.policy.902] policy file 'p.json': unknown key 'criteria.underflow.max_pc' (did you "
        "mean 'max_pct'?)");
  // Issue 56 item 7: 100,000 unknown keys took 22.6 s to refuse (the ordered parse is quadratic
  // in an object's keys); an object past 1000 keys is refused before it.
  std::string crowded = R"({"criteria": {)";
  for (int i = 0; i < 100000; ++i) crowded += (i ? "," : "") + std::string("\"k") + std::to_string(i) + "\": 1";
  crowded += "}}";
  CHECK(parse_error(crowded) ==
        "[fp8a.policy.902] policy file 'p.json': criteria has over 1000 keys; a policy's objects have a "
        "dozen (docs/POLICY.md)");
  CHECK(parse_error(R"({"criteria": {"rel_mse_floor": {"zzzz": 3}}})") ==
        "[fp8a.policy.902] policy file 'p.json': unknown key 'criteria.rel_mse_floor.zzzz'");
  CHECK(parse_error(R"({"criteria": {"underflow": {"max_pct": "5"}}})") ==
        "[fp8a.policy.903] policy file 'p.json': criteria.underflow.max_pct must be a number, not "
        "a string");
  CHECK(parse_error(R"({"criteria": {"underflow": {"max_energy_pct": true}}})") ==
        "[fp8a.policy.903] policy file 'p.json': criteria.underflow.max_energy_pct must be a "
        "number or null, not a boolean");
  CHECK(parse_error(R"({"criteria": {"mse": {"enabled": 1}}})") ==
        "[fp8a.policy.903] policy file 'p.json': criteria.mse.enabled must be true or false, not "
        "a number");
  CHECK(parse_error(R"({"criteria": {"mse": {"source": null}}})") ==
        "[fp8a.policy.903] policy file 'p.json': criteria.mse.source must be a string, not null");
  CHECK(parse_error(R"({"criteria": []})") ==
        "[fp8a.policy.903] policy file 'p.json': criteria must be an object, not an array");
  CHECK(parse_error(R"({"criteria": {"saturation": 0.1}})") ==
        "[fp8a.policy.903] policy file 'p.json': criteria.saturation must be an object, not a "
        "number");
  CHECK(parse_error(R"({"criteria": {"delayed_forecast": {"horizon_steps": 1.5}}})") ==
        "[fp8a.policy.903] policy file 'p.json': criteria.delayed_forecast.horizon_steps must be "
        "an integer, not a number");
  CHECK(parse_error(R"({"criteria": {"delayed_forecast": {"horizon_steps": -1}}})") ==
        "[fp8a.policy.904] policy file 'p.json': criteria.delayed_forecast.horizon_steps is -1, "
        "expected an integer in [0, 1000000000]");
  CHECK(parse_error(R"({"criteria": {"saturation": {"max_pct": 0}}})") ==
        "[fp8a.policy.904] policy file 'p.json': criteria.saturation.max_pct is 0, expected a "
        "number in (0.0, 100.0]");
  CHECK(parse_error(R"({"criteria": {"underflow": {"max_pct": 101}}})") ==
        "[fp8a.policy.904] policy file 'p.json': criteria.underflow.max_pct is 101, expected a "
        "number in (0.0, 100.0]");
  CHECK(parse_error(R"({"criteria": {"rel_mse_floor": {"k": 0.5}}})") ==
        "[fp8a.policy.904] policy file 'p.json': criteria.rel_mse_floor.k is 0.5, expected a "
        "number in [1.0, inf)");
  CHECK(parse_error(R"({"criteria": {"mse": {"weight": -1}}})") ==
        "[fp8a.policy.904] policy file 'p.json': criteria.mse.weight is -1, expected a number in "
        "[0.0, inf)");
  CHECK(parse_error(R"({"criteria": {"saturation": {"action": "warn"}}})") ==
        "[fp8a.policy.904] policy file 'p.json': criteria.saturation.action is 'warn', expected one of "
        "fail, watch");
  CHECK(parse_error(R"({"criteria": {"wgrad_damage": {"action": true}}})") ==
        "[fp8a.policy.903] policy file 'p.json': criteria.wgrad_damage.action must be a string, not a "
        "boolean");
  CHECK(parse_error(R"({"scope": "layer"})") ==
        "[fp8a.policy.904] policy file 'p.json': scope is 'layer', expected one of gemm, global");
  CHECK(parse_error(R"({"base": "te_autoswitch"})") ==
        "[fp8a.policy.904] policy file 'p.json': base is 'te_autoswitch', expected one of default, "
        "te-autoswitch (did you mean 'te-autoswitch'?)");
  CHECK(parse_error(R"({"base": 3})") ==
        "[fp8a.policy.903] policy file 'p.json': base must be a string, not a number");
}

TEST_CASE("--policy that is neither a preset nor a file is a usage error") {
  fp8a::MemoryFileSystem mfs;
  mfs.add_file("dir/p.json", bytes_of("{}"));
  const auto message = [&](const std::string& arg) -> std::string {
    try {
      (void)fp8a::load_policy(arg, mfs);
    } catch (const fp8a::Error& e) {
      CHECK(e.exit_code() == 2);
      return e.what();
    }
    return "no error";
  };
  CHECK(message("te-autoswich") ==
        "[fp8a.usage.213] --policy 'te-autoswich' is neither a preset (default, te-autoswitch) "
        "nor a policy file (did you mean 'te-autoswitch'?)");
  CHECK(message("dir") ==
        "[fp8a.usage.213] --policy 'dir' is neither a preset (default, te-autoswitch) nor a "
        "policy file");
  CHECK(fp8a::load_policy("dir/p.json", mfs) == fp8a::default_policy());
  // A file that parses badly is bad input (exit 3), named by its path.
  mfs.add_file("dir/bad.json", bytes_of("{\"nme\": 1}"));
  try {
    (void)fp8a::load_policy("dir/bad.json", mfs);
    FAIL("no error");
  } catch (const fp8a::Error& e) {
    CHECK(e.exit_code() == 3);
    CHECK(std::string(e.what()) ==
          "[fp8a.policy.902] policy file 'dir/bad.json': unknown key 'nme' (did you mean 'name'?)");
  }
}

TEST_CASE("a key given twice in one object is the policy error naming it, not the last one taken") {
  CHECK(parse_error(R"({"criteria": {"mse": {"max": 1e-3, "max": 1e-1}}})") ==
        "[fp8a.policy.905] policy file 'p.json': key criteria.mse.max is given twice in one object; keep one");
  CHECK(parse_error(R"({"name": "a", "criteria": {}, "name": "b"})") ==
        "[fp8a.policy.905] policy file 'p.json': key name is given twice in one object; keep one");
  // The same key in two objects is two keys.
  CHECK_NOTHROW((void)fp8a::parse_policy(R"({"criteria": {"mse": {"weight": 1}, "saturation": {"weight": 1}}})", "p.json"));
}

TEST_CASE("a number beyond a double's range is the policy error naming its key, not an internal error") {
  CHECK(parse_error(R"({"criteria": {"mse": {"max": 1e400}}})") ==
        "[fp8a.policy.904] policy file 'p.json': criteria.mse.max is a number beyond the range of a double "
        "(about 1.8e308); expected a finite number");
  CHECK(parse_error(R"({"criteria": {"saturation": {"max_pct": -1e400}}})") ==
        "[fp8a.policy.904] policy file 'p.json': criteria.saturation.max_pct is a number beyond the range "
        "of a double (about 1.8e308); expected a finite number");
  // 400 digits: too large for an integer, then for a double.
  CHECK(parse_error(R"({"criteria": {"delayed_forecast": {"horizon_steps": 1)" + std::string(400, '0') + "}}}") ==
        "[fp8a.policy.904] policy file 'p.json': criteria.delayed_forecast.horizon_steps is a number beyond "
        "the range of a double (about 1.8e308); expected a finite number");
  // Anywhere in the file, also under a key the file has no business having, or in an array.
  CHECK(parse_error(R"({"criteria": {"mse": {"max": 1e-3}}, "zz": [0, 2e999]})") ==
        "[fp8a.policy.904] policy file 'p.json': zz[1] is a number beyond the range of a double "
        "(about 1.8e308); expected a finite number");
  CHECK(parse_error("1e400") ==
        "[fp8a.policy.904] policy file 'p.json': the value is a number beyond the range of a double "
        "(about 1.8e308); expected a finite number");
  // Tiny numbers are finite: the range check of the key applies.
  CHECK(parse_error(R"({"criteria": {"mse": {"max": 1e-400}}})") ==
        "[fp8a.policy.904] policy file 'p.json': criteria.mse.max is 0.0, expected a number in (0.0, inf)");
}

namespace {

// The message is one line of printable ASCII or valid UTF-8 (no control byte, no invalid byte),
// with the id and the file name.
void check_one_printable_line(const std::string& message, const std::string& id) {
  INFO(fp8a::quoted_input(message, 400));
  CHECK(message.starts_with("[" + id + "] policy file 'p.json' "));
  CHECK(!fp8a::first_invalid_utf8(message).has_value());
  for (const char c : message) CHECK(static_cast<unsigned char>(c) >= 0x20);
  CHECK(message.find('\x7f') == std::string::npos);
}

// `text` in UTF-16, each character < U+0080 as two bytes.
std::string utf16(const std::string& text, bool big_endian) {
  std::string out;
  for (const char c : text) out += big_endian ? std::string{'\0', c} : std::string{c, '\0'};
  return out;
}

}  // namespace

TEST_CASE("policy files that are not UTF-8 text: one readable line naming what the file is") {
  const std::string json = R"({"criteria": {}})";
  std::string m = parse_error("\xFF\xFE" + utf16(json, false));
  CHECK(m == "[fp8a.policy.901] policy file 'p.json' is UTF-16LE (it starts with the byte order mark FF FE), "
             "not UTF-8; save it as UTF-8");
  check_one_printable_line(m, "fp8a.policy.901");
  m = parse_error("\xFE\xFF" + utf16(json, true));
  CHECK(m == "[fp8a.policy.901] policy file 'p.json' is UTF-16BE (it starts with the byte order mark FE FF), "
             "not UTF-8; save it as UTF-8");
  check_one_printable_line(m, "fp8a.policy.901");
  for (const bool big_endian : {false, true}) {
    m = parse_error(utf16(json, big_endian));
    CHECK(m == "[fp8a.policy.901] policy file 'p.json' is UTF-16 (a NUL byte beside each character), not "
               "UTF-8; save it as UTF-8");
    check_one_printable_line(m, "fp8a.policy.901");
  }
  m = parse_error(std::string("{\"name\": \"a\0b\"}", 15));
  CHECK(m == "[fp8a.policy.901] policy file 'p.json' holds a NUL byte at byte offset 11; a policy file is UTF-8 "
             "JSON text");
  check_one_printable_line(m, "fp8a.policy.901");
  m = parse_error("{\"name\": \"caf\xFF\x1b[31m\"}");
  CHECK(m == "[fp8a.policy.901] policy file 'p.json' is not UTF-8 at byte offset 13 ('\\xff\\x1b[31m\"}' "
             "there); save it as UTF-8");
  check_one_printable_line(m, "fp8a.policy.901");
  m = parse_error("\xFF");
  CHECK(m == "[fp8a.policy.901] policy file 'p.json' is not UTF-8 at byte offset 0 ('\\xff' there); save it "
             "as UTF-8");
  check_one_printable_line(m, "fp8a.policy.901");
  // Valid UTF-8 that a terminal acts on, outside a string: the parser's excerpt shown escaped.
  m = parse_error("{\"criteria\": \x1b[2J\xE2\x80\xAE}");
  CHECK(m == "[fp8a.policy.901] policy file 'p.json' is not valid JSON: parse error at line 1, column 14: "
             "syntax error while parsing value - invalid literal; last read: '\"criteria\": <U+001B>'");
  check_one_printable_line(m, "fp8a.policy.901");
  // U+202E (right-to-left override): the parser quotes its first byte alone, shown escaped.
  m = parse_error("{\"criteria\": \xE2\x80\xAE}");
  CHECK(m == "[fp8a.policy.901] policy file 'p.json' is not valid JSON: parse error at line 1, column 14: "
             "syntax error while parsing value - invalid literal; last read: '\"criteria\": \\xe2'");
  check_one_printable_line(m, "fp8a.policy.901");
  // An unterminated string of 100,000 characters: the parser's excerpt is cut, the line stays short.
  m = parse_error("{\"name\": \"" + std::string(100'000, 'x'));
  check_one_printable_line(m, "fp8a.policy.901");
  const std::string start = "parse error at line 1, column 100011: syntax error while parsing value - invalid "
                            "string: missing closing quote; last read: '\"";
  CHECK(m == "[fp8a.policy.901] policy file 'p.json' is not valid JSON: " + start +
                 std::string(300 - start.size(), 'x') + "...");
  // A UTF-8 byte order mark is UTF-8: the file reads.
  CHECK(fp8a::parse_policy("\xEF\xBB\xBF{}", "p.json") == fp8a::default_policy());
}

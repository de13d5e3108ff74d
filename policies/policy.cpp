#include "policies/policy.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/suggest.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kPr2883 =
    "NVIDIA/TransformerEngine PR #2883 (open), transformer_engine/debug/features/autoswitch_gemm.py";

}  // namespace

const char* criterion_action_name(CriterionAction action) {
  return action == CriterionAction::kFail ? "fail" : "watch";
}

const char* fallback_scope_name(FallbackScope scope) {
  return scope == FallbackScope::kGemm ? "gemm" : "global";
}

double rel_mse_floor(int mantissa_bits) {
  return std::ldexp(1.0, -2 * mantissa_bits) / (32.0 * std::log(2.0));
}

Policy default_policy() {
  Policy p;
  p.name = "default";
  p.description =
      "fp8-advisor's default, calibrated against training (calibration/RESULTS.md): relative "
      "measures only. A GEMM fails when an operand's underflow exceeds TE's 5 % and the flushed "
      "values carry more than 1 % of its energy or are more than half its elements, or when its "
      "output error is far above what its operands predict. The criteria whose breaches trained "
      "no worse than BF16 (rel_mse against the rounding floor, clipping, per-element damage to "
      "dW, the delayed-scaling forecast) only watch: the answer reports each breach and the GEMM "
      "stays FP8.";
  p.scope = FallbackScope::kGemm;
  p.scope_source =
      "per GEMM: nvdlfw_inspect's DisableQuantizationGEMM keeps single GEMMs of a layer in high "
      "precision (TE debug features)";
  p.underflow = {true, 5.0, 1.0, 1.0,
                 std::string("count: ") + kPr2883 +
                     " underflow_threshold_pct default 5.0; energy: fp8-advisor, 1 % of sum x^2 "
                     "(flushes alone then allow 20 dB SQNR, the E5M2 rel_mse_floor limit k x "
                     "floor = 19.5 dB); METRICS.md \"Policy criteria\"; any energy above 50 % of "
                     "elements flushed: calibration/RESULTS.md outlier20x2/current (a 2^20 per-token "
                     "outlier: 98.4 % of the FC2 input flushed at 1.6e-5 % of its energy, val loss "
                     "+0.108 +- 0.006 over BF16; with those fprops and wgrads in BF16 +0.0005 +- 0.0008, "
                     "current+policy-plan) and outlier20x2/block (the wgrad's columnwise copy); its 2 false "
                     "alarms, outlier20/current and outlier20/block, train beyond noise (+0.025 +- 0.005, "
                     "+0.006 +- 0.003) but under the 1 % harm bar, and their plan's FC2 in BF16 removes it "
                     "(current+fc2-bf16 +0.0003)",
                 50.0};
  p.mse = {false, 1e-4, 1.0,
           std::string(kPr2883) +
               " mse_threshold default 1e-4; absolute (scales with the tensor's magnitude "
               "squared), so off here: rel_mse_floor judges the relative error"};
  p.rel_mse_floor = {true, 4.0, rel_mse_floor(3), rel_mse_floor(2), rel_mse_floor(7), 1.0,
                     "floor: uniform rounding noise of m mantissa bits, 2^(-2m)/(32 ln 2) "
                     "(E4M3 m=3, E5M2 m=2, BF16 m=7; METRICS.md \"Policy criteria\"); k = 4: twice "
                     "the 1.85x of the least favourable scale position within a binade "
                     "(fp8-advisor); watch only: calibration/RESULTS.md rel_mse_floor, 1 false "
                     "alarm (ramp/delayed: 25.9x the floor, val gap -0.0003 +- 0.0006) and no "
                     "detection"};
  p.rel_mse_floor.action = CriterionAction::kWatch;
  p.saturation = {true, 0.05, 1.0,
                  "fp8-advisor: clipping is the scale behind the amax, not rounding; 1 element in "
                  "2,000, between datasets/real/lm-sane (delayed clips at most 0.012 %, rel_mse at "
                  "the floor) and synth outlier-growth (delayed clips 0.177 % of the growing FC2 "
                  "input at 1.1x the floor: only this criterion sees it); no published threshold "
                  "(TE logs overflows% only); watch only: calibration/RESULTS.md saturation, 1 "
                  "false alarm (ramp/delayed: 3.891 % of the FC2 input clipped, val gap -0.0003 +- "
                  "0.0006) and no detection"};
  p.saturation.action = CriterionAction::kWatch;
  p.gemm_amplification = {true, 8.0, 0.001953125, 1.0,
                          "fp8-advisor: independent operand errors predict rel_fro_err = "
                          "sqrt(rel_mse_a + rel_mse_b) (METRICS.md); factor 8: calibration/RESULTS.md "
                          "gemm_amplification, the harmful outlier20x2 FC2 wgrads measure 17.1-17.4x "
                          "(detections under current and block scaling; block with those wgrads in "
                          "BF16 trains within noise, block+policy-plan -0.0002 +- 0.0016), harmless "
                          "runs at most 4.7x (outlier16/current, +0.0044, under 1 %: factor 2 failed "
                          "it and outlier16/block); its 2 false alarms, outlier20/current and "
                          "outlier20/block (17.1-17.3x), train beyond noise (+0.025 +- 0.005) but under "
                          "the 1 % harm bar; errors below 2^-9, the BF16 rounding of the output "
                          "itself, never fail"};
  p.wgrad_damage = {true, 1.0, 2.0, 1.0,
                    "fp8-advisor: Adam normalises each parameter's update, so a dW entry zeroed "
                    "by FP8 stops that weight for the step (1 % of entries); sign flips against "
                    "the share independent rounding noise of the measured size flips, each "
                    "entry's noise as its operands predict (gemms.csv noise_sign_flip_pct, "
                    "METRICS.md), factor 2: datasets/real/lm-spike's GEMMs measure 0.5-1.7x; "
                    "watch only: calibration/RESULTS.md wgrad_damage, 6 false alarms (high-lr x3, "
                    "outlier16/current, outlier20/current, outlier20/block) and its 2 detections "
                    "(outlier20x2) are gemm_amplification's too, while its own plan, the FC2 wgrads "
                    "in BF16, trains no better under current scaling (+0.120 +- 0.015, "
                    "current+wgrad-bf16); issue 23: lm-spike's current scaling trains within noise "
                    "of BF16 though 9 wgrads zero up to 14.9 % of dW entries"};
  p.wgrad_damage.action = CriterionAction::kWatch;
  p.delayed_forecast = {true, 10000, 1.0,
                        "fp8-advisor: the clipping a stale delayed scale is forecast to cause over 10,000 steps "
                        "after the trace's last step (the fitted amax growth against the history's threshold, "
                        "the latest captured tensor's shape held; METRICS.md \"Amax trend and the "
                        "delayed-scaling forecast\") fails by the saturation and rel_mse_floor criteria that "
                        "judge a captured step, one rule for \"clipping hurts\"; basis: issue 23, TE's default "
                        "DelayedScaling (history 1024, max, margin 0) trained a healthy char-GPT to BF16's val "
                        "loss (2.4629 vs 2.4675) while clipping its largest element by about 0.06 % a step; "
                        "the 10,000-step horizon is not calibrated; watch only: calibration/RESULTS.md "
                        "delayed_forecast, 3 false alarms (high-lr/delayed, spike/delayed-h16-recent, "
                        "ramp/delayed-margin1) and no detection: no delayed-scaling run of the table "
                        "trained worse than BF16 beyond the harm bar"};
  p.delayed_forecast.action = CriterionAction::kWatch;
  // calibration/RESULTS.md's record of this policy (table.py check compares the two).
  p.calibration = PolicyCalibration{"calibration/RESULTS.md", 8, 18, 2, 2, 2};
  return p;
}

Policy te_autoswitch_policy() {
  Policy p = default_policy();
  p.name = "te-autoswitch";
  p.description =
      "Transformer Engine PR #2883 AutoswitchGemm's rule with its defaults: a GEMM goes to high "
      "precision when any tensor it consumes has underflow% > 5 or MSE > 1e-4 (absolute: it "
      "depends on the tensor's scale), and any such breach sends every GEMM to high precision "
      "(hold_window_scope global). No other criterion.";
  p.scope = FallbackScope::kGlobal;
  p.scope_source = std::string(kPr2883) + " hold_window_scope default \"global\"";
  p.underflow = {true, 5.0, std::nullopt, 1.0,
                 std::string(kPr2883) + " underflow_threshold_pct default 5.0 (switch if >)",
                 std::nullopt};
  p.mse = {true, 1e-4, 1.0, std::string(kPr2883) + " mse_threshold default 1e-4 (switch if >)"};
  p.rel_mse_floor.enabled = false;
  p.saturation.enabled = false;
  p.gemm_amplification.enabled = false;
  p.wgrad_damage.enabled = false;
  p.delayed_forecast.enabled = false;
  // AutoswitchGemm switches on every breach: a criterion a file enables here fails, as TE's do.
  for (CriterionAction* a : criterion_actions(p)) *a = CriterionAction::kFail;
  // So the default's reason to only watch one is not this policy's: its sources end before it.
  for (std::string* source : {&p.rel_mse_floor.source, &p.saturation.source, &p.wgrad_damage.source,
                              &p.delayed_forecast.source}) {
    const std::size_t at = source->find("; watch only: ");
    if (at != std::string::npos) source->resize(at);
  }
  p.calibration.reset();  // the table judges the default policy only
  return p;
}

std::array<CriterionAction*, 7> criterion_actions(Policy& p) {
  return {&p.underflow.action,  &p.mse.action,                &p.rel_mse_floor.action,
          &p.saturation.action, &p.gemm_amplification.action, &p.wgrad_damage.action,
          &p.delayed_forecast.action};
}

std::string calibration_text(const Policy& p) {
  if (!p.calibration)
    return "policy " + quoted_input(p.name, 80) +
           " has no calibration record: its criteria are not validated against training";
  const PolicyCalibration& c = *p.calibration;
  const int harmless = c.runs - c.harmful;
  return format_text("validated on %d training case%s (%d FP8 run%s, %s): %d of %d harmful run%s fail, "
                     "%d false alarm%s in %d harmless one%s",
                     c.cases, c.cases == 1 ? "" : "s", c.runs, c.runs == 1 ? "" : "s", c.table.c_str(),
                     c.detected, c.harmful, c.harmful == 1 ? "" : "s", c.false_alarms,
                     c.false_alarms == 1 ? "" : "s", harmless, harmless == 1 ? "" : "s");
}

std::string policy_to_json(const Policy& p) {
  Json c;
  c["underflow"] = {{"enabled", p.underflow.enabled},
                    {"action", criterion_action_name(p.underflow.action)},
                    {"max_pct", p.underflow.max_pct},
                    {"max_energy_pct", p.underflow.max_energy_pct ? Json(*p.underflow.max_energy_pct)
                                                                  : Json(nullptr)},
                    {"max_pct_any_energy", p.underflow.max_pct_any_energy
                                               ? Json(*p.underflow.max_pct_any_energy)
                                               : Json(nullptr)},
                    {"weight", p.underflow.weight},
                    {"source", p.underflow.source}};
  c["mse"] = {{"enabled", p.mse.enabled},
              {"action", criterion_action_name(p.mse.action)},
              {"max", p.mse.max},
              {"weight", p.mse.weight},
              {"source", p.mse.source}};
  c["rel_mse_floor"] = {{"enabled", p.rel_mse_floor.enabled},
                        {"action", criterion_action_name(p.rel_mse_floor.action)},
                        {"k", p.rel_mse_floor.k},
                        {"floor_e4m3", p.rel_mse_floor.floor_e4m3},
                        {"floor_e5m2", p.rel_mse_floor.floor_e5m2},
                        {"floor_bf16", p.rel_mse_floor.floor_bf16},
                        {"weight", p.rel_mse_floor.weight},
                        {"source", p.rel_mse_floor.source}};
  c["saturation"] = {{"enabled", p.saturation.enabled},
                     {"action", criterion_action_name(p.saturation.action)},
                     {"max_pct", p.saturation.max_pct},
                     {"weight", p.saturation.weight},
                     {"source", p.saturation.source}};
  c["gemm_amplification"] = {{"enabled", p.gemm_amplification.enabled},
                             {"action", criterion_action_name(p.gemm_amplification.action)},
                             {"factor", p.gemm_amplification.factor},
                             {"min_rel_fro_err", p.gemm_amplification.min_rel_fro_err},
                             {"weight", p.gemm_amplification.weight},
                             {"source", p.gemm_amplification.source}};
  c["wgrad_damage"] = {{"enabled", p.wgrad_damage.enabled},
                       {"action", criterion_action_name(p.wgrad_damage.action)},
                       {"max_zeroed_pct", p.wgrad_damage.max_zeroed_pct},
                       {"sign_flip_factor", p.wgrad_damage.sign_flip_factor},
                       {"weight", p.wgrad_damage.weight},
                       {"source", p.wgrad_damage.source}};
  c["delayed_forecast"] = {{"enabled", p.delayed_forecast.enabled},
                           {"action", criterion_action_name(p.delayed_forecast.action)},
                           {"horizon_steps", p.delayed_forecast.horizon_steps},
                           {"weight", p.delayed_forecast.weight},
                           {"source", p.delayed_forecast.source}};
  Json j;
  j["name"] = p.name;
  j["description"] = p.description;
  j["scope"] = fallback_scope_name(p.scope);
  j["scope_source"] = p.scope_source;
  j["criteria"] = std::move(c);
  if (p.calibration) {
    const PolicyCalibration& k = *p.calibration;
    j["calibration"] = {{"table", k.table},       {"cases", k.cases},
                        {"runs", k.runs},         {"harmful", k.harmful},
                        {"detected", k.detected}, {"false_alarms", k.false_alarms}};
  } else {
    j["calibration"] = nullptr;
  }
  return j.dump(2) + "\n";
}

namespace {

// Reads one JSON object's keys into a struct, naming each key by its path in messages.
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string path, std::string_view origin)
      : object_(object), path_(std::move(path)), origin_(origin) {}

  // Every key of the object must be one of `keys`.
  void only(const std::vector<std::string>& keys) const {
    for (const auto& [key, value] : object_.items()) {
      (void)value;
      bool known = false;
      for (const auto& k : keys) known = known || k == key;
      if (!known)
        throw input_error("fp8a.policy.902", prefix() + "unknown key " + quoted_input(name(key)) +
                                                 did_you_mean(key, keys));
    }
  }

  void boolean(const char* key, bool* out) const {
    if (const Json* v = find(key)) {
      if (!v->is_boolean()) wrong_type(key, "true or false", *v);
      *out = v->get<bool>();
    }
  }

  void text(const char* key, std::string* out) const {
    if (const Json* v = find(key)) {
      if (!v->is_string()) wrong_type(key, "a string", *v);
      *out = v->get<std::string>();
    }
  }

  // A finite number in [lo, hi], or (lo, hi] when lo_open.
  void number(const char* key, double lo, bool lo_open, double hi, double* out) const {
    if (const Json* v = find(key)) *out = checked_number(key, *v, lo, lo_open, hi);
  }

  // Like number(), or null to unset.
  void optional_number(const char* key, double lo, bool lo_open, double hi,
                       std::optional<double>* out) const {
    if (const Json* v = find(key)) {
      if (v->is_null()) *out = std::nullopt;
      else *out = checked_number(key, *v, lo, lo_open, hi, " or null");
    }
  }

  void integer(const char* key, std::int64_t lo, std::int64_t hi, std::int64_t* out) const {
    if (const Json* v = find(key)) {
      if (!v->is_number_integer()) wrong_type(key, "an integer", *v);
      const bool is_unsigned = v->is_number_unsigned();
      const auto u = is_unsigned ? v->get<std::uint64_t>() : 0;
      const std::int64_t x = is_unsigned ? static_cast<std::int64_t>(std::min<std::uint64_t>(
                                               u, static_cast<std::uint64_t>(hi) + 1))
                                         : v->get<std::int64_t>();
      if (x < lo || x > hi)
        throw input_error("fp8a.policy.904", prefix() + name(key) + " is " + v->dump() +
                                                 ", expected an integer in [" + std::to_string(lo) +
                                                 ", " + std::to_string(hi) + "]");
      *out = x;
    }
  }

  // The object under `key` (checked to be an object), or nullptr when absent.
  const Json* object(const char* key) const {
    const Json* v = find(key);
    if (v != nullptr && !v->is_object()) wrong_type(key, "an object", *v);
    return v;
  }

  // One of `names`; returns its index, or -1 when the key is absent.
  int choice(const char* key, const std::vector<std::string>& names) const {
    const Json* v = find(key);
    if (v == nullptr) return -1;
    if (!v->is_string()) wrong_type(key, "a string", *v);
    const auto s = v->get<std::string>();
    for (std::size_t i = 0; i < names.size(); ++i)
      if (names[i] == s) return static_cast<int>(i);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw input_error("fp8a.policy.904", prefix() + name(key) + " is " + quoted_input(s) +
                                             ", expected one of " + list + did_you_mean(s, names));
  }

  std::string name(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

 private:
  const Json* find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  std::string prefix() const { return "policy file " + std::string(origin_) + ": "; }

  static std::string type_of(const Json& v) {
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_null()) return "null";
    if (v.is_array()) return "an array";
    return "an object";
  }

  [[noreturn]] void wrong_type(const char* key, const char* expected, const Json& v) const {
    throw input_error("fp8a.policy.903", prefix() + name(key) + " must be " + expected + ", not " +
                                             type_of(v));
  }

  double checked_number(const char* key, const Json& v, double lo, bool lo_open, double hi,
                        const char* or_null = "") const {
    if (!v.is_number()) {
      const std::string expected = std::string("a number") + or_null;
      wrong_type(key, expected.c_str(), v);
    }
    const double x = v.get<double>();
    const bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi;
    if (!ok) {
      const auto bound = [](double b) {
        return b == std::numeric_limits<double>::max() ? std::string("inf") : Json(b).dump();
      };
      throw input_error("fp8a.policy.904", prefix() + name(key) + " is " + v.dump() +
                                               ", expected a number in " + (lo_open ? "(" : "[") +
                                               bound(lo) + ", " + bound(hi) +
                                               (hi == std::numeric_limits<double>::max() ? ")" : "]"));
    }
    return x;
  }

  const Json& object_;
  std::string path_;
  std::string_view origin_;
};

constexpr double kInf = std::numeric_limits<double>::max();

// enabled, action, weight and source: the keys every criterion has.
void read_common(const ObjectReader& r, bool* enabled, CriterionAction* action, double* weight,
                 std::string* source) {
  r.boolean("enabled", enabled);
  if (const int a = r.choice("action", {"fail", "watch"}); a >= 0)
    *action = a == 0 ? CriterionAction::kFail : CriterionAction::kWatch;
  r.number("weight", 0.0, false, kInf, weight);
  r.text("source", source);
}

}  // namespace

namespace {

// A SAX pass over policy text that keeps the path of keys to the current value
// ("criteria.mse.max", "criteria[0]"), to name the number nlohmann's parser refused as beyond a
// double's range (its out_of_range.406 carries only the offset), and stops at the first key given
// twice in one object (nlohmann keeps the last silently).
class KeyPathSax : public nlohmann::json_sax<Json> {
 public:
  // The path at the refused value, once sax_parse has returned.
  std::string path() const {
    std::string s;
    for (const Frame& f : frames_)
      s += f.in_array ? "[" + std::to_string(f.index) + "]" : (s.empty() ? "" : ".") + f.key;
    return s;
  }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override {
    frames_.push_back({false, 0, {}, {}});
    return true;
  }
  bool key(string_t& k) override {
    frames_.back().key = k;
    if (frames_.back().keys.insert(k).second) return true;
    repeated_ = true;
    return false;
  }
  // Whether the pass stopped at a key given twice; path() then names it.
  bool repeated() const { return repeated_; }
  bool end_object() override { return end(); }
  bool start_array(std::size_t) override {
    frames_.push_back({true, 0, {}, {}});
    return true;
  }
  bool end_array() override { return end(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    bool in_array = false;
    std::size_t index = 0;  // of the next element, in an array
    std::string key;        // of the current value, in an object
    std::set<std::string> keys;  // every key of the object so far
  };
  bool value() {
    if (!frames_.empty() && frames_.back().in_array) ++frames_.back().index;
    return true;
  }
  bool end() {
    frames_.pop_back();
    return value();
  }
  std::vector<Frame> frames_;
  bool repeated_ = false;
};

// Policy text that is not UTF-8 (RFC 8259 JSON is): policy error fp8a.policy.901 saying what it
// is instead, so that no raw byte of it reaches the one-line message.
void require_utf8(std::string_view text, const std::string& where) {
  if (const std::string bom = utf16_or_utf32_bom(text); !bom.empty())
    throw input_error("fp8a.policy.901", "policy file " + where + " is " + bom + ", not UTF-8; save it as UTF-8");
  // UTF-16 without a byte order mark: a NUL byte beside each ASCII character ("{\0" or "\0{").
  const auto ascii = [](char c) { return c >= 0x20 && c < 0x7F; };
  if (text.size() >= 2 && ((ascii(text[0]) && text[1] == '\0') || (text[0] == '\0' && ascii(text[1]))))
    throw input_error("fp8a.policy.901", "policy file " + where +
                                             " is UTF-16 (a NUL byte beside each character), not UTF-8; "
                                             "save it as UTF-8");
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw input_error("fp8a.policy.901", "policy file " + where + " holds a NUL byte at byte offset " +
                                             std::to_string(nul) + "; a policy file is UTF-8 JSON text");
  if (const auto bad = first_invalid_utf8(text)) {
    constexpr std::size_t kExcerpt = 16;
    throw input_error("fp8a.policy.901", "policy file " + where + " is not UTF-8 at byte offset " +
                                             std::to_string(*bad) + " (" +
                                             quoted_input(text.substr(*bad, kExcerpt), kExcerpt) +
                                             " there); save it as UTF-8");
  }
}

}  // namespace

Policy parse_policy(std::string_view json_text, std::string_view origin) {
  const std::string where = quoted_input(origin, 200);
  require_utf8(json_text, where);
  Json j;
  try {
    j = Json::parse(json_text.begin(), json_text.end());
  } catch (const Json::parse_error& e) {
    std::string what = e.what();
    if (const auto at = what.find("] "); what.rfind("[json.exception", 0) == 0 && at != std::string::npos)
      what = what.substr(at + 2);
    // The parser quotes what it last read, as raw bytes and at any length: escaped and cut.
    constexpr std::size_t kShownBytes = 300;
    const std::string shown =
        what.size() > kShownBytes ? printable_text(what.substr(0, kShownBytes)) + "..." : printable_text(what);
    throw input_error("fp8a.policy.901", "policy file " + where + " is not valid JSON: " + shown);
  } catch (const Json::out_of_range&) {
    // A number beyond a double's range (1e400): nlohmann refuses it while parsing; a second pass
    // finds its key.
    KeyPathSax keys;
    (void)Json::sax_parse(json_text.begin(), json_text.end(), &keys);
    const std::string path = keys.path();
    throw input_error("fp8a.policy.904", "policy file " + where + ": " +
                                             (path.empty() ? std::string("the value") : escaped_input(path, 200)) +
                                             " is a number beyond the range of a double (about 1.8e308); "
                                             "expected a finite number");
  }
  // Valid JSON, but a key given twice would be taken silently (the last wins).
  if (KeyPathSax keys; !Json::sax_parse(json_text.begin(), json_text.end(), &keys) && keys.repeated())
    throw input_error("fp8a.policy.905", "policy file " + where + ": key " + escaped_input(keys.path(), 200) +
                                             " is given twice in one object; keep one");
  if (!j.is_object())
    throw input_error("fp8a.policy.901", "policy file " + where + " is not a JSON object");

  const ObjectReader top(j, "", where);
  top.only({"base", "name", "description", "scope", "scope_source", "criteria", "calibration"});
  const int base = top.choice("base", {kPolicyPresets[0], kPolicyPresets[1]});
  Policy p = base == 1 ? te_autoswitch_policy() : default_policy();
  top.text("name", &p.name);
  top.text("description", &p.description);
  if (const int scope = top.choice("scope", {"gemm", "global"}); scope >= 0)
    p.scope = scope == 0 ? FallbackScope::kGemm : FallbackScope::kGlobal;
  top.text("scope_source", &p.scope_source);
  // Changed criteria or scope are not what the base's record measured.
  if (j.contains("criteria") || j.contains("scope")) p.calibration.reset();
  if (j.contains("calibration")) {
    if (j["calibration"].is_null()) {
      p.calibration.reset();
    } else {
      const Json* o = top.object("calibration");
      const ObjectReader r(*o, "calibration", where);
      r.only({"table", "cases", "runs", "harmful", "detected", "false_alarms"});
      PolicyCalibration k;
      r.text("table", &k.table);
      std::int64_t n[5] = {0, 0, 0, 0, 0};
      const char* keys[5] = {"cases", "runs", "harmful", "detected", "false_alarms"};
      for (int i = 0; i < 5; ++i) r.integer(keys[i], 0, 1'000'000, &n[i]);
      k.cases = static_cast<int>(n[0]);
      k.runs = static_cast<int>(n[1]);
      k.harmful = static_cast<int>(n[2]);
      k.detected = static_cast<int>(n[3]);
      k.false_alarms = static_cast<int>(n[4]);
      if (k.harmful > k.runs || k.detected > k.harmful || k.false_alarms > k.runs - k.harmful)
        throw input_error("fp8a.policy.904",
                          "policy file " + where +
                              ": calibration counts do not add up (detected <= harmful <= runs, "
                              "false_alarms <= runs - harmful)");
      p.calibration = std::move(k);
    }
  }

  const Json* criteria = top.object("criteria");
  if (criteria == nullptr) return p;
  const ObjectReader cr(*criteria, "criteria", where);
  cr.only({"underflow", "mse", "rel_mse_floor", "saturation", "gemm_amplification", "wgrad_damage",
           "delayed_forecast"});
  // Each criterion's object, read by `read` when present.
  const auto each = [&](const char* key, const std::vector<std::string>& keys,
                        const std::function<void(const ObjectReader&)>& read) {
    if (const Json* o = cr.object(key)) {
      const ObjectReader r(*o, cr.name(key), where);
      r.only(keys);
      read(r);
    }
  };
  each("underflow", {"enabled", "action", "max_pct", "max_energy_pct", "max_pct_any_energy", "weight", "source"},
       [&](const ObjectReader& r) {
         auto& c = p.underflow;
         read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
         r.number("max_pct", 0.0, true, 100.0, &c.max_pct);
         r.optional_number("max_energy_pct", 0.0, true, 100.0, &c.max_energy_pct);
         r.optional_number("max_pct_any_energy", 0.0, true, 100.0, &c.max_pct_any_energy);
       });
  each("mse", {"enabled", "action", "max", "weight", "source"}, [&](const ObjectReader& r) {
    auto& c = p.mse;
    read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
    r.number("max", 0.0, true, kInf, &c.max);
  });
  each("rel_mse_floor", {"enabled", "action", "k", "floor_e4m3", "floor_e5m2", "floor_bf16", "weight", "source"},
       [&](const ObjectReader& r) {
         auto& c = p.rel_mse_floor;
         read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
         r.number("k", 1.0, false, kInf, &c.k);
         r.number("floor_e4m3", 0.0, true, 1.0, &c.floor_e4m3);
         r.number("floor_e5m2", 0.0, true, 1.0, &c.floor_e5m2);
         r.number("floor_bf16", 0.0, true, 1.0, &c.floor_bf16);
       });
  each("saturation", {"enabled", "action", "max_pct", "weight", "source"}, [&](const ObjectReader& r) {
    auto& c = p.saturation;
    read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
    r.number("max_pct", 0.0, true, 100.0, &c.max_pct);
  });
  each("gemm_amplification", {"enabled", "action", "factor", "min_rel_fro_err", "weight", "source"},
       [&](const ObjectReader& r) {
         auto& c = p.gemm_amplification;
         read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
         r.number("factor", 1.0, false, kInf, &c.factor);
         r.number("min_rel_fro_err", 0.0, true, kInf, &c.min_rel_fro_err);
       });
  each("wgrad_damage", {"enabled", "action", "max_zeroed_pct", "sign_flip_factor", "weight", "source"},
       [&](const ObjectReader& r) {
         auto& c = p.wgrad_damage;
         read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
         r.number("max_zeroed_pct", 0.0, true, 100.0, &c.max_zeroed_pct);
         r.number("sign_flip_factor", 1.0, false, kInf, &c.sign_flip_factor);
       });
  each("delayed_forecast", {"enabled", "action", "horizon_steps", "weight", "source"},
       [&](const ObjectReader& r) {
         auto& c = p.delayed_forecast;
         read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
         r.integer("horizon_steps", 0, 1'000'000'000, &c.horizon_steps);
       });
  return p;
}

Policy load_policy(std::string_view name_or_path, const FileSystem& fs) {
  if (name_or_path == kPolicyPresets[0]) return default_policy();
  if (name_or_path == kPolicyPresets[1]) return te_autoswitch_policy();
  const std::string path(name_or_path);
  if (fs.kind(path) != FileSystem::Kind::kFile)
    throw usage_error("fp8a.usage.213",
                      "--policy " + quoted_input(name_or_path, 200) +
                          " is neither a preset (default, te-autoswitch) nor a policy file" +
                          did_you_mean(name_or_path, {kPolicyPresets[0], kPolicyPresets[1]}));
  const auto file = fs.map(path);
  const auto bytes = file->bytes();
  return parse_policy(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                      path);
}

}  // namespace fp8a

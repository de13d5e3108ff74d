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
#include "policies/policy_files.hpp"

namespace fp8a {

namespace {

using Json = nlohmann::ordered_json;

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
                        {"floor_e2m1", p.rel_mse_floor.floor_e2m1},
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
  std::string path() const { return path_of(frames_.size()); }
  // The path of the object being read, "" at the top level.
  std::string object_path() const { return path_of(frames_.empty() ? 0 : frames_.size() - 1); }

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
    if (frames_.back().keys.size() >= kMaxKeys) {
      crowded_ = true;
      return false;
    }
    if (frames_.back().keys.insert(k).second) return true;
    repeated_ = true;
    return false;
  }
  // Whether the pass stopped at a key given twice; path() then names it.
  bool repeated() const { return repeated_; }
  // Whether it stopped at an object with more than kMaxKeys keys (a policy's have a dozen): the
  // ordered JSON parse takes time quadratic in them (100,000 unknown keys: 22 s before refusing).
  static constexpr std::size_t kMaxKeys = 1000;
  bool crowded() const { return crowded_; }
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
  // The path through the first `depth` frames.
  std::string path_of(std::size_t depth) const {
    std::string s;
    for (std::size_t i = 0; i < depth; ++i) {
      const Frame& f = frames_[i];
      s += f.in_array ? "[" + std::to_string(f.index) + "]" : (s.empty() ? "" : ".") + f.key;
    }
    return s;
  }
  std::vector<Frame> frames_;
  bool repeated_ = false;
  bool crowded_ = false;
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

namespace {

// The policy of json_text over its "base" preset (the default when it names none); `root`: the
// text is a whole policy read over Policy{}, and names no base (default_policy.json itself).
Policy parse_policy_text(std::string_view json_text, std::string_view origin, bool root) {
  const std::string where = quoted_input(origin, 200);
  require_utf8(json_text, where);
  // Keys first (a set per object, not the ordered parse's linear search): a key given twice, or
  // an object past any policy's size, refused before the parse.
  if (KeyPathSax keys; !Json::sax_parse(json_text.begin(), json_text.end(), &keys)) {
    if (keys.repeated())
      throw input_error("fp8a.policy.905", "policy file " + where + ": key " + escaped_input(keys.path(), 200) +
                                               " is given twice in one object; keep one");
    if (keys.crowded())
      throw input_error("fp8a.policy.902", "policy file " + where + ": " +
                                               (keys.object_path().empty() ? std::string("the top-level object")
                                                                           : escaped_input(keys.object_path(), 200)) +
                                               " has over " +
                                               std::to_string(KeyPathSax::kMaxKeys) +
                                               " keys; a policy's objects have a dozen (docs/POLICY.md)");
  }
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
  if (!j.is_object())
    throw input_error("fp8a.policy.901", "policy file " + where + " is not a JSON object");

  const ObjectReader top(j, "", where);
  top.only({"base", "name", "description", "scope", "scope_source", "criteria", "calibration"});
  if (root) top.only({"name", "description", "scope", "scope_source", "criteria", "calibration"});
  const int base = top.choice("base", {kPolicyPresets[0], kPolicyPresets[1]});
  Policy p = root ? Policy{} : base == 1 ? te_autoswitch_policy() : default_policy();
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
  each("rel_mse_floor", {"enabled", "action", "k", "floor_e4m3", "floor_e5m2", "floor_bf16", "floor_e2m1", "weight",
                          "source"},
       [&](const ObjectReader& r) {
         auto& c = p.rel_mse_floor;
         read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
         r.number("k", 1.0, false, kInf, &c.k);
         r.number("floor_e4m3", 0.0, true, 1.0, &c.floor_e4m3);
         r.number("floor_e5m2", 0.0, true, 1.0, &c.floor_e5m2);
         r.number("floor_bf16", 0.0, true, 1.0, &c.floor_bf16);
         r.number("floor_e2m1", 0.0, true, 1.0, &c.floor_e2m1);
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

}  // namespace

Policy parse_policy(std::string_view json_text, std::string_view origin) {
  return parse_policy_text(json_text, origin, false);
}

Policy default_policy() {
  static const Policy p = parse_policy_text(kDefaultPolicyJson, "policies/default_policy.json (built in)", true);
  return p;
}

Policy te_autoswitch_policy() {
  static const Policy p = parse_policy_text(kTeAutoswitchPolicyJson, "policies/te_autoswitch_policy.json (built in)", false);
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

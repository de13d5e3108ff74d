#include "policies/policy.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/suggest.hpp"
#include "core/text.hpp"
#include "policies/json_input.hpp"
#include "policies/policy_files.hpp"

namespace fp8a {

namespace {

constexpr InputId kPolicyNotJson = "fp8a.policy.901";
constexpr InputId kPolicyUnknownKey = "fp8a.policy.902";
constexpr InputId kPolicyWrongType = "fp8a.policy.903";
constexpr InputId kPolicyOutOfRange = "fp8a.policy.904";
constexpr InputId kPolicyRepeatedKey = "fp8a.policy.905";
constexpr JsonInputKind kPolicyFile{"policy file",     kPolicyNotJson,     kPolicyUnknownKey,
                                    kPolicyWrongType,  kPolicyOutOfRange,  kPolicyRepeatedKey,
                                    "a policy's objects have a dozen (docs/POLICY.md)"};

}  // namespace

const char* criterion_action_name(CriterionAction action) {
  return action == CriterionAction::kFail ? "fail" : "watch";
}

namespace {

// A per-GEMM action: its name, or null when the criterion's own action applies.
Json optional_action_json(const std::optional<CriterionAction>& a) {
  return a ? Json(criterion_action_name(*a)) : Json(nullptr);
}

}  // namespace

const char* fallback_scope_name(FallbackScope scope) {
  return scope == FallbackScope::kGemm ? "gemm" : "global";
}

double rel_mse_floor(int mantissa_bits) {
  return std::ldexp(1.0, -2 * mantissa_bits) / (32.0 * std::log(2.0));
}

std::array<CriterionAction*, 8> criterion_actions(Policy& p) {
  return {&p.underflow.action,          &p.mse.action,          &p.rel_mse_floor.action,
          &p.saturation.action,         &p.gemm_amplification.action, &p.wgrad_damage.action,
          &p.wgrad_direction.action,    &p.delayed_forecast.action};
}

std::string calibration_text(const Policy& p) {
  if (!p.calibration)
    return "policy " + quoted_input(p.name, 80) +
           " has no calibration record: its criteria are not validated against training";
  const PolicyCalibration& c = *p.calibration;
  const int harmless = c.runs - c.harmful;
  std::string widths;  // " at d_model 64 and 256"
  for (std::size_t i = 0; i < c.widths.size(); ++i)
    widths += (i == 0 ? " at d_model " : i + 1 == c.widths.size() ? " and " : ", ") + std::to_string(c.widths[i]);
  return format_text("validated on %d training case%s%s (%d FP8 run%s, %s): %d of %d harmful run%s fail, "
                     "%d false alarm%s in %d harmless one%s",
                     c.cases, c.cases == 1 ? "" : "s", widths.c_str(), c.runs, c.runs == 1 ? "" : "s", c.table.c_str(),
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
                    {"max_lost_rows_pct", p.underflow.max_lost_rows_pct ? Json(*p.underflow.max_lost_rows_pct)
                                                                        : Json(nullptr)},
                    {"lost_rows_wgrad_action", optional_action_json(p.underflow.lost_rows_wgrad_action)},
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
                             {"wgrad_action", optional_action_json(p.gemm_amplification.wgrad_action)},
                             {"weight", p.gemm_amplification.weight},
                             {"source", p.gemm_amplification.source}};
  c["wgrad_damage"] = {{"enabled", p.wgrad_damage.enabled},
                       {"action", criterion_action_name(p.wgrad_damage.action)},
                       {"max_zeroed_pct", p.wgrad_damage.max_zeroed_pct},
                       {"sign_flip_factor", p.wgrad_damage.sign_flip_factor},
                       {"weight", p.wgrad_damage.weight},
                       {"source", p.wgrad_damage.source}};
  c["wgrad_direction"] = {{"enabled", p.wgrad_direction.enabled},
                          {"action", criterion_action_name(p.wgrad_direction.action)},
                          {"min_cos", p.wgrad_direction.min_cos},
                          {"weight", p.wgrad_direction.weight},
                          {"source", p.wgrad_direction.source}};
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
    if (!k.widths.empty()) j["calibration"]["widths"] = k.widths;
  } else {
    j["calibration"] = nullptr;
  }
  return j.dump(2) + "\n";
}

namespace {

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

// A per-GEMM action key: "fail", "watch", or null for the criterion's own action.
void read_optional_action(const ObjectReader& r, const char* key, std::optional<CriterionAction>* out) {
  std::optional<int> a = out->has_value() ? std::optional<int>(**out == CriterionAction::kFail ? 0 : 1) : std::nullopt;
  r.optional_choice(key, {"fail", "watch"}, &a);
  *out = a ? std::optional<CriterionAction>(*a == 0 ? CriterionAction::kFail : CriterionAction::kWatch) : std::nullopt;
}

// The "calibration" object of a policy file (present, not null), its counts checked.
PolicyCalibration read_calibration(const ObjectReader& top, const std::string& where) {
  const Json* o = top.object("calibration");
  const ObjectReader r(*o, "calibration", where, kPolicyFile);
  r.only({"table", "cases", "runs", "harmful", "detected", "false_alarms", "widths"});
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
  if (const auto w = r.integers("widths", 1, 1'000'000, 100)) {
    k.widths.assign(w->begin(), w->end());
    std::sort(k.widths.begin(), k.widths.end());
    k.widths.erase(std::unique(k.widths.begin(), k.widths.end()), k.widths.end());
  }
  if (k.harmful > k.runs || k.detected > k.harmful || k.false_alarms > k.runs - k.harmful)
    throw input_error("fp8a.policy.904",
                      "policy file " + where +
                          ": calibration counts do not add up (detected <= harmful <= runs, "
                          "false_alarms <= runs - harmful)");
  return k;
}

// The policy of json_text over its "base" preset (the default when it names none); `root`: the
// text is a whole policy read over Policy{}, and names no base (default_policy.json itself).
Policy parse_policy_text(std::string_view json_text, std::string_view origin, bool root) {
  const std::string where = quoted_input(origin, 200);
  const Json j = parse_json_input(json_text, where, kPolicyFile);
  const ObjectReader top(j, "", where, kPolicyFile);
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
      p.calibration = read_calibration(top, where);
    }
  }

  const Json* criteria = top.object("criteria");
  if (criteria == nullptr) return p;
  const ObjectReader cr(*criteria, "criteria", where, kPolicyFile);
  cr.only({"underflow", "mse", "rel_mse_floor", "saturation", "gemm_amplification", "wgrad_damage",
           "wgrad_direction", "delayed_forecast"});
  // Each criterion's object, read by `read` when present.
  const auto each = [&](const char* key, const std::vector<std::string>& keys,
                        const std::function<void(const ObjectReader&)>& read) {
    if (const Json* o = cr.object(key)) {
      const ObjectReader r(*o, cr.name(key), where, kPolicyFile);
      r.only(keys);
      read(r);
    }
  };
  each("underflow",
       {"enabled", "action", "max_pct", "max_energy_pct", "max_pct_any_energy", "max_lost_rows_pct",
        "lost_rows_wgrad_action", "weight", "source"},
       [&](const ObjectReader& r) {
         auto& c = p.underflow;
         read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
         r.number("max_pct", 0.0, true, 100.0, &c.max_pct);
         r.optional_number("max_energy_pct", 0.0, true, 100.0, &c.max_energy_pct);
         r.optional_number("max_pct_any_energy", 0.0, true, 100.0, &c.max_pct_any_energy);
         r.optional_number("max_lost_rows_pct", 0.0, true, 100.0, &c.max_lost_rows_pct);
         read_optional_action(r, "lost_rows_wgrad_action", &c.lost_rows_wgrad_action);
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
  each("gemm_amplification", {"enabled", "action", "factor", "min_rel_fro_err", "wgrad_action", "weight", "source"},
       [&](const ObjectReader& r) {
         auto& c = p.gemm_amplification;
         read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
         r.number("factor", 1.0, false, kInf, &c.factor);
         r.number("min_rel_fro_err", 0.0, true, kInf, &c.min_rel_fro_err);
         read_optional_action(r, "wgrad_action", &c.wgrad_action);
       });
  each("wgrad_damage", {"enabled", "action", "max_zeroed_pct", "sign_flip_factor", "weight", "source"},
       [&](const ObjectReader& r) {
         auto& c = p.wgrad_damage;
         read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
         r.number("max_zeroed_pct", 0.0, true, 100.0, &c.max_zeroed_pct);
         r.number("sign_flip_factor", 1.0, false, kInf, &c.sign_flip_factor);
       });
  each("wgrad_direction", {"enabled", "action", "min_cos", "weight", "source"}, [&](const ObjectReader& r) {
    auto& c = p.wgrad_direction;
    read_common(r, &c.enabled, &c.action, &c.weight, &c.source);
    r.number("min_cos", -1.0, false, 1.0, &c.min_cos);
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

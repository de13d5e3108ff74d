#include "core/recipe_options.hpp"


namespace fp8a {

const char* consumer_name(Consumer c) {
  switch (c) {
    case Consumer::kTe: return "TE's recipe object";
    case Consumer::kMegatronArgs: return "megatron_args.txt";
    case Consumer::kMegatronBridge: return "megatron_bridge.yaml";
    case Consumer::kPrecisionConfig: return "te_precision_config.yaml";
    case Consumer::kTorchao: return "torchao.json";
  }
  return "";
}

std::string option_value_text(const RecipeOptionValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const int* i = std::get_if<int>(&v)) return std::to_string(*i);
  return std::get<std::string>(v);
}

namespace {

constexpr CarriedBy kNo{Carrier::kNone, ""};
constexpr TeVersion kEvery{0, 0};

// TE's environment variables (transformer_engine/common/recipe/__init__.py reads them at import).
constexpr const char* kPow2Env = "NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES";
constexpr const char* kFp32Env = "NVTE_FP8_BLOCK_SCALING_FP32_SCALES";
constexpr const char* kNoRhtEnv = "NVTE_NVFP4_DISABLE_RHT";
constexpr const char* kNoSrEnv = "NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING";
constexpr const char* kNo2dEnv = "NVTE_NVFP4_DISABLE_2D_QUANTIZATION";
constexpr CarriedBy env(const char* name) { return {Carrier::kEnv, name}; }
constexpr CarriedBy field(const char* name) { return {Carrier::kField, name}; }

RecipeOptionValue env_on(const Recipe&) { return std::string("1"); }

// "power-of-two current scaling needs TE 2.8 (NVTE_...); TE 2.4 trains Float8CurrentScaling with FP32 scales"
std::string before_release(const RecipeOptionRow& row, TeVersion te) {
  return std::string(row.what) + " needs TE " + te_version_text(row.te_since) + " (" +
         row.by[static_cast<int>(Consumer::kTe)].name + "); TE " + te_version_text(te) + " trains " +
         row.before_since;
}

std::vector<RecipeOptionRow> make_rows() {
  return {
      // TE's Linear modules overwrite their quantizers' power-of-two choice with the class's
      // fp8_quant_*.power_2_scale, set at import from the variable (module/linear.py
      // _customize_quantizers_float8_current_scaling): the variable, not the field, from TE 2.8
      // (te_has_current_pow2_env). Megatron's per-module config cannot give one module its own
      // (the variable is global). torchao's tensorwise recipe keeps FP32 scales.
      {.name = "current:pow2",
       .kind = RecipeKind::kPerTensorCurrent,
       .what = "power-of-two current scaling",
       .set = [](const Recipe& r) { return r.pow2_scales; },
       .value = env_on,
       .evaluation_only = false,
       .te_since = {2, 8},
       .by = {env(kPow2Env), env(kPow2Env), env(kPow2Env), env(kPow2Env), kNo},
       .without = "",
       .torchao_without = "torchao's tensorwise recipe keeps FP32 scales (a Float8LinearConfig with "
                          "round_scales_to_power_of_2=True, not a recipe name, would round them)",
       .before_since = "Float8CurrentScaling with FP32 scales"},
      {.name = "current:eps",
       .kind = RecipeKind::kPerTensorCurrent,
       .what = "an amax epsilon",
       .set = [](const Recipe& r) { return r.amax_epsilon != 0.0f; },
       .value = [](const Recipe& r) -> RecipeOptionValue { return std::to_string(r.amax_epsilon); },
       .evaluation_only = false,
       .te_since = kEvery,
       .by = {kNo, kNo, kNo, kNo, kNo},
       .without = "Float8CurrentScaling takes no amax epsilon (its QParams' amax_epsilon is a class "
                  "attribute, 0); TE trains without it",
       .torchao_without = "torchao's tensorwise recipe takes no amax epsilon (float8_utils clamps the "
                          "amax at a fixed 1e-12); it trains without it",
       .before_since = ""},
      {.name = "delayed:margin",
       .kind = RecipeKind::kPerTensorDelayed,
       .what = "the scale's margin",
       .set = [](const Recipe& r) { return r.margin != 0; },
       .value = [](const Recipe& r) -> RecipeOptionValue { return r.margin; },
       .evaluation_only = false,
       .te_since = kEvery,
       .by = {field("margin"), field("--fp8-margin"), field("fp8_margin"), kNo, kNo},
       .without = "",
       .torchao_without = "",
       .before_since = ""},
      {.name = "delayed:history",
       .kind = RecipeKind::kPerTensorDelayed,
       .what = "the amax history length",
       .set = [](const Recipe& r) { return r.history != 1024; },
       .value = [](const Recipe& r) -> RecipeOptionValue { return r.history; },
       .evaluation_only = false,
       .te_since = kEvery,
       .by = {field("amax_history_len"), field("--fp8-amax-history-len"), field("fp8_amax_history_len"), kNo, kNo},
       .without = "",
       .torchao_without = "",
       .before_since = ""},
      {.name = "delayed:algo",
       .kind = RecipeKind::kPerTensorDelayed,
       .what = "the amax compute algorithm",
       .set = [](const Recipe& r) { return r.algo != DelayedAlgo::kMax; },
       .value = [](const Recipe& r) -> RecipeOptionValue {
         return std::string(r.algo == DelayedAlgo::kMax ? "max" : "most_recent");
       },
       .evaluation_only = false,
       .te_since = kEvery,
       .by = {field("amax_compute_algo"), field("--fp8-amax-compute-algo"), field("fp8_amax_compute_algo"), kNo, kNo},
       .without = "",
       .torchao_without = "",
       .before_since = ""},
      // Float8BlockScaling(use_f32_scales=True) does not change the scales; the variable does
      // (from TE 2.4, kTeOldest). torchao's rowwise recipe rounds its scales to powers of two.
      {.name = "block:fp32",
       .kind = RecipeKind::kBlock,
       .what = "FP32 block scales",
       .set = [](const Recipe& r) { return !r.pow2_scales; },
       .value = env_on,
       .evaluation_only = false,
       .te_since = kEvery,
       .by = {env(kFp32Env), env(kFp32Env), env(kFp32Env), env(kFp32Env), kNo},
       .without = "",
       .torchao_without = "torchao's rowwise recipe rounds its scales to powers of two; it trains without "
                          "FP32 scales",
       .before_since = ""},
      {.name = "block:2d",
       .kind = RecipeKind::kBlock,
       .what = "128x128 blocks for every role",
       .set = [](const Recipe& r) { return r.block_2d; },
       .value = [](const Recipe&) -> RecipeOptionValue { return true; },
       .evaluation_only = true,
       .te_since = kEvery,
       .by = {kNo, kNo, kNo, kNo, kNo},
       .without = "128x128 blocks for every role are not a recipe TE trains with (Float8BlockScaling: "
                  "1x128 for activations and gradients, 128x128 for weights)",
       .torchao_without = "",
       .before_since = ""},
      // NVFP4BlockScaling's three switches: dataclass fields whose defaults TE reads from these
      // variables at import (common/recipe/__init__.py, from TE 2.8), the variable being what
      // Megatron's and Bridge's NVFP4 recipes (built with the defaults) see too.
      {.name = "nvfp4:no_rht",
       .kind = RecipeKind::kNvfp4,
       .what = "NVFP4 without the Hadamard transform on wgrad's inputs",
       .set = [](const Recipe& r) { return !r.nvfp4_rht; },
       .value = env_on,
       .evaluation_only = false,
       .te_since = {2, 8},  // with the recipe class
       .by = {env(kNoRhtEnv), env(kNoRhtEnv), env(kNoRhtEnv), env(kNoRhtEnv), kNo},
       .without = "",
       .torchao_without = "torchao has no NVFP4 training recipe",
       .before_since = "no NVFP4 recipe"},
      {.name = "nvfp4:no_sr",
       .kind = RecipeKind::kNvfp4,
       .what = "NVFP4 without stochastic rounding of gradients",
       .set = [](const Recipe& r) { return !r.nvfp4_sr; },
       .value = env_on,
       .evaluation_only = false,
       .te_since = {2, 8},  // with the recipe class
       .by = {env(kNoSrEnv), env(kNoSrEnv), env(kNoSrEnv), env(kNoSrEnv), kNo},
       .without = "",
       .torchao_without = "torchao has no NVFP4 training recipe",
       .before_since = "no NVFP4 recipe"},
      {.name = "nvfp4:no_2d",
       .kind = RecipeKind::kNvfp4,
       .what = "NVFP4 with 1x16 blocks for weights",
       .set = [](const Recipe& r) { return !r.nvfp4_2d; },
       .value = env_on,
       .evaluation_only = false,
       .te_since = {2, 8},  // with the recipe class
       .by = {env(kNo2dEnv), env(kNo2dEnv), env(kNo2dEnv), env(kNo2dEnv), kNo},
       .without = "",
       .torchao_without = "torchao has no NVFP4 training recipe",
       .before_since = "no NVFP4 recipe"},
      {.name = "mxfp8:floor",
       .kind = RecipeKind::kMx,
       .what = "the OCP MX floor rule",
       .set = [](const Recipe& r) { return r.mx_rule == MxScaleRule::kOcpFloor; },
       .value = [](const Recipe&) -> RecipeOptionValue { return true; },
       .evaluation_only = true,
       .te_since = kEvery,
       .by = {kNo, kNo, kNo, kNo, kNo},
       .without = "the OCP MX floor rule is not TE's (MXFP8BlockScaling rounds the E8M0 scale up)",
       .torchao_without = "",
       .before_since = ""},
  };
}

}  // namespace

const std::vector<RecipeOptionRow>& recipe_option_rows() {
  static const std::vector<RecipeOptionRow> rows = make_rows();
  return rows;
}

std::vector<const RecipeOptionRow*> options_set(const Recipe& r) {
  std::vector<const RecipeOptionRow*> out;
  for (const RecipeOptionRow& row : recipe_option_rows())
    if (row.kind == r.kind && row.set(r)) out.push_back(&row);
  return out;
}

std::vector<const RecipeOptionRow*> field_rows(RecipeKind kind, Consumer c) {
  std::vector<const RecipeOptionRow*> out;
  for (const RecipeOptionRow& row : recipe_option_rows())
    if (row.kind == kind && row.by[static_cast<int>(c)].carrier == Carrier::kField) out.push_back(&row);
  return out;
}

std::vector<OptionCarriage> carry_options(const Recipe& r, Consumer c, TeVersion te) {
  std::vector<OptionCarriage> out;
  for (const RecipeOptionRow* row : options_set(r)) {
    const CarriedBy& by = row->by[static_cast<int>(c)];
    OptionCarriage o{row, by.carrier, "", "", ""};
    if (te < row->te_since) {
      // The release reads no field or variable for it: every consumer says so, in one sentence.
      o.carrier = Carrier::kNone;
      o.note = r.spec() + ": not expressible on TE " + te_version_text(te) + ": " + before_release(*row, te);
    } else if (by.carrier == Carrier::kEnv) {
      o.env_name = by.name;
      o.env_value = std::get<std::string>(row->value(r));
      o.note = r.spec() + " (" + row->what + "): set " + o.env_name + "=" + o.env_value +
               " in the environment before Transformer Engine is imported; TE reads it there, no field sets it";
    } else if (by.carrier == Carrier::kNone) {
      // torchao's recipe names say nothing of TE's options: its own sentence where it has one.
      // A consumer without the kind at all (Megatron's per-module config and delayed scaling)
      // says so itself, and the row has no sentence for it.
      const char* own = c == Consumer::kTorchao ? row->torchao_without : "";
      if (*own != '\0') o.note = r.spec() + ": not expressible in " + consumer_name(c) + ": " + own;
      else if (*row->without != '\0') o.note = r.spec() + ": " + row->without;
    }
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<std::string> option_notes(const Recipe& r, Consumer c, TeVersion te) {
  std::vector<std::string> out;
  for (const OptionCarriage& o : carry_options(r, c, te))
    if (!o.note.empty()) out.push_back(o.note);
  return out;
}

std::string te_cannot_train(const Recipe& r) {
  std::string why;
  for (const RecipeOptionRow* row : options_set(r))
    if (row->evaluation_only) why += (why.empty() ? "" : "; ") + std::string(row->without);
  return why;
}

std::string te_release_cannot_train(const Recipe& r, TeVersion te, int sm) {
  std::string why;
  const RecipeKindTraits& kind = recipe_kind_traits(r.kind);
  if (te < kind.te_since)  // the kind's reason covers its options'
    return std::string(kind.te_recipe) + " exists from TE " + te_version_text(kind.te_since) + "; TE " +
           te_version_text(te) + " has no " + kind.short_name + " recipe";
  if (r.kind == RecipeKind::kBlock && sm >= 100 && !te_has_block_on_blackwell(te))
    return "Float8BlockScaling runs on sm_100+ from TE 2.9; TE " + te_version_text(te) +
           " runs it on Hopper only (check_fp8_block_scaling_support)";
  for (const RecipeOptionRow* row : options_set(r))
    if (te < row->te_since) why += (why.empty() ? "" : "; ") + before_release(*row, te);
  return why;
}

FormatCarriage carry_format(RecipeKind kind, TrainingFormat format, Consumer c) {
  const std::string name = training_format_name(format);
  switch (c) {
    case Consumer::kTe:  // NVFP4BlockScaling's fp8_format is its block scales' type: E4M3 whatever was asked
      return {Carrier::kField, "fp8_format",
              format == TrainingFormat::kE4M3 || recipe_kind_traits(kind).fixed_e4m3 ? "E4M3" : "HYBRID", ""};
    case Consumer::kMegatronArgs: return {Carrier::kField, "--fp8-format", name, ""};
    case Consumer::kMegatronBridge: return {Carrier::kField, "fp8", name, ""};
    case Consumer::kPrecisionConfig: return {Carrier::kField, "fp8_format", name, ""};
    case Consumer::kTorchao: break;
  }
  const RecipeKindTraits& k = recipe_kind_traits(kind);
  if (format == k.torchao_format) return {Carrier::kField, "recipe_name", name, ""};
  const bool e5m2 = fp8_format_for(k.torchao_format, Role::kGradient) == Fp8Format::kE5M2;
  return {Carrier::kNone, "recipe_name", training_format_name(k.torchao_format),
          name + ": not expressible in torchao.json: torchao's " + k.torchao_recipe + " recipe casts gradients to " +
              (e5m2 ? "E5M2" : "E4M3") + "; it trains them in " + (e5m2 ? "E5M2" : "E4M3")};
}

bool carried_as_fields(const Recipe& r, Consumer c) {
  for (const RecipeOptionRow* row : options_set(r))
    if (row->by[static_cast<int>(c)].carrier != Carrier::kField) return false;
  return true;
}

}  // namespace fp8a

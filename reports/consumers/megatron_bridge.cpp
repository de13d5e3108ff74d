#include "reports/consumers/megatron_bridge.hpp"

#include <string>

#include "core/recipe_options.hpp"
#include "core/te_version.hpp"
#include "core/text.hpp"
#include "reports/consumers/megatron_settings.hpp"

namespace fp8a {
namespace {

// The newest TE Megatron-Bridge 0.3 installs (its wheel: transformer-engine <2.13.0, >=2.10).
constexpr TeVersion kBridgeTeNewest{2, 12};

// A comment line whatever bytes the text brings (visible_text keeps it on one line).
std::string comment(const std::string& text, const char* indent = "") {
  return std::string(indent) + "# " + visible_text(text) + "\n";
}

// Bridge's bf16_mixed() (megatron/bridge/training/mixed_precision.py), the base of its FP8
// recipes: the whole config is replaced, so these are written too.
constexpr const char* kBf16Mixed =
    "mixed_precision:\n"
    "  _target_: megatron.bridge.training.mixed_precision.MixedPrecisionConfig\n"
    "  bf16: true\n"
    "  fp16: false\n"
    "  fp32: false\n"
    "  params_dtype:\n"
    "    _target_: torch.bfloat16\n"
    "    _call_: false\n"
    "  pipeline_dtype:\n"
    "    _target_: torch.bfloat16\n"
    "    _call_: false\n"
    "  autocast_enabled: false\n"
    "  grad_reduce_in_fp32: true\n";

// What the evidence does not cover stays off, whatever the recipe's config had: FP8 attention
// and FP8 weights in memory; FP4 too, unless the recipe is FP4 (fp4 set above). FP4 weights in
// memory then stay off by Megatron's default: Bridge 0.3's MixedPrecisionConfig has no fp4_param
// (later ones do, and bf16_with_nvfp4_mixed turns fp4_param_gather on).
std::string off_fields(bool fp4) {
  return std::string(fp4 ? "  # Not judged by the plan, so off: FP8 attention, FP8 weights in memory (Megatron's fp4_param\n"
                           "  # default, False, keeps FP4 weights out of memory: Bridge 0.3 has no field for it).\n"
                         : "  # Not judged by the plan, so off: FP8 attention, FP8 weights in memory (Bridge's FP8 recipes\n"
                           "  # turn fp8_param_gather on to save memory), FP4.\n") +
         "  fp8_dot_product_attention: false\n"
         "  fp8_multi_head_attention: false\n"
         "  fp8_param: false\n"
         "  fp8_param_gather: false\n" +
         (fp4 ? "" : "  fp4: null\n");
}

void write_end_layers(std::string& s, int at_start, int at_end) {
  s += std::string("  first_last_layers_bf16: ") + (at_start > 0 || at_end > 0 ? "true" : "false") + "\n";
  s += "  num_layers_at_start_in_bf16: " + std::to_string(at_start) + "\n";
  s += "  num_layers_at_end_in_bf16: " + std::to_string(at_end) + "\n";
}

// A plan that keeps nothing in FP8 (or no candidate): BF16 with fp8 null.
Artifact bf16_file(std::string s, const MegatronFp8& m) {
  s += m.candidate == nullptr
           ? comment("No FP8 candidate was chosen: train in BF16 (fp8: null).")
           : comment("The plan keeps no GEMM in FP8 (" + m.candidate->recipe.spec() + "/" + m.format +
                     " chosen, every GEMM BF16): train in BF16,") +
                 comment("fp8: null, so Megatron runs every module in BF16, those never captured too.");
  s += kBf16Mixed;
  s += "  fp8: null\n";
  write_end_layers(s, 0, 0);
  s += off_fields(false);
  s += "model:\n  quant_recipe: null\n";
  return {"megatron_bridge.yaml", s, "BF16, fp8 null"};
}

// mixed_precision's recipe fields: the format and recipe, delayed scaling's options in full.
void write_recipe_fields(std::string& s, const MegatronFp8& m) {
  const Recipe& r = m.candidate->recipe;
  const std::string bits = m.fp4 ? "fp4" : "fp8";
  if (m.fp4) s += "  fp8: null\n";
  s += "  " + bits + ": " + m.format + "\n";
  s += "  " + bits + "_recipe: " + m.recipe + "\n";
  if (!m.delayed) return;
  s += comment("Bridge's defaults are Megatron's (history 1, most_recent), not TE's: all three written.", "  ");
  for (const RecipeOptionRow* row : field_rows(r.kind, Consumer::kMegatronBridge))
    s += "  " + std::string(row->by[static_cast<int>(Consumer::kMegatronBridge)].name) + ": " +
         option_value_text(row->value(r)) + "\n";
  s += comment("The replay took each tensor's amax over its captured tensor-parallel shards only; Megatron", "  ");
  s += comment("reduces it over TP x DP x CP (TP x CP with model.tp_only_amax_red: true): with data", "  ");
  s += comment("parallelism the amax TE uses is at least the replayed one, so it clips no more and may flush more.", "  ");
}

// The first/last layers in BF16 where TransformerConfig takes them (not under delayed scaling);
// whether they were written.
bool write_first_last(std::string& s, const MegatronFp8& m) {
  const FirstLastBf16& fl = m.first_last;
  if (m.first_last_applied) {
    s += comment("The plan keeps the " + std::to_string(fl.at_start) + " first and " + std::to_string(fl.at_end) +
                     " last transformer layer(s) in BF16; the last layer is taken to be",
                 "  ");
    s += comment("layers." + std::to_string(fl.last_index) + ", the last one captured: check it against model.num_layers.", "  ");
    write_end_layers(s, fl.at_start, fl.at_end);
    return true;
  }
  if (fl.at_start > 0 || fl.at_end > 0)
    s += comment("The plan's BF16 first/last layers are left to nvdlfw_inspect.yaml: TransformerConfig", "  ") +
         comment("raises on first_last_layers_bf16 with delayed scaling.", "  ");
  write_end_layers(s, 0, 0);
  return false;
}

// What becomes of the LM head: Megatron's output_layer is no TE module.
void write_head_note(std::string& s, const MegatronFp8& m) {
  switch (m.head) {
    case MegatronHead::kFp8:
    case MegatronHead::kFp8Lost:
      s += comment("The plan keeps the LM head (" + m.head_layer + ") in FP8, but Megatron's output_layer is not a");
      s += comment("TE module: it trains in BF16 (fp8_output_proj, mxfp8 only, is Megatron-Core 0.18+; Bridge 0.3");
      s += comment("pins 0.15-0.16), so the FP8 share the answer counts for it is not realised.");
      break;
    case MegatronHead::kBf16:
      s += comment("The LM head (" + m.head_layer + ") stays BF16: Megatron's output_layer trains in BF16 anyway.");
      break;
    case MegatronHead::kNotCaptured: break;
  }
}

// The single GEMMs (and, under delayed scaling, the end layers): nvdlfw_inspect.yaml through
// Bridge's tensor-inspect integration, when TE's feature names there are Bridge's TE's; whether
// the section was written.
bool write_tensor_inspect(std::string& s, const ConsumerPlan& plan) {
  const TeVersion te = plan.rec->te_version;
  const bool inspect_file = !plan.nvdlfw_omitted.has_value();
  // TE 2.13 renamed DisableFP8GEMM/Layer: a file for 2.13+ fails at initialize() on Bridge's TE.
  const bool loads = te_has_disable_quantization(te) == te_has_disable_quantization(kBridgeTeNewest);
  if (inspect_file && loads) {
    s += comment("nvdlfw_inspect.yaml (TE " + te_version_text(te) + " names) through Bridge's tensor-inspect integration; needs nvdlfw_inspect.");
    s += "tensor_inspect:\n"
         "  _target_: megatron.bridge.training.config.TensorInspectConfig\n"
         "  enabled: true\n"
         "  features: nvdlfw_inspect.yaml\n";
    return true;
  }
  if (inspect_file) {
    s += comment("No tensor_inspect: nvdlfw_inspect.yaml was written for TE " + te_version_text(te) +
                 " (--te-version), whose DisableQuantizationGEMM/Layer");
    s += comment("the TE Megatron-Bridge 0.3 installs (2.10-2.12) rejects. Rerun with --te-version 2.12 for the");
    s += comment("file and a tensor_inspect section that loads it.");
  }
  return false;
}

}  // namespace

Artifact render_megatron_bridge(const ConsumerPlan& plan) {
  std::string s = comment("Megatron-Bridge overrides for the recommended recipe (fp8-advisor megatron_bridge.yaml).");
  s += comment("Written for Megatron-Bridge 0.3, which pins Megatron-Core 0.15-0.16 and TE 2.10-2.12 (docs/VERSIONS.md).");
  s += comment("Merge it into the recipe's ConfigContainer as Bridge's example scripts do with --config-file:");
  s += comment("  megatron.bridge.training.utils.omegaconf_utils.process_config_with_overrides(");
  s += comment("      cfg, config_filepath=\"megatron_bridge.yaml\")");
  s += comment("File paths below are relative: give them as the training job sees them.");
  s += comment("mixed_precision replaces the recipe's whole precision config: Bridge's bf16_mixed() with the");
  s += comment("plan's FP8 fields (the TransformerConfig fields megatron_args.txt's flags set).");
  const MegatronFp8& m = plan.megatron;
  if (!m.fp8) return bf16_file(std::move(s), m);
  const Recipe& r = m.candidate->recipe;
  const std::string bits = m.fp4 ? "fp4" : "fp8";
  std::string note = bits + " " + m.format + ", " + bits + "_recipe " + m.recipe;
  s += comment("Recipe " + r.spec() + " in format " + m.format + " (TE " + recipe_kind_traits(r.kind).te_recipe + ").");
  for (const std::string& line : plan.notes(Consumer::kMegatronBridge)) s += comment(line);
  s += kBf16Mixed;
  write_recipe_fields(s, m);
  if (write_first_last(s, m)) note += ", first/last BF16";
  s += off_fields(m.fp4);
  write_head_note(s, m);
  s += "model:\n";
  if (m.te_precision_config) {
    s += comment("The per-module plan: te_precision_config.yaml, written beside this file, read by Megatron-Core's", "  ");
    s += comment("own loader into TransformerConfig.quant_recipe (Megatron-Core 0.16+; pipeline parallelism:", "  ");
    s += comment("see that file's header).", "  ");
    s += "  quant_recipe:\n"
         "    _target_: megatron.core.quantization.utils.load_quantization_recipe\n"
         "    recipe_path: te_precision_config.yaml\n";
    note += ", quant_recipe";
  } else {
    s += "  quant_recipe: null\n";
  }
  const bool applied = write_tensor_inspect(s, plan);
  if (applied) note += ", tensor_inspect";
  if (!m.uncovered.empty()) {
    s += comment(std::string("BF16 fallbacks mixed_precision cannot express (") +
                 (m.te_precision_config ? "quant_recipe keeps whole modules, " : "") +
                 (applied ? "tensor_inspect single GEMMs):" : "not applied without tensor_inspect):"));
    for (const std::string& u : m.uncovered) s += comment("  " + u);
  }
  return {"megatron_bridge.yaml", s, note};
}

}  // namespace fp8a

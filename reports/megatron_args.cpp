#include "reports/megatron_args.hpp"

#include <sstream>
#include <vector>

#include "core/te_version.hpp"
#include "reports/layer_names.hpp"
#include "reports/te_precision_config.hpp"

namespace fp8a {

Artifact render_megatron_args(const Recommendation& rec) {
  std::ostringstream o;
  o << "# Megatron-LM FP8 flags for the recommended recipe (fp8-advisor megatron_args.txt).\n";
  o << "# Written for Transformer Engine " << te_version_text(rec.te_version)
    << " (--te-version); the FP8 flags need Megatron-Core 0.13+, --te-precision-config-file 0.16+\n"
       "# (docs/VERSIONS.md).\n";
  const RunCandidate* c = chosen_candidate(rec);
  if (c == nullptr) {
    o << "# No FP8 candidate was chosen: train in BF16 (no --fp8-format).\n";
    if (!rec.why.empty()) o << "# " << rec.why << "\n";
    return {"megatron_args.txt", o.str(), "no FP8 candidate"};
  }
  const Recipe& r = c->recipe;
  const RecipeKindTraits& kind = recipe_kind_traits(r.kind);
  if (plan_all_bf16(rec)) {
    o << "# The plan keeps no GEMM in FP8 (" << r.spec() << "/" << training_format_name(c->format)
      << " chosen, every GEMM BF16): train in BF16,\n"
         "# no --fp8-format or --fp8-recipe, so Megatron runs every module in BF16, those never captured too.\n";
    return {"megatron_args.txt", o.str(), "no FP8 flags: every GEMM BF16"};
  }
  o << "# Recipe " << r.spec() << " in format " << training_format_name(c->format) << " (TE " << kind.te_recipe
    << ").\n";
  o << "--fp8-format " << training_format_name(c->format) << "\n";
  o << "--fp8-recipe " << kind.megatron_recipe << "\n";
  std::string note = std::string("--fp8-recipe ") + kind.megatron_recipe + " --fp8-format " +
                     training_format_name(c->format);
  switch (r.kind) {
    case RecipeKind::kPerTensorDelayed:
      o << "# Megatron's delayed-scaling defaults differ from TE's DelayedScaling: --fp8-amax-history-len 1\n"
           "# (TE 1024) and --fp8-amax-compute-algo most_recent (TE max); all three are written explicitly.\n";
      o << "--fp8-margin " << r.margin << "\n";
      o << "--fp8-amax-history-len " << r.history << "\n";
      o << "--fp8-amax-compute-algo " << (r.algo == DelayedAlgo::kMax ? "max" : "most_recent") << "\n";
      o << "# The replay took each tensor's amax over its captured tensor-parallel shards (the trace's\n"
           "# rank) only. Megatron reduces delayed scaling's amax over TP x DP x CP (TP x CP with\n"
           "# --tp-only-amax-red): with data parallelism the amax TE uses is at least the replayed one,\n"
           "# so it clips no more and may flush more than the evidence shows.\n";
      break;
    case RecipeKind::kPerTensorCurrent:
      if (r.pow2_scales)
        o << "# current:pow2 (power-of-two scales): set NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES=1 in the\n"
             "# environment before TE is imported; TE's modules read it, not the recipe's field.\n";
      if (r.amax_epsilon != 0.0f)
        o << "# Not expressible: " << r.spec() << "'s amax epsilon (TE's Float8CurrentScaling has none).\n";
      break;
    case RecipeKind::kBlock:
      if (!r.pow2_scales)
        o << "# block:fp32 (FP32 block scales): set NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1 in the environment;\n"
             "# Megatron's blockwise uses TE's power-of-two scales otherwise.\n";
      if (r.block_2d)
        o << "# Not expressible in Megatron's flags: 128x128 blocks for every role (blockwise uses TE's\n"
             "# default, 1x128 for activations and gradients).\n";
      break;
    case RecipeKind::kMx:
      if (r.mx_rule == MxScaleRule::kOcpFloor)
        o << "# Not expressible: the OCP floor scale rule (TE's MXFP8 rounds its E8M0 scales up).\n";
      break;
    case RecipeKind::kBf16: break;
  }
  const FirstLastBf16 fl = first_last_bf16(rec);
  if (fl.at_start > 0 || fl.at_end > 0) {
    std::ostringstream which;
    which << fl.at_start << " first and " << fl.at_end << " last transformer layer(s)";
    if (r.kind == RecipeKind::kPerTensorDelayed) {
      o << "# The plan keeps the " << which.str() << " in BF16, but Megatron\n"
           "# cannot combine --first-last-layers-bf16 with delayed scaling (TransformerConfig raises):\n"
           "# left out; nvdlfw_inspect.yaml's DisableQuantizationLayer keeps them in BF16.\n";
    } else {
      o << "# The plan keeps the " << which.str() << " in BF16. The model's last layer\n"
           "# is taken to be layers." << fl.last_index << ", the last one captured: check it against --num-layers.\n"
           "# The counts are global; Megatron checks them against num_layers / pipeline stages.\n";
      o << "--first-last-layers-bf16\n";
      o << "--num-layers-at-start-in-bf16 " << fl.at_start << "\n";
      o << "--num-layers-at-end-in-bf16 " << fl.at_end << "\n";
      note += " --first-last-layers-bf16";
    }
  }
  // Megatron's LM head is a ColumnParallelLinear, not a TE module: FP8 only with --fp8-output-proj,
  // which Megatron applies under --fp8-recipe mxfp8 alone (TransformerConfig.fp8_output_proj,
  // fp8_utils.is_mxfp8_output_proj_active).
  for (const LayerDecision& l : rec.layers) {
    if (megatron_module_path(l.layer).name != "output_layer") continue;
    const bool fp8_head = l.precision != Precision::kBf16;
    if (fp8_head && r.kind == RecipeKind::kMx) {
      o << "# The plan keeps the LM head (" << l.layer << ") in FP8: Megatron's output_layer is FP8 only\n"
           "# with --fp8-output-proj (mxfp8 only; Megatron-Core TransformerConfig.fp8_output_proj).\n";
      o << "--fp8-output-proj\n";
      note += " --fp8-output-proj";
    } else if (fp8_head) {
      o << "# The plan keeps the LM head (" << l.layer << ") in FP8, but Megatron's output_layer is not a\n"
           "# TE module: it trains in BF16 under " << kind.megatron_recipe << " (--fp8-output-proj applies to mxfp8 only),\n"
           "# so the FP8 share the answer counts for it is not realised.\n";
    } else {
      o << "# The LM head (" << l.layer << ") stays BF16: Megatron's output_layer trains in BF16 anyway.\n";
    }
    break;
  }
  // The per-module file beside this one, when the run writes it (Megatron-Core >= 0.16 reads it).
  const bool te_file = !te_precision_config_omitted(rec).has_value();
  if (te_file) {
    o << "# The per-module plan: te_precision_config.yaml, written beside this file (give its path as\n"
         "# the training job sees it). Needs Megatron-Core >= 0.16; pipeline parallelism: see its header.\n";
    o << "--te-precision-config-file te_precision_config.yaml\n";
    note += " --te-precision-config-file";
  }
  // What the flags cannot carry: BF16 fallbacks of single modules or GEMMs elsewhere.
  std::vector<std::string> rest;
  for (const LayerDecision& l : rec.layers) {
    if (!has_bf16_gemm(l)) continue;
    const auto i = transformer_layer_index(l.layer);
    const bool covered = r.kind != RecipeKind::kPerTensorDelayed && i &&
                         (*i < fl.at_start || (fl.at_end > 0 && *i > fl.last_index - fl.at_end));
    if (covered) continue;
    rest.push_back(l.layer + " (" + fallback_gemm_list(l) + ")");
  }
  if (!rest.empty()) {
    o << (te_file ? "# BF16 fallbacks the flags above cannot express (te_precision_config.yaml keeps whole\n"
                    "# modules, nvdlfw_inspect.yaml single GEMMs):\n"
                  : "# BF16 fallbacks these flags cannot express (nvdlfw_inspect.yaml keeps single GEMMs):\n");
    for (const std::string& s : rest) o << "#   " << s << "\n";
  }
  return {"megatron_args.txt", o.str(), note};
}

}  // namespace fp8a

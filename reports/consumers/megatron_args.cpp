#include "reports/consumers/megatron_args.hpp"

#include <sstream>

#include "core/recipe_options.hpp"
#include "core/te_version.hpp"
#include "core/text.hpp"
#include "reports/consumers/megatron_settings.hpp"

namespace fp8a {

Artifact render_megatron_args(const ConsumerPlan& plan) {
  const Recommendation& rec = *plan.rec;
  std::ostringstream o;
  o << "# Megatron-LM FP8 flags for the recommended recipe (fp8-advisor megatron_args.txt).\n";
  const MegatronFp8& m = plan.megatron;
  const std::string bits = m.fp4 ? "--fp4" : "--fp8";
  o << "# Written for Transformer Engine " << te_version_text(rec.te_version) << " (--te-version); the "
    << (m.fp4 ? "FP4 flags need Megatron-Core 0.15+" : "FP8 flags need Megatron-Core 0.13+") << ",\n"
       "# --te-precision-config-file 0.16+, --fp8-output-proj 0.18+ (docs/VERSIONS.md).\n";
  if (m.candidate == nullptr) {
    o << "# No FP8 candidate was chosen: train in BF16 (no --fp8-format).\n";
    if (!rec.why.empty()) o << "# " << visible_text(rec.why) << "\n";
    return {"megatron_args.txt", o.str(), "no FP8 candidate"};
  }
  const Recipe& r = m.candidate->recipe;
  if (!m.fp8) {
    o << "# The plan keeps no GEMM in FP8 (" << r.spec() << "/" << m.format
      << " chosen, every GEMM BF16): train in BF16,\n"
         "# no " << bits << "-format or " << bits << "-recipe, so Megatron runs every module in BF16, those never captured too.\n";
    return {"megatron_args.txt", o.str(), "no FP8 flags: every GEMM BF16"};
  }
  o << "# Recipe " << r.spec() << " in format " << m.format << " (TE " << recipe_kind_traits(r.kind).te_recipe
    << ").\n";
  o << bits << "-format " << m.format << "\n";
  o << bits << "-recipe " << m.recipe << "\n";
  std::string note = bits + "-recipe " + m.recipe + " " + bits + "-format " + m.format;
  if (m.delayed) {
    o << "# Megatron's delayed-scaling defaults differ from TE's DelayedScaling: --fp8-amax-history-len 1\n"
         "# (TE 1024) and --fp8-amax-compute-algo most_recent (TE max); all three are written explicitly.\n";
    for (const RecipeOptionRow* row : field_rows(r.kind, Consumer::kMegatronArgs))
      o << row->by[static_cast<int>(Consumer::kMegatronArgs)].name << " " << option_value_text(row->value(r)) << "\n";
    o << "# The replay took each tensor's amax over its captured tensor-parallel shards (the trace's\n"
         "# rank) only. Megatron reduces delayed scaling's amax over TP x DP x CP (TP x CP with\n"
         "# --tp-only-amax-red): with data parallelism the amax TE uses is at least the replayed one,\n"
         "# so it clips no more and may flush more than the evidence shows.\n";
  }
  for (const std::string& line : plan.notes(Consumer::kMegatronArgs))
    o << "# " << visible_text(line) << "\n";
  const FirstLastBf16& fl = m.first_last;
  if (fl.at_start > 0 || fl.at_end > 0) {
    std::ostringstream which;
    which << fl.at_start << " first and " << fl.at_end << " last transformer layer(s)";
    if (!m.first_last_applied) {
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
  switch (m.head) {
    case MegatronHead::kFp8:
      o << "# The plan keeps the LM head (" << visible_text(m.head_layer) << ") in FP8: Megatron's output_layer is FP8 only\n"
           "# with --fp8-output-proj (mxfp8 only; Megatron-Core 0.18+ TransformerConfig.fp8_output_proj).\n";
      o << "--fp8-output-proj\n";
      note += " --fp8-output-proj";
      break;
    case MegatronHead::kFp8Lost:
      o << "# The plan keeps the LM head (" << visible_text(m.head_layer) << ") in FP8, but Megatron's output_layer is not a\n"
           "# TE module: it trains in BF16 under " << m.recipe << " (--fp8-output-proj applies to mxfp8 only),\n"
           "# so the FP8 share the answer counts for it is not realised.\n";
      break;
    case MegatronHead::kBf16:
      o << "# The LM head (" << visible_text(m.head_layer) << ") stays BF16: Megatron's output_layer trains in BF16 anyway.\n";
      break;
    case MegatronHead::kNotCaptured: break;
  }
  // The per-module file beside this one, when the run writes it (Megatron-Core >= 0.16 reads it).
  if (m.te_precision_config) {
    o << "# The per-module plan: te_precision_config.yaml, written beside this file (give its path as\n"
         "# the training job sees it). Needs Megatron-Core >= 0.16; pipeline parallelism: see its header.\n";
    o << "--te-precision-config-file te_precision_config.yaml\n";
    note += " --te-precision-config-file";
  }
  // What the flags cannot carry: BF16 fallbacks of single modules or GEMMs elsewhere.
  if (!m.uncovered.empty()) {
    o << (m.te_precision_config
              ? "# BF16 fallbacks the flags above cannot express (te_precision_config.yaml keeps whole\n"
                "# modules, nvdlfw_inspect.yaml single GEMMs):\n"
              : "# BF16 fallbacks these flags cannot express (nvdlfw_inspect.yaml keeps single GEMMs):\n");
    for (const std::string& s : m.uncovered) o << "#   " << visible_text(s) << "\n";
  }
  return {"megatron_args.txt", o.str(), note};
}

}  // namespace fp8a

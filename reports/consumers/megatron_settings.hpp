// What Megatron's FP8 settings hold for a Recommendation, whichever form carries them: Megatron-LM's
// flags (megatron_args.txt) and Megatron-Bridge's MixedPrecisionConfig (megatron_bridge.yaml) set
// the same TransformerConfig fields (fp8, fp8_recipe, the delayed-scaling three,
// first_last_layers_bf16 and its counts), and both name te_precision_config.yaml for the modules.
#pragma once

#include <string>
#include <vector>

#include "policies/advice.hpp"

namespace fp8a {

// The leading / trailing run of captured transformer layers whose every captured module is all
// BF16: counts of consecutive indices from the smallest captured index (0 required) up, and from
// the largest captured index down (the largest captured index taken as the model's last layer).
struct FirstLastBf16 {
  int at_start = 0;
  int at_end = 0;
  int last_index = -1;  // the largest captured transformer layer index; -1 when none
};

// Where the plan puts Megatron's LM head (output_layer: a ColumnParallelLinear, not a TE module;
// FP8 only through TransformerConfig.fp8_output_proj, which Megatron applies under mxfp8 alone,
// fp8_utils.is_mxfp8_output_proj_active; Megatron-Core 0.19).
enum class MegatronHead {
  kNotCaptured,  // the captures have no LM head
  kBf16,         // the plan keeps it BF16: Megatron trains it BF16 anyway
  kFp8,          // FP8 in the plan and the recipe is mxfp8: fp8_output_proj carries it
  kFp8Lost,      // FP8 in the plan, but the recipe is not mxfp8: Megatron trains it BF16
};

struct MegatronFp8 {
  const RunCandidate* candidate = nullptr;  // the chosen one; null: none chosen
  bool fp8 = false;         // FP8 training: a candidate is chosen and the plan keeps a GEMM in FP8
  // The recipe is a 4-bit kind (RecipeKindTraits::megatron_fp4): format and recipe are Megatron's
  // --fp4-format / fp4 ("e2m1") and --fp4-recipe / fp4_recipe ("nvfp4"), and `fp8` means FP4.
  bool fp4 = false;
  std::string format;       // Megatron's --fp8-format / fp8: "hybrid", "e4m3"
  std::string recipe;       // Megatron's --fp8-recipe / fp8_recipe: "tensorwise", "delayed", ...
  bool delayed = false;     // the delayed-scaling three apply (margin, history, algo of candidate)
  std::string amax_compute_algo;  // "max" / "most_recent" when delayed
  FirstLastBf16 first_last;       // the plan's BF16 end layers
  // first_last has layers, and the recipe is not delayed scaling: TransformerConfig raises on
  // first_last_layers_bf16 with delayed ("Delayed scaling does not support first / last layer in
  // BF16"), so under delayed they are left to nvdlfw_inspect.yaml's DisableQuantizationLayer.
  bool first_last_applied = false;
  MegatronHead head = MegatronHead::kNotCaptured;
  std::string head_layer;   // the captured name of the LM head, when captured
  bool te_precision_config = false;  // te_precision_config.yaml is written (ConsumerPlan::precision_config_omitted unset)
  // The BF16 fallbacks the settings above cannot carry, "layer (fprop,wgrad)": every layer with a
  // fallback GEMM outside the applied first/last layers.
  std::vector<std::string> uncovered;
};

}  // namespace fp8a

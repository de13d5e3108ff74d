// megatron_args.txt: the Megatron-LM FP8 flags of the recommendation, one flag per line (shell
// words; `#` starts a comment): --fp8-format, --fp8-recipe, the delayed-scaling settings, and
// --first-last-layers-bf16 with its counts where the plan keeps the first/last transformer layers
// in BF16. Comments say what the flags cannot express (per-module and per-GEMM fallbacks, delayed
// scaling with BF16 end layers, recipe options) and where Megatron's defaults differ from TE's.
#pragma once

#include "policies/advice.hpp"
#include "reports/artifact.hpp"
#include "reports/consumers/consumer_plan.hpp"

namespace fp8a {

// Note: the chosen candidate's flags ("--fp8-recipe tensorwise --fp8-format hybrid"), or "no FP8
// candidate" (then the file holds only comments: train in BF16).
Artifact render_megatron_args(const ConsumerPlan& plan);

}  // namespace fp8a

// megatron_bridge.yaml: the plan as Megatron-Bridge overrides, for the YAML a Bridge training script
// merges into its recipe's ConfigContainer (megatron.bridge.training.utils.omegaconf_utils
// .process_config_with_overrides, the example scripts' --config-file). Written for Megatron-Bridge
// 0.3 (pins Megatron-Core 0.15-0.16 and TE 2.10-2.12):
//  - mixed_precision: a whole MixedPrecisionConfig by `_target_` (the recipes give a string,
//    "bf16_mixed", which a plain mapping cannot be merged into): Bridge's bf16_mixed() fields, the
//    plan's FP8 fields (megatron_fp8: the same TransformerConfig fields as megatron_args.txt's
//    flags), FP8 attention, FP8 weights and FP4 explicitly off (the evidence covers none of them);
//  - model.quant_recipe: te_precision_config.yaml through Megatron-Core's own
//    load_quantization_recipe, when that file is written (else null);
//  - tensor_inspect: nvdlfw_inspect.yaml (Bridge's TensorInspectConfig), when that file is written
//    and uses names Bridge's TE has (TE < 2.13: --te-version 2.12 or older); otherwise it says what
//    is then not applied.
// A plan that keeps no GEMM in FP8, or no chosen candidate: BF16 (fp8 null), no per-module file.
// tests/consumers/check_bridge.py runs it through Bridge's own override code.
#pragma once

#include "policies/advice.hpp"
#include "reports/artifact.hpp"
#include "reports/consumers/consumer_plan.hpp"

namespace fp8a {

// Note: "fp8 hybrid, fp8_recipe tensorwise, quant_recipe, tensor_inspect" / "BF16, fp8 null".
Artifact render_megatron_bridge(const ConsumerPlan& plan);

}  // namespace fp8a

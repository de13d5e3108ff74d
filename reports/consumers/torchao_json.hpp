// torchao.json: the advice for torchao's float8 training (torchao.float8, as torchtitan's and NeMo
// AutoModel's configs take it): {"recipe_name", "filter_fqns", "reason"}. recipe_name is the
// Float8LinearRecipeName closest to the chosen candidate: current scaling -> "tensorwise" (E4M3
// forward, E5M2 grad_output: hybrid), block scaling -> "rowwise" (per-row E4M3 scales, powers of
// two), or "rowwise_with_gw_hp" when some module keeps only its wgrad in BF16 (torchao's
// grad-weight GEMM in high precision, for every module); null for delayed scaling (removed from
// torchao) and MXFP8 (prototype only), with `reason`. filter_fqns: the captured names of the
// modules to keep in high precision (torchao matches them as substrings of its FQNs; the
// captured names are the model's own named_modules()), `reason` also saying what differs.
#pragma once

#include "policies/advice.hpp"
#include "reports/artifact.hpp"
#include "reports/consumers/consumer_plan.hpp"

namespace fp8a {

// Note: the recipe name ("rowwise", or "none") and the filter's size.
Artifact render_torchao_json(const ConsumerPlan& plan);

}  // namespace fp8a

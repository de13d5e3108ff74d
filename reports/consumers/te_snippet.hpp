// te_snippet.py: the answer as Transformer Engine code, for a training script that calls TE
// itself: the env variables TE reads at import, the recipe object (every field written), and a
// forward wrapped in TE's autocast of Recommendation::te_version: te.autocast(recipe=...) from
// TE 2.9, te.fp8_autocast(fp8_recipe=...) before. A plan that keeps no GEMM in FP8 (or no chosen
// candidate) builds no recipe and has no autocast: the forward runs in BF16. The BF16 fallbacks
// are not in it (nvdlfw_inspect.yaml and te_precision_config.yaml have them); it says so.
// tests/consumers/check_te_snippet.py compiles it and runs it against TE's sources of a release.
#pragma once

#include "policies/advice.hpp"
#include "reports/artifact.hpp"
#include "reports/consumers/consumer_plan.hpp"

namespace fp8a {

// Note: "te.autocast, Float8CurrentScaling" / "te.fp8_autocast, ..." / "BF16, no autocast".
Artifact render_te_snippet(const ConsumerPlan& plan);

}  // namespace fp8a

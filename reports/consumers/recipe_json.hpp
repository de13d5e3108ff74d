// recipe.json: the recommendation for the tools people train with. Its "recipe" object is
// Transformer Engine's recipe class with its own field names (tests/consumers/check_te_recipe.py
// builds it), then the per-layer / per-GEMM precision with reasons, the predicted speedup, the
// Pareto list of every candidate, the evidence behind each decision, the tensors to watch and the
// provenance. The format is reports/consumers/recipe.schema.json (Draft 2020-12); every value comes from
// the Recommendation (policies/advice.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policies/advice.hpp"
#include "reports/artifact.hpp"
#include "reports/run_info.hpp"
#include "reports/consumers/consumer_plan.hpp"

namespace fp8a {

// recipe.json's "schema_version": bumped on any change of the format that a reader must know.
inline constexpr int kRecipeJsonSchemaVersion = 1;

// With no chosen candidate, "recipe", "candidate" and the evidence are null / empty and every
// layer is BF16 with the Recommendation's why as the reason (recommend() fills them so).
Artifact render_recipe_json(const ConsumerPlan& plan, const RunInfo& info);

// How the plan of recipe.json `after` differs from that of `before` (both recipe.json texts), one
// line each, in this order: the chosen candidate ("candidate: current/hybrid -> block/hybrid";
// "none" without one), the FP8 share of the GEMM FLOPs when it moved by 0.05 percentage points or
// more, layers only one side holds, then each (layer, GEMM) whose precision changed ("<layer>
// wgrad: fp8 -> bf16: <after's reason>"). Layer names escaped (visible_text). Empty: the same
// plan. Unset, with *why: a text that is not a recipe.json (not JSON, no "layers" array, ...).
std::optional<std::vector<std::string>> plan_differences(std::string_view before, std::string_view after,
                                                         std::string* why);

}  // namespace fp8a

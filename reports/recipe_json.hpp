// recipe.json: the recommendation for the tools people train with. Its "recipe" object is
// Transformer Engine's recipe class with its own field names (tests/consumers/check_te_recipe.py
// builds it), then the per-layer / per-GEMM precision with reasons, the predicted speedup, the
// Pareto list of every candidate, the evidence behind each decision, the tensors to watch and the
// provenance. The format is reports/recipe.schema.json (Draft 2020-12); every value comes from
// the Recommendation (policies/advice.hpp).
#pragma once

#include "policies/advice.hpp"
#include "reports/artifact.hpp"
#include "reports/run_info.hpp"

namespace fp8a {

// recipe.json's "schema_version": bumped on any change of the format that a reader must know.
inline constexpr int kRecipeJsonSchemaVersion = 1;

// With no chosen candidate, "recipe", "candidate" and the evidence are null / empty and every
// layer is BF16 with the Recommendation's why as the reason (recommend() fills them so).
Artifact render_recipe_json(const Recommendation& rec, const RunInfo& info);

}  // namespace fp8a

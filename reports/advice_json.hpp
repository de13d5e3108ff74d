// The parts of a Recommendation that recipe.json and summary.json's "decision" both carry, rendered
// once so the two files spell them alike: TE's recipe object, the candidates, the Pareto list, the
// per-module plan and the field advisories.
#pragma once

#include <nlohmann/json.hpp>

#include "policies/advice.hpp"
#include "reports/consumers/te_recipe.hpp"

namespace fp8a {

// TE's recipe object (reports/consumers/te_recipe.hpp) as JSON: "class", "fp8_format", every field the spec
// sets (defaults too), and "env" for what TE reads only from the environment.
nlohmann::ordered_json te_recipe_json(const TeRecipe& t);

// {"name", "recipe", "format"} of a candidate.
nlohmann::ordered_json candidate_ref(const RunCandidate& c);

// Every candidate: its name, recipe and format, whether chosen, runnable (and why not), its plan's
// FP8 FLOP share, predicted GEMM speedup (null without a cost model), GEMMs to BF16 for the
// numbers and where FP8 would not pay, and total risk.
nlohmann::ordered_json candidates_json(const Recommendation& rec);

// The Pareto list (ParetoPoint): gemms_to_bf16, moved, fp8_flop_share, gemm_speedup_vs_bf16, risk,
// failing_in_fp8, chosen.
nlohmann::ordered_json pareto_json(const Recommendation& rec);

// The per-module plan, or null (module_plan_note says why): base, why, note, modules (layer,
// precision, candidate, recipe as te_recipe_json or null, reason), predicted.
nlohmann::ordered_json module_plan_json(const Recommendation& rec);
// Recommendation::module_plan_note as JSON: null when empty.
nlohmann::ordered_json module_plan_note_json(const Recommendation& rec);

// Recommendation::limits as a JSON array of strings.
nlohmann::ordered_json limits_json(const Recommendation& rec);

// [{"source", "text"}] of Recommendation::advisories.
nlohmann::ordered_json advisories_json(const Recommendation& rec);

// Sets "candidates", "pareto", "module_plan", "module_plan_note", "advisories" and "limits" of
// `out` (recipe.json's top level, summary.json's "decision"), in that order.
void add_recommendation_lists(nlohmann::ordered_json& out, const Recommendation& rec);

}  // namespace fp8a

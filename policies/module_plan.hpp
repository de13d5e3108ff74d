// The module plan: for users who can mix recipes per module (Megatron-Core's
// --te-precision-config-file), each module's own recipe, or BF16. te_precision_config renders it.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "policies/cost_plan.hpp"
#include "policies/fallback_plan.hpp"

namespace fp8a {

// Megatron-Core's --te-precision-config-file runs each module under its own recipe: tensorwise
// (Float8CurrentScaling with TE's defaults), blockwise (Float8BlockScaling: power-of-two scales,
// TE's default blocks) or mxfp8 (MXFP8BlockScaling, TE's scale rule), in e4m3 or hybrid.
// Megatron-Core 0.19: megatron/core/quantization/quant_config.py and utils.py read the file,
// megatron/core/extensions/transformer_engine.py _get_fp8_autocast_for_quant_recipe maps each
// recipe name to its TE class; tests/consumers/check_megatron.py loads our file with them.
// No delayed scaling, no recipe option, no single GEMM.
bool per_module_recipe(const Recipe& recipe);

// One module of the per-module plan.
struct ModuleChoice {
  std::string layer;
  // Into Recommendation::candidates: the module's recipe; unset: the whole module in BF16.
  std::optional<std::size_t> candidate;
  // Empty on the base with every GEMM passing; else why not the base, with numbers.
  std::string reason;
};

// One precision tier of the per-module plan: the modules on one candidate (or in BF16), what
// their numbers come to there and, with a cost model, their GEMM time in BF16 and in the tier.
struct ModuleTier {
  std::optional<std::size_t> candidate;  // into Recommendation::candidates; unset: BF16
  int modules = 0;
  int gemms = 0;        // their judged GEMMs
  double flops = 0;     // their GEMM FLOPs (as CandidatePlan::total_flops counts them)
  double risk = 0;      // the sum of their GEMMs' threshold loads under the candidate; 0 for BF16
  // With a cost model, over the modules the model holds: their GEMMs' time all in BF16, and in
  // the tier with its casts (one module at a time on the roofline; the same for BF16).
  std::optional<double> bf16_seconds, seconds;
};

// The per-module plan, for users who can mix recipes per module: every module on the base
// candidate where all its GEMMs pass there, else on the candidate under which they all pass
// (the lowest risk of the layer, within 10 % the preference order), else BF16; with a cost model,
// the fastest of those (BF16 included: where FP8 would not pay), the base on ties. Only
// per_module_recipe candidates the GPU runs; none under a global-scope policy.
struct ModulePlan {
  std::size_t base = 0;              // into Recommendation::candidates: the "*" recipe
  std::vector<ModuleChoice> modules; // every layer, in Recommendation::layers order
  double fp8_flops = 0;
  double fp8_flop_share = 0;
  std::optional<double> speedup;     // with a cost model
  int switched = 0;                  // modules on a candidate other than the base
  int bf16 = 0;                      // modules in BF16
  // The tiers with a module: the base first, then the other candidates by index, BF16 last.
  std::vector<ModuleTier> tiers;
  std::string why;                   // the plan in one line, with numbers
};

// Why there is no per-module plan ("no per-module plan: ..."): nothing chosen, a global scope,
// or no runnable per_module_recipe candidate; "" when plan_modules can make one.
std::string module_plan_note(const std::vector<CandidatePlan>& candidates, std::optional<std::size_t> chosen,
                             FallbackScope scope);

// The per-module plan over the runnable per_module_recipe candidates; the base is the chosen one
// when it is among them, else the best ranked of them (choice.hpp ranks_before). Only where
// module_plan_note is "". `cost` null: numerics alone.
ModulePlan plan_modules(const std::vector<CandidatePlan>& candidates, std::size_t chosen, const CostModel* cost,
                        const CostRows& rows);

// The chosen plan as a consumer that sets precision per module trains it (Megatron's
// te_precision_config.yaml under the chosen recipe, torchao's module filter): every module with a
// GEMM the plan keeps in BF16 (a judged one: its numbers, its grouped module, the cost, or forced)
// wholly BF16, the others as the plan has them (a GEMM not judged under the recipe). Its FP8
// share and, with a cost model, its speedup are this plan's own. `layers`: the decisions under
// `chosen` (Recommendation::layers); FLOPs from chosen.layers, in the same order.
struct WholeModulePlan {
  std::vector<std::array<Precision, 3>> plan;  // per layer (Recommendation::layers order), per GEMM
  std::vector<std::size_t> widened;   // layers with an FP8 GEMM in the per-GEMM plan made whole BF16
  double fp8_flops = 0;
  double fp8_flop_share = 0;          // of CandidatePlan::total_flops
  std::optional<double> speedup;      // with a cost model
};
WholeModulePlan plan_whole_modules(const CandidatePlan& chosen, const std::vector<LayerDecision>& layers,
                                   const CostModel* cost, const CostRows& rows);

// Why a per-module plan cannot stand beside the chosen plan ("" when it can): the chosen plan keeps
// no GEMM in FP8, so the answer and every file say BF16, while the plan puts modules in FP8 (with
// a cost model, a module's shared casts can pay where none of its GEMMs pays alone).
std::string module_plan_conflict(const CandidatePlan& chosen, const ModulePlan& plan);

}  // namespace fp8a

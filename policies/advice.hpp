// The selection, numerics first: every (layer, GEMM) judged under every evaluated FP8 candidate
// (recipe, format), the global candidate chosen, and the plan of which GEMMs stay FP8 under it.
// A pure function from the evaluation tables to a Recommendation; reports render it, they build
// no reasons of their own.
//
// The choice (no cost model, `--cost none`): the candidate under which the most GEMM FLOPs stay
// FP8 once every failing GEMM is sent to BF16 (FLOPs: 2 m n k of the whole layer, from
// GemmLayer::dims, summed over the captured steps); between widths (NVFP4 and the FP8 kinds) each
// FLOP counts at its nominal saving of BF16 time, 3/4 at 4 bits and 1/2 at 8 (tensor cores run
// them at 4x and 2x BF16's rate on B200 and GB200), so NVFP4 keeping 22 of 24 GEMMs ranks before
// MXFP8 keeping 23. Ties: the lower total risk (the sum of the
// worst Verdict::risk of the GEMMs the plan keeps in FP8; within 10 % counts as a tie), then
// kCandidatePreference:
//   current > block > mxfp8 > delayed   (recipe kind), then the kind's default_format first
//   (core/recipe.hpp: hybrid, mxfp8 e4m3; both are candidates only under --format e4m3,hybrid),
//   then input order.
// Why that order: per-tensor current scaling follows each tensor's amax with no history to lag and
// runs on every FP8 GPU (sm_89+); block scaling next (sm_90+, a scale per 1x128 / 128x128 block
// to cast and read); MXFP8 needs sm_100+; delayed scaling last, because its amax history lags
// spikes and growth (datasets/real/lm-spike: the spike step saturates). Hybrid first: E5M2
// gradients keep the range TE's and Megatron's default training format is chosen for, and tracked
// BF16 better under block scaling (TransformerEngine #2754); but not for MXFP8, whose 32-element
// blocks already give gradients range: E5M2 gradients diverged there (Megatron-Bridge PR #638,
// whose MXFP8 preset and TE's MXFP8BlockScaling default are E4M3).
//
// The GPU target is an input: without a CostModel the candidates the GPU cannot run
// (recipe_support) are left out before judging, each with its reason (gpu_excluded). With one,
// those and the candidates the model does not hold are judged but excluded with their reason;
// among the others, the fastest plan (estimate_cost of the plan that keeps the passing GEMMs in
// FP8 under the candidate), ties in the numerics order above.
//
// Under a policy with FallbackScope::kGlobal (te-autoswitch) any failing GEMM sends every GEMM of
// the candidate to BF16.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/te_version.hpp"
#include "policies/advisories.hpp"
#include "policies/candidate.hpp"
#include "policies/choice.hpp"
#include "policies/cost_model.hpp"
#include "policies/cost_plan.hpp"
#include "policies/fallback_plan.hpp"
#include "policies/judgement.hpp"
#include "policies/judging.hpp"
#include "policies/module_plan.hpp"
#include "policies/pareto.hpp"
#include "policies/policy.hpp"
#include "policies/watch_list.hpp"

namespace fp8a {

// A candidate left out before judging because the GPU cannot run it (without a cost model; with
// one it is judged, and CandidatePlan::excluded says why it cannot be chosen).
struct GpuExclusion {
  std::string candidate;  // candidate_name
  std::string reason;     // recipe_support's, "mxfp8 needs sm_100+ (TE MXFP8BlockScaling); h100 is sm_90"
};

// Recommendation::cost_basis of --cost none.
inline constexpr const char* kNumericsOnlyBasis = "none (numerics only)";

struct Recommendation {
  // RecommendationInputs::candidates without the bf16 ones and, without a cost model, those in gpu_excluded.
  std::vector<CandidatePlan> candidates;
  std::vector<GpuExclusion> gpu_excluded;  // in RecommendationInputs::candidates order
  // Index into candidates of the chosen one; unset when none (no candidate, or none runnable).
  std::optional<std::size_t> chosen;
  // The one ranking (choice.hpp): every runnable candidate, the chosen first; what any output
  // that orders or picks among the candidates follows.
  std::vector<std::size_t> ranking;
  // How it was chosen, with numbers; when none is chosen, why not (the exclusions).
  std::string why;
  // Every layer of the index: under the chosen candidate, or, when none is chosen, every GEMM
  // BF16 with `why` as its reason.
  std::vector<LayerDecision> layers;
  std::vector<ParetoPoint> pareto;    // under the chosen candidate; empty when none is chosen
  // The chosen plan as a per-module consumer trains it (module_plan.hpp); unset when none is chosen.
  std::optional<WholeModulePlan> whole_modules;
  // Unset when no candidate can be mixed per module (module_plan_note says why).
  std::optional<ModulePlan> module_plan;
  std::string module_plan_note;
  std::vector<Advisory> advisories;
  // What the advice could not judge and why, e.g. no amax trend from a single captured step;
  // empty when nothing.
  std::vector<std::string> limits;
  // How well the policy's criteria are validated against training (calibration_text).
  std::string calibration;
  const GpuTarget* gpu = nullptr;     // the GPU it is for; recommend() always sets it
  // The Transformer Engine release the files are written for (--te-version): candidates it cannot
  // train with are excluded (CandidatePlan::release_excluded), and the renderers spell the recipe
  // as it takes it (docs/VERSIONS.md).
  TeVersion te_version = kTeNewest;
  const char* cost_source = "none";   // "roofline" with a cost model (estimate_cost), else "none"
  // The cost line's words after "cost: ": with a cost model "roofline at N tokens a step (<its
  // source>)", or "roofline at the captured token count" (at_captured_tokens); without one "none
  // (numerics only)", or, set by the caller, why the cost was not judged.
  std::string cost_basis = kNumericsOnlyBasis;
  bool at_captured_tokens = false;
  // What to watch next run (watch_list.hpp): the chosen plan's FP8 GEMMs closest to a threshold,
  // at most kWatchCount; empty when none is chosen. Every output that names GEMMs to watch names
  // these.
  std::vector<WatchItem> watch;
};

// "nothing judged: ... (<the first GEMM>: <why>)" when the candidates hold layers but judged none
// of their GEMMs (recommend() then chooses none); "" otherwise.
std::string nothing_judged(const std::vector<CandidatePlan>& candidates);

// The selection, a pipeline of the steps above: judging (judging.hpp), the BF16-fallback plan
// (fallback_plan.hpp), the cost plan (cost_plan.hpp), the choice (choice.hpp), the chosen plan's
// decisions, watch list (watch_list.hpp), Pareto path (pareto.hpp) and module plan
// (module_plan.hpp), the advisories and limits (advisories.hpp). `gpu`: the target (--gpu),
// with or without a cost model. `cost` null: numerics alone (--cost none); else built for `gpu`,
// its recipes name the candidates' recipes (matched by ==) and its layers the GemmLayers' names.
// `te`: the target TE release; a candidate it cannot train with is judged but never chosen.
Recommendation recommend(const RecommendationInputs& inputs, const Policy& policy, const GpuTarget& gpu,
                         const CostModel* cost, TeVersion te = kTeNewest);

}  // namespace fp8a

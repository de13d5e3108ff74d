// One plan for every consumer file, decided once per run (issue 38): the chosen recipe as the
// target TE release spells it (TE's recipe object: class, fields, environment, notes), what each
// consumer says about the recipe's options (core/recipe_options.hpp), the per-layer BF16
// fallbacks with their first reason, the first/last layers, Megatron's settings (the LM head
// among them), whether te_precision_config.yaml can be written, and where two captured layers
// become one module in a config. `render_run` (cli/command_run.cpp) builds it once; every file in
// reports/consumers/ and the answer format it and decide nothing of their own.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/recipe_options.hpp"
#include "policies/advice.hpp"
#include "reports/consumers/layer_names.hpp"
#include "reports/consumers/megatron_settings.hpp"
#include "reports/consumers/te_recipe.hpp"

namespace fp8a {

// The recommendation's queries every consumer file and the answer share.

// The group's plan as one module, with its reasons: merge_members decides which GEMMs are BF16
// (a fallback of any member), each then its first member's fallback with that reason, the
// others as their first member that judged them.
LayerDecision merged_decision(const std::vector<LayerDecision>& layers, const ModuleGroup& group);

// Whether the group's members keep different GEMMs in BF16 (the one plan then differs from some).
bool group_plans_differ(const std::vector<LayerDecision>& layers, const ModuleGroup& group);

// For a group of two or more: which captured layers share the name in `scheme` (a file name), and
// whether their plans differ; "" for one member.
std::string group_note(const std::vector<LayerDecision>& layers, const ModuleGroup& group, const std::string& scheme);

// The plan keeps no GEMM in FP8 (the answer "every GEMM in BF16"): a candidate is chosen and
// none of its decisions is FP8. Every config then trains BF16, uncaptured modules included.
bool plan_all_bf16(const Recommendation& rec);

// " with TE X.Y (--te-version)" when a candidate was excluded for the target TE release (the answer's
// "none runs on h100 with TE 2.4 (--te-version)"), else "".
std::string on_release(const Recommendation& rec);

// The chosen candidate, null when none.
const RunCandidate* chosen_candidate(const Recommendation& rec);

// A BF16 fallback of the plan: a judged GEMM the plan keeps in BF16. A GEMM with no operand
// captured (judged false) is BF16 in the plan but unknown, not a fallback: the configs leave it
// at the run's recipe.
bool is_fallback(const GemmDecision& gemm);
// Whether the layer has at least one fallback GEMM.
bool has_bf16_gemm(const LayerDecision& layer);
// Its fallback GEMMs, "fprop,wgrad"; "" when none.
std::string fallback_gemm_list(const LayerDecision& layer);
// Every judged GEMM is a fallback (and at least one is judged).
bool whole_layer_fallback(const LayerDecision& layer);

// The first reason of a BF16 GEMM of the layer ("" when none).
std::string first_bf16_reason(const LayerDecision& layer);

// The plan's BF16 end layers (FirstLastBf16, megatron_settings.hpp).
FirstLastBf16 first_last_bf16(const Recommendation& rec);

// A layer of the plan with a BF16 fallback GEMM.
struct LayerFallback {
  std::size_t layer = 0;  // index in Recommendation::layers
  std::string gemms;      // fallback_gemm_list: "fprop,wgrad"
  bool whole = false;     // whole_layer_fallback: every judged GEMM
  std::string reason;     // first_bf16_reason
};

// What one group of consumer files trains, GEMM by GEMM: the files that set precision per GEMM
// (te_snippet.py with nvdlfw_inspect.yaml's DisableFP8GEMM, recipe.json's layers) train the
// recommendation's plan; those that set it per module (Megatron's megatron_args.txt,
// megatron_bridge.yaml and te_precision_config.yaml; torchao.json's filter) train the per-module
// plan when te_precision_config.yaml mixes recipes, else the plan with each module that keeps a
// GEMM in BF16 wholly BF16 (WholeModulePlan). Its FP8 share and speedup are that plan's.
struct TrainedPlan {
  const char* granularity = "gemm";  // "gemm" or "module"
  std::vector<std::string> files;    // the files that train it, as written by this run
  // Per layer (Recommendation::layers order), per GEMM: the precision, and the candidate it
  // trains under when low precision (into Recommendation::candidates).
  std::vector<std::array<Precision, 3>> precision;
  std::vector<std::optional<std::size_t>> candidate;
  double fp8_flop_share = 0;
  std::optional<double> speedup;
  // How it differs from the recommendation's plan, in words ("" when it is that plan): captured
  // layers one name selects trained as one (either group), whole modules in BF16 (per module),
  // "layers.1.mlp.linear_fc2 whole in BF16" or the per-module plan's line.
  std::string differs;
};

// One section of nvdlfw_inspect.yaml: a group of captured layers one name selects (module_groups
// under nvdlfw's dot-suffix match: two sections matching one module would fail at its lookup),
// its plan as one module (merged_decision: BF16 where any member's is), the GEMMs it keeps in
// BF16 and the watch list's items on its FP8 GEMMs.
struct NvdlfwSection {
  ModuleGroup group;
  LayerDecision merged;
  std::vector<std::string> bf16;        // GEMM names ("fprop"), in GEMM order
  std::vector<const WatchItem*> watch;  // into Recommendation::watch
};

struct ConsumerPlan {
  // plan_consumers; `rec` must outlive the plan.
  explicit ConsumerPlan(const Recommendation& rec);

  const Recommendation* rec;
  const RunCandidate* candidate = nullptr;  // the chosen one; null: none
  // A candidate is chosen and the plan keeps some GEMM in FP8 (not plan_all_bf16): the configs
  // turn FP8 on. A chosen candidate with every GEMM in BF16 trains BF16 everywhere.
  bool fp8 = false;
  TeRecipe te;  // the chosen recipe for rec->te_version; empty when none is chosen
  // What each consumer says about the chosen recipe's options (option_notes), by Consumer.
  std::array<std::vector<std::string>, kConsumerCount> option_notes;
  std::vector<LayerFallback> fallbacks;  // in layer order
  FirstLastBf16 first_last;
  // Why te_precision_config.yaml is not written; unset: it is.
  std::optional<std::string> precision_config_omitted;
  // Captured layers a config cannot tell apart whose plans differ: group_note's sentence, for
  // te_precision_config.yaml's module paths then nvdlfw_inspect.yaml's names (the answer says them).
  std::vector<std::string> merged_modules;
  // Why nvdlfw_inspect.yaml is not written (no FP8 candidate, or no fallback and no GEMM to
  // watch); unset: it is (megatron_bridge.yaml's tensor_inspect names it then).
  std::optional<std::string> nvdlfw_omitted;
  // Its sections when the plan trains FP8: every group that falls back or is watched, in
  // module_groups order (empty when nothing trains FP8: the file then turns every layer BF16).
  std::vector<NvdlfwSection> nvdlfw_sections;
  MegatronFp8 megatron;  // it reads the fields above
  // What the files train (set last): [0] per GEMM, [1] per module (Megatron's files, and
  // torchao.json where it trains the same), [2] torchao.json where it trains another plan (its
  // suffix filter joins other modules, or rowwise_with_gw_hp). All-BF16 when nothing trains FP8;
  // empty when no candidate is chosen.
  std::vector<TrainedPlan> trained;
  // Some module keeps only its wgrad in BF16 (its fprop and dgrad are not fallbacks).
  bool wgrad_only_fallback = false;
  // torchao.json's recipe is block's rowwise and wgrad_only_fallback: rowwise_with_gw_hp, every
  // grad-weight GEMM in high precision.
  bool torchao_gw_hp = false;
  // te_precision_config.yaml carries the per-module plan (its base is the chosen recipe), not
  // only the chosen plan's BF16 modules.
  bool precision_config_mixes = false;

  const std::vector<std::string>& notes(Consumer c) const { return option_notes[static_cast<int>(c)]; }
};

// Every consumer file's plan for the recommendation, decided once (render_run builds it and hands
// it to every renderer and the answer); it points into `rec`, which must outlive it.
ConsumerPlan plan_consumers(const Recommendation& rec);

}  // namespace fp8a

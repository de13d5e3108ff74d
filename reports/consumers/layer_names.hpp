// Captured layer names in each consumer's scheme, the captured layers one consumer name selects
// together, and the one rule that merges their precisions (merge_members). What the configs
// share about a Recommendation is the consumer plan's (consumer_plan.hpp).
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/layer_name.hpp"
#include "policies/advice.hpp"

namespace fp8a {

// A name in a consumer's scheme; `guess` says the mapping is inferred, with why in `note`.
struct MappedName {
  std::string name;
  bool guess = false;
  std::string note;  // empty when not a guess
  // A TE dump's name the mapping could not restore (core is_te_dump_name): each '_' of `name` may
  // stand for a '.', and a config's pattern matches either there (name_text.hpp's any_dot).
  bool any_dot = false;
};

// Megatron-Core's module path (GPTModel.named_modules(): "decoder.layers.3.mlp.linear_fc2",
// "output_layer"): the path within the model that owns the layer (each GPTModel of a multimodal
// model names its own modules), the block as captured (decoder, encoder), wrappers and stacks left
// out. The index is the captured one; Megatron's count from 0 in each pipeline stage.
MappedName megatron_module_path(const std::string& layer);

// The end of nvdlfw_inspect's name for the module, "[<stack>.]decoder.layers.<layer_number>.<module>"
// (the stack, "language_model" or "vision_model", kept: the debug API names modules from the root):
// infer_and_assign_layer_names names a module "model." + its attribute path from the object it is
// given (model.module.module.decoder... for Megatron's DDP(Float16Module(GPTModel))), a
// ModuleList child by its layer_number attribute, Megatron's global 1-based TransformerLayer
// number. The captured index (named_modules(), 0-based in its pipeline stage) + 1: exact without
// pipeline parallelism, a guess (said in `note`) only for names Megatron would not give.
MappedName nvdlfw_layer_name(const std::string& layer);

// Each mapping takes an expert of a grouped module as the module: fp8a_capture records TE's
// GroupedLinear (Megatron's TEGroupedMLP, "<...>.mlp.experts.linear_fc1") per expert, as
// "<module>.expert<i>", and no consumer config can give one expert of the module its own recipe;
// module_groups then gathers the experts into the module, with a note naming them.

// The captured name itself (torchao's FQNs).
MappedName captured_name(const std::string& layer);

// How a consumer's names select modules: kExact, the module with that path (Megatron's precision
// config, as te_precision_config.yaml writes it: a model-relative path, matched whole); kDotSuffix,
// every module whose path is the name or ends in "." + the name (nvdlfw_inspect's regex, torchao's
// filter as torchao.json tells it), so a name also selects a longer one that ends in it.
enum class NameMatch { kExact, kDotSuffix };

// The captured layers (indices into the list, in capture order) that one consumer name selects
// together: two stacks of a multimodal or encoder-decoder model (Megatron names each module within
// its own model), two wrappers of one model, "layers.0" and "layers.00". A config cannot tell them
// apart, so it gives them one plan (merged_decision) and says so (group_note).
struct ModuleGroup {
  MappedName name;                  // the consumer name that selects every member (the shortest)
  std::vector<std::size_t> layers;  // at least one
};
std::vector<ModuleGroup> module_groups(const std::vector<LayerDecision>& layers,
                                       MappedName (*map)(const std::string&), NameMatch match);

// A captured layer's plan as a consumer file holds it: each GEMM's precision, and the recipe
// (an index into Recommendation::candidates) it trains under; unset: none, BF16.
struct MemberPlan {
  std::array<Precision, 3> precision{};
  std::optional<std::size_t> candidate;
};
// The one rule for captured layers a consumer name selects together (a group): each GEMM BF16
// where any member's is; every GEMM BF16 where the members' recipes differ. `recipes_agree` says
// which; `candidate` is the shared recipe when they agree.
struct MergedMembers {
  std::array<Precision, 3> precision{};
  std::optional<std::size_t> candidate;
  bool recipes_agree = true;
};
MergedMembers merge_members(std::span<const MemberPlan> members);

}  // namespace fp8a

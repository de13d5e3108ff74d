// Transformer-layer names as training frameworks spell them: "...layers.<N>.<module>" (Megatron's
// decoder.layers.3.mlp.linear_fc2, HF's model.layers.3.mlp.down_proj). Shared by the advice (which
// layers are the first and last) and the renderers that map names to each consumer's scheme.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fp8a {

struct TransformerLayerName {
  std::size_t start = 0;  // where "layers." begins in the name
  int index = 0;          // N
  std::string suffix;     // after "layers.<N>.", e.g. "mlp.linear_fc2"
};

// The first "layers.<N>." at the start of the name or after a '.', N of 1 to 6 digits; unset when
// there is none ("output_layer", "xlayers.3.fc").
std::optional<TransformerLayerName> split_transformer_layer(const std::string& name);

// split_transformer_layer's index; for a TE DumpTensors name, its Megatron module's
// (megatron_name_of_te_dump).
std::optional<int> transformer_layer_index(const std::string& name);

// A suffix after "layers.<N>." that is one of Megatron-Core's linear modules: the TransformerLayer's
// self_attention.linear_qkv / linear_proj and mlp.linear_fc1 / fc2, and the MoE MLP's
// (megatron/core/transformer/moe/): SequentialMLP's experts (mlp.experts.local_experts.<E>.linear_fc1),
// TEGroupedMLP's grouped modules (mlp.experts.linear_fc1) and SharedExpertMLP's
// (mlp.shared_experts.linear_fc1).
bool megatron_module_suffix(const std::string& suffix);

// A layer name as TE's DumpTensors files carry it (datasets/capture.hpp): the debug API's name of a
// Megatron module, "model." + its attribute path through the wrappers with the 1-based
// layer_number, every '.' made '_' ("model_module_module_decoder_layers_1_mlp_linear_fc1"); the
// name the capture hook gives that module ("decoder.layers.0.mlp.linear_fc1"), or "" for any
// other name. Only Megatron's own module names are restored: elsewhere an '_' may be the name's own.
std::string megatron_name_of_te_dump(const std::string& layer);

// A TE dump's name taken apart: after "model_" and any "module_" wrappers, the stack
// ("language_model", "vision_model" or ""), then "<block>_layers_<N>_" (block "decoder" or
// "encoder", N the debug API's 1-based layer_number, 1 to 6 digits) and the rest, the module's
// own name with its '.'s made '_'. Without such a layer, block is "" and rest the name after the
// wrappers. Unset for a name that does not start "model_".
struct TeDumpParts {
  std::string stack, block;
  int layer_number = 0;
  std::string rest;
};
std::optional<TeDumpParts> te_dump_parts(const std::string& layer);

// A name as TE's DumpTensors files carry it: the debug API's "model." + path with every '.' made
// '_' ("model_decoder_layers_1_my_mlp_linear_fc1": no '.' left). Where megatron_name_of_te_dump
// cannot restore it, each '_' may have been a '.' or the name's own.
bool is_te_dump_name(const std::string& layer);

// Megatron's LM head, "output_layer" (GPTModel's, or a stack's "<...>.output_layer"): a
// ColumnParallelLinear, not a TE module, unless fp8_output_proj under mxfp8 makes it
// TELMHeadColumnParallelLinear (megatron/core/models/gpt/gpt_model.py; Megatron-Core 0.18+).
bool is_lm_head(const std::string& layer);

// Megatron's MoE router, "<...>.mlp.router" (TopKRouter): its weight a plain nn.Parameter and its
// GEMM router_gating_linear's te_general_gemm with no quantizer (or torch.mm), in the router's
// dtype under any FP8 recipe (megatron/core/transformer/moe/router.py, moe_utils.py).
bool is_moe_router(const std::string& layer);

// Expert <i> of Megatron TEGroupedMLP's grouped module as fp8a_capture names it (python/
// fp8a_capture.py _expert_name): "<...>.mlp.experts.linear_fc1.expert<i>" (or linear_fc2, i any
// run of digits, as %d writes it); the module's name, or "" for any other name. Only under Megatron's grouped-module
// names, where no child module can be called so: a custom model's "expert3" may be a module of its
// own. TE's GroupedLinear runs every expert in one recipe, and no consumer config can set one.
std::string grouped_module_of(const std::string& layer);

// The grouped modules among items (name_of(item) the captured layer name), each with its experts'
// indices into items, in order.
template <class Items, class NameOf>
std::map<std::string, std::vector<std::size_t>> grouped_module_members(const Items& items, const NameOf& name_of) {
  std::map<std::string, std::vector<std::size_t>> members;
  for (std::size_t i = 0; i < items.size(); ++i)
    if (std::string m = grouped_module_of(name_of(items[i])); !m.empty()) members[m].push_back(i);
  return members;
}

}  // namespace fp8a

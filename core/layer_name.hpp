// Transformer-layer names as training frameworks spell them: "...layers.<N>.<module>" (Megatron's
// decoder.layers.3.mlp.linear_fc2, HF's model.layers.3.mlp.down_proj). Shared by the advice (which
// layers are the first and last) and the renderers that map names to each consumer's scheme.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace fp8a {

struct TransformerLayerName {
  std::size_t start = 0;  // where "layers." begins in the name
  int index = 0;          // N
  std::string suffix;     // after "layers.<N>.", e.g. "mlp.linear_fc2"
};

// The first "layers.<N>." at the start of the name or after a '.', N of 1 to 6 digits; unset when
// there is none ("output_layer", "xlayers.3.fc").
std::optional<TransformerLayerName> split_transformer_layer(const std::string& name);

// split_transformer_layer's index.
std::optional<int> transformer_layer_index(const std::string& name);

// Expert <i> of Megatron TEGroupedMLP's grouped module as fp8a_capture names it (python/
// fp8a_capture.py _expert_name): "<...>.mlp.experts.linear_fc1.expert<i>" (or linear_fc2, i of 1
// to 6 digits); the module's name, or "" for any other name. Only under Megatron's grouped-module
// names, where no child module can be called so: a custom model's "expert3" may be a module of its
// own. TE's GroupedLinear runs every expert in one recipe, and no consumer config can set one.
std::string grouped_module_of(const std::string& layer);

}  // namespace fp8a

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

}  // namespace fp8a

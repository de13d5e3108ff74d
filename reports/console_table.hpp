// The readable per-layer table printed on stdout at the end of a run.
#pragma once

#include <span>
#include <string>

#include "policies/layer_summary.hpp"

namespace fp8a {

std::string render_layer_table(std::span<const LayerSummary> layers);

}  // namespace fp8a

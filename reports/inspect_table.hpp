// What `fp8-advisor inspect` prints: one line per captured tensor (key, dtype, shape, amax, the
// smallest non-zero magnitude, its dynamic range, NaN/Inf counts, file) and a closing line.
#pragma once

#include <span>
#include <string>

#include "core/metrics.hpp"
#include "datasets/capture.hpp"

namespace fp8a {

// stats[i] is the statistics pass over captures.tensors[i].
std::string render_inspect_table(const CaptureSet& captures, std::span<const TensorStats> stats);

}  // namespace fp8a

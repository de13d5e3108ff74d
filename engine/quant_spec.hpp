// Resolving a candidate into the cast it needs (QuantSpec), for every backend: the CPU backend,
// the CUDA backend and the GEMM-error computation give the same candidate the same cast.
#pragma once

#include "engine/backend.hpp"
#include "engine/fake_quant.hpp"

namespace fp8a {

// Resolves a candidate for a tensor with these stats (pass 1) and input type into *spec:
//   per-tensor current: the scale from stats.amax, or the candidate's given (reduced) scale;
//   per-tensor delayed: the candidate's replayed scale; not applicable when there is none;
//   blocked: the block shape of the recipe, role and orientation, and the block scale rule.
Applicability make_quant_spec(const Candidate& candidate, const TensorStats& stats, DType dtype,
                              QuantSpec* spec);

}  // namespace fp8a

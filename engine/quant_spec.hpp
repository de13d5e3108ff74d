// Resolving a candidate into the cast it needs (QuantSpec), for every backend: the CPU backend,
// the CUDA backend and the GEMM-error computation give the same candidate the same cast.
#pragma once

#include "engine/backend.hpp"
#include "engine/fake_quant.hpp"

namespace fp8a {

// Resolves a candidate for a tensor with these stats (pass 1) and input type into *spec:
//   per-tensor current: the scale from stats.amax, or the candidate's given (reduced) scale;
//   per-tensor delayed: the candidate's replayed scale; not applicable when there is none;
//   blocked: the block shape of the recipe, role and orientation, and the block scale rule;
//   NVFP4: the copy and its level-2 scales (left NaN for a transformed copy without a given
//   amax: the caller computes nvfp4_rht_amax and calls set_nvfp4_amax).
// How TE's NVFP4BlockScaling (TE 2.14+'s block rule) quantises this copy of this role under the
// recipe's switches (docs/NVFP4-TE.md §1.2): weights 16x16 tiles, the wgrad copies of X and dY
// the Hadamard transform, dY's copies stochastic rounding (a seeded stream per role and
// orientation), each unless the recipe turns it off.
Nvfp4Copy nvfp4_copy_for(const Recipe& recipe, Role role, Orientation orientation);

// An NVFP4 spec's level-2 scales from its copy's amax (scale and nvfp4_decode).
void set_nvfp4_amax(float amax, QuantSpec* spec);

// Whether an NVFP4 copy of a tensor with these statistics has a finite error to measure (issue
// 56's one rule for non-finite input: an element that is NaN or Inf is left out of the sums; a
// copy where one spreads to finite elements is not applicable, with why): an Inf anywhere makes
// the tensor scale's amax, and so the decode factor, inf; a NaN in a copy under the Hadamard
// transform spreads over its 16-element block; finite values past FLT_MAX / 4 overflow the
// transform. `given_amax`: the ranks' reduced amax, NaN when none.
Applicability nvfp4_finite(const TensorStats& stats, const Nvfp4Copy& copy, float given_amax);

Applicability make_quant_spec(const Candidate& candidate, const TensorStats& stats, DType dtype,
                              QuantSpec* spec);

}  // namespace fp8a

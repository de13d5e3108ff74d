// What the CUDA wing runs on the device: every recipe kind's casts and GEMMs but NVFP4's. E2M1
// under two-level scales, the Hadamard transform and stochastic rounding have no kernels yet, and
// cuBLASLt's VEC16_UE4M3 GEMMs are not planned; CudaBackend::evaluate sends NVFP4's candidates to
// the CPU backend, and the GEMM error keeps its products on the CPU.
#pragma once

#include "core/recipe.hpp"

namespace fp8a {

inline bool runs_on_device(RecipeKind kind) { return kind != RecipeKind::kNvfp4; }

}  // namespace fp8a

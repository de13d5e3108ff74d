// The cuBLASLt GEMM engine: engine/gemm_engine.hpp on device 0. Each GEMM of a layer runs twice
// on the GPU, with the operands the recipe quantised (cublaslt_gemm_plan.hpp packs them on the
// host with the codec the emulated path uses, so both see the same FP8 operands):
//   the low-precision GEMM  FP8 x FP8 (E4M3 x E4M3, or E4M3 x E5M2 for the gradient under
//                           hybrid) with the recipe's scaling mode, CUBLAS_COMPUTE_32F, FP32 output
//                           (so output rounding does not enter the error), fast accumulation for
//                           fprop and split accumulation for dgrad/wgrad (TE's defaults; split for
//                           every block-scaled GEMM); the bf16 recipe runs a BF16 GEMM;
//   the reference GEMM      the unquantised operands rounded to BF16 (how they are usually
//                           captured), CUBLAS_COMPUTE_32F, FP32 output.
// Both as TN with M, N, K zero-padded to cuBLASLt's multiples (the padded dims are reported), a 32
// MiB workspace, the first algorithm of cublasLtMatmulAlgoGetHeuristic. A GEMM this GPU or
// cuBLASLt cannot run (MXFP8 before sm_100, 1x128/128x128 blocks off Hopper, no algorithm
// returned) comes back with ran = false and the reason; the emulated row stands alone then.
//
// Thread-safe: run() serialises the GPU work (one stream, buffers reused between calls).
#pragma once

#include <memory>
#include <string>

#include "cuda/cublaslt_gemm_plan.hpp"
#include "engine/gemm_engine.hpp"

namespace fp8a::cuda {

// 32 MiB, as TE's cuBLAS workspace on sm_90 (TE transformer_engine/pytorch/cpp_extensions/gemm.py
// get_cublas_workspace_size_bytes).
inline constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;

// Device 0's compute capability and the loaded cuBLASLt's version.
LtCaps probe_lt_caps();

class CublasltGemm final : public GemmEngine {
 public:
  // Throws fp8a::Error (fp8a.cuda.801) when device 0 cannot be used (cuda_unusable_reason()).
  CublasltGemm();
  ~CublasltGemm() override;
  CublasltGemm(const CublasltGemm&) = delete;
  CublasltGemm& operator=(const CublasltGemm&) = delete;

  std::string name() const override { return "cublaslt"; }
  GemmRun run(const GemmProblem& problem) const override;
  const LtCaps& caps() const { return caps_; }

 private:
  struct State;
  LtCaps caps_;
  std::unique_ptr<State> state_;
};

}  // namespace fp8a::cuda

// CUDA status checks: every runtime call and every kernel launch goes through FP8A_CUDA_CHECK, which
// throws fp8a::Error (kind internal, id fp8a.cuda.801) naming the call, file:line and the runtime's
// message. Never exit() below main (STYLE.md, "Errors"); like TE's NVTE_CHECK_CUDA and ggml's
// CUDA_CHECK_GEN, the failure path is one [[noreturn]] function.
#pragma once

#include <cuda_runtime.h>

namespace fp8a::cuda {

[[noreturn]] void cuda_failed(cudaError_t status, const char* expression, const char* file, int line);

}  // namespace fp8a::cuda

#define FP8A_CUDA_CHECK(expr)                                                        \
  do {                                                                               \
    const cudaError_t fp8a_cuda_status_ = (expr);                                    \
    if (fp8a_cuda_status_ != cudaSuccess)                                            \
      ::fp8a::cuda::cuda_failed(fp8a_cuda_status_, #expr, __FILE__, __LINE__);       \
  } while (0)

// After every kernel launch: launch-configuration errors surface here, not at the next call.
#define FP8A_CUDA_CHECK_LAUNCH() FP8A_CUDA_CHECK(cudaGetLastError())

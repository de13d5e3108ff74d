// Every kernel launch of the CUDA stage goes through launch_kernel, so the same launch runs either
// on a GPU (nvcc: the triple-chevron launch) or, in the host emulation of tests/cuda_emu/ (tests without
// a GPU), as CUDA threads on host fibers with the emulated block and warp semantics.
#pragma once

#include <cuda_runtime.h>

namespace fp8a::cuda {

// Enqueues kernel<<<blocks, threads, 0, stream>>>(args...); check the launch with
// FP8A_CUDA_CHECK_LAUNCH() afterwards.
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), int blocks, int threads, cudaStream_t stream, Args... args) {
#if defined(FP8A_CUDA_EMULATION)
  ::fp8a_emu::launch(blocks, threads, stream, {::fp8a_emu::pointer_arg(args)...},
                     [=] { kernel(static_cast<Params>(args)...); });
#else
  kernel<<<blocks, threads, 0, stream>>>(static_cast<Params>(args)...);
#endif
}

}  // namespace fp8a::cuda

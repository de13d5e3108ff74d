// Every kernel launch of the CUDA stage goes through launch_kernel: the runtime's
// cudaLaunchKernel, so the same launch runs on a GPU or, in the host emulation of tests/cuda_emu/
// (tests without a GPU), on that emulation's cudaLaunchKernel, which runs the CUDA threads on host
// fibers with the emulated block and warp semantics.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <tuple>
#include <type_traits>

namespace fp8a::cuda {

// Enqueues kernel<<<blocks, threads, 0, stream>>>(args...), each argument converted to its
// parameter's type; check the launch with FP8A_CUDA_CHECK_LAUNCH() afterwards (cudaLaunchKernel's
// error is also the runtime's last error).
template <class... Params, class... Args>
void launch_kernel(void (*kernel)(Params...), int blocks, int threads, cudaStream_t stream, Args... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "launch_kernel: one argument per kernel parameter");
  std::tuple<std::decay_t<Params>...> values(static_cast<Params>(args)...);
  std::apply(
      [&](auto&... v) {
        std::array<void*, sizeof...(Params)> pointers{static_cast<void*>(&v)...};
        static_cast<void>(cudaLaunchKernel(kernel, dim3(blocks), dim3(threads), pointers.data(), 0, stream));
      },
      values);
}

}  // namespace fp8a::cuda

#include "cli/backend_registry.hpp"

#include "engine/cpu_backend.hpp"

#if FP8A_WITH_CUDA
#include "cuda/device_info.hpp"
#endif

namespace fp8a::cli {

BuildBackends probe_backends() {
  BuildBackends b;
#if FP8A_WITH_CUDA
  b.cuda_compiled = true;
  b.cuda_devices = cuda::device_count();
#endif
  return b;
}

std::unique_ptr<Backend> make_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace fp8a::cli

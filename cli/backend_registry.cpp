#include "cli/backend_registry.hpp"

#include <string>

#include "core/error.hpp"
#include "core/text.hpp"
#include "core/suggest.hpp"
#include "engine/cpu_backend.hpp"

#if FP8A_WITH_CUDA
#include "cuda/cublaslt_gemm.hpp"
#include "cuda/cuda_backend.hpp"
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

DeviceChoice parse_device_choice(std::string_view text) {
  if (text == "auto") return DeviceChoice::kAuto;
  if (text == "cpu") return DeviceChoice::kCpu;
  if (text == "cuda") return DeviceChoice::kCuda;
  throw usage_error("fp8a.usage.206", "--device " + quoted_input(text, 200) +
                                          ": expected auto, cpu or cuda" +
                                          did_you_mean(text, {"auto", "cpu", "cuda"}));
}

const char* device_choice_name(DeviceChoice choice) {
  switch (choice) {
    case DeviceChoice::kAuto: return "auto";
    case DeviceChoice::kCpu: return "cpu";
    case DeviceChoice::kCuda: break;
  }
  return "cuda";
}

std::unique_ptr<Backend> make_backend(DeviceChoice choice) {
  if (choice == DeviceChoice::kCpu) return std::make_unique<CpuBackend>();
  if (choice == DeviceChoice::kAuto && !kCudaValidatedOnGpu) return std::make_unique<CpuBackend>();
#if FP8A_WITH_CUDA
  const std::string why = cuda::cuda_unusable_reason();
  if (why.empty()) return std::make_unique<cuda::CudaBackend>();
  if (choice == DeviceChoice::kCuda) throw usage_error("fp8a.usage.206", "--device cuda: " + why);
#else
  if (choice == DeviceChoice::kCuda)
    throw usage_error("fp8a.usage.206",
                      "--device cuda: this build has no CUDA backend (configured with "
                      "FP8A_WITH_CUDA=OFF, or without the CUDA toolkit)");
#endif
  return std::make_unique<CpuBackend>();
}

std::unique_ptr<GemmEngine> make_gemm_engine(const Backend& backend) {
#if FP8A_WITH_CUDA
  if (backend.name() == "cuda") return std::make_unique<cuda::CublasltGemm>();
#else
  static_cast<void>(backend);
#endif
  return nullptr;
}

}  // namespace fp8a::cli

// The one place that knows which backends this build has (the only FP8A_WITH_CUDA switch).
#pragma once

#include <memory>
#include <string_view>

#include "engine/backend.hpp"
#include "engine/gemm_engine.hpp"

namespace fp8a::cli {

struct BuildBackends {
  bool cuda_compiled = false;
  int cuda_devices = 0;
};

BuildBackends probe_backends();

// --device: auto, cpu, or cuda. auto takes CUDA (when built and a GPU is present) only once the
// CUDA backend is validated on a GPU (kCudaValidatedOnGpu); until then the CPU.
enum class DeviceChoice { kAuto, kCpu, kCuda };

// `--device auto` takes the CUDA backend only once it has passed scripts/gpu-check.sh on a GPU
// (CPU == CUDA on the sample and the backend comparison tests). It has not yet: until then auto
// means the CPU and `--device cuda` opts in.
inline constexpr bool kCudaValidatedOnGpu = false;

// Parses a --device value; anything else is usage error fp8a.usage.206 with "did you mean".
DeviceChoice parse_device_choice(std::string_view text);
const char* device_choice_name(DeviceChoice choice);

// The backend a run uses. kCuda in a build without CUDA, or without a usable GPU, is usage
// error fp8a.usage.206 ("--device cuda: <reason>").
std::unique_ptr<Backend> make_backend(DeviceChoice choice);

// The real low-precision GEMM engine that goes with a backend: cuBLASLt with the CUDA backend
// (gemms.csv then holds engine=cublaslt rows beside the emulated ones), none (nullptr) with the CPU.
std::unique_ptr<GemmEngine> make_gemm_engine(const Backend& backend);

}  // namespace fp8a::cli

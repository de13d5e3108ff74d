// CUDA device discovery, for the backend registry (cli/) and CudaBackend (cuda_backend.hpp).
#pragma once

#include <string>

namespace fp8a::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no device (never throws).
int device_count();

// "NVIDIA H200 (sm_90, 139 GiB)" for device 0, or the runtime's reason when there is none.
std::string describe_device0();

}  // namespace fp8a::cuda

// The one place that knows which backends this build has (the only FP8A_WITH_CUDA switch).
#pragma once

#include <memory>

#include "engine/backend.hpp"

namespace fp8a::cli {

struct BuildBackends {
  bool cuda_compiled = false;
  int cuda_devices = 0;
};

BuildBackends probe_backends();

// The backend a run uses. Until the CUDA backend lands every run uses the CPU backend.
std::unique_ptr<Backend> make_backend();

}  // namespace fp8a::cli

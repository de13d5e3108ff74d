// main() of the GPU test programs (ctest label "cuda"): runs the doctest cases when a CUDA device is
// present, else prints why and exits 77, which ctest reports as skipped.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>

#include "cuda/device_info.hpp"

namespace fp8a::cuda_test {

inline int run_gpu_tests(const char* program, int argc, char** argv) {
  if (fp8a::cuda::device_count() == 0) {
    std::printf("%s: SKIPPED: %s\n", program, fp8a::cuda::describe_device0().c_str());
    return 77;
  }
  std::printf("%s: device %s\n", program, fp8a::cuda::describe_device0().c_str());
  doctest::Context context(argc, argv);
  return context.run();
}

}  // namespace fp8a::cuda_test

#include "cuda/check.hpp"

#include <string>

#include "core/error.hpp"

namespace fp8a::cuda {

void cuda_failed(cudaError_t status, const char* expression, const char* file, int line) {
  throw internal_error("fp8a.cuda.801",
                       std::string(file) + ":" + std::to_string(line) + ": " + expression + " failed: " +
                           cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

}  // namespace fp8a::cuda

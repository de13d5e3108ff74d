// A dense row-major matrix in device memory: a chunk of a tensor, or a whole tensor that already
// lives on the GPU. No CUDA headers, so host code can name it.
#pragma once

#include <cstdint>

#include "core/tensor_view.hpp"

namespace fp8a::cuda {

struct DeviceMatrix {
  const void* data = nullptr;  // device pointer, 16-byte aligned (cudaMalloc gives 256)
  DType dtype = DType::kBF16;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t numel() const { return rows * cols; }
};

}  // namespace fp8a::cuda

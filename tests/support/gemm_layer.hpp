// A linear layer's three GEMM operands as a capture, for the GEMM-error tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "datasets/capture.hpp"

namespace fp8a::testing {

// Layer "l" at step 0 into `set`: row-major float operands X [m, k], W [n, k], dY [m, n], viewed
// where they lie (the vectors must outlive the set).
inline void add_float_gemm_layer(std::vector<float>& x, std::vector<float>& w, std::vector<float>& dy, std::int64_t m,
                                 std::int64_t n, std::int64_t k, CaptureSet* set) {
  const auto add = [&](Role role, std::vector<float>& data, std::vector<std::int64_t> shape) {
    CapturedTensor t;
    t.key = {0, "l", role};
    t.view = make_tensor_view(reinterpret_cast<const std::byte*>(data.data()), DType::kF32, std::move(shape));
    set->tensors.push_back(t);
  };
  add(Role::kActivation, x, {m, k});
  add(Role::kWeight, w, {n, k});
  add(Role::kGradient, dy, {m, n});
}

}  // namespace fp8a::testing

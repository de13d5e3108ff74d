// A linear layer's captured operands as safetensors tensors, Gaussian and BF16: X [m, k],
// W [n, k] and (unless left out) dY [m, n], for tests that build captures of given shapes.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "datasets/safetensors_writer.hpp"

namespace fp8a::testing {

// BF16 bytes of n Gaussian values (the float's upper half: enough for a test operand).
inline std::string gaussian_bf16(std::int64_t n, float scale, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, scale);
  std::string out;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = d(rng);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    out += static_cast<char>((bits >> 16) & 0xFF);
    out += static_cast<char>(bits >> 24);
  }
  return out;
}

// Appends "<name>.activation" X [m, k] (scale 1), ".weight" W [n, k] (0.05) and, with `gradient`,
// ".gradient" dY [m, n] (1e-3).
inline void add_layer(std::vector<SafetensorsTensorOut>* t, const std::string& name, std::int64_t m, std::int64_t n,
                      std::int64_t k, std::mt19937& rng, bool gradient = true) {
  t->push_back({name + ".activation", "BF16", {m, k}, gaussian_bf16(m * k, 1.0f, rng)});
  t->push_back({name + ".weight", "BF16", {n, k}, gaussian_bf16(n * k, 0.05f, rng)});
  if (gradient) t->push_back({name + ".gradient", "BF16", {m, n}, gaussian_bf16(m * n, 1e-3f, rng)});
}

}  // namespace fp8a::testing

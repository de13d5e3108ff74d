// A minimal safetensors writer: the layout parse_safetensors (datasets/safetensors.hpp) reads.
// Tensors are laid out in the order given; the header is padded with spaces to a multiple of 8.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fp8a {

struct SafetensorsTensorOut {
  std::string name;
  std::string dtype_name;  // e.g. "BF16"
  std::vector<std::int64_t> shape;
  std::string bytes;       // raw little-endian data
};

// Returns the file contents. Names must be unique (checked).
std::string safetensors_bytes(const std::vector<SafetensorsTensorOut>& tensors,
                              const std::map<std::string, std::string>& metadata);

}  // namespace fp8a

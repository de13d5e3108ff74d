// Whether a reader's data range lies inside the file it read: the check of the damaged-file tests
// (tests/datasets/test_mutations.cpp) and the fuzz harness (tests/fuzz/fuzz_inputs.cpp), which
// catches a tensor reaching past the file without a sanitizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace fp8a::testing {

inline bool in_file(std::span<const std::byte> file, const std::byte* p, std::uint64_t bytes) {
  if (bytes == 0) return true;
  const std::byte* end = file.data() + file.size();
  return p >= file.data() && p <= end && bytes <= static_cast<std::uint64_t>(end - p);
}

}  // namespace fp8a::testing

// safetensors header parsing and validation, following the reference implementation
// (huggingface/safetensors, safetensors/src/tensor.rs: read_metadata + Metadata::validate):
//   - 8-byte little-endian header length N, N <= 100,000,000, 8 + N <= file size;
//   - header is UTF-8 JSON (no byte-order mark, no NUL): an object of tensor entries
//     {dtype, shape, data_offsets} and an optional "__metadata__" object (or null) whose values
//     are all strings;
//   - a key repeated in any object is refused (the reference refuses repeated entry fields; for
//     repeated tensor names it keeps the last one, which hides data, so we refuse those too);
//   - dtype is one the reference knows;
//   - sorted by offsets, tensors tile the data buffer exactly: the first starts at 0, each starts
//     where the previous ended, begin <= end (no gaps, no overlaps);
//   - prod(shape) * bits is computed with overflow checks (dimensions above 2^63 - 1 are refused
//     even when another is 0, which the reference accepts), is a whole number of bytes and equals
//     end - begin;
//   - the last tensor ends exactly at the end of the file.
// Every failure throws input error fp8a.safetensors.3xx naming the file (and tensor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor_view.hpp"

namespace fp8a {

inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;       // as written ("BF16", "F8_E4M3", ...)
  std::optional<DType> dtype;   // set when it is an input type fp8-advisor evaluates
  std::vector<std::int64_t> shape;
  std::uint64_t numel = 0;
  std::uint64_t begin = 0;      // byte offsets into the whole file
  std::uint64_t end = 0;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<SafetensorsEntry> entries;  // sorted by name
};

// file_name is used in messages only.
SafetensorsFile parse_safetensors(std::span<const std::byte> bytes, std::string_view file_name);

}  // namespace fp8a

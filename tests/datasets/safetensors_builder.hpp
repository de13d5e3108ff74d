// Test-side safetensors files for the reader (datasets/safetensors.cpp).
//
// File layout (huggingface/safetensors): 8-byte little-endian header length N, N bytes of JSON
// header, then the data buffer that data_offsets index into.
//   - raw_file(): any header text (malformed on purpose) and any data bytes, written here so that
//     a test can damage any part of a file;
//   - build_file(): a valid file from (name, dtype, shape, values), written by the project's one
//     writer (datasets/safetensors_writer.hpp: tensors back to back in the order given, the
//     header padded with spaces to a multiple of 8); the values are encoded here.
// Values are encoded here: F32 as IEEE bits, BF16 by round-to-nearest-even of the F32 bits, F16
// only for a few exact values whose half bit patterns are written out by hand below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "datasets/safetensors_writer.hpp"

namespace fp8a::test {

inline void append_u64_le(std::vector<std::byte>* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}

inline void append_u16_le(std::vector<std::byte>* out, std::uint16_t v) {
  out->push_back(static_cast<std::byte>(v & 0xFF));
  out->push_back(static_cast<std::byte>(v >> 8));
}

inline void append_u32_le(std::vector<std::byte>* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
}

inline std::vector<std::byte> to_bytes(std::string_view s) {
  std::vector<std::byte> out;
  for (char c : s) out.push_back(static_cast<std::byte>(static_cast<unsigned char>(c)));
  return out;
}

// Length field declared explicitly (for headers whose length lies).
inline std::vector<std::byte> raw_file_with_length(std::uint64_t declared_header_length,
                                                   std::string_view header,
                                                   const std::vector<std::byte>& data) {
  std::vector<std::byte> out;
  append_u64_le(&out, declared_header_length);
  const auto h = to_bytes(header);
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// 8-byte LE length of header + header + data.
inline std::vector<std::byte> raw_file(std::string_view header, const std::vector<std::byte>& data = {}) {
  return raw_file_with_length(header.size(), header, data);
}

inline std::vector<std::byte> zero_bytes(std::size_t n) { return std::vector<std::byte>(n); }

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// float -> bfloat16, round to nearest, ties to even (finite inputs only).
inline std::uint16_t bf16_rne(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

// IEEE half bit patterns written out by hand: sign | 5-bit exponent (bias 15) | 10-bit mantissa.
inline std::uint16_t f16_exact(float f) {
  static const std::pair<float, std::uint16_t> kTable[] = {
      {0.0f, 0x0000},   {1.0f, 0x3C00},    {1.5f, 0x3E00},    {-2.0f, 0xC000},
      {0.5f, 0x3800},   {-0.25f, 0xB400},  {3.0f, 0x4200},    {65504.0f, 0x7BFF},
  };
  for (const auto& [value, bits] : kTable)
    if (value == f) return bits;
  throw std::logic_error("f16_exact: no hand-written half pattern for this value");
}

struct TensorSpec {
  std::string name;
  std::string dtype;  // "BF16", "F16" or "F32"
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // row-major, prod(shape) of them
};

// A valid file: tensors back to back in the order given, metadata as "__metadata__" (omitted
// when empty).
inline std::vector<std::byte> build_file(const std::vector<TensorSpec>& tensors,
                                         const std::map<std::string, std::string>& metadata = {}) {
  std::vector<SafetensorsTensorOut> out;
  for (const auto& t : tensors) {
    std::int64_t numel = 1;
    for (auto d : t.shape) numel *= d;
    if (static_cast<std::size_t>(numel) != t.values.size())
      throw std::logic_error("TensorSpec " + t.name + ": value count does not match the shape");
    std::vector<std::byte> data;
    for (float v : t.values) {
      if (t.dtype == "BF16")
        append_u16_le(&data, bf16_rne(v));
      else if (t.dtype == "F16")
        append_u16_le(&data, f16_exact(v));
      else if (t.dtype == "F32")
        append_u32_le(&data, float_bits(v));
      else
        throw std::logic_error("TensorSpec: unsupported dtype " + t.dtype);
    }
    out.push_back({t.name, t.dtype, t.shape, std::string(reinterpret_cast<const char*>(data.data()), data.size())});
  }
  const std::string file = safetensors_bytes(out, metadata);
  return to_bytes(file);
}

}  // namespace fp8a::test

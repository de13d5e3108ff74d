// TensorView: a non-owning view of a captured high-precision tensor, seen as 2-D [rows, cols].
//
// The bytes usually live in a memory-mapped file and may be unaligned, so elements are read with
// memcpy (load_float), never by reinterpreting the pointer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/fp8_codec.hpp"

namespace fp8a {

// Element types a capture may hold.
enum class DType : std::uint8_t { kBF16, kF16, kF32 };

struct DTypeTraits {
  DType dtype;
  const char* name;  // safetensors spelling
  std::size_t size;  // bytes per element
};

inline constexpr DTypeTraits kDTypeTraits[] = {
    {DType::kBF16, "BF16", 2},
    {DType::kF16, "F16", 2},
    {DType::kF32, "F32", 4},
};

inline const DTypeTraits& dtype_traits(DType d) { return kDTypeTraits[static_cast<int>(d)]; }
inline std::size_t dtype_size(DType d) { return dtype_traits(d).size; }
inline const char* dtype_name(DType d) { return dtype_traits(d).name; }

// Looks up a safetensors dtype string ("BF16", "F16", "F32"); nullopt when unsupported.
inline std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& t : kDTypeTraits)
    if (name == t.name) return t.dtype;
  return std::nullopt;
}

// Where a view's bytes live. A pass over a tensor tells it when it is done with the bytes, so a
// memory-mapped file can drop their pages from the process: the resident set then holds the
// tensors being read, not every tensor read so far. Reads after a release still see the same
// bytes (the pages come back from the file).
class TensorStorage {
 public:
  virtual ~TensorStorage() = default;
  // [data, data + size) is not needed for now. Safe while other threads read these or nearby
  // bytes. No-op for storage that is not a mapping. May throw the input error fp8a.io.110 when
  // the file under the mapping changed since it was read (MappedFile::check_unchanged).
  virtual void release(const std::byte* data, std::size_t size) const = 0;
};

struct TensorView {
  const std::byte* data = nullptr;  // first element, row-major, little-endian
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;  // as stored (N-D)
  std::int64_t rows = 0;            // product of all dims but the last (1 for 0-D and 1-D)
  std::int64_t cols = 0;            // last dim (1 for 0-D)

  // The storage the bytes live in (a capture's mapped file); null: nothing to release. Not owned:
  // it outlives the view (CaptureSet::mappings).
  const TensorStorage* storage = nullptr;

  std::int64_t numel() const { return rows * cols; }
  std::size_t byte_size() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype); }

  // Done with the bytes for now: the storage may drop them from memory (TensorStorage::release).
  void release() const {
    if (storage != nullptr) storage->release(data, byte_size());
  }

  // Element i (row-major) as float; exact for all three input types.
  float load_float(std::int64_t i) const {
    const std::byte* p = data + static_cast<std::size_t>(i) * dtype_size(dtype);
    switch (dtype) {
      case DType::kBF16: {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        return bf16_to_float(h);
      }
      case DType::kF16: {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        return f16_to_float(h);
      }
      case DType::kF32: break;
    }
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }

  // Converts elements [begin, begin + n) to float into out.
  void load_floats(std::int64_t begin, std::int64_t n, float* out) const {
    const std::byte* p = data + static_cast<std::size_t>(begin) * dtype_size(dtype);
    switch (dtype) {
      case DType::kBF16:
        for (std::int64_t i = 0; i < n; ++i) {
          std::uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          out[i] = bf16_to_float(h);
        }
        return;
      case DType::kF16:
        for (std::int64_t i = 0; i < n; ++i) {
          std::uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          out[i] = f16_to_float(h);
        }
        return;
      case DType::kF32: break;
    }
    std::memcpy(out, p, static_cast<std::size_t>(n) * 4);
  }
};

// The 2-D view [rows, last dim] of an N-D shape: rows the product of every dim but the last;
// 0-D is [1,1], 1-D [n] is [1,n].
struct Shape2d {
  std::int64_t rows = 1, cols = 1;
};
inline Shape2d shape_2d(std::span<const std::int64_t> shape) {
  Shape2d v;
  v.cols = shape.empty() ? 1 : shape.back();
  for (std::size_t i = 0; i + 1 < shape.size(); ++i) v.rows *= shape[i];
  return v;
}

// Builds a 2-D view [rows, last dim] of an N-D tensor (shape_2d).
inline TensorView make_tensor_view(const std::byte* data, DType dtype, std::vector<std::int64_t> shape,
                                   const TensorStorage* storage = nullptr) {
  TensorView v;
  v.data = data;
  v.storage = storage;
  v.dtype = dtype;
  const Shape2d s = shape_2d(shape);
  v.rows = s.rows;
  v.cols = s.cols;
  v.shape = std::move(shape);
  return v;
}

}  // namespace fp8a

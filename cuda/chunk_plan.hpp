// How the CUDA backend cuts a tensor into chunks that are copied to the device and evaluated one
// after another. Host-only (no CUDA headers); tested in tests/cuda/test_cuda_host.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor_view.hpp"

namespace fp8a::cuda {

// Chunk edges fall on multiples of this many rows and columns of the 2-D view, so every
// quantisation block (1x128, 128x1, 128x128, 1x32, 32x1) lies inside exactly one chunk.
inline constexpr std::int64_t kChunkAlign = 128;

// Device chunk addresses are aligned to this (kernels read 16-byte vectors).
inline constexpr std::size_t kDeviceAlign = 256;

// A rectangle of the tensor's 2-D view [rows, cols]. On the device a chunk is dense row-major
// [rows, cols], whatever part of the tensor it came from.
struct Chunk {
  std::int64_t row0 = 0, rows = 0;  // row0 a multiple of kChunkAlign
  std::int64_t col0 = 0, cols = 0;  // col0 a multiple of kChunkAlign
  std::int64_t numel() const { return rows * cols; }
  bool operator==(const Chunk&) const = default;
};

struct ChunkPlan {
  std::vector<Chunk> chunks;         // by band of rows, then left to right; cover the tensor once
  std::vector<std::size_t> offsets;  // byte offset of each chunk when the tensor is kept resident
  std::size_t total_bytes = 0;       // resident size: chunk bytes, each rounded up to kDeviceAlign
  std::size_t max_chunk_bytes = 0;   // the largest chunk (staging and streaming buffer size)
};

// Cuts a rows x cols tensor of elem_size-byte elements into chunks of at most budget_bytes:
// bands of whole rows, a multiple of 128 rows each (the last band takes what is left). When 128
// rows are more than the budget, each band of 128 rows is split into column ranges, a multiple of
// 128 columns each. A chunk is never cut below 128 x 128 elements, so a chunk may exceed a budget
// smaller than 128 * 128 * elem_size bytes. An empty tensor gives no chunks.
ChunkPlan plan_chunks(std::int64_t rows, std::int64_t cols, std::size_t elem_size,
                      std::size_t budget_bytes);

// A single chunk covering the whole tensor (a tensor already in device memory).
ChunkPlan plan_whole(std::int64_t rows, std::int64_t cols, std::size_t elem_size);

// Copies chunk c of a host tensor (any alignment: memory-mapped files) to dst as dense rows of
// c.cols elements, in the tensor's own element type.
void gather_chunk(const TensorView& tensor, const Chunk& c, std::byte* dst);

}  // namespace fp8a::cuda

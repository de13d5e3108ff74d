#include "cuda/chunk_plan.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"

namespace fp8a::cuda {

namespace {

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

void add_chunk(ChunkPlan* plan, const Chunk& c, std::size_t elem_size) {
  const std::size_t bytes = static_cast<std::size_t>(c.numel()) * elem_size;
  plan->chunks.push_back(c);
  plan->offsets.push_back(plan->total_bytes);
  plan->total_bytes += align_up(bytes, kDeviceAlign);
  plan->max_chunk_bytes = std::max(plan->max_chunk_bytes, bytes);
}

}  // namespace

ChunkPlan plan_chunks(std::int64_t rows, std::int64_t cols, std::size_t elem_size,
                      std::size_t budget_bytes) {
  FP8A_CHECK(rows >= 0 && cols >= 0 && elem_size > 0, "plan_chunks: bad tensor shape");
  ChunkPlan plan;
  if (rows == 0 || cols == 0) return plan;
  const auto row_bytes = static_cast<std::size_t>(cols) * elem_size;
  std::int64_t band_rows = kChunkAlign;
  std::int64_t width = cols;
  if (static_cast<std::size_t>(kChunkAlign) * row_bytes <= budget_bytes) {
    band_rows = static_cast<std::int64_t>(budget_bytes / row_bytes) / kChunkAlign * kChunkAlign;
  } else {
    const std::int64_t r = std::min(rows, kChunkAlign);
    const auto fit = static_cast<std::int64_t>(budget_bytes / (static_cast<std::size_t>(r) * elem_size));
    width = std::min(cols, std::max(kChunkAlign, fit / kChunkAlign * kChunkAlign));
  }
  for (std::int64_t r0 = 0; r0 < rows; r0 += band_rows)
    for (std::int64_t c0 = 0; c0 < cols; c0 += width)
      add_chunk(&plan, {r0, std::min(band_rows, rows - r0), c0, std::min(width, cols - c0)}, elem_size);
  return plan;
}

ChunkPlan plan_whole(std::int64_t rows, std::int64_t cols, std::size_t elem_size) {
  ChunkPlan plan;
  if (rows > 0 && cols > 0) add_chunk(&plan, {0, rows, 0, cols}, elem_size);
  return plan;
}

void gather_chunk(const TensorView& t, const Chunk& c, std::byte* dst) {
  FP8A_CHECK(c.row0 >= 0 && c.col0 >= 0 && c.row0 + c.rows <= t.rows && c.col0 + c.cols <= t.cols,
             "gather_chunk: chunk outside the tensor");
  const std::size_t es = dtype_size(t.dtype);
  const auto at = [&](std::int64_t r, std::int64_t col) {
    return t.data + (static_cast<std::size_t>(r) * static_cast<std::size_t>(t.cols) +
                     static_cast<std::size_t>(col)) * es;
  };
  if (c.col0 == 0 && c.cols == t.cols) {
    std::memcpy(dst, at(c.row0, 0), static_cast<std::size_t>(c.numel()) * es);
    return;
  }
  const std::size_t row_bytes = static_cast<std::size_t>(c.cols) * es;
  for (std::int64_t r = 0; r < c.rows; ++r)
    std::memcpy(dst + static_cast<std::size_t>(r) * row_bytes, at(c.row0 + r, c.col0), row_bytes);
}

}  // namespace fp8a::cuda

// Pass 1 kernel family: the statistics of a chunk (TensorStats: NaN/Inf/zero counts, amax,
// amax over finite elements, min nonzero |x|, sum of squares).
#pragma once

#include <cuda_runtime.h>

#include "cuda/device_matrix.hpp"
#include "cuda/partials.hpp"

namespace fp8a::cuda {

// Writes one StatsPartial per thread block to out (capacity max_blocks) on the stream and returns
// the number written, at most max_blocks. The grid depends only on the chunk's size and max_blocks.
int launch_tensor_stats(const DeviceMatrix& chunk, int max_blocks, StatsPartial* out, cudaStream_t stream);

}  // namespace fp8a::cuda

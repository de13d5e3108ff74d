// Pass 2 kernel family for block-scaled candidates (TE block scaling 1x128 / 128x1 / 128x128 and
// MXFP8 1x32 / 32x1): block amax over non-NaN elements, the block's scale, then the cast.
#pragma once

#include <cuda_runtime.h>

#include "cuda/device_matrix.hpp"
#include "cuda/element_quant.hpp"
#include "cuda/partials.hpp"

namespace fp8a::cuda {

// Evaluates one blocked candidate on a chunk whose first row and column are multiples of 128 in
// the tensor (partial blocks at the chunk's right and bottom edges are quantised with their own
// amax, as fake_quant.cpp does). Writes one MetricPartial per thread block to out (capacity
// max_blocks) on the stream and returns the number written, at most max_blocks; the grid depends
// only on the chunk's shape and max_blocks. Block shapes other than the five above are an
// internal error.
int launch_metrics_blocked(const DeviceMatrix& chunk, const BlockedParams& params, int max_blocks,
                           MetricPartial* out, cudaStream_t stream);

}  // namespace fp8a::cuda

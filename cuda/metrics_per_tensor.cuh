// Pass 2 kernel family for candidates with one scale per tensor (current and delayed scaling,
// E4M3 or E5M2) and for the BF16 round trip: one pass over the chunk evaluates a whole
// PerTensorGroup, each thread looping over the group's candidates for every element it loads.
#pragma once

#include <cuda_runtime.h>

#include "cuda/device_matrix.hpp"
#include "cuda/metric_jobs.hpp"
#include "cuda/partials.hpp"

namespace fp8a::cuda {

// Writes MetricPartial records laid out [block][j < group.count] to out (capacity
// max_blocks * group.count) on the stream and returns the number of blocks, at most max_blocks.
// The grid depends only on the chunk's size and max_blocks.
int launch_metrics_per_tensor(const DeviceMatrix& chunk, const PerTensorGroup& group, int max_blocks,
                              MetricPartial* out, cudaStream_t stream);

}  // namespace fp8a::cuda

// FP8A_HD marks functions compiled for both host and device, so the CPU and CUDA backends share
// one implementation of the numerics (like ggml's ggml-common.h).
#pragma once

#if defined(__CUDACC__)
#define FP8A_HD __host__ __device__ __forceinline__
#else
#define FP8A_HD inline
#endif

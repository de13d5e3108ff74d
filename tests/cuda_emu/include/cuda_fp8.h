// Host emulation of <cuda_fp8.h> (tests/cuda_emu/include/cuda_runtime.h): nothing. The kernels use the
// hardware FP8 conversions only under __CUDA_ARCH__ >= 890, and take the shared software codec of
// core/fp8_codec.hpp otherwise, which is what the emulation runs.
#pragma once

#include "cuda_fp16.h"

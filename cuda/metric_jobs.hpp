// Pass 2 of the CUDA backend as a list of kernel launches ("jobs"), planned on the host from the
// resolved QuantSpecs. Host-only; tested in tests/cuda/test_cuda_host.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cuda/element_quant.hpp"
#include "engine/backend.hpp"
#include "engine/fake_quant.hpp"

namespace fp8a::cuda {

// Candidates evaluated together by one launch of the per-tensor kernel: each thread loops over
// them for every element it loads, so the tensor is read once per group. Eight keeps the
// per-thread accumulators (3 doubles + 3 counts each) in registers.
inline constexpr int kGroupSize = 8;

enum class ElementMode : std::uint8_t { kE4M3, kE5M2, kBf16 };

// Kernel parameter (passed by value, so it lives in the constant bank): up to kGroupSize
// per-tensor or bf16 candidates. scale_inv and overflow_threshold are computed on the host
// exactly as fake_quant.cpp does (1/scale, fp8_max * scale_inv).
struct PerTensorGroup {
  int count = 0;
  ElementMode mode[kGroupSize] = {};
  float scale[kGroupSize] = {};
  float scale_inv[kGroupSize] = {};
  float overflow_threshold[kGroupSize] = {};
  CountLimits limits[kGroupSize] = {};  // FP8 modes: the counts as ranges of |x| (element_quant.hpp)
};

struct MetricJob {
  bool blocked = false;
  PerTensorGroup group;              // per-tensor kernel
  BlockedParams params;              // blocked kernel
  std::vector<std::size_t> members;  // candidate index of each record slot: group.count, or one
};

// Per-tensor and bf16 candidates in groups of kGroupSize (candidate order), then one job per
// blocked candidate (candidate order). Candidates that are not applicable get no job.
std::vector<MetricJob> plan_metric_jobs(std::span<const QuantSpec> specs,
                                        std::span<const CandidateResult> results);

// Bytes of MetricPartial records the jobs write for one chunk, at most, with at most max_blocks
// thread blocks per launch.
std::size_t metric_partial_capacity(std::span<const MetricJob> jobs, int max_blocks);

}  // namespace fp8a::cuda

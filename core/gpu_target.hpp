// GPU targets as data: one row per GPU a recipe is advised for, with its compute capability (which
// recipes TE and cuBLASLt run there: core/recipe.hpp's rows) and its peak throughput (for the cost
// model). Figures are NVIDIA datasheet numbers per GPU, dense (without 2:4 sparsity), with FP32
// accumulation (TE's GEMMs accumulate in FP32; GeForce cards do that at half their FP16-accumulate
// rate). Rows are ordered by compute capability.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fp8a {

struct GpuTarget {
  const char* name;       // lower case, as options spell it: "h100"
  const char* product;    // the datasheet's product: "H100 SXM5 80GB"
  int sm;                 // compute capability, 10 * major + minor: 90
  double bf16_tflops;     // dense BF16 tensor-core peak, TFLOP/s
  double fp8_tflops;      // dense FP8 tensor-core peak, TFLOP/s; 0 without FP8 tensor cores
  double memory_gbs;      // memory bandwidth, GB/s (10^9 bytes per second)
  const char* source;     // where the figures come from
  double fp4_tflops = 0;  // dense FP4 (NVFP4) tensor-core peak, TFLOP/s; 0 where not given
};

inline constexpr GpuTarget kGpuTargets[] = {
    {"a100", "A100 SXM4 80GB", 80, 312.0, 0.0, 2039.0,
     "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM: BF16 Tensor Core 312 TFLOPS (624 with "
     "sparsity), GPU memory bandwidth 2,039 GB/s; no FP8 tensor cores"},
    {"l4", "L4", 89, 121.0, 242.5, 300.0,
     "NVIDIA L4 Tensor Core GPU datasheet: BF16 Tensor Core 242 TFLOPS and FP8 Tensor Core 485 "
     "TFLOPS with sparsity (half without), GPU memory bandwidth 300 GB/s"},
    {"l40s", "L40S", 89, 362.05, 733.0, 864.0,
     "NVIDIA L40S datasheet: BF16 Tensor Core 362.05 TFLOPS (733 with sparsity), FP8 Tensor Core "
     "733 TFLOPS (1,466 with sparsity), memory bandwidth 864 GB/s"},
    {"rtx4090", "GeForce RTX 4090", 89, 165.2, 330.3, 1008.0,
     "NVIDIA Ada GPU architecture whitepaper, GeForce RTX 4090 datasheet table: Peak BF16 Tensor "
     "TFLOPS with FP32 Accumulate 165.2 and Peak FP8 Tensor TFLOPS with FP32 Accumulate 330.3 "
     "(dense; FP8 with FP16 accumulate, 660.6, is not what TE's GEMMs use), memory bandwidth "
     "1,008 GB/s"},
    {"h100", "H100 SXM5 80GB", 90, 989.0, 1979.0, 3350.0,
     "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: BF16 Tensor Core 1,979 TFLOPS and FP8 "
     "3,958 TFLOPS with sparsity (half without), GPU memory bandwidth 3.35 TB/s"},
    {"h200", "H200 SXM 141GB", 90, 989.0, 1979.0, 4800.0,
     "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: BF16 Tensor Core 1,979 TFLOPS and FP8 "
     "3,958 TFLOPS with sparsity (half without), GPU memory bandwidth 4.8 TB/s"},
    {"b200", "B200 (HGX B200)", 100, 2250.0, 4500.0, 7700.0,
     "NVIDIA HGX B200 datasheet, per GPU: FP16/BF16 Tensor Core 4.5 PFLOPS and FP8 9 PFLOPS with "
     "sparsity (half without), 180 GB HBM3e at 7.7 TB/s; FP4 Tensor Core 18 PFLOPS with sparsity",
     9000.0},
    {"gb200", "B200 in GB200 NVL72", 100, 2500.0, 5000.0, 8000.0,
     "NVIDIA GB200 NVL72 datasheet, per Blackwell GPU: FP16/BF16 Tensor Core 5 PFLOPS and FP8 "
     "10 PFLOPS with sparsity (half without), 186 GB HBM3e at 8 TB/s; FP4 Tensor Core 20 PFLOPS with "
     "sparsity",
     10000.0},
    // Blackwell Ultra, compute capability 10.3: TE's MXFP8 and NVFP4 checks ask for 10.0+ (and
    // below 12.0), so both run here; FP4 dense is 1.5x B200's, FP8 and BF16 as B200's.
    {"b300", "B300 (HGX B300)", 103, 2250.0, 4500.0, 8000.0,
     "NVIDIA HGX B300 datasheet, 8 GPUs: FP4 Tensor Core 144 PFLOPS with sparsity and 108 without, "
     "FP8/FP6 72 PFLOPS and FP16/BF16 36 PFLOPS with sparsity (half without); per GPU 288 GB HBM3e "
     "at up to 8 TB/s",
     13500.0},
    {"gb300", "B300 in GB300 NVL72", 103, 2500.0, 5000.0, 8000.0,
     "NVIDIA GB300 NVL72 datasheet, 72 GPUs: FP4 Tensor Core 1,440 PFLOPS with sparsity and 1,080 "
     "without, FP8/FP6 720 PFLOPS and FP16/BF16 360 PFLOPS with sparsity (half without), HBM3e at "
     "576 TB/s (8 TB/s per GPU)",
     15000.0},
    {"rtx5090", "GeForce RTX 5090", 120, 209.5, 419.0, 1792.0,
     "NVIDIA RTX Blackwell GPU architecture whitepaper, GeForce RTX 5090 datasheet table: Peak BF16 "
     "Tensor TFLOPS with FP32 Accumulate 209.5 and Peak FP8 Tensor TFLOPS with FP32 Accumulate 419 "
     "(dense; FP8 with FP16 accumulate, 838, is not what TE's GEMMs use), memory bandwidth "
     "1,792 GB/s"},
};

// The row named `name`, or nullptr; then *why (when given) says so, with "did you mean" and the
// known names.
const GpuTarget* find_gpu_target(std::string_view name, std::string* why = nullptr);

// The rows with this compute capability, in table order (h100 and h200 share sm_90).
std::vector<const GpuTarget*> gpu_targets_with_sm(int sm);

}  // namespace fp8a

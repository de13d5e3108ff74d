// The CUDA backend: engine/backend.hpp on one NVIDIA GPU (device 0). Same results as CpuBackend
// for every recipe kind: integer counts, amax/amin and scales bit-identical, float64 sums equal to
// within rounding order: at most 2 n 2^-53 relative for n elements (tests/cuda/test_cuda_backend.cpp,
// run on a GPU and on the host emulation of tests/cuda_emu).
//
// Evaluation of one tensor, two passes:
//   pass 1  statistics kernel (stats.cuh) -> TensorStats; the host then resolves every candidate
//           with make_quant_spec (engine/quant_spec.hpp), exactly as the CPU backend does;
//   pass 2  one launch of the per-tensor kernel (metrics_per_tensor.cuh) per group of up to eight
//           per-tensor/bf16 candidates, and one launch of the blocked kernel (metrics_blocked.cuh)
//           per blocked candidate (metric_jobs.hpp).
//
// Accumulation (deterministic): each CUDA thread block reduces its elements into one partial
// record per candidate (float64 sums, 64-bit counts, scale_inv range) in global memory, with a
// grid that depends only on the chunk's shape; the host adds the records in block-index order,
// chunk after chunk (partials.hpp). Run-to-run results are bit-identical, on any GPU.
//
// Input and memory: the tensor stays in host memory (memory-mapped, any alignment, BF16/F16/F32);
// it is cut into chunks (chunk_plan.hpp: bands of 128*k whole rows, or 128-row x 128*k-column
// rectangles for very wide tensors, about chunk_bytes each, so every quantisation block lies in
// one chunk), gathered into pinned staging buffers and copied up on two streams that alternate,
// so the copy of one chunk overlaps the kernels of the previous one. Kernels read the raw
// element type and convert to float on the device. A tensor whose chunks fit in resident_bytes
// is kept on the device after pass 1 and read from there in pass 2 (streamed once); a larger one
// is streamed twice. Device memory held per concurrent evaluation is at most
//     resident_bytes + 2 * max(chunk_bytes, 128 * 128 * element size) + partial records
// (partials: max_grid_blocks * 56 bytes per candidate, 112 KiB per candidate for two slots), plus
// the same 2 * chunk size in pinned host memory. With the defaults (64 MiB chunks, 2 GiB
// resident, 2 concurrent evaluations) that is about 4.3 GiB of device memory and 256 MiB pinned,
// whatever the tensor's size: tensors larger than device memory are streamed. The constructor
// fits the options to 3/4 of the device's free memory (fit_to_device_memory: less resident, then
// smaller chunks), so a GPU shared with another job works too, or fails at once with fp8a.usage.212.
// When memory runs out later (the other job grew), a failed allocation of a workspace's buffers
// is retried with smaller ones, for that tensor and every later one (lower_budget: nothing
// resident, then half the chunk budget, down to one 128 x 128 tile); only then does evaluate()
// fail, with fp8a.cuda.803. A tensor's results do not depend on the retries before it, only on
// the chunks it was evaluated with (budget()).
//
// Threads: evaluate() may be called concurrently (engine/run.cpp evaluates tensors in parallel);
// each call takes one of max_concurrent workspaces (streams + buffers), waiting when all are busy.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "cuda/chunk_plan.hpp"
#include "cuda/device_matrix.hpp"
#include "cuda/partials.hpp"
#include "engine/backend.hpp"

namespace fp8a::cuda {

// Empty when device 0 can run this build's kernels; otherwise why not ("no CUDA device: ...", or
// a GPU older than the oldest architecture the kernels were compiled for).
std::string cuda_unusable_reason();

struct CudaBackendOptions {
  std::size_t chunk_bytes = std::size_t{64} << 20;     // target size of one streamed chunk
  std::size_t resident_bytes = std::size_t{2} << 30;   // keep a tensor on the device up to this
  int max_concurrent = 2;                              // workspaces (concurrent evaluate calls)
  // Thread blocks per kernel launch, at most: partial records per candidate. The constructor
  // lowers it to the device's maximum grid size (cudaDevAttrMaxGridDimX): 2^31 - 1 on every CUDA
  // GPU, so the grids are the same on all of them; the host emulation reports a small one.
  int max_grid_blocks = kMaxGridBlocks;
};

// The options shrunk to what a device with `free_bytes` of free memory can hold (another process,
// a training job, may share the GPU): max_concurrent workspaces of resident_bytes + two chunk
// buffers + the partial records (max_grid_blocks per candidate) of up to kFitCandidates
// candidates, each buffer rounded up to the 2 MiB allocation granule, within 3/4 of the free memory. resident_bytes shrinks first (down to
// 0: every tensor is streamed twice), then chunk_bytes (halving, down to 64 KiB). Throws a usage
// error (fp8a.usage.212) when even that does not fit. The CudaBackend constructor applies it to
// cudaMemGetInfo's free memory.
inline constexpr std::size_t kFitCandidates = 64;
CudaBackendOptions fit_to_device_memory(CudaBackendOptions options, std::size_t free_bytes);

// What evaluate() plans with now: options().chunk_bytes and resident_bytes until a device
// allocation fails, then lowered (lower_budget).
struct CudaBackendBudget {
  std::size_t chunk_bytes = 0;
  std::size_t resident_bytes = 0;
  bool operator==(const CudaBackendBudget&) const = default;
};

// The budget to retry with after an allocation failed: resident_bytes 0 (tensors streamed) if it
// was not, else chunk_bytes halved, not below min_chunk_bytes (128 x 128 elements of the
// tensor's type). Unchanged when both are at their floor: nothing left to make smaller.
CudaBackendBudget lower_budget(CudaBackendBudget budget, std::size_t min_chunk_bytes);

class CudaBackend final : public Backend {
 public:
  // Throws fp8a::Error (fp8a.cuda.801) when cuda_unusable_reason() is not empty, fp8a.usage.212
  // when the device has too little free memory. options() are the options after
  // fit_to_device_memory.
  explicit CudaBackend(CudaBackendOptions options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  std::string device() const override;  // describe_device0()
  // Throws fp8a::Error fp8a.cuda.803 when the device has no memory for the buffers even at the
  // smallest budget (see the top of this file), fp8a.cuda.801 for other runtime failures.
  // NVFP4 candidates are evaluated on the CPU (CpuBackend): no device kernels yet.
  TensorEvaluation evaluate(std::span<const Candidate> candidates,
                            const TensorView& tensor) const override;

  // The same evaluation on a tensor already in device memory (dense row-major, 16-byte aligned):
  // one chunk, no copies. For benchmarks and callers that own device data; the data must be
  // complete when this is called (the backend's streams do not wait for the caller's).
  TensorEvaluation evaluate_device(std::span<const Candidate> candidates,
                                   const DeviceMatrix& tensor) const;

  // How evaluate() cuts this tensor, and whether it keeps it resident between the passes, with
  // the budget now.
  ChunkPlan plan(const TensorView& tensor) const;
  bool keeps_resident(const ChunkPlan& plan) const;
  const CudaBackendOptions& options() const { return options_; }
  CudaBackendBudget budget() const;

 private:
  TensorEvaluation evaluate_on_device(std::span<const Candidate> candidates, const TensorView& tensor) const;

  class Workspace;
  struct Pool;
  class Lease;
  void release_idle_buffers() const;
  CudaBackendOptions options_;
  std::unique_ptr<Pool> pool_;
};

}  // namespace fp8a::cuda

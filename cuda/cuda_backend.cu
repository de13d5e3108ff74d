#include "cuda/cuda_backend.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/check.hpp"
#include "cuda/device_info.hpp"
#include "cuda/device_memory.hpp"
#include "cuda/device_support.hpp"
#include "cuda/metric_jobs.hpp"
#include "cuda/metrics_blocked.cuh"
#include "cuda/metrics_per_tensor.cuh"
#include "cuda/partials.hpp"
#include "cuda/stats.cuh"
#include "core/error.hpp"
#include "core/text.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/quant_spec.hpp"

namespace fp8a::cuda {

namespace {

// Thrown by a workspace when the runtime is out of memory for one of its buffers; caught by
// CudaBackend::evaluate, which retries with smaller buffers.
struct OutOfMemory {
  std::size_t bytes;  // the allocation that failed
};

template <class B>
void reserve_or_signal(B& buffer, std::size_t bytes) {
  if (!buffer.try_reserve(bytes)) throw OutOfMemory{bytes};
}

}  // namespace

// Device resources of one evaluation at a time: two slots that alternate over the chunks, and
// the resident copy of the tensor.
class CudaBackend::Workspace {
 public:
  // What pass 2 or pass 1 does with one chunk: enqueue kernels on the stream writing partial
  // records to `partials` (device), note each launch's block count in *blocks, return the bytes
  // of records written.
  using Launch = std::function<std::size_t(const DeviceMatrix& chunk, std::byte* partials,
                                           cudaStream_t stream, std::vector<int>* blocks)>;
  // Folds one chunk's records (now in host memory) into the totals.
  using Consume = std::function<void(const std::byte* partials, const std::vector<int>& blocks)>;

  // max_blocks: thread blocks per launch, at most (CudaBackendOptions::max_grid_blocks).
  // Throws OutOfMemory when a buffer cannot be allocated (nothing in flight then).
  TensorEvaluation evaluate(std::span<const Candidate> candidates, const TensorView* host,
                            const DeviceMatrix* device, const ChunkPlan& plan, bool resident,
                            int max_blocks);
  // Frees every buffer (a retry with smaller chunks, or memory for another workspace's retry).
  void release_buffers();

 private:
  struct Slot {
    Stream stream;
    Event done;                 // recorded after the chunk's partial records reach the host
    PinnedBuffer staging;       // the chunk gathered from the host tensor
    DeviceBuffer chunk;         // the chunk on the device (streamed mode)
    DeviceBuffer partials;      // records written by the kernels
    PinnedBuffer host_partials; // ... copied back
    std::vector<int> blocks;    // per launch, for the consumer
    bool pending = false;       // a chunk's work is in flight
  };

  struct Source {
    const TensorView* host;
    const DeviceMatrix* device;
    DType dtype;
  };

  void run_pass(const Source& src, const ChunkPlan& plan, bool resident, bool upload,
                std::size_t partial_capacity, const Launch& launch, const Consume& consume);
  void finish(Slot& s, const Consume& consume);
  void abandon();

  Slot slots_[2];
  DeviceBuffer resident_;
};

void CudaBackend::Workspace::finish(Slot& s, const Consume& consume) {
  if (!s.pending) return;
  FP8A_CUDA_CHECK(cudaEventSynchronize(s.done.get()));
  s.pending = false;
  consume(s.host_partials.data(), s.blocks);
}

void CudaBackend::Workspace::release_buffers() {
  for (Slot& s : slots_) {
    s.staging.release();
    s.chunk.release();
    s.partials.release();
    s.host_partials.release();
  }
  resident_.release();
}

void CudaBackend::Workspace::abandon() {
  for (Slot& s : slots_) {
    static_cast<void>(cudaStreamSynchronize(s.stream.get()));
    s.pending = false;
  }
  static_cast<void>(cudaGetLastError());
}

void CudaBackend::Workspace::run_pass(const Source& src, const ChunkPlan& plan, bool resident,
                                      bool upload, std::size_t partial_capacity,
                                      const Launch& launch, const Consume& consume) {
  for (Slot& s : slots_) {
    reserve_or_signal(s.partials, partial_capacity);
    reserve_or_signal(s.host_partials, partial_capacity);
  }
  const std::size_t elem = dtype_size(src.dtype);
  const std::size_t n = plan.chunks.size();
  for (std::size_t i = 0; i < n; ++i) {
    Slot& s = slots_[i % 2];
    finish(s, consume);  // chunk i - 2: frees the slot's staging and chunk buffers
    const Chunk& c = plan.chunks[i];
    const void* data = nullptr;
    if (src.device != nullptr) {
      FP8A_CHECK(n == 1, "a device tensor is evaluated as one chunk");
      data = src.device->data;
    } else {
      std::byte* dst = resident ? resident_.data() + plan.offsets[i] : s.chunk.data();
      if (upload) {
        const std::size_t bytes = static_cast<std::size_t>(c.numel()) * elem;
        gather_chunk(*src.host, c, s.staging.data());
        FP8A_CUDA_CHECK(cudaMemcpyAsync(dst, s.staging.data(), bytes, cudaMemcpyHostToDevice,
                                        s.stream.get()));
      }
      data = dst;
    }
    const DeviceMatrix m{data, src.dtype, c.rows, c.cols};
    s.blocks.clear();
    const std::size_t bytes = launch(m, s.partials.data(), s.stream.get(), &s.blocks);
    FP8A_CHECK(bytes <= partial_capacity, "partial records overflow their buffer");
    FP8A_CUDA_CHECK(cudaMemcpyAsync(s.host_partials.data(), s.partials.data(), bytes,
                                    cudaMemcpyDeviceToHost, s.stream.get()));
    FP8A_CUDA_CHECK(cudaEventRecord(s.done.get(), s.stream.get()));
    s.pending = true;
  }
  // The last two chunks, in chunk order.
  if (n >= 2) finish(slots_[(n - 2) % 2], consume);
  if (n >= 1) finish(slots_[(n - 1) % 2], consume);
}

TensorEvaluation CudaBackend::Workspace::evaluate(std::span<const Candidate> candidates,
                                                  const TensorView* host, const DeviceMatrix* device,
                                                  const ChunkPlan& plan, bool resident,
                                                  int max_blocks) {
  FP8A_CUDA_CHECK(cudaSetDevice(0));
  const Source src{host, device, host != nullptr ? host->dtype : device->dtype};
  TensorEvaluation out;
  out.stats.numel = host != nullptr ? host->numel() : device->numel();
  if (device != nullptr)
    FP8A_CHECK(reinterpret_cast<std::uintptr_t>(device->data) % 16 == 0,
               "evaluate_device: the tensor must be 16-byte aligned");
  if (host != nullptr) {
    for (Slot& s : slots_) reserve_or_signal(s.staging, plan.max_chunk_bytes);
    if (resident)
      reserve_or_signal(resident_, plan.total_bytes);
    else
      for (Slot& s : slots_) reserve_or_signal(s.chunk, plan.max_chunk_bytes);
  }
  const std::size_t k = candidates.size();
  out.results.resize(k);
  std::vector<QuantSpec> specs(k);
  std::vector<QuantSums> sums(k);
  std::vector<FakeQuantCounts> counts(k);
  try {
    // Pass 1: statistics (uploads the chunks; in resident mode they stay for pass 2).
    run_pass(
        src, plan, resident, host != nullptr, static_cast<std::size_t>(max_blocks) * sizeof(StatsPartial),
        [&](const DeviceMatrix& m, std::byte* partials, cudaStream_t stream, std::vector<int>* blocks) {
          const int b = launch_tensor_stats(m, max_blocks, reinterpret_cast<StatsPartial*>(partials), stream);
          blocks->push_back(b);
          return static_cast<std::size_t>(b) * sizeof(StatsPartial);
        },
        [&](const std::byte* partials, const std::vector<int>& blocks) {
          merge_stats_partials({reinterpret_cast<const StatsPartial*>(partials),
                                static_cast<std::size_t>(blocks.at(0))},
                               &out.stats);
        });

    // The candidates' scales from the statistics, on the host, as the CPU backend resolves them.
    for (std::size_t j = 0; j < k; ++j)
      out.results[j].applicability = make_quant_spec(candidates[j], out.stats, src.dtype, &specs[j]);
    const std::vector<MetricJob> jobs = plan_metric_jobs(specs, out.results);

    // Pass 2: every candidate; the chunks come from the resident copy or are streamed again.
    if (!jobs.empty())
      run_pass(
          src, plan, resident, host != nullptr && !resident, metric_partial_capacity(jobs, max_blocks),
          [&](const DeviceMatrix& m, std::byte* partials, cudaStream_t stream, std::vector<int>* blocks) {
            std::size_t offset = 0;
            for (const MetricJob& job : jobs) {
              auto* records = reinterpret_cast<MetricPartial*>(partials + offset);
              const int b = job.blocked ? launch_metrics_blocked(m, job.params, max_blocks, records, stream)
                                        : launch_metrics_per_tensor(m, job.group, max_blocks, records, stream);
              blocks->push_back(b);
              offset += static_cast<std::size_t>(b) * job.members.size() * sizeof(MetricPartial);
            }
            return offset;
          },
          [&](const std::byte* partials, const std::vector<int>& blocks) {
            std::size_t offset = 0;
            for (std::size_t i = 0; i < jobs.size(); ++i) {
              const std::size_t records = static_cast<std::size_t>(blocks.at(i)) * jobs[i].members.size();
              merge_metric_partials({reinterpret_cast<const MetricPartial*>(partials + offset), records},
                                    jobs[i].members, sums, counts);
              offset += records * sizeof(MetricPartial);
            }
          });
  } catch (...) {
    abandon();
    throw;
  }

  for (std::size_t j = 0; j < k; ++j)
    if (out.results[j].applicability.ok)
      out.results[j].metrics = finalize_candidate(out.stats, specs[j], sums[j], counts[j]);
  return out;
}

// ---- workspace pool ------------------------------------------------------------------------

struct CudaBackend::Pool {
  std::mutex mutex;
  std::condition_variable freed;
  std::vector<std::unique_ptr<Workspace>> idle;
  int live = 0;  // created, idle or leased
  CudaBackendBudget budget;  // what evaluate() plans with now (lowered by failed allocations)
};

class CudaBackend::Lease {
 public:
  Lease(Pool& pool, int max_live) : pool_(pool) {
    std::unique_lock<std::mutex> lock(pool_.mutex);
    pool_.freed.wait(lock, [&] { return !pool_.idle.empty() || pool_.live < max_live; });
    if (!pool_.idle.empty()) {
      workspace_ = std::move(pool_.idle.back());
      pool_.idle.pop_back();
      return;
    }
    ++pool_.live;
    lock.unlock();
    try {
      workspace_ = std::make_unique<Workspace>();
    } catch (...) {
      lock.lock();
      --pool_.live;
      pool_.freed.notify_one();
      throw;
    }
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() {
    const std::lock_guard<std::mutex> lock(pool_.mutex);
    pool_.idle.push_back(std::move(workspace_));
    pool_.freed.notify_one();
  }
  Workspace* operator->() const { return workspace_.get(); }

 private:
  Pool& pool_;
  std::unique_ptr<Workspace> workspace_;
};

// ---- backend -------------------------------------------------------------------------------

std::string cuda_unusable_reason() {
  if (device_count() == 0) return describe_device0();
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return "CUDA device 0: compute capability unavailable";
  }
  // Kernels built for sm_X run on X and, through their PTX, on newer GPUs; never on older ones.
  const int arch = 10 * major + minor;
  if (arch < FP8A_CUDA_MIN_ARCH)
    return describe_device0() + " is older than this build's kernels (sm_" +
           std::to_string(FP8A_CUDA_MIN_ARCH) + "; rebuild with CMAKE_CUDA_ARCHITECTURES=" +
           std::to_string(arch) + ")";
  return {};
}

CudaBackendOptions fit_to_device_memory(CudaBackendOptions o, std::size_t free_bytes) {
  using detail::round_up_allocation;
  constexpr std::size_t kMinChunk = 128 * 128 * 4;  // one F32 tile (chunk_plan.hpp's minimum)
  const std::size_t budget = free_bytes / 4 * 3 / static_cast<std::size_t>(o.max_concurrent);
  const std::size_t partials = 2 * round_up_allocation(static_cast<std::size_t>(o.max_grid_blocks) * kFitCandidates *
                                                       sizeof(MetricPartial));
  const auto streaming = [&](std::size_t chunk) { return 2 * round_up_allocation(chunk) + partials; };
  while (o.chunk_bytes > kMinChunk && streaming(o.chunk_bytes) > budget)
    o.chunk_bytes = std::max(o.chunk_bytes / 2, kMinChunk);
  const std::size_t need = streaming(o.chunk_bytes);
  if (need > budget) {
    const auto mib = [](std::size_t b) { return std::to_string((b + (std::size_t{1} << 20) - 1) >> 20); };
    throw usage_error("fp8a.usage.212",
                      "CUDA device 0 has " + mib(free_bytes) + " MiB of free memory; the CUDA backend needs at least " +
                          mib(need * static_cast<std::size_t>(o.max_concurrent) / 3 * 4) + " MiB free (" +
                          std::to_string(o.max_concurrent) +
                          " workspaces of two chunk buffers and partial records, in 3/4 of the free memory): "
                          "free some GPU memory, or run on the CPU (--device cpu)");
  }
  const std::size_t room = budget - need;
  const std::size_t granule = round_up_allocation(1);
  o.resident_bytes = std::min(o.resident_bytes, room / granule * granule);
  return o;
}

CudaBackend::CudaBackend(CudaBackendOptions options)
    : options_(options), pool_(std::make_unique<Pool>()) {
  FP8A_CHECK(options_.chunk_bytes > 0 && options_.max_concurrent >= 1 && options_.max_grid_blocks >= 1,
             "CudaBackend: bad options");
  const std::string why = cuda_unusable_reason();
  if (!why.empty()) throw internal_error("fp8a.cuda.801", "CUDA backend: " + why);
  std::size_t free_bytes = 0, total_bytes = 0;
  FP8A_CUDA_CHECK(cudaSetDevice(0));
  int grid_limit = 0;
  FP8A_CUDA_CHECK(cudaDeviceGetAttribute(&grid_limit, cudaDevAttrMaxGridDimX, 0));
  options_.max_grid_blocks = std::min(options_.max_grid_blocks, std::max(grid_limit, 1));
  FP8A_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  options_ = fit_to_device_memory(options_, free_bytes);
  pool_->budget = {options_.chunk_bytes, options_.resident_bytes};
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::device() const { return describe_device0(); }

CudaBackendBudget CudaBackend::budget() const {
  const std::lock_guard<std::mutex> lock(pool_->mutex);
  return pool_->budget;
}

ChunkPlan CudaBackend::plan(const TensorView& t) const {
  return plan_chunks(t.rows, t.cols, dtype_size(t.dtype), budget().chunk_bytes);
}

bool CudaBackend::keeps_resident(const ChunkPlan& plan) const {
  return plan.total_bytes <= budget().resident_bytes;
}

CudaBackendBudget lower_budget(CudaBackendBudget b, std::size_t min_chunk_bytes) {
  if (b.resident_bytes > 0) b.resident_bytes = 0;
  else if (b.chunk_bytes > min_chunk_bytes) b.chunk_bytes = std::max(b.chunk_bytes / 2, min_chunk_bytes);
  return b;
}

namespace {

[[noreturn]] void out_of_device_memory(const TensorView* host, const DeviceMatrix* device,
                                       std::size_t failed_bytes, const CudaBackendBudget& b) {
  const auto mib = [](std::size_t n) { return std::to_string(n >> 20); };
  const auto kib = [](std::size_t n) { return std::to_string((n + 1023) >> 10); };
  std::size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) static_cast<void>(cudaGetLastError());
  const DType dtype = host != nullptr ? host->dtype : device->dtype;
  const std::string shape = host != nullptr ? shape_text(host->shape)
                                            : "[" + std::to_string(device->rows) + ", " +
                                                  std::to_string(device->cols) + "]";
  throw internal_error(
      "fp8a.cuda.803",
      "CUDA device 0 is out of memory for the CUDA backend's buffers of a " + shape + " " +
          dtype_name(dtype) + " tensor, even with chunks of " + kib(b.chunk_bytes) + " KiB (" +
          std::to_string(kChunkAlign) + "x" + std::to_string(kChunkAlign) +
          " elements at the least) and nothing kept resident: an allocation of " + kib(failed_bytes) +
          " KiB failed with " + mib(free_bytes) + " MiB free; free some GPU memory, or run on the CPU (--device cpu)");
}

}  // namespace

void CudaBackend::release_idle_buffers() const {
  const std::lock_guard<std::mutex> lock(pool_->mutex);
  for (auto& w : pool_->idle) w->release_buffers();
}

TensorEvaluation CudaBackend::evaluate(std::span<const Candidate> candidates,
                                       const TensorView& tensor) const {
  // NVFP4 has no device kernels yet: its candidates go to the CPU backend, whose results join
  // the device's (the statistics are the device's).
  std::vector<Candidate> device, host;
  std::vector<std::size_t> device_at, host_at;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const bool on_host = !runs_on_device(candidates[i].recipe.kind);
    (on_host ? host : device).push_back(candidates[i]);
    (on_host ? host_at : device_at).push_back(i);
  }
  if (host.empty()) return evaluate_on_device(candidates, tensor);
  TensorEvaluation out = evaluate_on_device(device, tensor);
  const TensorEvaluation cpu = CpuBackend().evaluate(host, tensor);
  std::vector<CandidateResult> results(candidates.size());
  for (std::size_t i = 0; i < device_at.size(); ++i) results[device_at[i]] = std::move(out.results[i]);
  for (std::size_t i = 0; i < host_at.size(); ++i) results[host_at[i]] = cpu.results[i];
  out.results = std::move(results);
  return out;
}

TensorEvaluation CudaBackend::evaluate_on_device(std::span<const Candidate> candidates,
                                                 const TensorView& tensor) const {
  const Lease workspace(*pool_, options_.max_concurrent);
  const std::size_t min_chunk = static_cast<std::size_t>(kChunkAlign * kChunkAlign) * dtype_size(tensor.dtype);
  for (;;) {
    const CudaBackendBudget b = budget();
    const ChunkPlan p = plan_chunks(tensor.rows, tensor.cols, dtype_size(tensor.dtype), b.chunk_bytes);
    try {
      return workspace->evaluate(candidates, &tensor, nullptr, p, p.total_bytes <= b.resident_bytes,
                                 options_.max_grid_blocks);
    } catch (const OutOfMemory& oom) {
      // Smaller buffers, for this tensor and every later one: nothing resident, then half the
      // chunk budget, down to one 128 x 128 tile. The other workspaces' idle buffers go too.
      workspace->release_buffers();
      release_idle_buffers();
      const CudaBackendBudget lower = lower_budget(b, min_chunk);
      if (lower.chunk_bytes == b.chunk_bytes && lower.resident_bytes == b.resident_bytes)
        out_of_device_memory(&tensor, nullptr, oom.bytes, b);
      const std::lock_guard<std::mutex> lock(pool_->mutex);
      pool_->budget.chunk_bytes = std::min(pool_->budget.chunk_bytes, lower.chunk_bytes);
      pool_->budget.resident_bytes = std::min(pool_->budget.resident_bytes, lower.resident_bytes);
    }
  }
}

TensorEvaluation CudaBackend::evaluate_device(std::span<const Candidate> candidates,
                                              const DeviceMatrix& tensor) const {
  for (const Candidate& c : candidates)
    if (!runs_on_device(c.recipe.kind))
      throw internal_error("fp8a.cuda.801",
                           "evaluate_device: NVFP4 has no device kernels (CudaBackend::evaluate runs it on the CPU)");
  const ChunkPlan p = plan_whole(tensor.rows, tensor.cols, dtype_size(tensor.dtype));
  const Lease workspace(*pool_, options_.max_concurrent);
  try {
    return workspace->evaluate(candidates, nullptr, &tensor, p, true, options_.max_grid_blocks);
  } catch (const OutOfMemory& oom) {  // one chunk already on the device: nothing to make smaller
    workspace->release_buffers();
    out_of_device_memory(nullptr, &tensor, oom.bytes, budget());
  }
}

}  // namespace fp8a::cuda

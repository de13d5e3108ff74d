// The CUDA backend's device-memory bound (cuda/cuda_backend.hpp), on the host emulation of
// tests/cuda_emu, which counts every cudaMalloc (part of test_cuda_backend_emu, label cuda-emu): however
// large the tensors and however many threads call evaluate() at once, the device memory held
// stays within max_concurrent workspaces of
//     resident_bytes + 2 * max(chunk_bytes, 128 * 128 * element size) + 2 * partial records,
// each buffer rounded up to the 2 MiB allocation granule (device_memory.hpp), and all of it is
// released with the backend.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "cuda/device_memory.hpp"
#include "cuda/partials.hpp"
#include "core/error.hpp"
#include "engine/cpu_backend.hpp"
#include "tests/cuda/backend_compare.hpp"

namespace {

namespace ct = fp8a::cuda_test;

// Rounded up to the allocation granule of device_memory.hpp's buffers.
std::size_t granules(std::size_t bytes) { return fp8a::cuda::detail::round_up_allocation(bytes); }

}  // namespace

TEST_CASE("device memory stays within the documented bound, tensors streamed or resident, evaluated concurrently") {
  fp8a::cuda::CudaBackendOptions o;
  o.chunk_bytes = 256 << 10;
  o.resident_bytes = std::size_t{3} << 20;
  o.max_concurrent = 2;
  const auto cands = ct::all_candidates(fp8a::Role::kActivation, fp8a::Fp8Format::kE4M3, 1.0f);
  // Partial records: at most kMaxGridBlocks per candidate per launch (pass 2 is the larger).
  const std::size_t partials = std::max(static_cast<std::size_t>(fp8a::cuda::kMaxGridBlocks) * cands.size() *
                                            sizeof(fp8a::cuda::MetricPartial),
                                        static_cast<std::size_t>(fp8a::cuda::kMaxGridBlocks) *
                                            sizeof(fp8a::cuda::StatsPartial));
  const std::size_t per_workspace =
      granules(o.resident_bytes) + 2 * granules(std::max<std::size_t>(o.chunk_bytes, 128 * 128 * 4)) + 2 * granules(partials);
  const std::size_t bound = static_cast<std::size_t>(o.max_concurrent) * per_workspace;

  // Resident (1 MiB, 2.5 MiB) and streamed (5 MiB BF16, 6 MiB F32 with rows wider than a chunk)
  // tensors, the largest larger than the whole bound's resident part.
  std::vector<ct::StoredTensor> tensors;
  tensors.push_back(ct::store(ct::make_fill(512 * 1024, ct::Fill::kNormal, 1), fp8a::DType::kBF16, {512, 1024}));
  tensors.push_back(ct::store(ct::make_fill(640 * 1024, ct::Fill::kWide, 2), fp8a::DType::kF32, {640, 1024}));
  tensors.push_back(ct::store(ct::make_fill(2560 * 1024, ct::Fill::kNormal, 3), fp8a::DType::kBF16, {2560, 1024}));
  tensors.push_back(ct::store(ct::make_fill(12 * 131072, ct::Fill::kNonFinite, 4), fp8a::DType::kF32, {12, 131072}));

  const std::size_t before = fp8a_emu::device_bytes_in_use();
  fp8a_emu::reset_device_bytes_peak();
  {
    const fp8a::cuda::CudaBackend gpu(o);
    CHECK(gpu.keeps_resident(gpu.plan(tensors[0].view)));
    CHECK(gpu.keeps_resident(gpu.plan(tensors[1].view)));
    CHECK(!gpu.keeps_resident(gpu.plan(tensors[2].view)));
    CHECK(!gpu.keeps_resident(gpu.plan(tensors[3].view)));
    CHECK(gpu.plan(tensors[3].view).chunks[0].cols < 131072);  // column ranges
    std::vector<fp8a::TensorEvaluation> got(2 * tensors.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < got.size(); ++i)  // four threads, two workspaces
      threads.emplace_back([&, i] { got[i] = gpu.evaluate(cands, tensors[i % tensors.size()].view); });
    for (auto& t : threads) t.join();
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("tensor " << i % tensors.size());
      ct::check_same_evaluation(got[i], fp8a::CpuBackend().evaluate(cands, tensors[i % tensors.size()].view), cands);
    }
    const std::size_t peak = fp8a_emu::device_bytes_peak() - before;
    INFO("peak " << peak << " bytes, bound " << bound);
    CHECK(peak > 0);
    CHECK(peak <= bound);
  }
  CHECK(fp8a_emu::device_bytes_in_use() == before);  // the backend released all of it
}

namespace {

// Sets the emulated device's memory for one test, and back to the default after it.
struct DeviceMemory {
  explicit DeviceMemory(std::size_t bytes) { fp8a_emu::set_device_memory(bytes); }
  ~DeviceMemory() { fp8a_emu::set_device_memory(std::size_t{16} << 30); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
};

}  // namespace

TEST_CASE("a GPU with little free memory: the default options shrink, a tensor larger than the device streams") {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  REQUIRE(fp8a_emu::device_bytes_in_use() == 0);
  {
    const DeviceMemory limit(32 * MiB);
    fp8a_emu::reset_device_bytes_peak();
    const fp8a::cuda::CudaBackend gpu;  // defaults: 64 MiB chunks, 2 GiB resident
    // 12 MiB per workspace: two 4 MiB chunk buffers and 4 MiB of partial records, nothing resident.
    CHECK(gpu.options().chunk_bytes == 4 * MiB);
    CHECK(gpu.options().resident_bytes == 0);
    // 40 MiB of BF16, more than the whole device.
    const auto t = ct::store(ct::make_fill(4096 * 5120, ct::Fill::kNormal, 11), fp8a::DType::kBF16, {4096, 5120});
    std::vector<fp8a::Candidate> cands;
    for (const char* r : {"current", "block", "mxfp8"})
      for (auto o : fp8a::orientations_for(fp8a::parse_recipe(r), fp8a::Role::kActivation))
        cands.push_back({fp8a::parse_recipe(r), fp8a::Fp8Format::kE4M3, fp8a::Role::kActivation, o});
    CHECK(!gpu.keeps_resident(gpu.plan(t.view)));
    ct::check_same_evaluation(gpu.evaluate(cands, t.view), fp8a::CpuBackend().evaluate(cands, t.view), cands);
    CHECK(fp8a_emu::device_bytes_peak() <= 32 * MiB);
  }
  {
    const DeviceMemory limit(20 * MiB);  // 7.5 MiB per workspace: less than 2 + 2 + 4 MiB
    CHECK_THROWS_WITH_AS(fp8a::cuda::CudaBackend(), doctest::Contains("[fp8a.usage.212] CUDA device 0 has 20 MiB of free memory"),
                         fp8a::Error);
  }
}

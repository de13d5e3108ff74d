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

namespace {

// Bit-identical evaluations: every count, scale, float64 sum and derived figure equal.
void check_identical(const fp8a::TensorEvaluation& got, const fp8a::TensorEvaluation& want) {
  ct::check_same_stats(got.stats, want.stats);
  CHECK(ct::same_float(got.stats.sum_sq, want.stats.sum_sq));
  REQUIRE(got.results.size() == want.results.size());
  for (std::size_t j = 0; j < want.results.size(); ++j) {
    INFO("candidate " << j);
    const auto& g = got.results[j];
    const auto& w = want.results[j];
    CHECK(g.applicability.ok == w.applicability.ok);
    const fp8a::QuantMetrics& gm = g.metrics;
    const fp8a::QuantMetrics& wm = w.metrics;
    CHECK(gm.sums.underflow_count == wm.sums.underflow_count);
    CHECK(gm.sums.overflow_count == wm.sums.overflow_count);
    CHECK(gm.sums.saturated_count == wm.sums.saturated_count);
    for (const auto& [a, b] : {std::pair{gm.sums.sum_sq_err, wm.sums.sum_sq_err}, {gm.sums.sum_x_deq, wm.sums.sum_x_deq},
                               {gm.sums.sum_deq_sq, wm.sums.sum_deq_sq}, {gm.sums.sum_sq_underflow, wm.sums.sum_sq_underflow},
                               {gm.mse, wm.mse}, {gm.sqnr_db, wm.sqnr_db}, {gm.cos, wm.cos},
                               {static_cast<double>(gm.scale), static_cast<double>(wm.scale)},
                               {static_cast<double>(gm.scale_inv_min), static_cast<double>(wm.scale_inv_min)},
                               {static_cast<double>(gm.scale_inv_max), static_cast<double>(wm.scale_inv_max)}})
      CHECK(ct::same_float(a, b));
  }
}

std::vector<fp8a::Candidate> three_recipes() {
  std::vector<fp8a::Candidate> cands;
  for (const char* r : {"current", "block", "mxfp8"})
    for (auto o : fp8a::orientations_for(fp8a::parse_recipe(r), fp8a::Role::kActivation))
      cands.push_back({fp8a::parse_recipe(r), fp8a::Fp8Format::kE4M3, fp8a::Role::kActivation, o});
  return cands;
}

// Clears the injected failures when a test ends, however it ends.
struct NoFailuresAfter {
  ~NoFailuresAfter() { fp8a_emu::fail_device_allocations(0); }
};

}  // namespace

TEST_CASE("lower_budget: nothing resident first, then half the chunks, down to one 128 x 128 tile") {
  using fp8a::cuda::CudaBackendBudget;
  using fp8a::cuda::lower_budget;
  CHECK(lower_budget({256 << 10, 3 << 20}, 32 << 10) == CudaBackendBudget{256 << 10, 0});
  CHECK(lower_budget({256 << 10, 0}, 32 << 10) == CudaBackendBudget{128 << 10, 0});
  CHECK(lower_budget({48 << 10, 0}, 32 << 10) == CudaBackendBudget{32 << 10, 0});
  CHECK(lower_budget({32 << 10, 0}, 32 << 10) == CudaBackendBudget{32 << 10, 0});  // the floor
}

TEST_CASE("injected allocation failures: retried with smaller buffers, the results those buffers give") {
  const NoFailuresAfter cleanup;
  constexpr std::size_t KiB = 1024;
  fp8a::cuda::CudaBackendOptions o;
  o.chunk_bytes = 256 * KiB;
  o.resident_bytes = std::size_t{3} << 20;
  o.max_concurrent = 1;
  const auto t = ct::store(ct::make_fill(1024 * 1024, ct::Fill::kNormal, 21), fp8a::DType::kBF16, {1024, 1024});
  const auto cands = three_recipes();
  const std::size_t before = fp8a_emu::device_bytes_in_use();
  {
    const fp8a::cuda::CudaBackend gpu(o);
    CHECK(gpu.keeps_resident(gpu.plan(t.view)));  // 2 MiB of 3
    const std::size_t asked_before = fp8a_emu::device_allocation_sizes().size();
    // The resident copy, then a 256 KiB and a 128 KiB chunk buffer fail: 64 KiB chunks, streamed.
    fp8a_emu::fail_device_allocations(3);
    const fp8a::TensorEvaluation got = gpu.evaluate(cands, t.view);
    CHECK(fp8a_emu::fail_device_allocations(0) == 0);  // all three were used
    CHECK(gpu.budget() == fp8a::cuda::CudaBackendBudget{64 * KiB, 0});
    CHECK(!gpu.keeps_resident(gpu.plan(t.view)));
    CHECK(gpu.plan(t.view).max_chunk_bytes == 64 * KiB);  // 128 x 256 BF16
    const auto asked = fp8a_emu::device_allocation_sizes();
    REQUIRE(asked.size() > asked_before + 3);
    CHECK(asked[asked_before] >= t.view.byte_size());  // the resident copy came first
    // The same evaluation as a backend planned that way from the start, bit for bit; within the
    // documented bound of the CPU backend.
    fp8a::cuda::CudaBackendOptions planned = o;
    planned.chunk_bytes = 64 * KiB;
    planned.resident_bytes = 0;
    check_identical(got, fp8a::cuda::CudaBackend(planned).evaluate(cands, t.view));
    ct::check_same_evaluation(got, fp8a::CpuBackend().evaluate(cands, t.view), cands);
    // Later tensors start from the lowered budget: no more failures, the same results.
    check_identical(gpu.evaluate(cands, t.view), got);
  }
  CHECK(fp8a_emu::device_bytes_in_use() == before);
}

TEST_CASE("device memory taken after the backend started: the chunks halve until the buffers fit") {
  constexpr std::size_t MiB = std::size_t{1} << 20;
  const auto t = ct::store(ct::make_fill(2048 * 5120, ct::Fill::kNormal, 22), fp8a::DType::kBF16, {2048, 5120});
  const auto cands = three_recipes();
  REQUIRE(fp8a_emu::device_bytes_in_use() == 0);
  fp8a::TensorEvaluation got;
  {
    const fp8a::cuda::CudaBackend gpu;  // 16 GiB free now: 64 MiB chunks, 2 GiB resident
    REQUIRE(gpu.budget() == fp8a::cuda::CudaBackendBudget{64 * MiB, 2048 * MiB});
    const DeviceMemory limit(16 * MiB);  // then another job leaves 16 MiB of it
    fp8a_emu::reset_device_bytes_peak();
    // 20 MiB resident fails; two chunk buffers of 20, 16 and 8 MiB (+ 4 MiB of partial records)
    // fail; 4 MiB chunks fit.
    got = gpu.evaluate(cands, t.view);
    CHECK(gpu.budget() == fp8a::cuda::CudaBackendBudget{4 * MiB, 0});
    CHECK(fp8a_emu::device_bytes_peak() <= 16 * MiB);
  }
  fp8a::cuda::CudaBackendOptions planned;
  planned.chunk_bytes = 4 * MiB;
  planned.resident_bytes = 0;
  check_identical(got, fp8a::cuda::CudaBackend(planned).evaluate(cands, t.view));
  ct::check_same_evaluation(got, fp8a::CpuBackend().evaluate(cands, t.view), cands);
}

TEST_CASE("no memory even for 128 x 128 chunks: fp8a.cuda.803, and the backend still works after") {
  const NoFailuresAfter cleanup;
  fp8a::cuda::CudaBackendOptions o;
  o.chunk_bytes = 256 << 10;
  o.resident_bytes = 0;
  o.max_concurrent = 1;
  const auto t = ct::store(ct::make_fill(512 * 512, ct::Fill::kNormal, 23), fp8a::DType::kBF16, {512, 512});
  const auto cands = three_recipes();
  const fp8a::cuda::CudaBackend gpu(o);
  fp8a_emu::fail_device_allocations(1000);
  CHECK_THROWS_WITH_AS(gpu.evaluate(cands, t.view),
                       doctest::Contains("[fp8a.cuda.803] CUDA device 0 is out of memory for the CUDA backend's "
                                         "buffers of a [512, 512] BF16 tensor, even with chunks of 32 KiB (128x128 "
                                         "elements at the least) and nothing kept resident: an allocation of 32 KiB "
                                         "failed with "),
                       fp8a::Error);
  CHECK(fp8a_emu::fail_device_allocations(0) > 0);
  CHECK(gpu.budget() == fp8a::cuda::CudaBackendBudget{32 << 10, 0});
  ct::check_same_evaluation(gpu.evaluate(cands, t.view), fp8a::CpuBackend().evaluate(cands, t.view), cands);
}

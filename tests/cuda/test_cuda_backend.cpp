// CudaBackend against CpuBackend (ctest label "cuda"; exits 77, skipped, without a device): every
// default recipe in every orientation for activations and weights, E4M3 and E5M2, delayed scaling
// with and without a replayed scale, over odd shapes, fills and the three input types; chunked
// streaming (resident and streamed twice), wide tensors cut into column ranges, tensors already on
// the device, determinism and concurrent calls.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <functional>
#include <numeric>
#include <thread>
#include <vector>

#include "cuda/cuda_backend.hpp"
#include "cuda/device_info.hpp"
#include "tests/cuda/gpu_test_main.hpp"
#include "engine/cpu_backend.hpp"
#include "tests/cuda/backend_compare.hpp"

namespace {

// On the host emulation (tests/cuda_emu, ctest test_cuda_backend_emu) every thread block costs far
// more than its elements, so the emulated run uses smaller tensors with the same properties
// (rows wider than a chunk, more than four chunks, column ranges) and the F16/F32 loaders with
// two fills each (BF16 with all of them); on a GPU everything runs as written.
#if defined(FP8A_CUDA_EMULATION)
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

using fp8a::cuda::CudaBackend;
using fp8a::cuda::CudaBackendOptions;
namespace ct = fp8a::cuda_test;

// Small chunks so that the test tensors are cut into many: a 128 x 128 F32 tile is 64 KiB.
CudaBackendOptions small_chunks(bool resident) {
  CudaBackendOptions o;
  o.chunk_bytes = 48 << 10;
  o.resident_bytes = resident ? std::size_t{1} << 30 : 0;
  return o;
}

std::size_t numel(const std::vector<std::int64_t>& shape) {
  return static_cast<std::size_t>(std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>()));
}

// Runs every candidate set of one tensor on the CPU and on each CUDA backend.
void compare_all(const std::vector<const CudaBackend*>& gpus, const ct::StoredTensor& t, const std::string& what) {
  const float amax = fp8a::compute_tensor_stats(t.view).amax;
  for (auto role : {fp8a::Role::kActivation, fp8a::Role::kWeight}) {
    for (auto fmt : {fp8a::Fp8Format::kE4M3, fp8a::Fp8Format::kE5M2}) {
      const auto cands = ct::all_candidates(role, fmt, amax);
      const auto want = fp8a::CpuBackend().evaluate(cands, t.view);
      for (std::size_t g = 0; g < gpus.size(); ++g) {
        INFO(what << " role " << std::string(fp8a::role_name(role)) << " "
                  << std::string(fp8a::kFp8Traits[static_cast<int>(fmt)].name)
                  << " backend config " << g << " (" << gpus[g]->plan(t.view).chunks.size() << " chunks, "
                  << (gpus[g]->keeps_resident(gpus[g]->plan(t.view)) ? "resident" : "streamed") << ")");
        ct::check_same_evaluation(gpus[g]->evaluate(cands, t.view), want, cands);
      }
    }
  }
}

}  // namespace

TEST_CASE("CudaBackend == CpuBackend over shapes, fills, input types, recipes, roles and formats") {
  const CudaBackend whole;                              // default: one chunk each, resident
  const CudaBackend streamed(small_chunks(false));      // many chunks, streamed twice
  const CudaBackend resident(small_chunks(true));       // many chunks, kept between the passes
  // {3, 70001} (30001 emulated): rows wider than a 48 KiB chunk in every input type.
  const std::vector<std::vector<std::int64_t>> shapes = {{1, 16},     {5, 160},   {217, 256}, {5, 4, 3, 160},
                                                         {130, 300}, {3, kEmulated ? 30001 : 70001}, {16}};
  std::uint32_t seed = 100;
  for (const auto& shape : shapes) {
    for (auto fill : ct::kFills) {
      const auto x = ct::make_fill(numel(shape), fill, seed++);
      for (auto dtype : {fp8a::DType::kBF16, fp8a::DType::kF16, fp8a::DType::kF32}) {
        if (kEmulated && dtype != fp8a::DType::kBF16 && fill != ct::Fill::kNormal && fill != ct::Fill::kNonFinite)
          continue;
        const auto t = ct::store(x, dtype, shape);
        const std::string what = "shape " + std::to_string(t.view.rows) + "x" + std::to_string(t.view.cols) +
                                 " fill " + ct::fill_name(fill) + " dtype " + fp8a::dtype_name(dtype);
        compare_all({&whole, &streamed, &resident}, t, what);
      }
    }
  }
}

TEST_CASE("NVFP4 candidates are evaluated on the CPU beside the device's, in the caller's order") {
  // No device kernels for NVFP4 yet: CudaBackend hands its candidates to CpuBackend.
  const CudaBackend whole;
  const auto x = ct::make_fill(64 * 160, ct::Fill::kNormal, 7);
  const auto t = ct::store(x, fp8a::DType::kBF16, {64, 160});
  const fp8a::Recipe nvfp4 = fp8a::parse_recipe("nvfp4"), current = fp8a::parse_recipe("current");
  const std::vector<fp8a::Candidate> cands = {
      {nvfp4, fp8a::Fp8Format::kE4M3, fp8a::Role::kGradient, fp8a::Orientation::kColumnwise},
      {current, fp8a::Fp8Format::kE4M3, fp8a::Role::kActivation, fp8a::Orientation::kRowwise},
      {nvfp4, fp8a::Fp8Format::kE4M3, fp8a::Role::kWeight, fp8a::Orientation::kRowwise}};
  ct::check_same_evaluation(whole.evaluate(cands, t.view), fp8a::CpuBackend().evaluate(cands, t.view), cands);
}

TEST_CASE("tensors larger than one chunk: row bands and column ranges, resident and streamed") {
  CudaBackendOptions o;
  o.chunk_bytes = kEmulated ? 128 << 10 : 1 << 20;  // BF16 rows of 100000 are 195 KiB
  const CudaBackend resident(o);
  o.resident_bytes = 0;
  const CudaBackend streamed(o);
  const std::vector<std::vector<std::int64_t>> shapes =
      kEmulated ? std::vector<std::vector<std::int64_t>>{{531, 3000}, {20, 100000}}
                : std::vector<std::vector<std::int64_t>>{{2125, 3000}, {300, 100000}};
  for (const std::vector<std::int64_t>& shape : shapes) {
    const auto t = ct::store(ct::make_fill(numel(shape), ct::Fill::kNormal, 7), fp8a::DType::kBF16, shape);
    const auto plan = resident.plan(t.view);
    CHECK(plan.chunks.size() > 4);
    CHECK(resident.keeps_resident(plan));
    CHECK(!streamed.keeps_resident(plan));
    if (shape[1] == 100000) CHECK(plan.chunks[0].cols < shape[1]);  // column ranges
    compare_all({&resident, &streamed}, t, "large " + std::to_string(shape[0]) + "x" + std::to_string(shape[1]));
  }
}

TEST_CASE("results are bit-identical from run to run and between concurrent calls") {
  const CudaBackend gpu(small_chunks(false));
  std::vector<ct::StoredTensor> tensors;
  for (int i = 0; i < 6; ++i)
    tensors.push_back(ct::store(ct::make_fill(217 * 256, ct::Fill::kWide, 40 + i), fp8a::DType::kBF16, {217, 256}));
  const auto cands = ct::all_candidates(fp8a::Role::kActivation, fp8a::Fp8Format::kE4M3, 1.0f);
  std::vector<fp8a::TensorEvaluation> serial;
  for (const auto& t : tensors) serial.push_back(gpu.evaluate(cands, t.view));
  std::vector<fp8a::TensorEvaluation> parallel(tensors.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    threads.emplace_back([&, i] { parallel[i] = gpu.evaluate(cands, tensors[i].view); });
  for (auto& th : threads) th.join();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    CHECK(parallel[i].stats.sum_sq == serial[i].stats.sum_sq);
    for (std::size_t j = 0; j < cands.size(); ++j) {
      const auto& a = parallel[i].results[j].metrics.sums;
      const auto& b = serial[i].results[j].metrics.sums;
      CHECK(a.sum_sq_err == b.sum_sq_err);
      CHECK(a.sum_x_deq == b.sum_x_deq);
      CHECK(a.sum_deq_sq == b.sum_deq_sq);
      CHECK(a.sum_sq_underflow == b.sum_sq_underflow);
      CHECK(a.underflow_count == b.underflow_count);
    }
  }
}

TEST_CASE("evaluate_device on a resident tensor equals evaluate on the same tensor in host memory") {
  const CudaBackend gpu;
  for (auto dtype : {fp8a::DType::kBF16, fp8a::DType::kF16, fp8a::DType::kF32}) {
    const auto t = ct::store(ct::make_fill(130 * 300, ct::Fill::kNonFinite, 9), dtype, {130, 300});
    void* d = nullptr;
    REQUIRE(cudaMalloc(&d, t.bytes.size()) == cudaSuccess);
    REQUIRE(cudaMemcpy(d, t.bytes.data(), t.bytes.size(), cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the data complete before other streams read it
    const auto cands = ct::all_candidates(fp8a::Role::kWeight, fp8a::Fp8Format::kE4M3, 1.0f);
    const auto on_device = gpu.evaluate_device(cands, {d, dtype, 130, 300});
    const auto from_host = gpu.evaluate(cands, t.view);  // one chunk too: the same grid and order
    // Data that is element- but not 16-byte aligned is refused before any kernel reads it with
    // 16-byte loads (which would fault on a GPU, and fail the launch on the emulation).
    const std::size_t esize = t.bytes.size() / (130 * 300);
    CHECK_THROWS_WITH(gpu.evaluate_device(cands, {static_cast<char*>(d) + esize, dtype, 129, 300}),
                      doctest::Contains("16-byte aligned"));
    cudaFree(d);
    CHECK(on_device.stats.sum_sq == from_host.stats.sum_sq);
    for (std::size_t j = 0; j < cands.size(); ++j) {
      INFO("candidate " << j << " " << cands[j].recipe.spec());
      // NaN when the candidate does not apply (a delayed one without a scale): equal as NaN.
      CHECK(ct::same_float(on_device.results[j].metrics.sums.sum_sq_err, from_host.results[j].metrics.sums.sum_sq_err));
      CHECK(on_device.results[j].metrics.sums.overflow_count == from_host.results[j].metrics.sums.overflow_count);
    }
    ct::check_same_evaluation(on_device, fp8a::CpuBackend().evaluate(cands, t.view), cands);
  }
}

TEST_CASE("no candidates: the statistics pass alone (the engine's amax pass over rank shards)") {
  const CudaBackend whole;
  const CudaBackend streamed(small_chunks(false));
  const std::vector<fp8a::Candidate> none;
  for (auto fill : ct::kFills) {
    const auto t = ct::store(ct::make_fill(217 * 256, fill, 60), fp8a::DType::kBF16, {217, 256});
    const auto want = fp8a::CpuBackend().evaluate(none, t.view);
    CHECK(want.results.empty());
    for (const CudaBackend* gpu : {&whole, &streamed}) {
      INFO("fill " << ct::fill_name(fill));
      const auto got = gpu->evaluate(none, t.view);
      CHECK(got.results.empty());
      ct::check_same_evaluation(got, want, none);
    }
  }
}

int main(int argc, char** argv) { return fp8a::cuda_test::run_gpu_tests("test_cuda_backend", argc, argv); }

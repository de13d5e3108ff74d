// Throughput of the CUDA metric pass on a BF16 tensor already in device memory, with the
// device-to-device copy bandwidth measured in the same run as the floor.
//
//   bench_cuda_metrics [--elements 268435456] [--candidates 1,8,32] [--repeat 5] [--recipes all]
//
// The tensor is N(0,1) with 16 outliers x200 (as bench/make_bench_tensor.py), generated on the
// device. Time covers the whole CudaBackend::evaluate_device call: the statistics pass, the
// host-side scale resolution, the metric pass for every candidate and the reduction of the
// partial records. Candidates cycle through the same eight (recipe, FP8 type) pairs as
// bench/peer_torch.py and tests/peers/peer_numpy.py, so the rows are comparable.
// --recipes all: every default recipe in every orientation of an activation (E4M3), together and
// each alone.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/device_info.hpp"
#include "cuda/launch.cuh"
#include "core/error.hpp"
#include "core/fp8_codec.hpp"
#include "core/scale.hpp"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_cuda_metrics: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__device__ std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void fill_normal_bf16(std::uint16_t* x, std::int64_t n, std::int64_t outlier_stride) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const std::uint64_t h = splitmix64(static_cast<std::uint64_t>(i));
    const float u1 = (static_cast<float>(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
    const float u2 = (static_cast<float>(h & 0xFFFFFFu) + 0.5f) * (1.0f / 16777216.0f);
    float g = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (i % outlier_stride == 7) g *= 200.0f;
    x[i] = fp8a::float_to_bf16(g);
  }
}

using fp8a::bench::candidate_cycle;
using fp8a::bench::parse_ks;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct BenchArgs {
  long long elements = 268435456;
  std::string ks_text = "1,8,32", recipes_text;
  int repeat = 5;
};

// False: a bad argument (usage printed).
bool parse_bench_args(int argc, char** argv, BenchArgs* b) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--elements") b->elements = std::atoll(argv[i + 1]);
    else if (a == "--candidates") b->ks_text = argv[i + 1];
    else if (a == "--repeat") b->repeat = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--recipes") b->recipes_text = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--elements N] [--candidates 1,8,32] [--repeat 5] [--recipes all]\n", argv[0]);
      return false;
    }
  }
  return true;
}

// The floor: a device-to-device copy of the tensor (reads and writes `bytes` each), timed with
// events; returns one read of the tensor at that rate, in seconds.
double copy_floor(const std::uint16_t* x, std::size_t bytes, int repeat) {
  void* copy = nullptr;
  check(cudaMalloc(&copy, bytes), "cudaMalloc copy");
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  check(cudaMemcpy(copy, x, bytes, cudaMemcpyDeviceToDevice), "warm-up copy");
  std::vector<double> copy_s;
  for (int r = 0; r < std::max(repeat, 5); ++r) {
    check(cudaEventRecord(e0), "record");
    check(cudaMemcpyAsync(copy, x, bytes, cudaMemcpyDeviceToDevice), "copy");
    check(cudaEventRecord(e1), "record");
    check(cudaEventSynchronize(e1), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    copy_s.push_back(ms / 1e3);
  }
  const double t_copy = median(copy_s);
  const double bw = 2.0 * static_cast<double>(bytes) / t_copy;  // read + write bytes per second
  const double read_floor = static_cast<double>(bytes) / bw;     // one read of the tensor at that rate
  std::printf("d2d_copy bytes=%zu median_s=%.6f bandwidth_GB_per_s=%.1f (read+write) read_once_floor_s=%.6f\n", bytes,
              t_copy, bw / 1e9, read_floor);
  check(cudaFree(copy), "cudaFree");
  check(cudaEventDestroy(e0), "event");
  check(cudaEventDestroy(e1), "event");
  return read_floor;
}

// The median time of evaluate_device over `repeat` runs after a warm-up; the last result in *last.
double time_evaluation(const fp8a::cuda::CudaBackend& backend, const fp8a::cuda::DeviceMatrix& m,
                       const std::vector<fp8a::Candidate>& cands, int repeat, fp8a::TensorEvaluation* last) {
  *last = backend.evaluate_device(cands, m);  // warm-up
  std::vector<double> times;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    *last = backend.evaluate_device(cands, m);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(times);
}

// --recipes: every recipe in every orientation of an activation (E4M3) together, then each alone,
// on the tensor as a [16384, n/16384] matrix so the blocked recipes see rows (MXFP8 needs 2-D).
void time_recipes(const fp8a::cuda::CudaBackend& backend, std::uint16_t* x, const BenchArgs& a, float amax,
                  double stats_only) {
  const auto recipes = fp8a::parse_recipe_list(a.recipes_text == "all" ? fp8a::default_recipe_list() : a.recipes_text);
  std::vector<fp8a::Candidate> all;
  for (const auto& r : recipes)
    for (auto o : fp8a::orientations_for(r, fp8a::Role::kActivation)) {
      fp8a::Candidate c{r, fp8a::Fp8Format::kE4M3, fp8a::Role::kActivation, o};
      if (r.kind == fp8a::RecipeKind::kPerTensorDelayed) c.given_scale = fp8a::scale_from_amax(amax, 448.0f, false, 0.0f);
      all.push_back(c);
    }
  const fp8a::cuda::DeviceMatrix m2{x, fp8a::DType::kBF16, 16384, a.elements / 16384};
  fp8a::TensorEvaluation eval;
  const double total = time_evaluation(backend, m2, all, a.repeat, &eval);
  std::printf("fp8a_cuda recipes=all candidates=%zu shape=16384x%lld median_s=%.6f elements_x_candidates_per_s=%.4g\n",
              all.size(), a.elements / 16384, total,
              static_cast<double>(m2.numel()) * static_cast<double>(all.size()) / total);
  for (const auto& c : all) {
    const double s1 = time_evaluation(backend, m2, {c}, a.repeat, &eval);
    std::printf("  %-45s %-10s alone %.6f s (%.6f s over the statistics pass)\n", c.recipe.spec().c_str(),
                fp8a::orientation_name(c.orientation), s1, s1 - stats_only);
  }
}

// --candidates: K candidates of the eight-pair cycle at a time, with the first eight's metrics.
void time_candidate_counts(const fp8a::cuda::CudaBackend& backend, const fp8a::cuda::DeviceMatrix& m,
                           const BenchArgs& a, double read_floor) {
  const auto n = static_cast<double>(a.elements);
  fp8a::TensorEvaluation eval;
  for (int k : parse_ks(a.ks_text)) {
    const auto cands = candidate_cycle(k);
    const double t = time_evaluation(backend, m, cands, a.repeat, &eval);
    std::printf("fp8a_cuda K=%d elements=%lld median_s=%.6f elements_x_candidates_per_s=%.4g (%.2fx the read-once floor)\n",
                k, a.elements, t, n * k / t, t / read_floor);
    for (std::size_t j = 0; j < cands.size() && j < 8; ++j) {
      const auto& mm = eval.results[j].metrics;
      std::printf("  %s,%s scale=%.9g mse=%.17g cos=%.17g underflow_pct=%.17g overflow_pct=%.17g\n",
                  cands[j].recipe.spec().c_str(), fp8a::kFp8Traits[static_cast<int>(cands[j].format)].name, mm.scale,
                  mm.mse, mm.cos, mm.underflow_pct, mm.overflow_pct);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  BenchArgs a;
  if (!parse_bench_args(argc, argv, &a)) return 2;
  if (fp8a::cuda::device_count() == 0) {
    std::printf("bench_cuda_metrics: SKIPPED: %s\n", fp8a::cuda::describe_device0().c_str());
    return 77;
  }
  try {
    const std::size_t bytes = static_cast<std::size_t>(a.elements) * 2;
    std::uint16_t* x = nullptr;
    check(cudaMalloc(&x, bytes), "cudaMalloc tensor");
    fp8a::cuda::launch_kernel(fill_normal_bf16, 1024, 256, nullptr, x, static_cast<std::int64_t>(a.elements),
                              std::max<std::int64_t>(a.elements / 16, 1));
    check(cudaGetLastError(), "fill");
    check(cudaDeviceSynchronize(), "fill");
    std::printf("# device %s, BF16 tensor of %lld elements (%.1f MiB), device-resident\n",
                fp8a::cuda::describe_device0().c_str(), a.elements, static_cast<double>(bytes) / 1048576.0);
    const double read_floor = copy_floor(x, bytes, a.repeat);
    const fp8a::cuda::CudaBackend backend;
    const fp8a::cuda::DeviceMatrix m{x, fp8a::DType::kBF16, 1, a.elements};
    fp8a::TensorEvaluation eval;
    const double stats_only = time_evaluation(backend, m, {}, a.repeat, &eval);
    std::printf("fp8a_cuda statistics pass alone: median_s=%.6f (%.2fx the read-once floor)\n", stats_only,
                stats_only / read_floor);
    if (!a.recipes_text.empty()) time_recipes(backend, x, a, eval.stats.amax, stats_only);
    else time_candidate_counts(backend, m, a, read_floor);
    check(cudaFree(x), "cudaFree");
  } catch (const fp8a::Error& e) {
    std::fprintf(stderr, "bench_cuda_metrics: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}

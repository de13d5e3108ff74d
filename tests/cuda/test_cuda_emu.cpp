// The host emulation of tests/cuda_emu (label cuda-emu): its warp operations against their CUDA
// definitions written out here, its block barrier, and the CUDA rules it enforces (a barrier or a
// full-mask warp operation that not every thread joins, pointers that are not device memory,
// misaligned or out-of-bounds loads, copies in the wrong direction) as launch and call errors.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda/launch.cuh"

namespace {

using fp8a::cuda::launch_kernel;

constexpr int kThreads = 256;

__global__ void shuffles_kernel(unsigned* xor_out, unsigned* down_out, unsigned* max_out, int lane_mask, int delta) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned v = t * 2654435761u;  // distinct, unordered values
  xor_out[t] = __shfl_xor_sync(0xFFFFFFFFu, v, lane_mask);
  down_out[t] = __shfl_down_sync(0xFFFFFFFFu, v, static_cast<unsigned>(delta));
  max_out[t] = __reduce_max_sync(0xFFFFFFFFu, v);
}

// Thread t writes t to shared memory; after the barrier every thread reads its mirror's value.
__global__ void barrier_kernel(unsigned* out) {
  __shared__ unsigned buf[kThreads];
  buf[threadIdx.x] = blockIdx.x * 1000u + threadIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

// Two barriers (the code after each differs, so the compiler cannot merge the two calls).
__global__ void divergent_barrier_kernel(unsigned* out) {
  if (threadIdx.x < 64) {
    __syncthreads();
    out[threadIdx.x] = 2;
  } else {
    out[threadIdx.x] = 1;
    __syncthreads();
    out[threadIdx.x] += 3;
  }
}

__global__ void partial_barrier_kernel(unsigned* out) {
  if (threadIdx.x % 2 == 0) __syncthreads();  // odd threads never arrive, yet stay live below
  if (threadIdx.x % 2 == 1) out[0] = __shfl_xor_sync(0xFFFFFFFFu, 1u, 1);
}

__global__ void exited_lanes_kernel(unsigned* out) {
  if (threadIdx.x % 32 == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xFFFFFFFFu, threadIdx.x, 1);
}

__global__ void exit_before_barrier_kernel(unsigned* out) {
  if (threadIdx.x >= 128) return;  // exited threads do not hold up __syncthreads()
  __syncthreads();
  out[threadIdx.x] = threadIdx.x + 1;
}

// One 16-byte load from base + offset: its second word.
__global__ void vector_load_kernel(const unsigned* base, int offset_bytes, unsigned* out) {
  const auto* p = reinterpret_cast<const uint4*>(reinterpret_cast<const unsigned char*>(base) + offset_bytes);
  out[0] = __ldg(p).y;
}

template <class T>
T* device_array(std::size_t n) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> to_host(const T* d, std::size_t n) {
  std::vector<T> h(n);
  REQUIRE(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return h;
}

}  // namespace

TEST_CASE("warp shuffles and reductions follow CUDA's definitions") {
  constexpr int kBlocks = 3, n = kBlocks * kThreads;
  unsigned* x = device_array<unsigned>(n);
  unsigned* d = device_array<unsigned>(n);
  unsigned* m = device_array<unsigned>(n);
  for (const auto& [lane_mask, delta] : {std::pair{1, 1}, {16, 16}, {7, 3}, {31, 31}}) {
    launch_kernel(shuffles_kernel, kBlocks, kThreads, nullptr, x, d, m, lane_mask, delta);
    REQUIRE(cudaGetLastError() == cudaSuccess);
    const auto hx = to_host(x, n), hd = to_host(d, n), hm = to_host(m, n);
    for (unsigned t = 0; t < static_cast<unsigned>(n); ++t) {
      const unsigned lane = t % 32, warp0 = t - lane;
      const auto value = [](unsigned u) { return u * 2654435761u; };
      INFO("thread " << t << " lane mask " << lane_mask << " delta " << delta);
      CHECK(hx[t] == value(warp0 + (lane ^ static_cast<unsigned>(lane_mask))));
      CHECK(hd[t] == value(lane + delta < 32 ? t + delta : t));  // past the warp: its own value
      unsigned want = 0;
      for (unsigned l = 0; l < 32; ++l) want = std::max(want, value(warp0 + l));
      CHECK(hm[t] == want);
    }
  }
  cudaFree(x);
  cudaFree(d);
  cudaFree(m);
}

TEST_CASE("__syncthreads: shared memory written before it is read after it, per block") {
  constexpr int kBlocks = 4;
  unsigned* out = device_array<unsigned>(kBlocks * kThreads);
  launch_kernel(barrier_kernel, kBlocks, kThreads, nullptr, out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  const auto h = to_host(out, kBlocks * kThreads);
  for (unsigned b = 0; b < kBlocks; ++b)
    for (unsigned t = 0; t < kThreads; ++t) CHECK(h[b * kThreads + t] == b * 1000u + (kThreads - 1 - t));

  launch_kernel(exit_before_barrier_kernel, 1, kThreads, nullptr, out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  CHECK(to_host(out, 1)[0] == 1u);
  cudaFree(out);
}

TEST_CASE("what would hang or be undefined on a GPU fails the launch") {
  unsigned* out = device_array<unsigned>(kThreads);
  launch_kernel(divergent_barrier_kernel, 2, kThreads, nullptr, out);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  launch_kernel(partial_barrier_kernel, 1, kThreads, nullptr, out);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  launch_kernel(exited_lanes_kernel, 1, kThreads, nullptr, out);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  // A GPU faults on a 16-byte load that is not 16-byte aligned; 4-byte loads need 4.
  std::vector<unsigned> words(8);
  for (unsigned i = 0; i < 8; ++i) words[i] = 100 + i;
  unsigned* d_words = device_array<unsigned>(8);
  REQUIRE(cudaMemcpy(d_words, words.data(), 8 * sizeof(unsigned), cudaMemcpyHostToDevice) == cudaSuccess);
  launch_kernel(vector_load_kernel, 1, 32, nullptr, d_words, 16, out);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(to_host(out, 1)[0] == 105u);
  for (int offset : {4, 8, 12}) {
    CAPTURE(offset);
    launch_kernel(vector_load_kernel, 1, 32, nullptr, d_words, offset, out);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  }
  // Past the end of the 32-byte allocation (on a GPU: another buffer's data, or a fault).
  for (int offset : {32, 48, -16}) {
    CAPTURE(offset);
    launch_kernel(vector_load_kernel, 1, 32, nullptr, d_words, offset, out);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  }
  launch_kernel(vector_load_kernel, 1, 32, nullptr, d_words, 0, out);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(to_host(out, 1)[0] == 101u);
  CHECK(cudaFree(d_words) == cudaSuccess);
  // The emulator is usable again after a failed launch.
  launch_kernel(barrier_kernel, 1, kThreads, nullptr, out);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(to_host(out, 1)[0] == kThreads - 1u);

  std::vector<unsigned> host(kThreads);
  launch_kernel(barrier_kernel, 1, kThreads, nullptr, host.data());  // host memory into a kernel
  CHECK(cudaGetLastError() == cudaErrorInvalidDevicePointer);
  launch_kernel(barrier_kernel, 0, kThreads, nullptr, out);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  launch_kernel(barrier_kernel, 1, 2048, nullptr, out);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CHECK(cudaGetLastError() == cudaSuccess);  // read once, then cleared

  CHECK(cudaMemcpy(host.data(), out, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidMemcpyDirection);
  CHECK(cudaMemcpy(out, host.data(), 4, cudaMemcpyDeviceToHost) == cudaErrorInvalidMemcpyDirection);
  CHECK(cudaMemcpy(out, host.data(), (kThreads + 1) * 4, cudaMemcpyHostToDevice) == cudaErrorInvalidMemcpyDirection);
  CHECK(cudaMemcpy(out, host.data(), kThreads * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaFree(host.data()) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaFree(out) == cudaSuccess);
}

TEST_CASE("work on a created stream runs when the host waits for it, as late as CUDA allows") {
  constexpr int n = kThreads;
  unsigned* d = device_array<unsigned>(n);
  unsigned* out = device_array<unsigned>(n);
  unsigned* pinned = nullptr;
  REQUIRE(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * sizeof(unsigned)) == cudaSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);
  const std::vector<unsigned> zeros(n, 0u);
  REQUIRE(cudaMemcpy(d, zeros.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice) == cudaSuccess);

  // A copy from pinned memory reads it when it runs: refilling the buffer before waiting (a race
  // on a GPU) gives the device the new values.
  for (int i = 0; i < n; ++i) pinned[i] = 1;
  REQUIRE(cudaMemcpyAsync(d, pinned, n * sizeof(unsigned), cudaMemcpyHostToDevice, s) == cudaSuccess);
  CHECK(to_host(d, n)[0] == 0u);  // the default stream does not wait for a non-blocking one
  for (int i = 0; i < n; ++i) pinned[i] = 2;
  REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(to_host(d, n)[0] == 2u);

  // From pageable memory CUDA stages the source before returning: the values of the call.
  std::vector<unsigned> pageable(n, 3u);
  REQUIRE(cudaMemcpyAsync(d, pageable.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice, s) == cudaSuccess);
  pageable.assign(n, 4u);
  // An event synchronises the work before its record, not after: the kernel stays queued.
  REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
  launch_kernel(barrier_kernel, 1, kThreads, s, out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaEventSynchronize(e) == cudaSuccess);
  CHECK(to_host(d, n)[0] == 3u);
  REQUIRE(cudaMemcpy(out, zeros.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(to_host(out, n)[0] == 0u);
  // cudaFree waits for the device: the queued kernel runs (writing out) before d is freed.
  REQUIRE(cudaFree(d) == cudaSuccess);
  CHECK(to_host(out, n)[0] == kThreads - 1u);

  // A kernel that fails reports it where the host waits.
  launch_kernel(divergent_barrier_kernel, 2, kThreads, s, out);
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK(cudaStreamSynchronize(s) == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);

  CHECK(cudaEventDestroy(e) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
  CHECK(cudaFree(out) == cudaSuccess);
}

// Host emulation of the part of the CUDA runtime and kernel language that fp8-advisor's CUDA stage
// uses (tests/cuda_emu/README.md). Only targets built for the emulation (FP8A_CUDA_EMULATION) see this
// file, in place of the toolkit's <cuda_runtime.h>; the kernels and the backend are compiled
// unchanged by the host compiler and run with these semantics:
//   - one emulated device (sm_90 unless set: fp8a_emu::set_compute_capability); device memory is host memory, allocations are tracked so that
//     a copy in the wrong direction, or a kernel given a pointer that is not device memory, fails;
//   - work on a created stream is deferred until the host waits for it (cudaStreamSynchronize,
//     cudaEventSynchronize, cudaDeviceSynchronize, cudaFree...), so races between the host and the
//     GPU give wrong results here too; the legacy default stream (nullptr) runs work at once;
//   - a launch runs its blocks one after another, each block's threads as fibers on the calling
//     host thread, switching only at __syncthreads() and warp operations. A barrier that not every
//     live thread of the block reaches, a warp operation that not every lane of the warp joins (or
//     joins with another operation), is reported as a launch error, as on a GPU it would hang or be
//     undefined;
//   - __shared__ variables are thread_local: shared by the block's fibers, separate per host thread;
//   - __ldg from an address not aligned to the type's size, or not inside one live cudaMalloc
//     allocation, fails the launch, as it faults (or reads another buffer) on a GPU;
//   - no FMA contraction and no device intrinsics: code under __CUDA_ARCH__ takes its host path.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#define FP8A_CUDA_EMULATION 1

// ---- kernel-language keywords -----------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local

// ---- runtime types ----------------------------------------------------------------------------
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorLaunchFailure = 719,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
  cudaDevAttrMaxGridDimX = 5,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
};

struct CUstream_st;
struct CUevent_st;
typedef CUstream_st* cudaStream_t;
typedef CUevent_st* cudaEvent_t;

#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02

struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  int major;
  int minor;
  int multiProcessorCount;
  int warpSize;
  int maxThreadsPerBlock;
  int maxGridSize[3];
};

struct uint3 { unsigned int x, y, z; };
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};
struct alignas(16) uint4 { unsigned int x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }

// ---- runtime API (tests/cuda_emu/runtime.cpp) ---------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaMalloc(void** ptr, std::size_t bytes);
cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);  // host time between the records

template <class T>
cudaError_t cudaMalloc(T** ptr, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}

// ---- the emulator (tests/cuda_emu/fibers.cpp) ---------------------------------------------------
namespace fp8a_emu {

// The CUDA thread a fiber runs.
struct ThreadState {
  uint3 thread_idx, block_idx, block_dim, grid_dim;
};
const ThreadState& current();

// A kernel argument as launch() checks it: pointers must be device memory (or null).
struct ArgCheck {
  const void* pointer;
  bool is_pointer;
};
template <class T>
ArgCheck pointer_arg(const T& arg) {
  if constexpr (std::is_pointer_v<T>)
    return {static_cast<const void*>(arg), true};
  else
    return {nullptr, false};
}

// Runs `kernel` as blocks x threads CUDA threads (a 1-D grid); failures become the last error,
// and the one found at the launch itself is returned (cudaLaunchKernel below).
cudaError_t launch(int blocks, int threads, cudaStream_t stream, std::initializer_list<ArgCheck> args,
                   const std::function<void()>& kernel);

template <class... Params, std::size_t... I>
cudaError_t launch_kernel_args(void (*kernel)(Params...), dim3 grid, dim3 block, void** args,
                               cudaStream_t stream, std::index_sequence<I...>) {
  // 2-D and 3-D grids and blocks are not emulated: refused as an invalid configuration.
  if (grid.y != 1 || grid.z != 1 || block.y != 1 || block.z != 1) return launch(0, 0, stream, {}, {});
  // The arguments are copied at the launch, as CUDA does.
  const std::tuple<std::decay_t<Params>...> values(*static_cast<std::decay_t<Params>*>(args[I])...);
  return launch(static_cast<int>(grid.x), static_cast<int>(block.x), stream, {pointer_arg(std::get<I>(values))...},
                [=] { kernel(std::get<I>(values)...); });
}

// Device memory (cudaMalloc) the emulated device holds now, and the most it has held since the
// last reset: what a test of the backend's memory bound reads.
std::size_t device_bytes_in_use();
std::size_t device_bytes_peak();
void reset_device_bytes_peak();
// The emulated device's memory (16 GiB unless set): cudaMalloc past it fails with
// cudaErrorMemoryAllocation, cudaMemGetInfo reports it less what is in use.
void set_device_memory(std::size_t total_bytes);
// An injected failure: the next n cudaMalloc calls fail with cudaErrorMemoryAllocation, whatever
// the memory free (as on a GPU another process just filled), also set for a whole process by the
// environment variable FP8A_CUDA_EMULATION_FAIL_ALLOCATIONS=<n>. Returns how many of an earlier
// call's failures were left.
int fail_device_allocations(int n);
// Device allocations (cudaMalloc) asked for so far, failed or not, and their sizes in bytes, in
// order: what a test reads to see which buffers a retry asked for.
std::vector<std::size_t> device_allocation_sizes();
// The emulated device's compute capability, 10 * major + minor: 90 (H100/H200) unless set here or
// by the environment variable FP8A_CUDA_EMULATION_SM (e.g. 100 for a B200, whose cuBLASLt takes
// MXFP8). The kernels do not depend on it; cudaDeviceGetAttribute and the emulated cuBLASLt do.
void set_compute_capability(int sm);
int compute_capability();
// The emulated device's maximum grid size (cudaDevAttrMaxGridDimX, maxGridSize[0]): 8 blocks, so
// that CudaBackend, which caps its grids at the device's maximum, launches small grids here: an
// emulated block costs far more than its elements (about 45 ns per thread per barrier or warp
// operation), and with small grids the kernels' grid-stride loops go round many times. Reported,
// not enforced: a larger launch runs, slowly (the benchmark's fill kernel launches 1024 blocks).
inline constexpr int kMaxGridDimX = 8;

// __syncthreads(); a warp operation over the 32 lanes of the caller's warp: every lane hands in
// its value, gets back the one `op` picks for it.
enum class WarpOp { kShflXor, kShflDown, kReduceMaxU32 };
void sync_block(const char* file, int line);
std::uint64_t warp_exchange(unsigned mask, WarpOp op, int param, std::uint64_t value);
// A load from an address not aligned to its size: on a GPU the kernel faults (misaligned
// address); here the thread throws and the launch fails.
[[noreturn]] void misaligned_load(const void* p, std::size_t bytes);
// The device allocation the host thread's kernel last loaded from, [tl_load_begin, tl_load_end)
// (reset at each launch); check_device_load finds the one holding [p, p + bytes) and caches it,
// or throws (a load outside device memory: on a GPU an illegal address or a read of a
// neighbour's data). Two scalars, not a struct read through a reference: g++ 12 with
// -fsanitize=undefined miscompiled the null check of that reference inside the kernels (a `je`
// on stale flags, so every aligned load reported a null pointer).
extern constinit thread_local std::uintptr_t tl_load_begin;
extern constinit thread_local std::uintptr_t tl_load_end;
void check_device_load(const void* p, std::size_t bytes);

}  // namespace fp8a_emu

// The runtime's typed cudaLaunchKernel (1-D grids only): args[i] points to the i-th parameter's
// value; no dynamic shared memory.
template <class... Params>
cudaError_t cudaLaunchKernel(void (*kernel)(Params...), dim3 grid, dim3 block, void** args,
                             std::size_t shared_mem = 0, cudaStream_t stream = nullptr) {
  if (shared_mem != 0) return ::fp8a_emu::launch(0, 0, stream, {}, {});  // refused: not emulated
  return ::fp8a_emu::launch_kernel_args(kernel, grid, block, args, stream, std::index_sequence_for<Params...>{});
}

#define threadIdx (::fp8a_emu::current().thread_idx)
#define blockIdx (::fp8a_emu::current().block_idx)
#define blockDim (::fp8a_emu::current().block_dim)
#define gridDim (::fp8a_emu::current().grid_dim)

// A macro, so that the barrier a thread waits at is known by its source line: the host compiler
// may duplicate a call (e.g. into both arms of a following if), which a return address would
// see as two barriers.
#define __syncthreads() ::fp8a_emu::sync_block(__FILE__, __LINE__)

template <class T>
T fp8a_emu_shuffle(unsigned mask, T v, ::fp8a_emu::WarpOp op, int param) {
  static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = ::fp8a_emu::warp_exchange(mask, op, param, bits);
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  return fp8a_emu_shuffle(mask, v, ::fp8a_emu::WarpOp::kShflXor, lane_mask);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta) {
  return fp8a_emu_shuffle(mask, v, ::fp8a_emu::WarpOp::kShflDown, static_cast<int>(delta));
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) {
  return static_cast<unsigned>(::fp8a_emu::warp_exchange(mask, ::fp8a_emu::WarpOp::kReduceMaxU32, 0, v));
}

// ---- device functions ---------------------------------------------------------------------------
template <class T>
T __ldg(const T* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a % alignof(T) != 0) ::fp8a_emu::misaligned_load(p, sizeof(T));
  if (a < ::fp8a_emu::tl_load_begin || a + sizeof(T) > ::fp8a_emu::tl_load_end)
    ::fp8a_emu::check_device_load(p, sizeof(T));
  return *p;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float __fmul_rn(float a, float b) { return a * b; }  // the host build never contracts
inline float cospif(float x) { return static_cast<float>(std::cos(3.14159265358979323846 * static_cast<double>(x))); }
// CUDA's integer min/max overloads, for one type at a time (mixed calls do not compile here, so
// none slips in that would convert differently on the device).
template <class T>
constexpr T min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
constexpr T max(T a, T b) {
  return a < b ? b : a;
}

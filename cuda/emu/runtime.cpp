// The runtime API of the host emulation (include/cuda_runtime.h): one device, memory in host
// memory with every allocation tracked, synchronous copies that check their direction.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <new>

#include "cuda/emu/runtime_internal.hpp"

namespace fp8a_emu {

namespace {

enum class Space { kDevice, kPinned };

struct Registry {
  std::mutex mutex;
  std::map<std::uintptr_t, std::pair<std::size_t, Space>> blocks;  // start -> (bytes, space)
  std::size_t device_bytes = 0, device_peak = 0;
  std::size_t device_total = std::size_t{16} << 30;
  int sm = 90;
};

Registry& registry() {
  static Registry r;
  // FP8A_CUDA_EMULATION_MEMORY=<bytes>: the device's memory for a whole process (e.g. the CLI).
  static const bool configured = [] {
    if (const char* v = std::getenv("FP8A_CUDA_EMULATION_MEMORY"); v != nullptr && *v != '\0')
      r.device_total = static_cast<std::size_t>(std::strtoull(v, nullptr, 10));
    // FP8A_CUDA_EMULATION_SM=<10 * major + minor>: the device's compute capability.
    if (const char* v = std::getenv("FP8A_CUDA_EMULATION_SM"); v != nullptr && *v != '\0')
      r.sm = static_cast<int>(std::strtol(v, nullptr, 10));
    return true;
  }();
  static_cast<void>(configured);
  return r;
}

thread_local cudaError_t tl_last_error = cudaSuccess;
thread_local int tl_device = 0;

cudaError_t fail(cudaError_t e, const char* what) {
  report_failure(what);
  set_error(e);
  return e;
}

cudaError_t allocate(void** ptr, std::size_t bytes, Space space) {
  if (ptr == nullptr) return fail(cudaErrorInvalidValue, "allocation with a null result pointer");
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (space == Space::kDevice && bytes > r.device_total - r.device_bytes)
    return fail(cudaErrorMemoryAllocation, "out of emulated device memory");
  void* p = ::operator new(bytes, std::align_val_t{256}, std::nothrow);
  if (p == nullptr) return fail(cudaErrorMemoryAllocation, "out of host memory");
  r.blocks[reinterpret_cast<std::uintptr_t>(p)] = {bytes, space};
  if (space == Space::kDevice) {
    r.device_bytes += bytes;
    r.device_peak = std::max(r.device_peak, r.device_bytes);
  }
  *ptr = p;
  return cudaSuccess;
}

cudaError_t release(void* ptr, Space space) {
  if (ptr == nullptr) return cudaSuccess;
  Registry& r = registry();
  {
    const std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.blocks.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == r.blocks.end() || it->second.second != space)
      return fail(cudaErrorInvalidValue, space == Space::kDevice ? "cudaFree of a pointer cudaMalloc did not return"
                                                                 : "cudaFreeHost of a pointer cudaMallocHost did not return");
    if (space == Space::kDevice) r.device_bytes -= it->second.first;
    r.blocks.erase(it);
  }
  ::operator delete(ptr, std::align_val_t{256});
  return cudaSuccess;
}

// Whether [p, p + bytes) lies inside one live allocation of `space`.
bool inside(const void* p, std::size_t bytes, Space space) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.blocks.upper_bound(a);
  if (it == r.blocks.begin()) return false;
  --it;
  return it->second.second == space && a + bytes <= it->first + it->second.first;
}

}  // namespace

void set_error(cudaError_t error) { tl_last_error = error; }

std::size_t device_bytes_in_use() {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().device_bytes;
}

std::size_t device_bytes_peak() {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().device_peak;
}

void set_device_memory(std::size_t total_bytes) {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  registry().device_total = total_bytes;
}

void reset_device_bytes_peak() {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  registry().device_peak = registry().device_bytes;
}

void set_compute_capability(int sm) {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  registry().sm = sm;
}

int compute_capability() {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().sm;
}

bool is_device_pointer(const void* p) { return inside(p, 1, Space::kDevice); }
bool is_device_range(const void* p, std::size_t bytes) { return inside(p, bytes, Space::kDevice); }

void report_failure(const std::string& what) { std::fprintf(stderr, "fp8a CUDA emulation: %s\n", what.c_str()); }

}  // namespace fp8a_emu

using fp8a_emu::fail;

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "no such device");
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "%s", "host emulation of a CUDA device");
  {
    const std::lock_guard<std::mutex> lock(fp8a_emu::registry().mutex);
    prop->totalGlobalMem = fp8a_emu::registry().device_total;
  }
  prop->major = fp8a_emu::compute_capability() / 10;
  prop->minor = fp8a_emu::compute_capability() % 10;
  prop->multiProcessorCount = 1;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "no such device");
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 1; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = fp8a_emu::compute_capability() / 10; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = fp8a_emu::compute_capability() % 10; return cudaSuccess;
  }
  return fail(cudaErrorInvalidValue, "device attribute not emulated");
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "no such device");
  fp8a_emu::tl_device = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaGetLastError() {
  const cudaError_t e = fp8a_emu::tl_last_error;
  fp8a_emu::tl_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return fp8a_emu::tl_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}

cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total) {
  fp8a_emu::Registry& r = fp8a_emu::registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  *total = r.device_total;
  *free = r.device_total - std::min(r.device_bytes, r.device_total);
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) { return fp8a_emu::allocate(ptr, bytes, fp8a_emu::Space::kDevice); }
cudaError_t cudaFree(void* ptr) { return fp8a_emu::release(ptr, fp8a_emu::Space::kDevice); }
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) { return fp8a_emu::allocate(ptr, bytes, fp8a_emu::Space::kPinned); }
cudaError_t cudaFreeHost(void* ptr) { return fp8a_emu::release(ptr, fp8a_emu::Space::kPinned); }

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  using fp8a_emu::inside;
  using fp8a_emu::Space;
  const bool dst_device = inside(dst, bytes, Space::kDevice), src_device = inside(src, bytes, Space::kDevice);
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToHost: ok = !dst_device && !src_device; break;
    case cudaMemcpyHostToDevice: ok = dst_device && !src_device; break;
    case cudaMemcpyDeviceToHost: ok = !dst_device && src_device; break;
    case cudaMemcpyDeviceToDevice: ok = dst_device && src_device; break;
    case cudaMemcpyDefault: break;
  }
  if (!ok)
    return fail(cudaErrorInvalidMemcpyDirection,
                "a copy whose pointers do not match its direction (or run past their allocation)");
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}

// Streams and events are distinct non-null handles; all work is already done when enqueued.
struct CUstream_st {};
struct CUevent_st {
  std::chrono::steady_clock::time_point recorded{};
};

namespace fp8a_emu {
template <class T>
cudaError_t create_handle(T** handle) {
  *handle = new T;
  return cudaSuccess;
}
template <class T>
cudaError_t destroy_handle(T* handle) {
  delete handle;
  return cudaSuccess;
}
}  // namespace fp8a_emu

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return fp8a_emu::create_handle(stream); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) { return fp8a_emu::create_handle(stream); }
cudaError_t cudaStreamDestroy(cudaStream_t stream) { return fp8a_emu::destroy_handle(stream); }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t* event) { return fp8a_emu::create_handle(event); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) { return fp8a_emu::create_handle(event); }
cudaError_t cudaEventDestroy(cudaEvent_t event) { return fp8a_emu::destroy_handle(event); }
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  event->recorded = std::chrono::steady_clock::now();
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  *ms = std::chrono::duration<float, std::milli>(end->recorded - start->recorded).count();
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }

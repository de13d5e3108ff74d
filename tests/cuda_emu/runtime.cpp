// The runtime API of the host emulation (include/cuda_runtime.h): one device, memory in host
// memory with every allocation tracked, synchronous copies that check their direction.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/cuda_emu/runtime_internal.hpp"

namespace fp8a_emu {

namespace {

enum class Space { kDevice, kPinned };

struct Registry {
  std::mutex mutex;
  std::map<std::uintptr_t, std::pair<std::size_t, Space>> blocks;  // start -> (bytes, space)
  std::size_t device_bytes = 0, device_peak = 0;
  std::size_t device_total = std::size_t{16} << 30;
  int sm = 90;
  int failures_left = 0;                 // injected: the next cudaMalloc calls that fail
  std::vector<std::size_t> asked;        // every cudaMalloc's size, in order
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
    // FP8A_CUDA_EMULATION_FAIL_ALLOCATIONS=<n>: the first n cudaMalloc calls fail.
    if (const char* v = std::getenv("FP8A_CUDA_EMULATION_FAIL_ALLOCATIONS"); v != nullptr && *v != '\0')
      r.failures_left = static_cast<int>(std::strtol(v, nullptr, 10));
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
  if (space == Space::kDevice) {
    r.asked.push_back(bytes);
    if (r.failures_left > 0) {
      --r.failures_left;
      return fail(cudaErrorMemoryAllocation, "out of emulated device memory (an injected failure)");
    }
  }
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

int fail_device_allocations(int n) {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  const int left = registry().failures_left;
  registry().failures_left = n;
  return left;
}

std::vector<std::size_t> device_allocation_sizes() {
  const std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().asked;
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

constinit thread_local std::uintptr_t tl_load_begin = 0;
constinit thread_local std::uintptr_t tl_load_end = 0;

namespace {
std::string load_text(const void* p, std::size_t bytes) {
  char where[32];
  std::snprintf(where, sizeof where, "%p", p);
  return "a " + std::to_string(bytes) + "-byte load at " + where;
}
}  // namespace

void misaligned_load(const void* p, std::size_t bytes) {
  throw std::runtime_error("misaligned address: " + load_text(p, bytes));
}

void check_device_load(const void* p, std::size_t bytes) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.blocks.upper_bound(a);
  if (it != r.blocks.begin()) {
    --it;
    if (it->second.second == Space::kDevice && a + bytes <= it->first + it->second.first) {
      tl_load_begin = it->first;
      tl_load_end = it->first + it->second.first;
      return;
    }
  }
  throw std::runtime_error(load_text(p, bytes) +
                           " outside every device allocation (out of bounds, or not device memory)");
}

bool is_device_pointer(const void* p) { return inside(p, 1, Space::kDevice); }
bool is_device_range(const void* p, std::size_t bytes) { return inside(p, bytes, Space::kDevice); }

void report_failure(const std::string& what) { std::fprintf(stderr, "fp8a CUDA emulation: %s\n", what.c_str()); }

}  // namespace fp8a_emu

namespace fp8a_emu {
namespace {
// Defined with the streams below.
cudaError_t drain_all(bool blocking_only);
cudaError_t finished(cudaError_t e);
}  // namespace
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
  prop->maxGridSize[0] = fp8a_emu::kMaxGridDimX;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 1;  // 1-D grids only
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice, "no such device");
  switch (attr) {
    case cudaDevAttrMaxGridDimX: *value = fp8a_emu::kMaxGridDimX; return cudaSuccess;
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

cudaError_t cudaDeviceSynchronize() { return fp8a_emu::finished(fp8a_emu::drain_all(false)); }

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
// cudaFree and cudaFreeHost wait for the whole device first, as in CUDA.
cudaError_t cudaFree(void* ptr) {
  if (const cudaError_t e = fp8a_emu::drain_all(false); e != cudaSuccess) return fp8a_emu::finished(e);
  return fp8a_emu::release(ptr, fp8a_emu::Space::kDevice);
}
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) { return fp8a_emu::allocate(ptr, bytes, fp8a_emu::Space::kPinned); }
cudaError_t cudaFreeHost(void* ptr) {
  if (const cudaError_t e = fp8a_emu::drain_all(false); e != cudaSuccess) return fp8a_emu::finished(e);
  return fp8a_emu::release(ptr, fp8a_emu::Space::kPinned);
}

// ---- streams and events ------------------------------------------------------------------------
// Work enqueued on a created stream is deferred: it runs, in order, when the host waits for it
// (cudaStreamSynchronize, cudaEventSynchronize on an event recorded after it, cudaDeviceSynchronize,
// cudaFree, cudaFreeHost, cudaStreamDestroy), as late as CUDA allows. So host code that reuses a
// pinned staging buffer, reads results or frees memory before the GPU is done with them sees the
// wrong data here, as it could on a GPU. Work on the legacy default stream (nullptr) runs at once,
// after the work of the blocking streams (created without cudaStreamNonBlocking), as CUDA orders it.

struct CUstream_st {
  std::mutex mutex;  // held while the stream's operations run: in order, one at a time
  std::deque<std::pair<std::uint64_t, std::function<cudaError_t()>>> queue;
  std::uint64_t next_seq = 1;
  bool blocking = true;
};

struct CUevent_st {
  cudaStream_t stream = nullptr;  // where the last record waits to run (nullptr: done)
  std::uint64_t seq = 0;          // its place in that stream
  std::chrono::steady_clock::time_point recorded{};
};

namespace fp8a_emu {

namespace {

struct Streams {
  std::mutex mutex;
  std::set<cudaStream_t> live;
};

Streams& streams() {
  static Streams s;
  return s;
}

// Runs the stream's operations up to and including `seq` (all of them by default); returns the
// first error.
cudaError_t drain(cudaStream_t s, std::uint64_t seq = ~std::uint64_t{0}) {
  const std::lock_guard<std::mutex> lock(s->mutex);
  cudaError_t first = cudaSuccess;
  while (!s->queue.empty() && s->queue.front().first <= seq) {
    auto op = std::move(s->queue.front().second);
    s->queue.pop_front();
    const cudaError_t e = op();
    if (first == cudaSuccess) first = e;
  }
  return first;
}

// Every stream (cudaDeviceSynchronize, cudaFree), or only the blocking ones (legacy stream work).
cudaError_t drain_all(bool blocking_only) {
  const std::lock_guard<std::mutex> lock(streams().mutex);
  cudaError_t first = cudaSuccess;
  for (cudaStream_t s : streams().live) {
    if (blocking_only && !s->blocking) continue;
    const cudaError_t e = drain(s);
    if (first == cudaSuccess) first = e;
  }
  return first;
}

cudaError_t finished(cudaError_t e) {
  if (e != cudaSuccess) set_error(e);
  return e;
}

bool check_direction(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  const bool dst_device = inside(dst, bytes, Space::kDevice), src_device = inside(src, bytes, Space::kDevice);
  switch (kind) {
    case cudaMemcpyHostToHost: return !dst_device && !src_device;
    case cudaMemcpyHostToDevice: return dst_device && !src_device;
    case cudaMemcpyDeviceToHost: return !dst_device && src_device;
    case cudaMemcpyDeviceToDevice: return dst_device && src_device;
    case cudaMemcpyDefault: break;
  }
  return true;
}

}  // namespace

cudaError_t enqueue(cudaStream_t stream, std::function<cudaError_t()> op) {
  if (stream == nullptr) {
    const cudaError_t e = drain_all(true);
    const cudaError_t mine = op();
    return finished(e != cudaSuccess ? e : mine);
  }
  const std::lock_guard<std::mutex> lock(stream->mutex);
  stream->queue.emplace_back(stream->next_seq++, std::move(op));
  return cudaSuccess;
}

bool is_pinned_range(const void* p, std::size_t bytes) { return inside(p, bytes, Space::kPinned); }

}  // namespace fp8a_emu

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  using fp8a_emu::inside;
  using fp8a_emu::Space;
  if (!fp8a_emu::check_direction(dst, src, bytes, kind))
    return fail(cudaErrorInvalidMemcpyDirection,
                "a copy whose pointers do not match its direction (or run past their allocation)");
  const bool dst_device = inside(dst, bytes, Space::kDevice), src_device = inside(src, bytes, Space::kDevice);
  const bool dst_pinned = fp8a_emu::is_pinned_range(dst, bytes), src_pinned = fp8a_emu::is_pinned_range(src, bytes);
  if (stream != nullptr && !dst_device && !dst_pinned) {
    // Into pageable host memory: CUDA returns only when the copy is done.
    if (const cudaError_t e = fp8a_emu::drain(stream); e != cudaSuccess) return fp8a_emu::finished(e);
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  if (stream != nullptr && !src_device && !src_pinned) {
    // From pageable host memory: CUDA stages the source before returning; the write is deferred.
    auto staged = std::make_shared<std::vector<std::byte>>(static_cast<const std::byte*>(src),
                                                          static_cast<const std::byte*>(src) + bytes);
    return fp8a_emu::enqueue(stream, [=] {
      if (!inside(dst, bytes, Space::kDevice))
        return fail(cudaErrorInvalidValue, "an asynchronous copy ran after its destination was freed");
      std::memcpy(dst, staged->data(), bytes);
      return cudaSuccess;
    });
  }
  // Device or pinned memory on both sides: read and written when the stream gets there.
  return fp8a_emu::enqueue(stream, [=] {
    const auto still_there = [&](const void* p, bool device, bool pinned) {
      return device ? inside(p, bytes, Space::kDevice) : !pinned || inside(p, bytes, Space::kPinned);
    };
    const bool live = still_there(dst, dst_device, dst_pinned) && still_there(src, src_device, src_pinned);
    if (!live) return fail(cudaErrorInvalidValue, "an asynchronous copy ran after its memory was freed");
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  });
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  *stream = new CUstream_st;
  (*stream)->blocking = (flags & cudaStreamNonBlocking) == 0;
  const std::lock_guard<std::mutex> lock(fp8a_emu::streams().mutex);
  fp8a_emu::streams().live.insert(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return fail(cudaErrorInvalidValue, "cudaStreamDestroy of the default stream");
  {
    const std::lock_guard<std::mutex> lock(fp8a_emu::streams().mutex);
    fp8a_emu::streams().live.erase(stream);
  }
  const cudaError_t e = fp8a_emu::drain(stream);  // CUDA finishes the work of a destroyed stream
  delete stream;
  return fp8a_emu::finished(e);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return fp8a_emu::finished(stream == nullptr ? fp8a_emu::drain_all(true) : fp8a_emu::drain(stream));
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  *event = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) { return cudaEventCreate(event); }

namespace fp8a_emu {
namespace {

// An event's pending record: (stream, seq) read and written under one lock, as the record itself
// may run on another host thread (one that drains every stream in cudaFree).
std::mutex g_events_mutex;

std::pair<cudaStream_t, std::uint64_t> pending_record(cudaEvent_t event) {
  const std::lock_guard<std::mutex> lock(g_events_mutex);
  return {event->stream, event->seq};
}

// Runs the event's stream up to its record, if that has not run yet.
cudaError_t wait_for(cudaEvent_t event) {
  const auto [stream, seq] = pending_record(event);
  return stream != nullptr ? drain(stream, seq) : cudaSuccess;
}

}  // namespace
}  // namespace fp8a_emu

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  // A record still queued would write to the event: run the stream up to it first.
  const cudaError_t e = fp8a_emu::wait_for(event);
  delete event;
  return fp8a_emu::finished(e);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (stream == nullptr) {
    const cudaError_t e = fp8a_emu::drain_all(true);
    const std::lock_guard<std::mutex> lock(fp8a_emu::g_events_mutex);
    event->stream = nullptr;
    event->recorded = std::chrono::steady_clock::now();
    return fp8a_emu::finished(e);
  }
  const std::lock_guard<std::mutex> lock(stream->mutex);
  const std::uint64_t seq = stream->next_seq++;
  {
    const std::lock_guard<std::mutex> events(fp8a_emu::g_events_mutex);
    event->stream = stream;
    event->seq = seq;
  }
  stream->queue.emplace_back(seq, [event, stream, seq] {
    const std::lock_guard<std::mutex> events(fp8a_emu::g_events_mutex);
    event->recorded = std::chrono::steady_clock::now();
    // Done: waiting for it no longer touches the stream (which may be destroyed before the
    // event), unless the event was recorded again since.
    if (event->stream == stream && event->seq == seq) event->stream = nullptr;
    return cudaSuccess;
  });
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  *ms = std::chrono::duration<float, std::milli>(end->recorded - start->recorded).count();
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) { return fp8a_emu::finished(fp8a_emu::wait_for(event)); }

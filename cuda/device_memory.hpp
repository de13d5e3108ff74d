// RAII owners for device memory, pinned host memory, streams and events. Buffers only grow
// (reserve, try_reserve) until released, so a workspace reused across tensors reallocates rarely. Destructors never throw:
// release errors at teardown are ignored.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "cuda/check.hpp"

namespace fp8a::cuda {

namespace detail {
inline std::size_t round_up_allocation(std::size_t bytes) {
  constexpr std::size_t kGranule = std::size_t{2} << 20;
  return (bytes + kGranule - 1) / kGranule * kGranule;
}
}  // namespace detail

template <cudaError_t (*Alloc)(void**, std::size_t), cudaError_t (*Free)(void*)>
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }

  // At least `bytes` long afterwards; the contents are lost when it grows.
  void reserve(std::size_t bytes) {
    if (!try_reserve(bytes)) cuda_failed(cudaErrorMemoryAllocation, "Alloc(&p, n)", __FILE__, __LINE__);
  }
  // As reserve, but false when the runtime is out of memory (cudaErrorMemoryAllocation; the
  // buffer is then empty and the runtime's last error cleared). Other failures throw as reserve.
  bool try_reserve(std::size_t bytes) {
    if (bytes <= size_) return true;
    release();
    const std::size_t n = detail::round_up_allocation(bytes);
    void* p = nullptr;
    const cudaError_t status = Alloc(&p, n);
    if (status == cudaErrorMemoryAllocation) {
      static_cast<void>(cudaGetLastError());
      return false;
    }
    FP8A_CUDA_CHECK(status);
    data_ = static_cast<std::byte*>(p);
    size_ = n;
    return true;
  }
  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  // Frees the memory now (a later reserve allocates again).
  void release() {
    if (data_ != nullptr) static_cast<void>(Free(data_));
    data_ = nullptr;
    size_ = 0;
  }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

inline cudaError_t device_alloc(void** p, std::size_t n) { return cudaMalloc(p, n); }
inline cudaError_t device_free(void* p) { return cudaFree(p); }
inline cudaError_t pinned_alloc(void** p, std::size_t n) { return cudaMallocHost(p, n); }
inline cudaError_t pinned_free(void* p) { return cudaFreeHost(p); }

using DeviceBuffer = Buffer<device_alloc, device_free>;
using PinnedBuffer = Buffer<pinned_alloc, pinned_free>;

class Stream {
 public:
  Stream() { FP8A_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { static_cast<void>(cudaStreamDestroy(stream_)); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event() { FP8A_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() { static_cast<void>(cudaEventDestroy(event_)); }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace fp8a::cuda

// Shared between the emulator's runtime (runtime.cpp) and its launches (fibers.cpp).
#pragma once

#include <functional>
#include <string>

#include <cuda_runtime.h>

namespace fp8a_emu {

// The host thread's last error (cudaGetLastError), set by failed calls and launches.
void set_error(cudaError_t error);
// Whether p lies inside a live cudaMalloc allocation.
bool is_device_pointer(const void* p);
// Whether [p, p + bytes) lies inside one live cudaMalloc allocation.
bool is_device_range(const void* p, std::size_t bytes);
// Runs `op` on the stream: at once on the legacy default stream (nullptr, after the blocking
// streams' work; an error it returns becomes the last error), else when the stream's earlier
// work has run and the host waits for it (runtime.cpp, "streams and events").
cudaError_t enqueue(cudaStream_t stream, std::function<cudaError_t()> op);
// Prints why an emulated call or launch failed (stderr, one line), for the failing test's log.
void report_failure(const std::string& what);

}  // namespace fp8a_emu

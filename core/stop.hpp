// A request to stop a long run at the next unit of work (a tensor, a GEMM layer): the command
// line's SIGINT/SIGTERM handler sets it, the engine's loops read it. Units already started
// finish (and are checkpointed); none is started after the request; then the engine throws
// StopRequested.
#pragma once

#include <atomic>
#include <stdexcept>

namespace fp8a {

struct StopRequest {
  // The signal number that asked, 0 while none has. Lock-free: a signal handler may store it.
  std::atomic<int> signal{0};
  static_assert(std::atomic<int>::is_always_lock_free);
  bool requested() const { return signal.load(std::memory_order_relaxed) != 0; }
};

inline bool stop_requested(const StopRequest* stop) { return stop != nullptr && stop->requested(); }

// Thrown by evaluate_captures / evaluate_gemm_errors when they stopped on a request.
struct StopRequested : std::runtime_error {
  StopRequested() : std::runtime_error("stopped on request") {}
};

}  // namespace fp8a

#include "cli/stop_signals.hpp"

namespace fp8a::cli {

namespace {

StopRequest g_request;

extern "C" void on_stop_signal(int signal) { g_request.signal.store(signal, std::memory_order_relaxed); }

}  // namespace

StopOnSignals::StopOnSignals() {
  g_request.signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;  // the second signal is the default action: the process ends
  ::sigaction(SIGINT, &sa, &old_int_);
  ::sigaction(SIGTERM, &sa, &old_term_);
}

StopOnSignals::~StopOnSignals() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
}

const StopRequest& StopOnSignals::request() const { return g_request; }

const char* StopOnSignals::signal_name(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

}  // namespace fp8a::cli

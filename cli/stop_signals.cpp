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
  sigset_t both;
  sigemptyset(&both);
  sigaddset(&both, SIGINT);
  sigaddset(&both, SIGTERM);
  ::sigprocmask(SIG_UNBLOCK, &both, nullptr);
}

StopOnSignals::~StopOnSignals() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
}

const StopRequest& StopOnSignals::request() const { return g_request; }

void StopOnSignals::restore_default() {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  if (const int signal = g_request.signal.load(std::memory_order_relaxed); signal != 0) ::raise(signal);
}

const char* StopOnSignals::signal_name(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

}  // namespace fp8a::cli

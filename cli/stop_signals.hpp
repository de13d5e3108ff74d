// SIGINT and SIGTERM: main installs the handlers as its first statement (before the options, the
// backend probe and MPI), so a signal at any moment of a run is recorded, never the default
// action. The first signal asks the engine to stop at the next unit of work (core/stop.hpp), so
// what is finished stays in the checkpoint; `run` also looks at the request before it starts
// (exit 128 + the signal, nothing written). The handler then goes back to the default, so a
// second signal ends the process at once. The commands that do not stop on a request give the
// signals back to their default action (restore_default).
#pragma once

#include <csignal>

#include "core/stop.hpp"

namespace fp8a::cli {

class StopOnSignals {
 public:
  // Installs the handlers, then unblocks the two signals (a parent may have started this process
  // with them blocked: one already pending is delivered here and recorded). One object at a time.
  StopOnSignals();
  ~StopOnSignals();  // restores the handlers there were before
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

  const StopRequest& request() const;
  // The default actions again; a signal already recorded ends the process now, by that signal.
  void restore_default();
  // "SIGINT", "SIGTERM".
  static const char* signal_name(int signal);

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

}  // namespace fp8a::cli

// SIGINT and SIGTERM during a run: the first asks the engine to stop at the next unit of work
// (core/stop.hpp), so what is finished stays in the checkpoint; the handler then goes back to the
// default, so a second signal ends the process at once.
#pragma once

#include <csignal>

#include "core/stop.hpp"

namespace fp8a::cli {

class StopOnSignals {
 public:
  StopOnSignals();   // installs the handlers (one object at a time)
  ~StopOnSignals();  // restores the handlers there were before
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

  const StopRequest& request() const;
  // "SIGINT", "SIGTERM".
  static const char* signal_name(int signal);

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

}  // namespace fp8a::cli

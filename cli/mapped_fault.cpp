#include "cli/mapped_fault.hpp"

#include <unistd.h>

#include <csignal>
#include <cstring>

#include "core/error.hpp"
#include "datasets/file_system.hpp"

namespace fp8a::cli {

namespace {

void write_all(const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// Async-signal-safe only: describe_mapped_file_fault, write, _exit, signal, raise.
void on_bus_error(int signal, siginfo_t* info, void*) {
  // si_code > 0: the kernel's, for a faulting access; <= 0: sent (kill, sigqueue), no address.
  if (info != nullptr && info->si_code > 0) {
    char line[8192];
    if (const std::size_t n = describe_mapped_file_fault(info->si_addr, line, sizeof line); n > 0) {
      constexpr const char kPrefix[] = "fp8-advisor: error: ";
      write_all(kPrefix, sizeof kPrefix - 1);
      write_all(line, n);
      write_all("\n", 1);
      ::_exit(exit_code_of(ErrorKind::kInput));
    }
  }
  // Not ours: the default action. A fault retries the access on return and dies of it.
  ::signal(signal, SIG_DFL);
  if (info == nullptr || info->si_code <= 0) ::raise(signal);
}

}  // namespace

void install_mapped_fault_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_bus_error;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace fp8a::cli

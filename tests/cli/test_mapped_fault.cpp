// The SIGBUS handler of cli/mapped_fault.hpp, in a child process: a read past the end of a mapped
// capture that was truncated after it was mapped, on a worker thread, ends the process with the
// fp8a.io.110 line naming the file and exit 3; any other SIGBUS keeps its default action (issue 25).
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <fcntl.h>

#include <thread>

#include "cli/mapped_fault.hpp"
#include "datasets/file_system.hpp"
#include "tests/cli/cli_support.hpp"

namespace {

using namespace fp8a::cli_test;

std::string version_text(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return "size " + std::to_string(st.st_size) + ", mtime " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

// Runs body in a child with stderr to err and no core dump; the wait status.
template <class Body>
int in_child(const fs::path& err, Body body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const rlimit none{0, 0};
    ::setrlimit(RLIMIT_CORE, &none);
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) ::_exit(120);
    body();
    ::_exit(121);  // the body was to end the process
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

}  // namespace

TEST_CASE("SIGBUS in a capture truncated under its mapping: the fp8a.io.110 line naming it, exit 3") {
  TempDir dir;
  const fs::path file = dir.path / "rank0_step_1.safetensors", err = dir.path / "stderr";
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  write_bytes(file, std::string(4 * page, 'x'));
  const std::string was = version_text(file);
  const int status = in_child(err, [&] {
    fp8a::cli::install_mapped_fault_handler();
    const auto mapped = fp8a::DiskFileSystem().map(file.string());
    if (::truncate(file.c_str(), 100) != 0) ::_exit(122);
    volatile char sink = 0;
    std::thread worker([&] { sink = static_cast<char>(mapped->bytes()[2 * page]); });  // past the end now
    worker.join();
    (void)sink;
  });
  INFO("wait status " << status);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  CHECK(slurp(err) == "fp8-advisor: error: [fp8a.io.110] " + file.string() + ": changed while the run read it (was " +
                          was + "; now " + version_text(file) + "): rerun once nothing writes to it\n");
}

TEST_CASE("SIGBUS elsewhere keeps its default action: a mapping of no capture, a signal sent") {
  TempDir dir;
  const fs::path file = dir.path / "other.bin", err = dir.path / "stderr";
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  write_bytes(file, std::string(4 * page, 'x'));
  const int faulted = in_child(err, [&] {
    fp8a::cli::install_mapped_fault_handler();
    const int fd = ::open(file.c_str(), O_RDONLY);
    void* p = ::mmap(nullptr, 4 * page, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED || ::truncate(file.c_str(), 100) != 0) ::_exit(122);
    volatile char sink = static_cast<const char*>(p)[2 * page];
    (void)sink;
  });
  INFO("wait status " << faulted);
  CHECK(WIFSIGNALED(faulted));
  CHECK(WTERMSIG(faulted) == SIGBUS);
  CHECK(slurp(err).empty());
  const int sent = in_child(err, [] {
    fp8a::cli::install_mapped_fault_handler();
    ::kill(::getpid(), SIGBUS);
  });
  INFO("wait status " << sent);
  CHECK(WIFSIGNALED(sent));
  CHECK(WTERMSIG(sent) == SIGBUS);
  CHECK(slurp(err).empty());
}

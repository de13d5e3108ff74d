// The --out lock (rundir/output_lock.hpp) under contention: processes taking and releasing it in
// a loop, on a directory that stays and on one each holder created and removes again (the lock
// file unlinked while held), never hold it two at once. Each holder proves it is alone by
// creating a marker file with O_EXCL beside the directory while it holds the lock.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "rundir/output_lock.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int kProcesses = 4;
constexpr int kRounds = 200;

// A child's exit status: 0 it held the lock alone every time, 1 it found another holder's
// marker, 2 it never got the lock, 3 an unexpected error.
int contend(const fs::path& dir, const fs::path& marker) {
  int held = 0;
  for (int i = 0; i < kRounds; ++i) {
    try {
      const fp8a::OutputLock lock(dir.string(), "test contender");
      const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) return 1;
      ::close(fd);
      ++held;
      ::usleep(2000);  // held longer than the delay below: a second holder would overlap
      ::unlink(marker.c_str());
    } catch (const fp8a::Error& e) {
      if (std::string(e.what()).find("[fp8a.usage.220]") == std::string::npos) {
        std::fprintf(stderr, "contender %d: %s\n", static_cast<int>(::getpid()), e.what());  // for the log
        return 3;
      }
    }
  }
  return held > 0 ? 0 : 2;
}

// Runs kProcesses children contending for dir's lock; the number that ever held it.
int run_contenders(const fs::path& dir, const fs::path& marker) {
  std::vector<pid_t> kids;
  for (int k = 0; k < kProcesses; ++k) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Between opening the lock file and locking it: the window a releasing holder's unlink hits.
      ::setenv("FP8A_TEST_LOCK_DELAY_US", "1000", 1);
      ::_exit(contend(dir, marker));
    }
    kids.push_back(pid);
  }
  int holders = 0;
  for (const pid_t pid : kids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) != 1);  // never two holders
    CHECK(WEXITSTATUS(status) != 3);
    holders += WEXITSTATUS(status) == 0;
  }
  return holders;
}

}  // namespace

TEST_CASE("the --out lock: contending processes never hold it two at once") {
  const fp8a::testing::TempDir scratch;
  const fs::path root = scratch.path;
  SUBCASE("a directory that stays: each holder removes the lock file on release") {
    fs::create_directories(root / "out");
    CHECK(run_contenders(root / "out", root / "held") >= 1);
    CHECK_FALSE(fs::exists(root / "out" / fp8a::OutputLock::kFileName));
  }
  SUBCASE("a directory each holder creates and removes with its lock file") {
    // (Whether the directory is left at the end depends on who created it last.)
    CHECK(run_contenders(root / "out", root / "held") >= 1);
  }
}

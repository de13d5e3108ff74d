#include "rundir/output_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "rundir/atomic_file.hpp"
#include "rundir/output_set.hpp"

namespace fp8a {

namespace {

namespace fs = std::filesystem;

// Field 22 of /proc/PID/stat (clock ticks since boot the process started); "" when unreadable.
std::string start_time(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return "";
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return field;
  return "";
}

struct Holder {
  long pid = 0;
  std::string started, command;
};

// The lock's last holder as written: "pid start-time command"; pid 0 when the file is empty (a
// clean release, or a holder that has not written yet).
Holder read_holder(int fd) {
  std::string text;
  char buf[4096];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    at += n;
  }
  std::istringstream in(text);
  Holder h;
  if (!(in >> h.pid >> h.started)) return {};
  std::getline(in >> std::ws, h.command);
  return h;
}

// What a dead run was writing when it died, never renamed into place so nothing reads it: its
// temporary files (atomic_file.hpp names them NAME.tmp.PID) and any staging folder of an output
// set (only a holder of the lock stages, and we hold it).
void remove_leftovers(const std::string& dir, long dead_pid) {
  const std::string suffix = dead_pid > 0 ? ".tmp." + std::to_string(dead_pid) : std::string();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(kOutputStagingPrefix)) fs::remove_all(e.path(), ec);
    else if (!suffix.empty() && name.ends_with(suffix)) fs::remove(e.path(), ec);
  }
}

// Whether the path still names the inode fd locked (a releasing run may have removed it).
bool same_file(int fd, const std::string& path) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Test hook (tests/rundir/test_output_lock.cpp): microseconds to sleep between opening the lock
// file and locking it, so that a holder's removal of the file falls in between often.
void test_delay() {
  static const long us = [] {
    const char* v = std::getenv("FP8A_TEST_LOCK_DELAY_US");
    return v != nullptr ? std::atol(v) : 0L;
  }();
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

}  // namespace

OutputLock::OutputLock(const std::string& dir, const std::string& command)
    : dir_(dir), path_(dir + "/" + kFileName) {
  const std::string me = std::to_string(::getpid()) + " " + start_time(::getpid()) + " " + command + "\n";
  // A busy lock whose holder has not written its name yet is looked at again, up to about 1 s.
  constexpr int kAttempts = 200;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::error_code ec;
    created_dir_ = !fs::exists(dir, ec);
    ensure_output_directory(dir);
    // Never through a planted symbolic link (the lock would truncate and write its target), and
    // only a regular file (a FIFO or device is not ours).
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    // The folder is gone again: a run releasing the lock removed the folder it had created (and
    // that held nothing else) between our creating it and opening the file. Create it again.
    if (fd < 0 && errno == ENOENT && attempt + 1 < kAttempts) continue;
    if (fd < 0)
      throw input_error("fp8a.io.104", path_ + ": cannot write: " +
                                           (errno == ELOOP ? std::string("a symbolic link, not a lock file")
                                                           : std::string(std::strerror(errno))));
    if (struct stat st {}; ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1) {
      ::close(fd);
      // A hard link's other name is someone's file: truncating and writing ours would reach it.
      throw input_error("fp8a.io.104", path_ + ": cannot write: " +
                                           (S_ISREG(st.st_mode) ? "a hard link to another file, not a lock file"
                                                                : "not a regular file"));
    }
    test_delay();
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const Holder h = err == EWOULDBLOCK ? read_holder(fd) : Holder{};
      ::close(fd);
      if (err != EWOULDBLOCK) throw input_error("fp8a.io.104", path_ + ": cannot lock: " + std::strerror(err));
      if (h.pid == 0 && attempt + 1 < kAttempts) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      const std::string who =
          h.pid != 0 ? std::to_string(h.pid) + ": " + h.command : "unknown: it names no command yet";
      throw usage_error("fp8a.usage.220",
                        "--out " + dir + " is in use by another fp8-advisor (pid " + who +
                            "); wait for it or choose another --out (a lock left by a dead run is taken over: " +
                            path_ + ")");
    }
    if (!same_file(fd, path_)) {  // removed by a run releasing it: lock the file there now
      ::close(fd);
      continue;
    }
    const Holder last = read_holder(fd);  // a dead run's, when it did not end cleanly
    remove_leftovers(dir, last.pid);
    const bool ok = ::ftruncate(fd, 0) == 0 &&
                    ::pwrite(fd, me.data(), me.size(), 0) == static_cast<ssize_t>(me.size());
    if (!ok) {
      const int err = errno;
      ::close(fd);
      throw input_error("fp8a.io.104", path_ + ": cannot write the lock: " + std::strerror(err));
    }
    fd_ = fd;
    return;
  }
  throw input_error("fp8a.io.104", path_ + ": cannot take the lock (its file kept being removed)");
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  // The file goes while the lock is held: a run that opened it in the meantime finds, once it
  // has the lock, that the path no longer names that inode, and starts again (same_file).
  ::unlink(path_.c_str());
  ::close(fd_);
  if (created_dir_) {
    std::error_code ec;
    if (fs::is_empty(dir_, ec) && !ec) fs::remove(dir_, ec);  // nothing else in it: an error
  }
}

}  // namespace fp8a

// One run per output directory: a kernel lock (flock(2), exclusive) on `DIR/.fp8-advisor.lock`,
// taken before the run reads anything and held until it ends. The kernel drops the lock when its
// process dies (killed, crashed), so there is no stale lock to take over and no
// read-check-unlink-create window. After taking it the holder writes "pid start-time command"
// into the file, for the message a second run gives. While holding it a run removes what a dead
// run left half done: its `NAME.tmp.<pid>` files (the pid the lock file still names) and any
// `.fp8-advisor-staging.*` folder (rundir/output_set.hpp).
//
// On release the lock file is removed, the lock still held, so a run leaves --out as it found it
// (and a directory the lock created and nothing else filled goes too). A second run that opened
// the file in the meantime then locks an unlinked inode: every run therefore checks, after taking
// the lock, that the path still names the inode it locked, and starts again when it does not.
// So the removal cannot give two runs the lock (tests/rundir/test_output_lock.cpp forces it).
// A killed run's file stays, its kernel lock gone: the next run takes it.
#pragma once

#include <string>

namespace fp8a {

class OutputLock {
 public:
  // Creates dir when missing, then takes its lock. Usage error fp8a.usage.220 when another
  // fp8-advisor holds it (its pid and command named); input error fp8a.io.104 when the directory
  // or the lock file cannot be written or locked.
  OutputLock(const std::string& dir, const std::string& command);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  // The lock file's name inside the directory.
  static constexpr const char* kFileName = ".fp8-advisor.lock";

 private:
  std::string dir_, path_;
  int fd_ = -1;
  bool created_dir_ = false;
};

}  // namespace fp8a

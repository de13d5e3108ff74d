// One run per output directory: a kernel lock (flock(2), exclusive) on `DIR/.fp8-advisor.lock`,
// taken before the run reads anything and held until it ends. The file is never removed while the
// directory stays (one exception below), so two runs always lock the same inode; the kernel drops
// the lock when its process dies (killed, crashed), so there is no stale lock to take over and no
// read-check-unlink-create window. After taking it the holder writes "pid start-time command"
// into the file, for the message a second run gives; on a clean release the file is emptied.
// While holding it a run removes what a dead run left half done: its `NAME.tmp.<pid>` files (the
// pid the lock file still names) and any `.fp8-advisor-staging.*` folder (reports/output_set.hpp).
//
// When the lock created the directory and the run ends with nothing else in it (an error), the
// lock file and the directory are removed, the lock still held. A second run that opened the file
// in the meantime then locks an unlinked inode: every run therefore checks, after taking the lock,
// that the path still names the inode it locked, and starts again (creating the directory anew)
// when it does not. So the removal cannot give two runs the lock.
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

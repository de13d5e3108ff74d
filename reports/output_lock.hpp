// One run per output directory: a lock file `DIR/.fp8-advisor.lock` holding the owner's pid and
// its start time (from /proc), taken before the run reads anything and removed when it ends. A
// second run on the same directory refuses while the owner lives; a lock whose process is gone
// (killed, crashed: the pid does not exist or now belongs to a later process) is stale and is
// taken over, so a dead run never blocks its directory (and the temporary files it was writing
// when it died are removed). When the lock created the directory and
// the run ends without writing anything (an error), the empty directory is removed again.
#pragma once

#include <string>

namespace fp8a {

class OutputLock {
 public:
  // Creates dir when missing, then takes its lock. Usage error fp8a.usage.220 when another live
  // fp8-advisor holds it (its pid, command and start named); input error fp8a.io.104 when the
  // directory or the lock file cannot be written.
  OutputLock(const std::string& dir, const std::string& command);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  // The lock file's name inside the directory.
  static constexpr const char* kFileName = ".fp8-advisor.lock";

 private:
  std::string dir_, path_;
  bool created_dir_ = false;
};

}  // namespace fp8a

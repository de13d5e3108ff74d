#include "reports/output_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "reports/atomic_file.hpp"

namespace fp8a {

namespace {

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

// The lock's owner as written: "pid start-time command".
Holder read_holder(const std::string& path) {
  std::ifstream in(path);
  Holder h;
  in >> h.pid >> h.started;
  std::getline(in >> std::ws, h.command);
  return h;
}

// Whether the owner still runs: its pid exists and started when the lock says.
bool alive(const Holder& h) {
  if (h.pid <= 0) return false;
  if (::kill(static_cast<pid_t>(h.pid), 0) != 0 && errno == ESRCH) return false;
  const std::string now = start_time(h.pid);
  return now.empty() || h.started.empty() || now == h.started;
}

// The temporary files a dead run was writing when it died (atomic_file.hpp names them
// NAME.tmp.PID): never renamed into place, so nothing reads them; removed with the stale lock.
void remove_temporaries(const std::string& dir, long pid) {
  if (pid <= 0) return;
  const std::string suffix = ".tmp." + std::to_string(pid);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().filename().string().ends_with(suffix)) std::filesystem::remove(e.path(), ec);
}

}  // namespace

OutputLock::OutputLock(const std::string& dir, const std::string& command)
    : dir_(dir), path_(dir + "/" + kFileName) {
  std::error_code ec;
  created_dir_ = !std::filesystem::exists(dir, ec);
  ensure_output_directory(dir);
  const std::string me = std::to_string(::getpid()) + " " + start_time(::getpid()) + " " + command + "\n";
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const bool ok = ::write(fd, me.data(), me.size()) == static_cast<ssize_t>(me.size());
      ::close(fd);
      if (!ok) {
        ::unlink(path_.c_str());
        throw input_error("fp8a.io.104", path_ + ": cannot write the lock");
      }
      return;
    }
    if (errno != EEXIST) throw input_error("fp8a.io.104", path_ + ": cannot write: " + std::strerror(errno));
    const Holder h = read_holder(path_);
    if (alive(h))
      throw usage_error("fp8a.usage.220",
                        "--out " + dir + " is in use by another fp8-advisor (pid " + std::to_string(h.pid) +
                            ": " + h.command + "); wait for it or choose another --out (a lock left by "
                            "a dead run is taken over: " + path_ + ")");
    ::unlink(path_.c_str());  // stale: its run is gone
    remove_temporaries(dir, h.pid);
  }
  throw input_error("fp8a.io.104", path_ + ": cannot take the lock (another run took it meanwhile)");
}

OutputLock::~OutputLock() {
  ::unlink(path_.c_str());
  if (created_dir_) {
    std::error_code ec;
    if (std::filesystem::is_empty(dir_, ec)) std::filesystem::remove(dir_, ec);
  }
}

}  // namespace fp8a

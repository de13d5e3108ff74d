#include "rundir/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace fp8a {

namespace {
[[noreturn]] void write_failed(const std::string& path, const std::string& why) {
  throw input_error("fp8a.io.104", path + ": cannot write: " + why);
}
}  // namespace

void ensure_output_directory(const std::string& dir) {
  std::error_code ec;
  namespace fs = std::filesystem;
  // One stat: with two (exists, then is_directory) a folder removed in between by a run releasing
  // the --out lock read as "not a directory".
  if (const fs::file_status st = fs::status(dir, ec); fs::exists(st) && !fs::is_directory(st))
    write_failed(dir, "not a directory");
  ec.clear();
  fs::create_directories(dir, ec);
  if (ec) write_failed(dir, ec.message());
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  write_file_atomically(path, [&](const ByteSink& put) { put(contents); });
}

void write_file_atomically(const std::string& path, const std::function<void(const ByteSink&)>& produce) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  // O_NOFOLLOW: a symbolic link planted at the (predictable) temporary name is not written through.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) write_failed(path, std::strerror(errno));
  struct PutFailed {
    int err;
  };
  const ByteSink put = [&](std::string_view piece) {
    std::size_t done = 0;
    while (done < piece.size()) {
      const ssize_t n = ::write(fd, piece.data() + done, piece.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw PutFailed{errno};
      }
      done += static_cast<std::size_t>(n);
    }
  };
  try {
    produce(put);
  } catch (const PutFailed& f) {
    ::close(fd);
    ::unlink(tmp.c_str());
    write_failed(path, std::strerror(f.err));
  } catch (...) {  // the producer's own error: no file either
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  int err = ::fsync(fd) != 0 ? errno : 0;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    write_failed(path, std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    write_failed(path, std::strerror(err));
  }
}

std::optional<std::string> read_regular_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::optional<std::string> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    out.emplace();
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        out->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0) {
        break;
      } else if (errno != EINTR) {
        out.reset();
        break;
      }
    }
  }
  ::close(fd);
  return out;
}

}  // namespace fp8a

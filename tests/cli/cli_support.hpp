// Helpers of the end-to-end tests of the fp8-advisor executable (tests/cli/*.cpp): run it with
// arguments and collect exit code, stdout and stderr; temporary directories; file and CSV
// reading.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace fp8a::cli_test {

namespace fs = std::filesystem;

// The binary under test: $FP8A_TEST_BINARY when set (the GPU bundle carries the binaries away from
// the build tree they were built in), else the one the test was built against.
inline std::string binary_under_test() {
  const char* env = std::getenv("FP8A_TEST_BINARY");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(FP8A_BINARY);
}
inline const std::string kBinary = binary_under_test();
inline const fs::path kSource = FP8A_SOURCE_DIR;

struct Result {
  int rc;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
}

using fp8a::testing::TempDir;

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs the binary with `args` (shell syntax), stdin from /dev/null; `env`: "NAME=value ..."
// assignments for its environment.
inline Result run(const std::string& args, const std::string& env = {}) {
  TempDir io;
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + shell_quote(kBinary) + " " + args + " >" +
                          shell_quote((io.path / "out").string()) + " 2>" +
                          shell_quote((io.path / "err").string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  return {WEXITSTATUS(status), slurp(io.path / "out"), slurp(io.path / "err")};
}

// The checkpoint units a run has kept in --out so far (whole files only: NAME.unit).
inline std::size_t units_in(const fs::path& out) {
  std::error_code ec;
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(out / ".fp8-advisor-checkpoint/units", ec))
    n += e.path().extension() == ".unit";
  return n;
}

// Whether no process holds the --out lock file's kernel lock (flock) now: this process takes it
// and lets it go again. A released lock's file is gone (rundir/output_lock.hpp).
inline bool lock_is_free(const fs::path& lock) {
  const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return true;  // no file, no lock
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

using Row = std::map<std::string, std::string>;
using Table = std::vector<Row>;

// A CSV of one-line records, header row as keys; a field may be quoted (RFC 4180: commas inside,
// "" for a quote), as gemms.csv's notes are.
inline Table read_csv(const std::string& text) {
  const auto split = [](const std::string& line) {
    std::vector<std::string> f(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') f.back() += line[++i];
      else if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) f.emplace_back();
      else f.back() += c;
    }
    return f;
  };
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  const auto head = split(line);
  Table rows;
  while (std::getline(in, line)) {
    const auto f = split(line);
    REQUIRE(f.size() == head.size());
    Row r;
    for (std::size_t i = 0; i < f.size(); ++i) r[head[i]] = f[i];
    rows.push_back(std::move(r));
  }
  return rows;
}

inline double num(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

}  // namespace fp8a::cli_test

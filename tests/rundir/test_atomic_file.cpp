// Atomic writes (rundir/atomic_file.hpp): a file is replaced whole, and a failed write leaves
// nothing behind.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "rundir/atomic_file.hpp"
#include "support/golden.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using fp8a::testing::slurp;

TEST_CASE("atomic writes replace whole files and leave nothing behind on failure") {
  const fp8a::testing::TempDir scratch;
  const fs::path dir = scratch.path;
  const fs::path out = dir / "a" / "b";
  fp8a::ensure_output_directory(out.string());
  CHECK(fs::is_directory(out));
  fp8a::write_file_atomically((out / "x.csv").string(), "first, longer contents\n");
  fp8a::write_file_atomically((out / "x.csv").string(), "second\n");
  CHECK(slurp(out / "x.csv") == "second\n");
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(out)) ++n;
  CHECK(n == 1);
  const std::string bad = (dir / "missing" / "x.csv").string();
  CHECK_THROWS_WITH_AS(fp8a::write_file_atomically(bad, "x"),
                       ("[fp8a.io.104] " + bad + ": cannot write: No such file or directory").c_str(),
                       fp8a::Error);
}

TEST_CASE("a file made in pieces is written as they come; a producer's error leaves no file") {
  const fp8a::testing::TempDir scratch;
  const fs::path f = scratch.path / "trace.csv";
  fp8a::write_file_atomically(f.string(), [](const fp8a::ByteSink& put) {
    put("step,tensor,amax\n");
    for (int s = 0; s < 3; ++s) put(std::to_string(s) + ",x,1\n");
  });
  CHECK(slurp(f) == "step,tensor,amax\n0,x,1\n1,x,1\n2,x,1\n");
  const fs::path g = scratch.path / "half.csv";
  CHECK_THROWS_AS(fp8a::write_file_atomically(g.string(),
                                              [](const fp8a::ByteSink& put) {
                                                put("step,");
                                                throw std::runtime_error("generator failed");
                                              }),
                  std::runtime_error);
  CHECK_FALSE(fs::exists(g));
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(scratch.path)) ++n;
  CHECK(n == 1);  // trace.csv; no temporary left
}

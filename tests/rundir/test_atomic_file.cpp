// Atomic writes (rundir/atomic_file.hpp): a file is replaced whole, and a failed write leaves
// nothing behind.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
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

// Golden files of the report writers (tests/golden/reports/): a renderer's output diffed exactly
// against its file; FP8A_UPDATE_GOLDEN=1 rewrites the files instead, to be reviewed in the diff.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fp8a::testing {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void check_golden(const std::string& name, const std::string& got) {
  const std::filesystem::path path =
      std::filesystem::path(FP8A_SOURCE_DIR) / "tests/golden/reports" / name;
  if (const char* u = std::getenv("FP8A_UPDATE_GOLDEN"); u != nullptr && std::string(u) == "1") {
    std::ofstream(path, std::ios::binary) << got;
    MESSAGE("updated " << path);
    return;
  }
  INFO("golden file " << path << " (FP8A_UPDATE_GOLDEN=1 refreshes it)");
  REQUIRE(std::filesystem::exists(path));
  CHECK(got == slurp(path));
}

}  // namespace fp8a::testing

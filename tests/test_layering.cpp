// Data flows one way: datasets -> engine -> policies -> reports -> cli, with engine/core shared by
// all. A stage may include only engine/core and stages to its left; this test reads every
// #include "..." line of the source tree and enforces that.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

namespace {

// Stage of a path relative to the source root ("engine/core/x.hpp" -> "engine/core").
std::string stage_of(const std::string& rel) {
  if (rel.rfind("engine/core/", 0) == 0) return "engine/core";
  return rel.substr(0, rel.find('/'));
}

const std::map<std::string, std::set<std::string>> kAllowed = {
    {"engine/core", {"engine/core"}},
    {"datasets", {"engine/core", "datasets"}},
    {"engine", {"engine/core", "datasets", "engine"}},
    {"cuda", {"engine/core", "datasets", "engine", "cuda"}},
    {"policies", {"engine/core", "datasets", "engine", "policies"}},
    {"reports", {"engine/core", "datasets", "engine", "policies", "reports"}},
};

}  // namespace

TEST_CASE("no stage includes a stage to its right") {
  namespace fs = std::filesystem;
  const fs::path root = FP8A_SOURCE_DIR;
  int files = 0;
  for (const auto& [stage, allowed] : kAllowed) {
    for (const auto& entry : fs::recursive_directory_iterator(root / stage)) {
      const auto ext = entry.path().extension().string();
      if (ext != ".hpp" && ext != ".cpp" && ext != ".cuh" && ext != ".cu") continue;
      const std::string rel = fs::relative(entry.path(), root).string();
      if (stage_of(rel) != stage) continue;  // engine/core files are checked as their own stage
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("#include \"", 0) != 0) continue;
        const std::string target = line.substr(10, line.find('"', 10) - 10);
        const std::string target_stage = stage_of(target);
        INFO(rel << " includes " << target);
        CHECK(allowed.count(target_stage) == 1);
      }
    }
  }
  CHECK(files > 20);
}

TEST_CASE("every error id raised in the source is listed in README.md") {
  namespace fs = std::filesystem;
  const fs::path root = FP8A_SOURCE_DIR;
  std::ifstream readme_in(root / "README.md");
  const std::string readme((std::istreambuf_iterator<char>(readme_in)), std::istreambuf_iterator<char>());
  std::set<std::string> ids;
  for (const char* dir : {"engine", "datasets", "policies", "reports", "cli", "cuda"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path());
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (std::size_t pos = text.find("\"fp8a."); pos != std::string::npos; pos = text.find("\"fp8a.", pos + 1)) {
        const auto end = text.find('"', pos + 1);
        const std::string id = text.substr(pos + 1, end - pos - 1);
        // ids look like fp8a.<area>.<digits>
        if (id.find_first_of("0123456789") != std::string::npos && id.back() >= '0' && id.back() <= '9')
          ids.insert(id);
      }
    }
  }
  CHECK(ids.size() > 40);
  for (const auto& id : ids) {
    INFO(id);
    CHECK(readme.find("`" + id + "`") != std::string::npos);
  }
}

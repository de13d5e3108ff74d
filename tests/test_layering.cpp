// Data flows one way: core <- datasets <- engine <- policies <- pipeline <- reports <- rundir <- cli, with cuda/ beside
// policies (it implements engine's Backend; only cli links it). A stage may include core/, the
// stages to its left and itself, nothing else; this test reads every #include "..." line of the
// source tree and enforces that.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace {

// Stage of a path relative to the source root: its first folder ("core/recipe.hpp" -> "core").
std::string stage_of(const std::string& rel) { return rel.substr(0, rel.find('/')); }

// The stage each stage builds on; a stage may include that one's allowed stages and itself.
const std::map<std::string, std::string> kLeftOf = {
    {"core", ""},           {"datasets", "core"}, {"engine", "datasets"}, {"cuda", "engine"},
    {"policies", "engine"}, {"pipeline", "policies"}, {"reports", "pipeline"}, {"rundir", "reports"},
    {"cli", "rundir"},
};

std::set<std::string> allowed_for(const std::string& stage) {
  std::set<std::string> out;
  for (std::string s = stage; !s.empty(); s = kLeftOf.at(s)) out.insert(s);
  return out;
}

// The one exception to the stages: the backend registry registers the CUDA backend, under
// #if FP8A_WITH_CUDA, and no other file of cli/ includes cuda/.
constexpr const char* kCudaRegistry = "cli/backend_registry.cpp";

}  // namespace

TEST_CASE("no stage includes a stage to its right") {
  namespace fs = std::filesystem;
  const fs::path root = FP8A_SOURCE_DIR;
  int files = 0;
  for (const auto& [stage, left] : kLeftOf) {
    const std::set<std::string> allowed = allowed_for(stage);
    for (const auto& entry : fs::recursive_directory_iterator(root / stage)) {
      const auto ext = entry.path().extension().string();
      if (ext != ".hpp" && ext != ".cpp" && ext != ".cuh" && ext != ".cu") continue;
      const std::string rel = fs::relative(entry.path(), root).string();
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        if (line.rfind("#include \"", 0) != 0) continue;
        const std::string target = line.substr(10, line.find('"', 10) - 10);
        INFO(rel << " includes " << target);
        const bool registry = rel == kCudaRegistry && stage_of(target) == "cuda";
        CHECK((allowed.count(stage_of(target)) == 1 || registry));
      }
    }
  }
  CHECK(files > 20);
}

// README.md against the real tool: the worked example's block is the command it shows and exactly
// what that command prints, run from a folder whose datasets/ is the source tree's (so the paths
// it prints are the README's, relative); FP8A_UPDATE_GOLDEN=1 writes the real output into
// README.md instead, to be reviewed in the diff. And every file a run writes is named by the
// README's "Outputs" and by `fp8-advisor --help`.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_support.hpp"

namespace fp8a::cli_test {
namespace {

const fs::path kReadme = kSource / "README.md";
constexpr const char* kExampleHeading = "\n## Worked example: a sample shaped like a real model\n";
constexpr const char* kPrompt = "$ ./build/cli/fp8-advisor ";

// The worked example's block: the command (its `\` continuation lines joined) and the output,
// with the offsets of the output in the README's text.
struct ExampleBlock {
  std::string args;  // after "./build/cli/fp8-advisor "
  std::string output;
  std::size_t output_begin = 0, output_end = 0;
};

ExampleBlock example_block(const std::string& readme) {
  const auto heading = readme.find(kExampleHeading);
  REQUIRE_MESSAGE(heading != std::string::npos, "README.md has no \"Worked example\" section");
  const auto fence = readme.find("\n```\n", heading);
  REQUIRE(fence != std::string::npos);
  std::size_t pos = fence + 5;
  REQUIRE_MESSAGE(readme.compare(pos, std::string(kPrompt).size(), kPrompt) == 0,
                  "the block starts with: " << kPrompt);
  pos += std::string(kPrompt).size();
  ExampleBlock b;
  for (;;) {
    const auto eol = readme.find('\n', pos);
    REQUIRE(eol != std::string::npos);
    const std::string line = readme.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.size() < 2 || line.compare(line.size() - 2, 2, " \\") != 0) {
      b.args += line;
      break;
    }
    b.args += line.substr(0, line.size() - 1);
  }
  b.output_begin = pos;
  b.output_end = readme.find("```\n", pos);
  REQUIRE(b.output_end != std::string::npos);
  b.output = readme.substr(b.output_begin, b.output_end - b.output_begin);
  return b;
}

}  // namespace

TEST_CASE("README.md: the worked example prints what the README shows") {
  const std::string readme = slurp(kReadme);
  const ExampleBlock block = example_block(readme);
  // scripts/setup.sh (README command 1) ends with this run, without --quiet.
  const std::string setup = slurp(kSource / "scripts/setup.sh");
  const auto run_at = setup.find("./build/cli/fp8-advisor run ");
  REQUIRE(run_at != std::string::npos);
  std::string setup_args;
  for (std::size_t i = run_at + std::string("./build/cli/fp8-advisor ").size(); i < setup.size() && setup[i] != '\n'; ++i) {
    if (setup.compare(i, 2, "\\\n") == 0) {  // a continuation line
      i += 1;
      while (i + 1 < setup.size() && setup[i + 1] == ' ') ++i;
      setup_args += ' ';
      continue;
    }
    setup_args += setup[i];
  }
  auto squeeze = [](std::string t) {
    std::string o;
    for (char c : t)
      if (c != ' ' || (!o.empty() && o.back() != ' ')) o += c;
    return o;
  };
  CHECK(squeeze(setup_args) + " --quiet" == squeeze(block.args));
  TempDir cwd;
  fs::create_directory_symlink(kSource / "datasets", cwd.path / "datasets");
  // The sample as scripts/setup.sh makes it.
  const auto synth = run("synth --preset model --out " + shell_quote((cwd.path / "build/sample-model").string()));
  REQUIRE(synth.rc == 0);
  const std::string cmd = "cd " + shell_quote(cwd.path.string()) + " && " + shell_quote(kBinary) + " " +
                          block.args + " >stdout 2>stderr </dev/null";
  INFO("README.md's command: ./build/cli/fp8-advisor " << block.args);
  const int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(slurp(cwd.path / "stderr").empty());
  const std::string got = slurp(cwd.path / "stdout");
  // Robust by construction: nothing of this machine or build in the block.
  const std::string version = run("--version").out;
  const std::string revision = version.substr(0, version.find(')')).substr(version.find("(git ") + 5);
  REQUIRE(!revision.empty());
  CHECK(got.find(revision) == std::string::npos);
  CHECK(got.find(cwd.path.string()) == std::string::npos);
  CHECK(got.find(" /") == std::string::npos);
  if (const char* u = std::getenv("FP8A_UPDATE_GOLDEN"); u != nullptr && std::string(u) == "1") {
    write_bytes(kReadme, readme.substr(0, block.output_begin) + got + readme.substr(block.output_end));
    MESSAGE("updated " << kReadme);
    return;
  }
  // What the example is there to show (issue 37), read from the run's summary.json rather than
  // its text: most GEMM FLOPs in FP8, a predicted speedup over BF16 at the recorded token count,
  // and at least one GEMM in BF16 with its reason.
  const auto decision = nlohmann::json::parse(slurp(cwd.path / "build/sample-run/summary.json")).at("decision");
  CHECK(decision.at("chosen").at("fp8_flop_share").get<double>() > 0.5);
  CHECK(decision.at("chosen").at("gemm_speedup_vs_bf16").get<double>() > 1.0);
  CHECK(decision.at("cost_basis").get<std::string>().find("recorded in") != std::string::npos);
  int bf16_gemms = 0;
  for (const auto& l : decision.at("layers")) {
    for (const auto& [gemm, g] : l.at("gemms").items()) {
      if (g.at("precision") != "bf16") continue;
      ++bf16_gemms;
      bool reasoned = false;  // "<gemm>: <criterion's numbers>"
      for (const auto& r : l.at("reasons")) reasoned |= r.get<std::string>().starts_with(gemm + ": ");
      CHECK_MESSAGE(reasoned, l.at("layer") << " " << gemm);
    }
  }
  CHECK(bf16_gemms >= 1);

  // One watch list: the answer, report.md, recipe.json and nvdlfw_inspect.yaml name the same
  // "<layer> <gemm>"s, in the same order where the file has one.
  const fs::path run_dir = cwd.path / "build/sample-run";
  const auto lines_after = [](const std::string& text, const std::string& heading, const std::string& prefix) {
    std::vector<std::string> items;
    std::size_t at = text.find(heading);
    if (at == std::string::npos) return items;
    at += heading.size();
    while (text.compare(at, prefix.size(), prefix) == 0) {
      const std::size_t eol = text.find('\n', at);
      const std::string item = text.substr(at + prefix.size(), eol - at - prefix.size());
      items.push_back(item.substr(0, item.find(':')));  // "<layer> <gemm>"
      at = eol + 1;
    }
    return items;
  };
  const std::vector<std::string> answer_watch = lines_after(got, "  watch next run:\n", "    ");
  REQUIRE(answer_watch.size() == 5);
  CHECK(lines_after(slurp(run_dir / "report.md"), "### Watch next run\n\n", "- ") == answer_watch);
  std::vector<std::string> json_watch;
  const auto recipe = nlohmann::json::parse(slurp(run_dir / "recipe.json"));
  for (const auto& w : recipe.at("watch"))
    json_watch.push_back(w.at("layer").get<std::string>() + " " + w.at("gemm").get<std::string>());
  CHECK(json_watch == answer_watch);
  std::set<std::string> yaml_watch;  // "# <layer> -> <module> (...)" then "# watch: <gemm> kept FP8 ..."
  std::istringstream yaml(slurp(run_dir / "nvdlfw_inspect.yaml"));
  std::string line, layer;
  while (std::getline(yaml, line)) {
    if (line.starts_with("# ") && line.find(" -> ") != std::string::npos) layer = line.substr(2, line.find(" -> ") - 2);
    if (line.starts_with("# watch: ")) yaml_watch.insert(layer + " " + line.substr(9, line.find(' ', 9) - 9));
  }
  CHECK(yaml_watch == std::set<std::string>(answer_watch.begin(), answer_watch.end()));
  INFO("README.md's worked example (FP8A_UPDATE_GOLDEN=1 refreshes it)");
  CHECK(got == block.output);

  // The files of that run, each named in README's "Outputs" and in the top-level --help.
  const auto outputs = readme.find("\n## Outputs\n");
  REQUIRE(outputs != std::string::npos);
  const std::string outputs_section = readme.substr(outputs, readme.find("\n## ", outputs + 1) - outputs);
  const std::string help = run("--help").out;
  int files = 0;
  for (const auto& e : fs::directory_iterator(cwd.path / "build/sample-run")) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.front() == '.') continue;
    INFO(name);
    ++files;
    CHECK(outputs_section.find("`" + name + "`") != std::string::npos);
    CHECK(help.find(name) != std::string::npos);
  }
  CHECK(files == 12);
  // The thirteenth, written only when --training-log holds logged statistics.
  CHECK(outputs_section.find("`nvdlfw_stats.csv`") != std::string::npos);
  CHECK(help.find("nvdlfw_stats.csv") != std::string::npos);
}

}  // namespace fp8a::cli_test

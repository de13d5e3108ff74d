// Files that change or misbehave under `run` (issue 25): a capture truncated while the run reads
// it is the input error fp8a.io.110 naming the file, never a signal; paths that are not UTF-8
// (a capture folder, --out) are kept losslessly in every JSON file and a --resume of them reuses
// everything; a run that fails on its input leaves --out as it found it; a checkpoint unit that
// is a FIFO, or a units/ folder that is a symbolic link, is damage that --resume removes with a
// note, never waits on nor writes through.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/text.hpp"
#include "tests/cli/cli_support.hpp"

using fp8a::cli_test::units_in;

namespace {

using namespace fp8a::cli_test;
using Clock = std::chrono::steady_clock;

// The real lm-spike capture, copied to `capture` (a folder name the test chooses), --threads 1.
struct Spike {
  TempDir dir;
  fs::path capture, out;
  explicit Spike(const std::string& capture_name = "capture", const std::string& out_name = "out")
      : capture(dir.path / capture_name), out(dir.path / out_name) {
    fs::copy(kSource / "datasets/real/lm-spike", capture, fs::copy_options::recursive);
  }
  std::string args(const std::string& extra = {}) const {
    return "run --capture " + shell_quote(capture.string()) + " --out " + shell_quote(out.string()) +
           " --threads 1 --quiet " + extra;
  }
  std::vector<fs::path> files() const {
    std::vector<fs::path> f;
    for (const auto& e : fs::directory_iterator(capture))
      if (e.path().extension() == ".safetensors") f.push_back(e.path());
    std::sort(f.begin(), f.end());
    return f;
  }
};

// Every file below dir (relative path -> contents).
std::map<std::string, std::string> tree(const fs::path& dir) {
  std::map<std::string, std::string> t;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    t[fs::relative(e.path(), dir).string()] = e.is_regular_file() ? slurp(e.path()) : "<dir>";
  return t;
}

}  // namespace

TEST_CASE("a capture truncated while run reads it: fp8a.io.110 naming the file, exit 3, no outputs") {
  const Spike s;
  TempDir io;
  const std::string cmd = "exec " + shell_quote(kBinary) + " " + s.args() + " 2>" +
                          shell_quote((io.path / "stderr").string()) + " >/dev/null </dev/null";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Once the first unit is kept the captures are mapped and most of the run is to come: held
  // still while every capture file is cut to one page (a training job rewriting it in place).
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (units_in(s.out) == 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ::kill(pid, SIGSTOP);
  for (const fs::path& f : s.files()) REQUIRE(::truncate(f.c_str(), 4096) == 0);
  ::kill(pid, SIGCONT);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  const std::string err = slurp(io.path / "stderr");
  INFO(err);
  INFO("wait status " << status);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  // The one error line names one of the files and its two versions.
  bool named = false;
  for (const fs::path& f : s.files())
    named = named || err.find("fp8-advisor: error: [fp8a.io.110] " + f.string() +
                              ": changed while the run read it (was size ") != std::string::npos;
  CHECK(named);
  CHECK(err.find("; now size 4096, mtime ") != std::string::npos);
  CHECK(err.find("): rerun once nothing writes to it\n") != std::string::npos);
  CHECK(!fs::exists(s.out / "metrics.csv"));
  CHECK(!fs::exists(s.out / "summary.json"));
  // The files whole again: the next run takes --out over and finishes.
  fs::remove_all(s.capture);
  fs::copy(kSource / "datasets/real/lm-spike", s.capture, fs::copy_options::recursive);
  const Result again = run(s.args("--resume"));
  INFO(again.err);
  CHECK(again.rc == 0);
}

TEST_CASE("paths that are not UTF-8: kept losslessly in summary.json, recipe.json and the manifest") {
  const Spike s("capture\xFF\\x", "out\xFE");
  const Result r = run(s.args());
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string metrics = slurp(s.out / "metrics.csv");
  const auto summary = nlohmann::json::parse(slurp(s.out / "summary.json"));
  const auto files = s.files();
  REQUIRE(summary.at("inputs").size() == files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string written = summary.at("inputs")[i].at("file");
    CHECK(written == fp8a::utf8_lossless(files[i].string()));
    CHECK(fp8a::utf8_lossless_decode(written) == files[i].string());
  }
  // The form itself, spelled out: 0xFF as \xff, the folder's "\" doubled.
  CHECK(summary.at("inputs")[0].at("file").get<std::string>().find("/capture\\xff\\\\x/rank0_step_") != std::string::npos);
  const auto command_line = summary.at("command_line");
  CHECK(std::find(command_line.begin(), command_line.end(), fp8a::utf8_lossless(s.out.string())) != command_line.end());
  const auto recipe = nlohmann::json::parse(slurp(s.out / "recipe.json"));
  CHECK(recipe.at("provenance").at("command_line") == command_line);
  const auto manifest = nlohmann::json::parse(slurp(s.out / ".fp8-advisor-checkpoint/manifest.json"));
  std::vector<std::string> inputs;
  for (const auto& [path, identity] : manifest.at("inputs").items()) inputs.push_back(fp8a::utf8_lossless_decode(path));
  std::vector<std::string> expected;
  for (const fs::path& f : files) expected.push_back(f.string());
  CHECK(inputs == expected);
  // --resume reads the manifest back as the same bytes: nothing changed, every unit reused.
  const Result again = run(s.args("--resume"));
  INFO(again.err);
  REQUIRE(again.rc == 0);
  CHECK(again.err.find("changed") == std::string::npos);
  CHECK(again.err.find("was not read before") == std::string::npos);
  CHECK(again.err.find("fp8-advisor: resumed: ") != std::string::npos);
  CHECK(slurp(s.out / "metrics.csv") == metrics);
}

TEST_CASE("a run that fails on its input leaves --out as it found it, a path not UTF-8 included") {
  TempDir dir;
  const fs::path capture = dir.path / "bad\xFF", out = dir.path / "out\xFE";
  fs::create_directories(capture);
  write_bytes(capture / "step_1.safetensors", std::string("\x10\0\0\0\0\0\0\0{\"a\":", 13));
  const std::string args = "run --capture " + shell_quote(capture.string()) + " --out " + shell_quote(out.string()) + " --quiet";
  // --out missing: not created.
  Result r = run(args);
  INFO(r.err);
  CHECK(r.rc == 3);
  // The path as the error line shows it: the byte outside UTF-8 escaped (core/text printable_text).
  CHECK(r.err.find("[fp8a.safetensors.303] " + (dir.path / "bad\\xff/step_1.safetensors").string()) != std::string::npos);
  CHECK(!fs::exists(out));
  // --out holding an earlier run's files: byte for byte as they were.
  fs::create_directories(out);
  write_bytes(out / "metrics.csv", "earlier\n");
  const auto before = tree(out);
  r = run(args);
  CHECK(r.rc == 3);
  CHECK(tree(out) == before);
}

TEST_CASE("--resume with a unit that is a FIFO, or units/ linked outside --out: removed with a note") {
  const Spike s;
  const Result first = run(s.args());
  INFO(first.err);
  REQUIRE(first.rc == 0);
  const std::string metrics = slurp(s.out / "metrics.csv");
  const fs::path units = s.out / ".fp8-advisor-checkpoint/units";
  SUBCASE("a FIFO: --resume does not wait on it") {
    const fs::path unit = fs::directory_iterator(units)->path();
    fs::remove(unit);
    REQUIRE(::mkfifo(unit.c_str(), 0600) == 0);
    const Result r = run(s.args("--resume"));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    CHECK(r.err.find("fp8-advisor: --resume: 1 entry of " + units.string() +
                     " not a regular file (a symbolic link, FIFO or folder): removed, not followed; "
                     "what they held is evaluated again\n") != std::string::npos);
    CHECK(fs::symlink_status(unit).type() != fs::file_type::fifo);
    CHECK(slurp(s.out / "metrics.csv") == metrics);
  }
  SUBCASE("units/ a symbolic link to a folder outside --out: nothing written there") {
    TempDir elsewhere;
    const fs::path outside = elsewhere.path / "units";
    fs::rename(units, outside);
    fs::create_directory_symlink(outside, units);
    const auto before = tree(outside);
    const Result r = run(s.args("--resume"));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    CHECK(r.err.find("fp8-advisor: --resume: " + units.string() +
                     " is a symbolic link: not followed, removed; evaluating everything\n") != std::string::npos);
    CHECK(fs::symlink_status(units).type() == fs::file_type::directory);
    CHECK(units_in(s.out) > 0);
    CHECK(tree(outside) == before);
    CHECK(slurp(s.out / "metrics.csv") == metrics);
  }
}

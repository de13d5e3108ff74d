// Nothing lost when a run dies (issue 16): a run killed at random points (SIGKILL), more than once,
// then resumed with --resume, ends with the files of an uninterrupted run, byte for byte
// (summary.json apart from its timings); SIGINT and SIGTERM stop at the next unit of work, keep
// the checkpoint and say how to resume; a changed input is evaluated again, and the run says so.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "tests/cli/cli_support.hpp"

using fp8a::cli_test::units_in;

namespace {

using namespace fp8a::cli_test;
using Clock = std::chrono::steady_clock;

// The files every run writes that must not depend on its history.
const char* const kSameFiles[] = {"metrics.csv", "gemms.csv", "recipe.json", "megatron_args.txt",
                                  "megatron_bridge.yaml", "te_precision_config.yaml", "nvdlfw_inspect.yaml", "torchao.json",
                                  "report.md"};

// The real lm-spike capture with its amax trace (delayed scaling replays earlier steps, so the
// run goes in waves), copied so that a test may touch its files. --threads 1: the longest run.
struct Spike {
  TempDir dir;
  fs::path capture = dir.path / "capture", out = dir.path / "out";
  Spike() {
    fs::copy(kSource / "datasets/real/lm-spike", capture, fs::copy_options::recursive);
  }
  std::string args(const std::string& extra = {}) const {
    return "run --capture " + shell_quote(capture.string()) + " --training-log " +
           shell_quote((capture / "amax_trace_rank0.csv").string()) + " --out " +
           shell_quote(out.string()) + " --threads 1 --quiet " + extra;
  }
};

// A started fp8-advisor run, its output to files.
struct Child {
  pid_t pid = -1;
  fs::path err;
};

Child start(const std::string& args, const fs::path& io) {
  const std::string cmd = "exec " + shell_quote(kBinary) + " " + args + " >" +
                          shell_quote((io / "stdout").string()) + " 2>" + shell_quote((io / "stderr").string()) +
                          " </dev/null";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return {pid, io / "stderr"};
}

// The wait status of a child.
int finish(const Child& c) {
  int status = 0;
  REQUIRE(::waitpid(c.pid, &status, 0) == c.pid);
  return status;
}

// The reference: an uninterrupted run into out, moved to ref (the same --out, so recipe.json's
// provenance is the same command line).
void reference_run(const Spike& s, const fs::path& ref, double* seconds) {
  const auto t0 = Clock::now();
  const Result r = run(s.args());
  *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  INFO(r.err);
  REQUIRE(r.rc == 0);
  fs::rename(s.out, ref);
}

// The backend evaluations a run makes, from its metrics.csv: one per tensor (step, layer, role),
// recipe, orientation and FP8 type (formats that give a tensor the same type share one), and the
// GEMM layers of its gemms.csv (step, layer); those of one step, or of some recipes, when given.
std::size_t evaluations_in(const fs::path& out, const std::string& step = {},
                           const std::set<std::string>& recipes = {}) {
  std::set<std::string> seen;
  for (const Row& r : read_csv(slurp(out / "metrics.csv")))
    if ((step.empty() || r.at("step") == step) && (recipes.empty() || recipes.count(r.at("recipe")) != 0))
      seen.insert(r.at("step") + "|" + r.at("layer") + "|" + r.at("tensor") + "|" + r.at("recipe") + "|" +
                  r.at("orientation") + "|" + r.at("dtype"));
  return seen.size();
}
std::size_t gemm_layers_in(const fs::path& out, const std::string& step = {}) {
  std::set<std::string> seen;
  for (const Row& r : read_csv(slurp(out / "gemms.csv")))
    if (step.empty() || r.at("step") == step) seen.insert(r.at("step") + "|" + r.at("layer"));
  return seen.size();
}

std::string resumed_line(std::size_t reused, std::size_t evaluations, std::size_t gemm_reused,
                         std::size_t gemm_layers) {
  return "fp8-advisor: resumed: " + std::to_string(reused) + " of " + std::to_string(evaluations) +
         " evaluations (tensor x recipe) and " + std::to_string(gemm_reused) + " of " +
         std::to_string(gemm_layers) + " GEMM layers taken from ";
}

// The capture and its reference run.
struct SpikeRun : Spike {
  fs::path ref = dir.path / "ref";
  double t_full = 0;  // the reference run's seconds
  SpikeRun() { reference_run(*this, ref, &t_full); }
};

void check_same_outputs(const fs::path& ref, const fs::path& out) {
  for (const char* f : kSameFiles) {
    INFO(f);
    REQUIRE(fs::exists(out / f));
    CHECK(slurp(ref / f) == slurp(out / f));
  }
  auto a = nlohmann::json::parse(slurp(ref / "summary.json"));
  auto b = nlohmann::json::parse(slurp(out / "summary.json"));
  a.erase("timings_s");
  b.erase("timings_s");
  CHECK(a.dump() == b.dump());
}

}  // namespace

TEST_CASE("killed at random points, more than once, then resumed: the files of an uninterrupted run") {
  const SpikeRun s;
  const fs::path& ref = s.ref;
  const double t_full = s.t_full;
  std::random_device seed_source;
  const unsigned seed = seed_source();
  INFO("seed " << seed << ", uninterrupted run " << t_full << " s");
  std::mt19937 rng(seed);
  int killed = 0;
  for (int attempt = 0; attempt < 4; ++attempt) {
    // The first kill lands in the first 60 % of a fresh run's time: it cuts the run. Later ones
    // fall anywhere in it; a resumed run may be done before. The reference run's time was taken
    // beside other tests (ctest -j): where a fresh run beat the first kill (CI's seed 1935533350:
    // 0 kills), it starts over from nothing with the kill twice as soon, up to 5 times.
    std::uniform_real_distribution<double> when(0.05, attempt == 0 ? 0.6 : 1.0);
    double soon = 1.0;
    for (int retries = 0;; ++retries, soon /= 2) {
      TempDir io;
      const Child c = start(s.args(attempt == 0 ? "" : "--resume"), io.path);
      std::this_thread::sleep_for(std::chrono::duration<double>(when(rng) * t_full * soon));
      ::kill(c.pid, SIGKILL);
      const int status = finish(c);
      if (WIFSIGNALED(status)) {
        ++killed;
        break;
      }
      CHECK(WEXITSTATUS(status) == 0);
      if (attempt != 0 || retries == 5) break;
      fs::remove_all(s.out);
    }
  }
  CHECK(killed >= 1);
  CHECK(units_in(s.out) > 0);
  const Result r = run(s.args("--resume"));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.err.find("fp8-advisor: resumed: ") != std::string::npos);
  check_same_outputs(ref, s.out);
  // No temporary file of a killed run's writes is left behind, in --out or in the checkpoint.
  for (const auto& e : fs::recursive_directory_iterator(s.out))
    CHECK_MESSAGE(e.path().filename().string().find(".tmp.") == std::string::npos, e.path().string());
  // And one more --resume takes everything from the checkpoint.
  const Result again = run(s.args("--resume"));
  REQUIRE(again.rc == 0);
  const std::size_t n = evaluations_in(ref), g = gemm_layers_in(ref);
  // 24 tensors, 13 or 14 evaluations each (three delayed front-runners; --format auto: each
  // recipe in one format, so a gradient's copies once, where e4m3,hybrid evaluated 8 x 13 more).
  CHECK(n == 320);
  CHECK(g == 8);
  CHECK(again.err.find(resumed_line(n, n, g, g)) != std::string::npos);
  check_same_outputs(ref, s.out);
}

TEST_CASE("SIGINT and SIGTERM stop at the next unit, keep the checkpoint and say how to resume") {
  const SpikeRun s;
  const fs::path& ref = s.ref;
  for (const int sig : {SIGINT, SIGTERM}) {
    const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    INFO(name);
    TempDir io;
    fs::remove_all(s.out);
    const Child c = start(s.args(), io.path);
    // Once a first unit is kept, the handlers are in place and most of the run is still to come.
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (units_in(s.out) == 0 && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::kill(c.pid, sig);
    const int status = finish(c);
    const std::string err = slurp(c.err);
    INFO(err);
    INFO("wait status " << status);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + sig);
    CHECK(err.find(std::string("fp8-advisor: stopped by ") + name + ": ") != std::string::npos);
    CHECK(err.find(" are kept in " + (s.out / ".fp8-advisor-checkpoint").string() + "; resume with: ") != std::string::npos);
    CHECK(err.find(" --resume\n") != std::string::npos);
    CHECK(!fs::exists(s.out / "metrics.csv"));
    CHECK(lock_is_free(s.out / ".fp8-advisor.lock"));  // released on the way out
    CHECK(units_in(s.out) > 0);
    const Result r = run(s.args("--resume"));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    check_same_outputs(ref, s.out);
  }
}

TEST_CASE("--resume after an input file changed: its tensors are evaluated again, and it says so") {
  const SpikeRun s;
  const fs::path& ref = s.ref;
  fs::copy(ref, s.out, fs::copy_options::recursive);
  // The same bytes, a new modification time: the checkpoint cannot tell it is the same.
  const fs::path touched = s.capture / "rank0_step_000002.safetensors";
  fs::last_write_time(touched, fs::last_write_time(touched) + std::chrono::seconds(5));
  const Result r = run(s.args("--resume"));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.err.find("fp8-advisor: --resume: " + touched.string() + " changed (was size 525448, mtime ") !=
        std::string::npos);
  CHECK(r.err.find("): what it holds is evaluated again\n") != std::string::npos);
  // Step 2's tensors are evaluated again (delayed candidates of later steps keep their keys: the
  // bytes, so the amaxes, are the same), and the GEMM layers of step 2.
  const std::size_t n = evaluations_in(ref), g = gemm_layers_in(ref);
  const std::size_t n2 = evaluations_in(ref, "2"), g2 = gemm_layers_in(ref, "2");
  CHECK(n2 == 80);
  CHECK(g2 == 2);
  CHECK(r.err.find(resumed_line(n - n2, n, g - g2, g)) != std::string::npos);
  check_same_outputs(ref, s.out);

  // An option that changes results: only what it adds is evaluated.
  const Result more = run(s.args("--resume --recipes current,block,mxfp8"));
  INFO(more.err);
  REQUIRE(more.rc == 0);
  CHECK(more.err.find("fp8-advisor: --resume: --recipes changed (was '") != std::string::npos);
  // Every evaluation of those recipes is in the checkpoint; the GEMM layers are keyed by the
  // whole recipe list, so they are computed again.
  const std::size_t k = evaluations_in(ref, {}, {"current", "block", "mxfp8"});
  CHECK(k == 112);
  CHECK(more.err.find(resumed_line(k, k, 0, g)) != std::string::npos);
  // Without --resume the checkpoint starts afresh.
  const Result fresh = run(s.args());
  REQUIRE(fresh.rc == 0);
  CHECK(fresh.err.find("resumed") == std::string::npos);
  check_same_outputs(ref, s.out);
}

namespace {

// Whether /proc/PID/status says the process catches `sig` (SigCgt: its handler is installed).
bool catches(pid_t pid, int sig) {
  std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("SigCgt:", 0) == 0) return ((std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1) != 0;
  return false;
}

}  // namespace

TEST_CASE("SIGTERM at once after the start: exit 143 with a line, --out left as it was, 20 times") {
  TempDir work;
  const fs::path capture = kSource / "datasets/sample";
  for (int i = 0; i < 20; ++i) {
    INFO("start " << i);
    const fs::path out = work.path / ("out" + std::to_string(i));
    const fs::path err = work.path / ("err" + std::to_string(i));
    // Even starts: the child starts with SIGTERM blocked, and gets it before its first instruction
    // (pending until main unblocks it). Odd starts: sent as soon as the handler is in place.
    const bool blocked = i % 2 == 0;
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    REQUIRE(::sigprocmask(SIG_BLOCK, &term, &old) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      if (!blocked) ::sigprocmask(SIG_SETMASK, &old, nullptr);
      const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, STDERR_FILENO);
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDIN_FILENO);
      ::execl(kBinary.c_str(), kBinary.c_str(), "run", "--capture", capture.c_str(), "--out", out.c_str(), "--quiet",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    REQUIRE(::sigprocmask(SIG_SETMASK, &old, nullptr) == 0);
    if (!blocked) {
      // The binary running (not the fork of this runner before exec) with its handler in place.
      const fs::path binary = fs::canonical(kBinary);
      const fs::path exe = "/proc/" + std::to_string(pid) + "/exe";
      const auto started = [&] {
        std::error_code ec;
        return fs::read_symlink(exe, ec) == binary && catches(pid, SIGTERM);
      };
      while (!started() && ::kill(pid, 0) == 0) std::this_thread::yield();
    }
    ::kill(pid, SIGTERM);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    const std::string text = slurp(err);
    INFO(text);
    REQUIRE_FALSE(WIFSIGNALED(status));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 143);
    if (blocked || text.rfind("fp8-advisor: stopped by SIGTERM before ", 0) == 0) {
      CHECK(text.rfind("fp8-advisor: stopped by SIGTERM before ", 0) == 0);
      CHECK_FALSE(fs::exists(out));  // the lock removed the directory it created, and its file
    } else {
      // Sent once the handler is in place, the signal may land after the run has begun (a loaded
      // machine: seen in CI with 22 evaluations done): the ordinary stop, the checkpoint kept and
      // nothing else written.
      CHECK(text.rfind("fp8-advisor: stopped by SIGTERM: ", 0) == 0);
      std::set<std::string> left;
      for (const auto& e : fs::directory_iterator(out)) left.insert(e.path().filename().string());
      CHECK(left == std::set<std::string>{".fp8-advisor-checkpoint"});
    }
  }
}

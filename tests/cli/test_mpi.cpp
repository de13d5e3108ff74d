// `mpirun --oversubscribe -n N fp8-advisor run ...` against the single-process run of the same
// arguments, which is the reference: the same stdout and the same files byte for byte
// (metrics.csv, gemms.csv, recipe.json, the configs, report.md, report.html), summary.json but
// for its timings. Built only with MPI (label mpi); ctest runs it with OMPI_ALLOW_RUN_AS_ROOT*
// set, as this machine's tests run as root.
#include <doctest/doctest.h>

#include <csignal>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_support.hpp"

namespace {

using namespace fp8a::cli_test;

// mpirun with n ranks of the binary and `args`; stdin from /dev/null. Not bound to cores (Open
// MPI's default), so each rank sees the machine's cores as the single process does (summary.json
// names the thread count).
Result mpirun(int n, const std::string& args) {
  TempDir io;
  const std::string cmd = shell_quote(FP8A_MPIEXEC) + " --oversubscribe --bind-to none -n " + std::to_string(n) + " " +
                          shell_quote(kBinary) + " " + args + " >" + shell_quote((io.path / "out").string()) +
                          " 2>" + shell_quote((io.path / "err").string()) + " </dev/null";
  const int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  return {WEXITSTATUS(status), slurp(io.path / "out"), slurp(io.path / "err")};
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// summary.json without its timings (the one field that differs by design).
std::string without_timings(const fs::path& file) {
  auto j = nlohmann::json::parse(slurp(file));
  j.erase("timings_s");
  return j.dump(1);
}

// One process, then 2 and 3 ranks, on `args` into the same --out (moved away after each run, as
// the provenance names --out): every output compared with the single-process run's.
void check_same_as_one_process(const std::string& args) {
  TempDir work;
  const fs::path out = work.path / "out";
  const auto single = run(args + " --out " + shell_quote(out.string()));
  INFO(single.err);
  REQUIRE(single.rc == 0);
  fs::rename(out, work.path / "1");
  for (int n : {2, 3}) {
    INFO(n, " ranks");
    const auto r = mpirun(n, args + " --out " + shell_quote(out.string()));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    CHECK(r.out == single.out);  // rank 0 alone prints, what one process prints
    const fs::path many = work.path / std::to_string(n);
    fs::rename(out, many);
    for (const char* f : {"metrics.csv", "gemms.csv", "recipe.json", "megatron_args.txt", "megatron_bridge.yaml",
                          "te_precision_config.yaml", "nvdlfw_inspect.yaml", "torchao.json", "report.md", "report.html"}) {
      INFO(f);
      REQUIRE(fs::exists(work.path / "1" / f));
      CHECK(slurp(work.path / "1" / f) == slurp(many / f));
    }
    CHECK(without_timings(work.path / "1/summary.json") == without_timings(many / "summary.json"));
    CHECK(lock_is_free(many / ".fp8-advisor.lock"));  // rank 0's lock, released
  }
}

}  // namespace

TEST_CASE("mpirun -n 2 and -n 3 on lm-spike with its training log: the single-process files") {
  const fs::path dir = kSource / "datasets/real/lm-spike";
  // The default recipes include delayed scaling: one wave of tensors a step, the history of the
  // earlier steps (the trace's and the captured amaxes) known to every rank.
  check_same_as_one_process("run --threads 1 --cost none --capture " + shell_quote(dir.string()) + " --training-log " +
                                shell_quote((dir / "amax_trace_rank0.csv").string()));
}

TEST_CASE("mpirun -n 2 and -n 3 on a synthetic capture of 7 layers: the single-process files") {
  TempDir capture;
  REQUIRE(run("synth --preset all --out " + shell_quote(capture.path.string())).rc == 0);
  check_same_as_one_process("run --threads 1 --recipes current,delayed,block,mxfp8,bf16 --capture " +
                                shell_quote(capture.path.string()));
}

TEST_CASE("an error over several ranks: one line, the exit code kept, no rank left waiting") {
  // Every rank meets it: rank 0 says it once.
  const auto missing = mpirun(2, "run --capture /nonexistent/capture --out " +
                                     shell_quote((fs::temp_directory_path() / "fp8a-mpi-unused").string()));
  CHECK(missing.rc == 3);
  CHECK(count(missing.err, "fp8-advisor: error: [fp8a.io.101]") == 1);
  // Ranks given different arguments (MPMD): refused before any work, naming the rank.
  TempDir out;
  const std::string sample = shell_quote((kSource / "datasets/sample").string());
  const auto differ = mpirun(1, "run --threads 1 --capture " + sample + " --out " + shell_quote(out.path.string()) +
                                    " : -n 1 " + shell_quote(kBinary) + " run --threads 2 --capture " + sample +
                                    " --out " + shell_quote(out.path.string()));
  CHECK(differ.rc == 2);
  CHECK(count(differ.err,
              "fp8-advisor: error: [fp8a.usage.230] MPI rank 1 has argument '2' where rank 0 has argument "
              "'1': every rank must be given the same options and read the same files (a shared file "
              "system)\n") == 1);
  // Only run spreads over ranks.
  const auto inspect = mpirun(2, "inspect " + sample);
  CHECK(inspect.rc == 2);
  CHECK(count(inspect.err, "fp8-advisor: error: [fp8a.usage.231] 'inspect' launched as 2 MPI ranks: only 'run' "
                           "spreads over ranks; run 'inspect' as one process\n") == 1);
}

namespace {

// The pid of the process of MPI rank `rank` whose command line names `marker`; 0 when none yet.
pid_t rank_pid(int rank, const std::string& marker) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = slurp(e.path() / "cmdline");
    if (cmdline.find(marker) == std::string::npos || cmdline.find("fp8-advisor") == std::string::npos) continue;
    const std::string environ = slurp(e.path() / "environ");
    for (std::size_t at = 0; at < environ.size();) {
      const std::size_t end = environ.find('\0', at);
      if (environ.substr(at, end - at) == want) return static_cast<pid_t>(std::stol(name));
      if (end == std::string::npos) break;
      at = end + 1;
    }
  }
  return 0;
}

}  // namespace

TEST_CASE("a rank stopped (SIGSTOP) mid-run: rank 0 names it after --rank-timeout and the job ends") {
  TempDir work;
  const fs::path out = work.path / "out", dir = kSource / "datasets/real/lm-spike";
  // The job is bounded from outside as well (timeout kills it after 300 s: exit 137), so that a
  // hang fails this test rather than holding ctest.
  const std::string cmd = "exec timeout -s KILL 300 " + shell_quote(FP8A_MPIEXEC) +
                          " --oversubscribe --bind-to none -n 2 " + shell_quote(kBinary) + " run --threads 1 --cost none --rank-timeout 2 --capture " +
                          shell_quote(dir.string()) + " --training-log " +
                          shell_quote((dir / "amax_trace_rank0.csv").string()) + " --out " + shell_quote(out.string()) +
                          " >" + shell_quote((work.path / "stdout").string()) + " 2>" +
                          shell_quote((work.path / "stderr").string()) + " </dev/null";
  const pid_t job = ::fork();
  REQUIRE(job >= 0);
  if (job == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Once rank 0 keeps a first unit every rank is past MPI_Init and the first exchange; exchanges
  // (each step's wave, the GEMM layers, the last one before MPI_Finalize) are still to come.
  const fs::path units = out / ".fp8-advisor-checkpoint/units";
  pid_t stopped = 0;
  for (int i = 0; i < 120000 && stopped == 0; ++i) {
    std::error_code ec;
    if (fs::exists(units, ec) && !fs::is_empty(units, ec)) stopped = rank_pid(1, out.string());
    if (stopped == 0) ::usleep(1000);
  }
  REQUIRE(stopped != 0);
  REQUIRE(::kill(stopped, SIGSTOP) == 0);
  int status = 0;
  REQUIRE(::waitpid(job, &status, 0) == job);
  if (::kill(stopped, 0) == 0) ::kill(stopped, SIGKILL);  // never left behind
  const std::string err = slurp(work.path / "stderr");
  INFO(err);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);  // rank 0's usage error, through MPI_Abort; not timeout's 137
  CHECK(count(err, "fp8-advisor: error: [fp8a.usage.240] MPI rank 1 did not answer MPI rank 0 within --rank-timeout "
                   "2 s: stopped, hung or far behind the others (raise --rank-timeout when one rank's share takes "
                   "that much longer than another's)\n") == 1);
  CHECK_FALSE(fs::exists(out / "metrics.csv"));
}

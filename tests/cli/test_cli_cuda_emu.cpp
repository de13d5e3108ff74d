// fp8-advisor built on the host emulation of cuda/emu (label cuda-emu): `run --device cuda` on the
// sample capture gives --device cpu's metrics.csv (text equal, numbers within the rounding of
// float64 sums) and the same emulated GEMM rows, and summary.json names the CUDA backend, as
// scripts/gpu-check.sh checks on a GPU. No cuBLASLt here: gemms.csv has emulated rows only.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "cli/cli_support.hpp"

namespace {

namespace ct = fp8a::cli_test;

// Float64 sums of at most ~10^6 non-negative terms in two orders (tests/cuda/backend_compare.hpp):
// 2 n 2^-53 relative, with n well under 10^6 here; derived metrics a few times that.
constexpr double kRelTol = 1e-9;

void check_same_table(const ct::Table& cpu, const ct::Table& cuda, const char* what) {
  REQUIRE(cpu.size() == cuda.size());
  CHECK(!cpu.empty());
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    for (const auto& [column, want] : cpu[i]) {
      const std::string& got = cuda[i].at(column);
      if (got == want || column == "note") continue;
      INFO(what << " row " << i << " column " << column << ": cpu " << want << " cuda " << got);
      const double w = ct::num(want), g = ct::num(got);
      CHECK(std::isfinite(w));
      CHECK(std::fabs(g - w) <= kRelTol * std::fabs(w));
    }
  }
}

}  // namespace

TEST_CASE("run --device cuda (emulated) == run --device cpu on the sample, with its amax trace") {
  ct::TempDir out;
  const std::string sample = (ct::kSource / "datasets/sample").string();
  for (const char* device : {"cpu", "cuda"}) {
    const auto r = ct::run("run --capture " + ct::shell_quote(sample) + " --amax-trace " +
                           ct::shell_quote(sample + "/amax_trace.csv") + " --device " + device + " --out " +
                           ct::shell_quote((out.path / device).string()));
    INFO(r.err);
    REQUIRE(r.rc == 0);
  }
  const auto summary = nlohmann::json::parse(ct::slurp(out.path / "cuda/summary.json"));
  CHECK(summary["backend"]["name"] == "cuda");
  CHECK(summary["backend"]["requested"] == "cuda");
  CHECK(summary["backend"]["cuda_devices"] == 1);
  CHECK(nlohmann::json::parse(ct::slurp(out.path / "cpu/summary.json"))["backend"]["name"] == "cpu");

  check_same_table(ct::read_csv(ct::slurp(out.path / "cpu/metrics.csv")),
                   ct::read_csv(ct::slurp(out.path / "cuda/metrics.csv")), "metrics.csv");
  const auto gemms_cpu = ct::read_csv(ct::slurp(out.path / "cpu/gemms.csv"));
  const auto gemms_cuda = ct::read_csv(ct::slurp(out.path / "cuda/gemms.csv"));
  for (const auto& row : gemms_cuda) CHECK(row.at("engine") == "emulated");
  check_same_table(gemms_cpu, gemms_cuda, "gemms.csv");

  // A GPU with too little free memory: a one-line usage error, exit 2, no output files.
  const auto small = ct::run("run --capture " + ct::shell_quote(sample) + " --device cuda --out " +
                                 ct::shell_quote((out.path / "small").string()),
                             "FP8A_CUDA_EMULATION_MEMORY=20971520");
  CHECK(small.rc == 2);
  CHECK(small.err.rfind("fp8-advisor: error: [fp8a.cuda.803] CUDA device 0 has 20 MiB of free memory", 0) == 0);
  CHECK(std::count(small.err.begin(), small.err.end(), '\n') == 1);
  CHECK(!std::filesystem::exists(out.path / "small" / "metrics.csv"));

  // auto stays on the CPU until the CUDA backend has passed the GPU checks.
  const auto r = ct::run("run --capture " + ct::shell_quote(sample) + " --no-gemms --out " +
                         ct::shell_quote((out.path / "auto").string()));
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(ct::slurp(out.path / "auto/summary.json"))["backend"]["name"] == "cpu");
}

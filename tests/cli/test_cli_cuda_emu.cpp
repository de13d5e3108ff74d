// fp8-advisor built on the host emulation of tests/cuda_emu (label cuda-emu): `run --device cuda` on the
// sample capture gives --device cpu's metrics.csv (text equal, numbers within the rounding of
// float64 sums) and the same emulated GEMM rows, and summary.json names the CUDA backend, as
// test_cli_gpu checks on a GPU (both by run_compare.hpp); and gemms.csv adds, after each emulated
// row, the row of the GEMM engine run on the emulated cuBLASLt (tests/cuda_emu/cublaslt.cpp), as
// an H200, a B200 and an A100.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/cli_support.hpp"
#include "cli/run_compare.hpp"

namespace {

namespace ct = fp8a::cli_test;

// The comparisons of tests/cli/run_compare.hpp, with the emulated cuBLASLt's tolerance.
void check_same_dirs(const std::filesystem::path& cpu, const std::filesystem::path& cuda) {
  for (const auto& c : ct::compare_run_dirs(cpu, cuda)) ct::check_run_comparison(c);
}
void check_cublaslt_rows(const std::filesystem::path& run, const std::vector<std::string>& not_run_families) {
  ct::check_run_comparison(
      ct::check_cublaslt_rows(ct::read_csv(ct::slurp(run / "gemms.csv")), ct::kCublasltTolEmulated, not_run_families));
}
// Rows of a run's gemms.csv from the cuBLASLt engine.
std::size_t cublaslt_row_count(const std::filesystem::path& run) {
  const auto gemms = ct::read_csv(ct::slurp(run / "gemms.csv"));
  return static_cast<std::size_t>(
      std::count_if(gemms.begin(), gemms.end(), [](const ct::Row& r) { return r.at("engine") == "cublaslt"; }));
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

  check_same_dirs(out.path / "cpu", out.path / "cuda");
  for (const auto& row : ct::read_csv(ct::slurp(out.path / "cpu/gemms.csv"))) CHECK(row.at("engine") == "emulated");
  // On sm_90 every GEMM but MXFP8's also ran in cuBLASLt: 8 layers x 3 GEMMs x 8 recipes (the
  // trace's search puts three delayed ones in the default list), each in one format (the default
  // --format auto).
  check_cublaslt_rows(out.path / "cuda", {"mxfp8"});
  CHECK(cublaslt_row_count(out.path / "cuda") == 192);

  // `run --device cuda` on the sample as another GPU (FP8A_CUDA_EMULATION_SM): its gemms.csv.
  const auto run_as = [&](const std::string& name, const std::string& sm) {
    const auto r = ct::run("run --capture " + ct::shell_quote(sample) + " --amax-trace " +
                               ct::shell_quote(sample + "/amax_trace.csv") + " --device cuda --out " +
                               ct::shell_quote((out.path / name).string()),
                           "FP8A_CUDA_EMULATION_SM=" + sm);
    INFO(r.err);
    REQUIRE(r.rc == 0);
    return out.path / name;
  };
  // As a B200 (sm_100): MXFP8 runs in cuBLASLt, the Hopper-only 1x128/128x128 modes do not.
  const auto b200 = run_as("b200", "100");
  check_cublaslt_rows(b200, {"block"});
  CHECK(cublaslt_row_count(b200) == 192);
  // As an A100 (sm_80, which the default build has kernels for): the metrics on the device are the
  // CPU's, and cuBLASLt runs only the BF16 GEMMs (FP8 needs sm_89+): 8 layers x 3 GEMMs.
  const auto a100 = run_as("a100", "80");
  check_cublaslt_rows(a100, {"current", "delayed", "block", "mxfp8"});
  CHECK(cublaslt_row_count(a100) == 24);
  check_same_dirs(out.path / "cpu", a100);

  // `run --device cuda` on a GPU it cannot use: a one-line usage error, exit 2, no metrics.csv.
  const auto refused = [&](const std::string& name, const std::string& env) {
    const auto r = ct::run("run --capture " + ct::shell_quote(sample) + " --device cuda --out " +
                               ct::shell_quote((out.path / name).string()),
                           env);
    CHECK(r.rc == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(!std::filesystem::exists(out.path / name / "metrics.csv"));
    return r.err;
  };
  // A GPU older than the build's oldest kernels (a T4, sm_75): not even the output directory.
  const std::string t4 = refused("t4", "FP8A_CUDA_EMULATION_SM=75");
  CHECK(t4.find("--device cuda: ") != std::string::npos);
  CHECK(t4.find("sm_75") != std::string::npos);
  CHECK(t4.find("is older than this build's kernels (sm_80; rebuild with CMAKE_CUDA_ARCHITECTURES=75)") !=
        std::string::npos);
  CHECK(!std::filesystem::exists(out.path / "t4"));
  // A GPU with too little free memory.
  CHECK(refused("small", "FP8A_CUDA_EMULATION_MEMORY=20971520")
            .rfind("fp8-advisor: error: [fp8a.usage.212] CUDA device 0 has 20 MiB of free memory", 0) == 0);

  // auto stays on the CPU until the CUDA backend has passed the GPU checks.
  const auto r = ct::run("run --capture " + ct::shell_quote(sample) + " --no-gemms --out " +
                         ct::shell_quote((out.path / "auto").string()));
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(ct::slurp(out.path / "auto/summary.json"))["backend"]["name"] == "cpu");
}

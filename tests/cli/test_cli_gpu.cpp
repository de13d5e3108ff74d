// fp8-advisor on a GPU (ctest label cuda; scripts/gpu-check.sh runs it from the GPU bundle): `run
// --device cpu` and `run --device cuda` of the real binary on the sample capture, compared by
// tests/cli/run_compare.hpp: metrics.csv and the emulated rows of gemms.csv equal up to the float64
// sums' rounding, summary.json naming the CUDA backend, and the cuBLASLt rows against the emulated
// ones up to the accumulation. Exits 77 (skipped) without a CUDA device.
//
// Environment:
//   FP8A_TEST_BINARY    the fp8-advisor to run (default: the one of this build)
//   FP8A_TEST_DATA      the folder holding sample/ (default: the source tree's datasets/)
//   FP8A_TEST_OUT_DIR   keep the sample runs there, as cpu/ and cuda/ (default: a temporary folder)
//   FP8A_TEST_E2E_DIR   only compare cpu/ and cuda/ there, two --out folders of `run` already made
//                       (gpu-check.sh's end-to-end capture); needs no device. Also prints each
//                       run's timings_s from summary.json, as `e2e_run device=... timings_s=...`.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/cli_support.hpp"
#include "cli/run_compare.hpp"
#include "tests/cuda/gpu_test_main.hpp"

namespace {

namespace ct = fp8a::cli_test;
namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// The sample runs, made once for the test cases below: folder, and each run's result.
struct SampleRuns {
  std::unique_ptr<ct::TempDir> temp;
  fs::path dir;
  ct::Result cpu{}, cuda{};
};

const SampleRuns& sample_runs() {
  static const SampleRuns runs = [] {
    SampleRuns r;
    const std::string keep = env_or("FP8A_TEST_OUT_DIR", "");
    if (keep.empty()) {
      r.temp = std::make_unique<ct::TempDir>();
      r.dir = r.temp->path;
    } else {
      r.dir = keep;
      fs::create_directories(r.dir);
    }
    const std::string sample = env_or("FP8A_TEST_DATA", (ct::kSource / "datasets").string()) + "/sample";
    for (const char* device : {"cpu", "cuda"}) {
      fs::remove_all(r.dir / device);
      const auto result = ct::run("run --capture " + ct::shell_quote(sample) + " --amax-trace " +
                                  ct::shell_quote(sample + "/amax_trace.csv") + " --device " + device + " --out " +
                                  ct::shell_quote((r.dir / device).string()));
      (device == std::string("cpu") ? r.cpu : r.cuda) = result;
    }
    return r;
  }();
  return runs;
}

void require_runs_ok() {
  const auto& runs = sample_runs();
  INFO("--device cpu: " << runs.cpu.err);
  REQUIRE(runs.cpu.rc == 0);
  INFO("--device cuda: " << runs.cuda.err);
  REQUIRE(runs.cuda.rc == 0);
}

TEST_CASE("sample: run --device cpu and --device cuda; summary.json names the backend each ran on") {
  INFO("binary " << ct::kBinary);
  require_runs_ok();
  const auto& dir = sample_runs().dir;
  const auto cuda = nlohmann::json::parse(ct::slurp(dir / "cuda/summary.json"))["backend"];
  MESSAGE("cuda run's backend: " << cuda.dump());
  CHECK(cuda["name"] == "cuda");
  CHECK(cuda["requested"] == "cuda");
  CHECK(cuda["cuda_devices"].get<int>() >= 1);
  CHECK(nlohmann::json::parse(ct::slurp(dir / "cpu/summary.json"))["backend"]["name"] == "cpu");
}

TEST_CASE("sample: metrics.csv and the emulated rows of gemms.csv, cpu == cuda") {
  require_runs_ok();
  const auto& dir = sample_runs().dir;
  for (const auto& row : ct::read_csv(ct::slurp(dir / "cpu/gemms.csv"))) CHECK(row.at("engine") == "emulated");
  const auto results = ct::compare_run_dirs(dir / "cpu", dir / "cuda");
  CHECK(results.size() == 2);
  for (const auto& c : results) ct::check_run_comparison(c);
}

TEST_CASE("sample: the cuBLASLt rows beside the emulated ones, the same error up to the accumulation") {
  require_runs_ok();
  // Which recipes the GPU and its cuBLASLt run is theirs to say (the notes): any plan's reason.
  ct::check_run_comparison(ct::check_cublaslt_rows(ct::read_csv(ct::slurp(sample_runs().dir / "cuda/gemms.csv")),
                                                   ct::kCublasltTolGpu));
}

TEST_CASE("end to end: $FP8A_TEST_E2E_DIR/cpu == $FP8A_TEST_E2E_DIR/cuda" * doctest::skip()) {
  const fs::path dir = env_or("FP8A_TEST_E2E_DIR", "");
  REQUIRE(!dir.empty());
  for (const char* device : {"cpu", "cuda"}) {
    INFO((dir / device / "summary.json").string());
    REQUIRE(fs::exists(dir / device / "summary.json"));
    const auto summary = nlohmann::json::parse(ct::slurp(dir / device / "summary.json"));
    std::printf("e2e_run device=%s timings_s=%s\n", device, summary.value("timings_s", nlohmann::json()).dump().c_str());
    CHECK(summary["backend"]["name"] == device);
  }
  for (const auto& c : ct::compare_run_dirs(dir / "cpu", dir / "cuda")) {
    std::printf("e2e_compare %s\n", c.summary.c_str());
    ct::check_run_comparison(c);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!env_or("FP8A_TEST_E2E_DIR", "").empty()) {
    doctest::Context context(argc, argv);
    context.setOption("test-case", "end to end*");
    context.setOption("no-skip", true);
    return context.run();
  }
  return fp8a::cuda_test::run_gpu_tests("test_cli_gpu", argc, argv);
}

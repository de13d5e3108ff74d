// fp8-advisor built on the host emulation of cuda/emu (label cuda-emu): `run --device cuda` on the
// sample capture gives --device cpu's metrics.csv (text equal, numbers within the rounding of
// float64 sums) and the same emulated GEMM rows, and summary.json names the CUDA backend, as
// scripts/gpu-check.sh checks on a GPU; and gemms.csv adds, after each emulated row, the row of the
// GEMM engine run on the emulated cuBLASLt (cuda/emu/cublaslt.cpp), as an H200 and as a B200.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

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

// The engine=cublaslt rows: each right after the emulated row of the same GEMM, with TE's
// accumulation (fast for per-tensor fprop), dims padded to 16 (K to 128 with block scales), and the
// emulated row's error up to the accumulation difference (both FP32 here). The recipe families that
// the emulated device cannot run must carry the "cublaslt not run" note instead. Returns the count.
std::size_t check_cublaslt_rows(const ct::Table& gemms, const std::vector<std::string>& not_run_families) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    const auto& e = gemms[i];
    if (e.at("engine") != "emulated") continue;
    const std::string recipe = e.at("recipe"), family = recipe.substr(0, recipe.find(':'));
    INFO("row " << i << " " << e.at("layer") << " " << e.at("gemm") << " " << recipe);
    const bool ran = i + 1 < gemms.size() && gemms[i + 1].at("engine") == "cublaslt";
    const bool runs = std::find(not_run_families.begin(), not_run_families.end(), family) == not_run_families.end();
    CHECK(ran == runs);
    if (!ran) {
      CHECK(e.at("note").rfind("cublaslt not run: ", 0) == 0);
      continue;
    }
    ++count;
    const auto& r = gemms[i + 1];
    for (const char* column : {"step", "layer", "gemm", "recipe", "format", "m", "n", "k"})
      CHECK(r.at(column) == e.at(column));
    const bool per_tensor = family == "current" || family == "delayed";
    CHECK(r.at("accumulation") == (family == "bf16"                          ? "fp32"
                                   : per_tensor && e.at("gemm") == "fprop" ? "fast"
                                                                           : "split"));
    const double k_multiple = per_tensor || family == "bf16" ? 16 : 128;
    CHECK(std::fmod(ct::num(r.at("padded_m")), 16) == 0);
    CHECK(std::fmod(ct::num(r.at("padded_n")), 16) == 0);
    CHECK(std::fmod(ct::num(r.at("padded_k")), k_multiple) == 0);
    CHECK(ct::num(r.at("padded_k")) >= ct::num(e.at("k")));
    CHECK(std::fabs(ct::num(r.at("rel_fro_err")) - ct::num(e.at("rel_fro_err"))) <= 1e-5);
    CHECK(r.at("note").find("reference BF16 x BF16") != std::string::npos);
  }
  return count;
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
  for (const auto& row : gemms_cpu) CHECK(row.at("engine") == "emulated");
  ct::Table emulated;
  for (const auto& row : gemms_cuda)
    if (row.at("engine") == "emulated") emulated.push_back(row);
  check_same_table(gemms_cpu, emulated, "gemms.csv");
  // On sm_90 every GEMM but MXFP8's also ran in cuBLASLt: 8 layers x 3 GEMMs x 7 recipes.
  CHECK(check_cublaslt_rows(gemms_cuda, {"mxfp8"}) == 168);

  // `run --device cuda` on the sample as another GPU (FP8A_CUDA_EMULATION_SM): its gemms.csv.
  const auto run_as = [&](const std::string& name, const std::string& sm) {
    const auto r = ct::run("run --capture " + ct::shell_quote(sample) + " --amax-trace " +
                               ct::shell_quote(sample + "/amax_trace.csv") + " --device cuda --out " +
                               ct::shell_quote((out.path / name).string()),
                           "FP8A_CUDA_EMULATION_SM=" + sm);
    INFO(r.err);
    REQUIRE(r.rc == 0);
    return ct::read_csv(ct::slurp(out.path / name / "gemms.csv"));
  };
  // As a B200 (sm_100): MXFP8 runs in cuBLASLt, the Hopper-only 1x128/128x128 modes do not.
  CHECK(check_cublaslt_rows(run_as("b200", "100"), {"block"}) == 168);
  // As an A100 (sm_80, which the default build has kernels for): the metrics on the device are the
  // CPU's, and cuBLASLt runs only the BF16 GEMMs (FP8 needs sm_89+): 8 layers x 3 GEMMs.
  CHECK(check_cublaslt_rows(run_as("a100", "80"), {"current", "delayed", "block", "mxfp8"}) == 24);
  check_same_table(ct::read_csv(ct::slurp(out.path / "cpu/metrics.csv")),
                   ct::read_csv(ct::slurp(out.path / "a100/metrics.csv")), "a100 metrics.csv");

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

// End-to-end tests of the fp8-advisor executable: exit codes, exact error lines, output files.
// Metric values on the shipped sample are compared with golden CSVs computed by an independent
// NumPy + ml_dtypes implementation (tests/peers/peer_numpy.py --all; see tests/golden/README.md).
#include <doctest/doctest.h>
#include <cerrno>
#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_support.hpp"
#include "core/text.hpp"
#include "datasets/safetensors_builder.hpp"

namespace {

using namespace fp8a::cli_test;

// The float64 sums of the two implementations run in different orders (NumPy pairwise vs.
// chunked Eigen); the helper that produced the goldens measured agreement to ~4e-16 relative.
constexpr double kGoldenRelTol = 1e-12;
// underflow_energy_pct: two float64 sums (x^2 of the flushed elements, of all) in different
// orders; measured against the peer on the sample: 1.5e-14 relative at most (23 nonzero rows).
constexpr double kEnergyRelTol = 1e-12;
// gemms.csv per-entry damage. zeroed_pct and sign_flip_pct count entries whose float32 value is
// exactly 0 or of the wrong sign, which float32 accumulation (fp8-advisor) against float64 (the
// peer) can change for an entry whose exact sum is within rounding of 0: one entry of slack;
// measured: one entry in 3 of 216 rows (the engine's float32 sum cancels to 0 exactly).
constexpr double kGemmEntrySlack = 1.0;
// median_rel_err: the median entry's float32 value moves with the accumulation order, and its
// relative error |got - ref| / |ref| is a difference of close numbers; measured at most 1.5e-5
// relative (5.4e-7 absolute) on the sample against the float64 peer, 188 of 216 rows differing.
constexpr double kGemmMedianRelTol = 2e-4;
// noise_sign_flip_pct: a float64 sum of erfc terms scaled by ||got - ref||^2, which carries the
// float32 accumulation difference of rel_fro_err; measured 3.8e-7 relative at most on the
// sample's 72 wgrad rows against the float64 peer (fprop and dgrad rows leave it empty).
constexpr double kGemmNoiseRelTol = 1e-5;

std::string sample() { return shell_quote((kSource / "datasets/sample").string()); }

std::size_t count_of(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// A safetensors file with one 1-D F32 tensor, written by the tests' builder.
std::string one_tensor(const std::string& name, const std::vector<float>& values) {
  const auto bytes =
      fp8a::test::build_file({{name, "F32", {static_cast<std::int64_t>(values.size())}, values}});
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace

TEST_CASE("--version and --help") {
  const auto v = run("--version");
  CHECK(v.rc == 0);
  CHECK(v.out.rfind("fp8-advisor 0.1.0 (git ", 0) == 0);
  // The second line says what the CUDA backend was built for (the GPUs a user's run can use).
  const std::string cuda_line = v.out.substr(v.out.find('\n') + 1);
  // The third, whether `run` can spread over MPI ranks.
  const std::string mpi_line = cuda_line.substr(cuda_line.find('\n') + 1);
  if (FP8A_EXPECT_MPI_COMPILED)
    CHECK(mpi_line.rfind("MPI: built (MPI ", 0) == 0);
  else
    CHECK(mpi_line.rfind("MPI: not built (", 0) == 0);
  if (FP8A_EXPECT_CUDA_COMPILED) {
    CHECK(cuda_line.rfind("CUDA backend: kernels for sm_", 0) == 0);
    CHECK(cuda_line.find(", CUDA ") != std::string::npos);
  } else {
    CHECK(cuda_line.rfind("CUDA backend: not built (", 0) == 0);
  }
  CHECK(std::count(v.out.begin(), v.out.end(), '\n') == 3);
  const auto h = run("--help");
  CHECK(h.rc == 0);
  CHECK(h.out.find("run ") != std::string::npos);
  for (const char* cmd : {"run", "inspect"}) {
    const auto r = run(std::string(cmd) + " --help");
    CHECK(r.rc == 0);
    CHECK(r.out.rfind(std::string("usage: fp8-advisor ") + cmd, 0) == 0);
    CHECK(r.err.empty());
  }
}

// Compares fp8-advisor's metrics.csv with a NumPy golden file row by row (keyed by step, layer,
// tensor, recipe, orientation): fp32 quantities and counts exactly, float64 sums to kGoldenRelTol.
void check_against_golden(const Table& got, const Table& want) {
  REQUIRE(got.size() == want.size());
  auto key = [](const std::map<std::string, std::string>& r) {
    const auto o = r.find("orientation");
    return r.at("step") + "|" + r.at("layer") + "|" + r.at("tensor") + "|" + r.at("recipe") + "|" +
           (o == r.end() ? std::string("rowwise") : o->second);
  };
  std::map<std::string, const std::map<std::string, std::string>*> by_key;
  for (const auto& row : got) by_key[key(row)] = &row;
  for (const auto& w : want) {
    INFO(key(w));
    REQUIRE(by_key.count(key(w)) == 1);
    const auto& g = *by_key[key(w)];
    CHECK(g.at("format") == w.at("format"));
    CHECK(g.at("dtype") == w.at("dtype"));
    // fp32 quantities are exact; percentages are 100 * count / numel on both sides.
    CHECK(g.at("scale").empty() == w.at("scale").empty());
    if (!w.at("scale").empty())
      CHECK(static_cast<float>(num(g.at("scale"))) == static_cast<float>(num(w.at("scale"))));
    CHECK(static_cast<float>(num(g.at("amax"))) == static_cast<float>(num(w.at("amax"))));
    CHECK(num(g.at("underflow_pct")) == num(w.at("underflow_pct")));
    CHECK(num(g.at("overflow_pct")) == num(w.at("overflow_pct")));
    if (w.count("saturated_count") != 0) {
      CHECK(g.at("saturated_count") == w.at("saturated_count"));
      CHECK(static_cast<float>(num(g.at("scale_inv_min"))) == static_cast<float>(num(w.at("scale_inv_min"))));
      CHECK(static_cast<float>(num(g.at("scale_inv_max"))) == static_cast<float>(num(w.at("scale_inv_max"))));
    }
    if (w.count("underflow_energy_pct") != 0) {
      const double gv = num(g.at("underflow_energy_pct")), wv = num(w.at("underflow_energy_pct"));
      INFO("underflow_energy_pct got " << gv << " want " << wv);
      CHECK(std::fabs(gv - wv) <= kEnergyRelTol * std::fabs(wv));  // 0 exactly when nothing flushes
    }
    for (const char* col : {"mse", "rel_mse", "sqnr_db", "cos"}) {
      INFO(col << " got " << g.at(col) << " want " << w.at(col));
      const double gv = num(g.at(col)), wv = num(w.at(col));
      if (std::isinf(wv)) CHECK(gv == wv);
      else CHECK(std::fabs(gv - wv) <= kGoldenRelTol * std::fabs(wv));
    }
  }
}

TEST_CASE("run on the shipped sample matches the independent NumPy golden values") {
  for (const std::string format : {"e4m3", "hybrid"}) {
    TempDir out;
    const auto r = run("run --capture " + sample() + " --out " + shell_quote(out.path.string()) +
                       " --recipes current,current:pow2 --format " + format);
    INFO(r.err);
    REQUIRE(r.rc == 0);
    CHECK(r.out.find("wrote ") != std::string::npos);
    const std::string csv = slurp(out.path / "metrics.csv");
    CHECK(csv.rfind("step,layer,tensor,recipe,format,dtype,scale,amax,mse,rel_mse,sqnr_db,cos,"
                    "underflow_pct,overflow_pct,",
                    0) == 0);
    const auto want = read_csv(slurp(kSource / ("tests/golden/sample_numpy_" + format + ".csv")));
    REQUIRE(want.size() == 48);
    check_against_golden(read_csv(csv), want);
    const auto summary = nlohmann::json::parse(slurp(out.path / "summary.json"));
    CHECK(summary["format"] == format);
    CHECK(summary["recipes"] == nlohmann::json::array({"current", "current:pow2"}));
    CHECK(summary["inputs"].size() == 2);
    CHECK(summary["inputs"][0]["step"] == 100);
    CHECK(summary["inputs"][0]["step_source"] == "metadata");
    // --device auto: the CPU here, CUDA on a machine with a GPU and a CUDA build.
    CHECK(summary["backend"]["requested"] == "auto");
    CHECK((summary["backend"]["name"] == "cpu" || summary["backend"]["name"] == "cuda"));
    // The build configuration is recorded: the CUDA stage is compiled only when configured on.
    CHECK(summary["backend"]["cuda_compiled"] == static_cast<bool>(FP8A_EXPECT_CUDA_COMPILED));
    CHECK(summary["tool"]["version"] == "0.1.0");
    CHECK(summary["command_line"][1] == "run");
    CHECK(summary["layers"].size() == 8);  // 4 layers x 2 recipes
    CHECK(summary["evaluations"] == 48);
    // No temporary files left behind: the set and its manifest (the lock file goes on release).
    std::set<std::string> files;
    for (const auto& e : fs::directory_iterator(out.path))
      if (e.is_regular_file()) files.insert(e.path().filename().string());
    CHECK(files == std::set<std::string>{"metrics.csv", "gemms.csv", "recipe.json",
                                         "megatron_args.txt", "megatron_bridge.yaml", "te_precision_config.yaml",
                                         "nvdlfw_inspect.yaml", "te_snippet.py", "torchao.json", "report.md", "summary.json",
                                         "report.html", ".fp8-advisor-outputs-run.json"});
    // report.md: the same answer as stdout, every layer's decision.
    const std::string md = slurp(out.path / "report.md");
    CHECK(md.starts_with("# fp8-advisor report\n"));
    CHECK(md.find("## Per-layer decisions") != std::string::npos);
    for (const char* layer : {"layers.0.self_attention.linear_qkv", "layers.1.mlp.linear_fc2"})
      CHECK(md.find(std::string("| ") + layer + " | ") != std::string::npos);
  }
}


TEST_CASE("every recipe kind, the delayed replay from the sample's amax trace, and the GEMM errors "
          "match the independent NumPy peer") {
  TempDir out;
  const auto r = run("run --capture " + sample() + " --out " + shell_quote(out.path.string()) +
                     " --format hybrid --training-log " +
                     shell_quote((kSource / "datasets/sample/amax_trace.csv").string()) +
                     " --recipes current,current:pow2,delayed:history=16:algo=max:margin=0,"
                     "delayed:history=4:algo=most_recent:margin=1,block,block:fp32,mxfp8,mxfp8:floor,bf16");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto got = read_csv(slurp(out.path / "metrics.csv"));
  check_against_golden(got, read_csv(slurp(kSource / "tests/golden/sample_numpy_all_hybrid.csv")));
  for (const auto& row : got)
    if (row.at("recipe").rfind("delayed", 0) == 0) CHECK(row.at("replay") == "exact");
  // GEMM errors: the peer multiplies in float64, fp8-advisor in float32 (oneDNN, both the
  // quantised and the reference GEMM), so compare with tolerances: measured on this sample
  // 1.2e-6 relative in rel_fro_err (5e-6 allowed) and 1.2e-9 in cos (1e-7 allowed).
  const auto g = read_csv(slurp(out.path / "gemms.csv"));
  const auto w = read_csv(slurp(kSource / "tests/golden/sample_gemms_numpy_hybrid.csv"));
  REQUIRE(g.size() == w.size());
  std::map<std::string, const std::map<std::string, std::string>*> by_key;
  for (const auto& row : g)
    by_key[row.at("step") + "|" + row.at("layer") + "|" + row.at("gemm") + "|" + row.at("recipe")] = &row;
  for (const auto& want : w) {
    const std::string key = want.at("step") + "|" + want.at("layer") + "|" + want.at("gemm") + "|" + want.at("recipe");
    INFO(key);
    REQUIRE(by_key.count(key) == 1);
    const auto& got_row = *by_key[key];
    for (const char* dim : {"m", "n", "k"}) CHECK(got_row.at(dim) == want.at(dim));
    CHECK(std::fabs(num(got_row.at("rel_fro_err")) - num(want.at("rel_fro_err"))) <= 5e-6 * num(want.at("rel_fro_err")) + 1e-12);
    CHECK(std::fabs(num(got_row.at("cos")) - num(want.at("cos"))) <= 1e-7);
    const double entry_pct = 100.0 * kGemmEntrySlack / (num(want.at("m")) * num(want.at("n")));
    for (const char* col : {"zeroed_pct", "sign_flip_pct"}) {
      INFO(col << " got " << got_row.at(col) << " want " << want.at(col));
      CHECK(std::fabs(num(got_row.at(col)) - num(want.at(col))) <= entry_pct);
    }
    const double median = num(want.at("median_rel_err"));
    INFO("median_rel_err got " << got_row.at("median_rel_err") << " want " << median);
    CHECK(std::fabs(num(got_row.at("median_rel_err")) - median) <= kGemmMedianRelTol * median + 1e-12);
    INFO("noise_sign_flip_pct got " << got_row.at("noise_sign_flip_pct") << " want "
                                    << want.at("noise_sign_flip_pct"));
    if (want.at("noise_sign_flip_pct").empty()) {  // fprop, dgrad: not computed
      CHECK(got_row.at("noise_sign_flip_pct").empty());
    } else {
      const double noise = num(want.at("noise_sign_flip_pct"));
      CHECK(std::fabs(num(got_row.at("noise_sign_flip_pct")) - noise) <= kGemmNoiseRelTol * noise + 1e-12);
    }
  }
}

TEST_CASE("the sample's known content: gradients underflow under all-E4M3, not under hybrid") {
  TempDir a, b;
  REQUIRE(run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) + " --format e4m3").rc == 0);
  REQUIRE(run("run --capture " + sample() + " --out " + shell_quote(b.path.string()) + " --format hybrid").rc == 0);
  double worst_e4m3 = 0, worst_hybrid = 0;
  for (const auto& row : read_csv(slurp(a.path / "metrics.csv")))
    if (row.at("tensor") == "gradient") worst_e4m3 = std::max(worst_e4m3, num(row.at("underflow_pct")));
  for (const auto& row : read_csv(slurp(b.path / "metrics.csv")))
    if (row.at("tensor") == "gradient") worst_hybrid = std::max(worst_hybrid, num(row.at("underflow_pct")));
  CHECK(worst_e4m3 > 4.0);     // the generator's lognormal gradients (datasets/sample/README.md)
  CHECK(worst_hybrid < 0.2);
}

TEST_CASE("--format e4m3,hybrid: the files are the single-format runs' one after the other; auto: each recipe once") {
  TempDir a, b, both, dup, au;
  REQUIRE(run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) + " --format e4m3").rc == 0);
  REQUIRE(run("run --capture " + sample() + " --out " + shell_quote(b.path.string()) + " --format hybrid").rc == 0);
  const auto r = run("run --capture " + sample() + " --out " + shell_quote(both.path.string()) + " --format e4m3,hybrid");
  REQUIRE(r.rc == 0);
  const auto ra = run("run --capture " + sample() + " --out " + shell_quote(au.path.string()));
  REQUIRE(ra.rc == 0);
  REQUIRE(run("run --capture " + sample() + " --out " + shell_quote(dup.path.string()) +
              " --format e4m3,hybrid,e4m3").rc == 0);
  for (const char* name : {"metrics.csv", "gemms.csv"}) {
    INFO(name);
    const std::string e4m3 = slurp(a.path / name), hybrid = slurp(b.path / name);
    const std::size_t header = e4m3.find('\n') + 1;
    REQUIRE(hybrid.compare(0, header, e4m3, 0, header) == 0);
    CHECK(slurp(both.path / name) == e4m3 + hybrid.substr(header));
    CHECK(slurp(dup.path / name) == slurp(both.path / name));
  }
  // stdout names the formats, and the layer table gains a format column.
  CHECK(r.out.find("format e4m3,hybrid, backend") != std::string::npos);
  CHECK(r.out.find("  format  min sqnr dB") != std::string::npos);
  CHECK(run("run --capture " + sample() + " --out " + shell_quote(b.path.string()) + " --format hybrid")
            .out.find("  format  ") == std::string::npos);
  const auto summary = nlohmann::json::parse(slurp(both.path / "summary.json"));
  CHECK(summary["format"] == "e4m3,hybrid");
  CHECK(summary["layers"][0]["format"] == "e4m3");
  CHECK(summary["layers"][1]["format"] == "hybrid");
  CHECK(summary["layers"][0]["recipe"] == summary["layers"][1]["recipe"]);

  // The default, auto: the hybrid run's rows but MXFP8's, then the e4m3 run's MXFP8 rows (TE's
  // MXFP8BlockScaling default; Megatron-Bridge's MXFP8 preset), each recipe in one format only.
  for (const char* name : {"metrics.csv", "gemms.csv"}) {
    INFO(name);
    const auto mx = [](const std::map<std::string, std::string>& row) { return row.at("recipe").starts_with("mxfp8"); };
    std::vector<std::map<std::string, std::string>> expected;
    for (const auto& row : read_csv(slurp(b.path / name)))
      if (!mx(row)) expected.push_back(row);
    const std::size_t hybrid_rows = expected.size();
    for (const auto& row : read_csv(slurp(a.path / name)))
      if (mx(row)) expected.push_back(row);
    CHECK(hybrid_rows > 0);
    CHECK(expected.size() > hybrid_rows);
    CHECK(read_csv(slurp(au.path / name)) == expected);
  }
  CHECK(ra.out.find("format auto (hybrid: current, delayed, block; e4m3: mxfp8), backend") != std::string::npos);
  CHECK(ra.out.find("excluded on h100:\n    mxfp8/e4m3, mxfp8:floor/e4m3: mxfp8 needs sm_100+") != std::string::npos);
  CHECK(ra.out.find("/e4m3") == ra.out.find("mxfp8/e4m3") + 5);  // no other recipe in e4m3
  const auto auto_summary = nlohmann::json::parse(slurp(au.path / "summary.json"));
  CHECK(auto_summary["format"] == "auto");
  std::set<std::string> layer_recipes;  // every recipe of a layer named once
  for (const auto& l : auto_summary["layers"])
    if (l["layer"] == auto_summary["layers"][0]["layer"]) CHECK(layer_recipes.insert(l["recipe"].get<std::string>()).second);
  CHECK(layer_recipes.size() == 9);
}

TEST_CASE("inspect lists every tensor with the shape of its file's header and the NumPy peer's amax") {
  const auto r = run("inspect " + sample());
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("24 tensors in 2 file(s): valid") != std::string::npos);
  // Index the table by "step layer role": columns are step, layer, role, dtype, shape..., amax.
  std::map<std::string, std::vector<std::string>> lines;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string t; words >> t;) w.push_back(t);
    if (w.size() > 5) lines[w[0] + " " + w[1] + " " + w[2]] = w;
  }
  // Expected: shapes as each file's safetensors header declares them (read here, not by the
  // tool's reader), amax as the independent NumPy peer computed it (tests/golden/README.md).
  std::map<std::string, std::string> want_shape;
  for (const int step : {100, 200}) {
    const std::string file = slurp(kSource / ("datasets/sample/step_000" + std::to_string(step) + ".safetensors"));
    REQUIRE(file.size() > 8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[static_cast<std::size_t>(i)]);
    const nlohmann::json header = nlohmann::json::parse(file.substr(8, n));
    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const nlohmann::json& entry = it.value();
      if (name == "__metadata__") continue;
      const auto dot = name.rfind('.');
      CHECK(entry["dtype"] == "BF16");
      std::string shape = "[";
      for (std::size_t d = 0; d < entry["shape"].size(); ++d)
        shape += (d ? ", " : "") + std::to_string(entry["shape"][d].get<int>());
      want_shape[std::to_string(step) + " " + name.substr(0, dot) + " " + name.substr(dot + 1)] = shape + "]";
    }
  }
  REQUIRE(want_shape.size() == 24);
  // The sample holds 3-D [batch, seq, hidden] operands on purpose: N-D tensors are read as 2-D.
  CHECK(std::count_if(want_shape.begin(), want_shape.end(),
                      [](const auto& kv) { return std::count(kv.second.begin(), kv.second.end(), ',') == 2; }) == 8);
  std::size_t checked = 0;
  for (const auto& g : read_csv(slurp(kSource / "tests/golden/sample_numpy_hybrid.csv"))) {
    if (g.at("recipe") != "current") continue;
    const std::string key = g.at("step") + " " + g.at("layer") + " " + g.at("tensor");
    INFO(key);
    REQUIRE(lines.count(key) == 1);
    REQUIRE(want_shape.count(key) == 1);
    const auto& w = lines[key];
    CHECK(w[3] == "BF16");
    // The shape prints as "[a, b]" (split on spaces); amax follows it with 6 significant digits.
    std::string shape;
    std::size_t i = 4;
    for (; i < w.size(); ++i) {
      shape += (shape.empty() ? "" : " ") + w[i];
      if (w[i].back() == ']') break;
    }
    CHECK(shape == want_shape[key]);
    char amax[64];
    std::snprintf(amax, sizeof amax, "%.6g", num(g.at("amax")));
    CHECK(w[i + 1] == amax);
    ++checked;
  }
  CHECK(checked == 24);
}

TEST_CASE("usage errors exit 2 with one line") {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"", "fp8-advisor: error: [fp8a.usage.204] missing command; try 'fp8-advisor --help'\n"},
      {"rnu", "fp8-advisor: error: [fp8a.usage.204] unknown command 'rnu' (did you mean 'run'?); "
              "try 'fp8-advisor --help'\n"},
      {"run --out x", "fp8-advisor: error: [fp8a.usage.203] fp8-advisor run: the option "
                      "'--capture' is required but missing (or --training-log alone: advice from its "
                      "statistics)\n"},
      {"run --capture x --out y --recipy current",
       "fp8-advisor: error: [fp8a.usage.203] fp8-advisor run: unknown option '--recipy' (did you "
       "mean '--recipe'?)\n"},
      {"run --capture x --out y --recipes delayd",
       "fp8-advisor: error: [fp8a.usage.201] --recipes: bad recipe 'delayd': unknown kind "
       "'delayd' (did you mean 'delayed'?)\n"},
      {"run --capture x --out y --format e5m2",
       "fp8-advisor: error: [fp8a.usage.202] --format e5m2: Transformer Engine has no all-E5M2 "
       "recipe; use e4m3 or hybrid (E5M2 for gradients only)\n"},
      {"run --capture x --out y --format e4m3,hybird",
       "fp8-advisor: error: [fp8a.usage.202] --format 'hybird': expected auto, or e4m3 and/or hybrid (did you "
       "mean 'hybrid'?)\n"},
      {"run --capture x --out y --format hybrid,",
       "fp8-advisor: error: [fp8a.usage.202] --format 'hybrid,': empty entry in the list; expected "
       "auto, or e4m3 and/or hybrid\n"},
      {"run --capture x --out y --amax-reduction dp",
       "fp8-advisor: error: [fp8a.usage.208] --amax-reduction 'dp': expected tp or none (did you "
       "mean 'tp'?)\n"},
      {"run --capture x --out y --threads -1",
       "fp8-advisor: error: [fp8a.usage.205] --threads must be >= 0\n"},
      {"run --capture x --out y --gemm-rows atuo",
       "fp8-advisor: error: [fp8a.usage.225] --gemm-rows 'atuo': expected auto, 0 (all rows) or a "
       "number of rows (tokens; dW rows for wgrad) (did you mean 'auto'?)\n"},
      {"whatif --capture x --layer l --gemm-rows 12x",
       "fp8-advisor: error: [fp8a.usage.225] --gemm-rows '12x': expected auto, 0 (all rows) or a "
       "number of rows (tokens; dW rows for wgrad)\n"},
      {"run --capture x --out y --policy te-autoswich",
       "fp8-advisor: error: [fp8a.usage.213] --policy 'te-autoswich' is neither a preset (default, "
       "te-autoswitch) nor a policy file (did you mean 'te-autoswitch'?)\n"},
  };
  for (const auto& c : cases) {
    INFO("args: " << c.args);
    const auto r = run(c.args);
    CHECK(r.rc == 2);
    CHECK(r.err == c.message);
    CHECK(r.out.empty());
  }
}

TEST_CASE("bad input exits 3 naming the file and tensor, and writes no output") {
  TempDir dir;
  const fs::path out = dir.path / "out";
  auto expect = [&](const std::string& capture, const std::string& message) {
    INFO("capture " << capture);
    const auto r = run("run --capture " + shell_quote(capture) + " --out " + shell_quote(out.string()));
    CHECK(r.rc == 3);
    CHECK(r.err == "fp8-advisor: error: " + message + "\n");
    CHECK_FALSE(fs::exists(out));
  };
  const std::string missing = (dir.path / "missing.safetensors").string();
  expect(missing, "[fp8a.io.101] " + missing + ": no such file or directory");

  const fs::path empty_dir = dir.path / "empty";
  fs::create_directories(empty_dir / "sub");
  write_bytes(empty_dir / "sub" / "notes.txt", "hello");
  expect(empty_dir.string(), "[fp8a.io.103] " + empty_dir.string() + ": directory holds no captures (*.safetensors, *.npy, *.npz, *.pt)");

  const fs::path text = dir.path / "text.safetensors";
  write_bytes(text, "this is a text file, not a capture");
  expect(text.string(), "[fp8a.safetensors.302] " + text.string() +
                            ": not a safetensors file: header length 2338328219631577204 exceeds "
                            "the limit of 100000000 bytes");

  const fs::path truncated = dir.path / "truncated.safetensors";
  std::string good = one_tensor("l.activation", {1, 2, 3, 4});
  write_bytes(truncated, good.substr(0, good.size() - 3));
  expect(truncated.string(), "[fp8a.safetensors.310] " + truncated.string() +
                                 ": truncated: tensors need 16 data bytes but the file holds 13");

  // A bad --policy file is bad input, found before any capture is read.
  const fs::path policy = dir.path / "policy.json";
  write_bytes(policy, "{\"criteria\": {\"saturation\": {\"max_pct\": -1}}}");
  const auto bad_policy = run("run --capture " + shell_quote(missing) + " --out " +
                              shell_quote(out.string()) + " --policy " + shell_quote(policy.string()));
  CHECK(bad_policy.rc == 3);
  CHECK(bad_policy.err == "fp8-advisor: error: [fp8a.policy.904] policy file '" + policy.string() +
                              "': criteria.saturation.max_pct is -1, expected a number in (0.0, "
                              "100.0]\n");
  CHECK_FALSE(fs::exists(out));

  const fs::path badname = dir.path / "badname.safetensors";
  write_bytes(badname, one_tensor("layers.0.fc1.input", {1, 2}));
  expect(badname.string(), "[fp8a.capture.403] " + badname.string() +
                               ": tensor 'layers.0.fc1.input': name must be <layer>.<role> with "
                               "role activation, weight or gradient");
}

TEST_CASE("NaN/Inf data: a warning by default, exit 3 with --fail-on-nonfinite") {
  TempDir dir;
  const fs::path file = dir.path / "nan_step_5.safetensors";
  write_bytes(file, one_tensor("l.weight", {1.0f, NAN, 2.0f, INFINITY}));
  const fs::path out = dir.path / "out";
  const auto r = run("run --recipes current --format e4m3,hybrid --capture " + shell_quote(file.string()) +
                     " --out " + shell_quote(out.string()));
  CHECK(r.rc == 0);
  CHECK(r.err == "fp8-advisor: warning: " + file.string() +
                     ": tensor 'l.weight' holds 1 NaN and 1 Inf elements; they are counted and "
                     "left out of the error sums\n");
  // One row per format, one warning for the tensor.
  const auto rows = read_csv(slurp(out / "metrics.csv"));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("format") == "e4m3");
  CHECK(rows[1].at("format") == "hybrid");
  CHECK(rows[0].at("step") == "5");  // from the file name
  CHECK(rows[0].at("nan_count") == "1");
  CHECK(rows[0].at("inf_count") == "1");
  CHECK(rows[0].at("scale") == "1");  // TE: amax inf -> scale 1
  const fs::path out2 = dir.path / "out2";
  const auto strict = run("run --fail-on-nonfinite --capture " + shell_quote(file.string()) +
                          " --out " + shell_quote(out2.string()));
  CHECK(strict.rc == 3);
  CHECK(strict.err == "fp8-advisor: error: [fp8a.capture.406] " + file.string() +
                          ": tensor 'l.weight' holds 1 NaN and 1 Inf elements (--fail-on-nonfinite)\n");
  CHECK_FALSE(fs::exists(out2));
}

TEST_CASE("an output path that is a file is refused; existing reports are replaced whole") {
  TempDir dir;
  const fs::path blocker = dir.path / "file";
  write_bytes(blocker, "x");
  const auto r = run("run --capture " + sample() + " --out " + shell_quote(blocker.string()));
  CHECK(r.rc == 3);
  CHECK(r.err == "fp8-advisor: error: [fp8a.io.104] " + blocker.string() + ": cannot write: not a directory\n");

  const fs::path out = dir.path / "out";
  fs::create_directories(out);
  write_bytes(out / "metrics.csv", "old contents that are longer than nothing");
  REQUIRE(run("run --capture " + sample() + " --out " + shell_quote(out.string())).rc == 0);
  CHECK(slurp(out / "metrics.csv").rfind("step,layer,", 0) == 0);
}

TEST_CASE("--training-log (alias --amax-trace) makes the delayed replay exact (CSV and nvdlfw_inspect logs)") {
  TempDir dir;
  const fs::path capture = dir.path / "step_5.safetensors";
  write_bytes(capture, one_tensor("l.activation", {1.0f, -0.5f, 0.25f, 2.0f}));
  // Amax 1, 2, 4, 8, 16 at steps 0..4: history=2 at step 5 sees max(8, 16) -> scale 448/16 = 28.
  const fs::path csv = dir.path / "trace.csv";
  write_bytes(csv, "step,tensor,amax\n0,l.activation,1\n1,l.activation,2\n2,l.activation,4\n"
                   "3,l.activation,8\n4,l.activation,16\n");
  const fs::path log = dir.path / "nvdlfw_inspect_globalrank-0.log";
  std::string lines;
  for (int s = 0; s < 5; ++s)
    lines += "2026-01-01 00:00:00,000 - INFO - l_activation_cur_amax \t\t\t\t iteration=00000" +
             std::to_string(s) + " \t\t\t\t value=" + std::to_string(1 << s) + ".0000\n";
  write_bytes(log, lines);
  for (const fs::path& trace : {csv, log}) {
    INFO(trace);
    const fs::path out = dir.path / ("out-" + trace.filename().string());
    // The CSV through --training-log, the log through its alias --amax-trace.
    const std::string option = trace == csv ? " --training-log " : " --amax-trace ";
    const auto r = run("run --recipes delayed:history=2:algo=max:margin=0,current --format hybrid --capture " +
                       shell_quote(capture.string()) + option + shell_quote(trace.string()) +
                       " --out " + shell_quote(out.string()));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto rows = read_csv(slurp(out / "metrics.csv"));
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].at("recipe") == "delayed:history=2:algo=max:margin=0");
    CHECK(rows[0].at("replay") == "exact");
    CHECK(rows[0].at("scale") == "28");
    CHECK(num(rows[0].at("delayed_vs_current_log2")) == doctest::Approx(std::log2(28.0 / 224.0)));
    CHECK(rows[1].at("replay").empty());
    const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
    CHECK(summary["delayed_replay"]["exact"] == 1);
    CHECK(summary["delayed_replay"]["amax_trace_rounded"] == (trace == log));
  }
  const fs::path bad = dir.path / "bad.csv";
  write_bytes(bad, "step,tensor,amax\n1,l.activation,-3\n");
  const auto r = run("run --capture " + shell_quote(capture.string()) + " --amax-trace " +
                     shell_quote(bad.string()) + " --out " + shell_quote((dir.path / "o").string()));
  CHECK(r.rc == 3);
  CHECK(r.err == "fp8-advisor: error: [fp8a.trace.503] " + bad.string() + ":2: amax '-3' is negative\n");
}

namespace {

// The answer block: from its "answer: " line to its "wrote " line, inclusive.
std::string answer_block(const std::string& out) {
  const auto begin = out.find("answer: ");
  const auto wrote = out.find("\nwrote ", begin);
  if (begin == std::string::npos || wrote == std::string::npos) return {};
  return out.substr(begin, out.find('\n', wrote + 1) + 1 - begin);
}

std::string real_run(const std::string& name, const fs::path& out, const std::string& extra) {
  const fs::path dir = kSource / "datasets/real" / name;
  return "run --capture " + shell_quote(dir.string()) + " --training-log " +
         shell_quote((dir / "amax_trace_rank0.csv").string()) + " --out " +
         shell_quote(out.string()) + " " + extra;
}

}  // namespace

TEST_CASE("results are identical with 1 and 2 threads") {
  TempDir a, b;
  REQUIRE(run("run --threads 1 --capture " + sample() + " --out " + shell_quote(a.path.string())).rc == 0);
  REQUIRE(run("run --threads 2 --capture " + sample() + " --out " + shell_quote(b.path.string())).rc == 0);
  CHECK(slurp(a.path / "metrics.csv") == slurp(b.path / "metrics.csv"));
  // The advice and every config, on a run where it keeps GEMMs FP8 (numerics alone), with 1, 2
  // and 4 threads into the same --out (moved away after each): byte for byte, recipe.json
  // included (its provenance leaves --threads out).
  TempDir c;
  const fs::path out = c.path / "out";
  for (const char* threads : {"1", "2", "4"}) {
    REQUIRE(run(real_run("lm-spike", out, std::string("--cost none --threads ") + threads)).rc == 0);
    fs::rename(out, c.path / threads);
  }
  for (const char* f : {"metrics.csv", "gemms.csv", "recipe.json", "megatron_args.txt", "megatron_bridge.yaml",
                        "te_precision_config.yaml", "nvdlfw_inspect.yaml", "torchao.json", "report.md"}) {
    INFO(f);
    CHECK(slurp(c.path / "1" / f) == slurp(c.path / "2" / f));
    CHECK(slurp(c.path / "1" / f) == slurp(c.path / "4" / f));
  }
  const auto provenance = nlohmann::json::parse(slurp(c.path / "1/recipe.json")).at("provenance");
  CHECK(provenance.at("command_line").dump().find("threads") == std::string::npos);
}

TEST_CASE("the answer: numerics alone on the sample and the real runs, the decision in summary.json") {
  TempDir a;
  const auto r = run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) + " --cost none");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  // The layer table first, the answer last (issue 61: the last screen a person sees is the
  // answer): the output ends with its "wrote ..." line.
  const auto answer_at = r.out.find("\nanswer: Float8CurrentScaling(fp8_format=Format.HYBRID)  [current/hybrid]\n");
  REQUIRE(answer_at != std::string::npos);
  CHECK(answer_at > r.out.find("min sqnr dB"));
  CHECK(r.out.rfind("\nwrote ") > answer_at);
  CHECK(r.out.find('\n', r.out.rfind("\nwrote ") + 1) == r.out.size() - 1);
  CHECK(r.out.find("  keep in BF16: nothing, every GEMM FP8\n") != std::string::npos);
  CHECK(r.out.find("  cost: none (numerics only); FP8 share of GEMM FLOPs 100.0 %\n") != std::string::npos);
  const auto summary = nlohmann::json::parse(slurp(a.path / "summary.json"));
  const auto& d = summary.at("decision");
  CHECK(d.at("gpu") == "h100");
  CHECK(d.at("cost_source") == "none");
  CHECK(d.at("chosen").at("name") == "current/hybrid");
  CHECK(d.at("chosen").at("te_recipe") == "Float8CurrentScaling(fp8_format=Format.HYBRID)");
  CHECK(d.at("layers").size() == 4);
  for (const auto& l : d.at("layers")) {
    CHECK(l.at("fp8_safe") == true);
    CHECK(l.at("precision") == "fp8");
  }
  CHECK_FALSE(d.at("pareto").empty());

  // lm-spike: after the spike the scale it left behind flushes most of the first layer's gradient
  // under delayed scaling (73.507 % of the elements at step 3 with margin 3), but small values in
  // every token: no token loses half its energy (METRICS.md "Flushed rows"), and the clipping at
  // the spike only watches (calibration/RESULTS.md: spike/delayed trains within 1 % of BF16). Every
  // recipe keeps every GEMM in FP8; the threshold load decides, and it is not delayed scaling's.
  TempDir spike;
  const auto s = run(real_run("lm-spike", spike.path, "--cost none --gemm-rows 256"));
  INFO(s.err);
  REQUIRE(s.rc == 0);
  const auto sd = nlohmann::json::parse(slurp(spike.path / "summary.json")).at("decision");
  REQUIRE(sd.at("chosen").is_object());
  CHECK(sd.at("chosen").at("recipe").get<std::string>().rfind("delayed", 0) != 0);
  CHECK(s.out.find("answer: DelayedScaling") == std::string::npos);
  CHECK(s.out.find("  keep in BF16: nothing, every GEMM FP8\n") != std::string::npos);
  CHECK(s.out.find("  not the other recipes:\n") == std::string::npos);
  // The search line says what each delayed option clips and flushes on the captures.
  CHECK(s.out.find("; TE's default delayed:history=1024:algo=max:margin=0/hybrid: 100.0 %, ") != std::string::npos);
  // Those shares from metrics.csv's counts, summed here: flushed and clipped elements over all
  // elements of every applicable row of the recipe.
  const auto cast_share = [&](const std::string& recipe) {
    double n = 0, flushed = 0, clipped = 0;
    for (const auto& row : read_csv(slurp(spike.path / "metrics.csv"))) {
      if (row.at("recipe") != recipe || row.at("format") != "hybrid" || row.at("numel").empty() ||
          row.at("underflow_count").empty())
        continue;
      n += std::stod(row.at("numel"));
      flushed += std::stod(row.at("underflow_count"));
      clipped += std::stod(row.at("saturated_count"));
    }
    return fp8a::format_text("its casts flush %.3f %% and clip %.4f %% of the elements", 100 * flushed / n,
                       100 * clipped / n);
  };
  CHECK(s.out.find("on the captures " + cast_share("delayed:history=2:algo=max:margin=3") + "; TE's default") !=
        std::string::npos);
  CHECK(s.out.find("on the captures " + cast_share("delayed:history=1024:algo=max:margin=0") + " (one delayed") !=
        std::string::npos);
  CHECK(s.out.find("  watch next run:\n") != std::string::npos);

  // lm-sane: every GEMM stays FP8.
  TempDir sane;
  const auto n = run(real_run("lm-sane", sane.path, "--cost none --gemm-rows 256"));
  INFO(n.err);
  REQUIRE(n.rc == 0);
  CHECK(n.out.find("  keep in BF16: nothing, every GEMM FP8\n") != std::string::npos);
  const auto nd = nlohmann::json::parse(slurp(sane.path / "summary.json")).at("decision");
  CHECK(nd.at("chosen").at("fp8_flop_share") == 1.0);
  for (const auto& l : nd.at("layers")) CHECK(l.at("precision") == "fp8");
}

TEST_CASE("--cost roofline at the captured tokens (h100): FP8 does not pay for the sample's GEMMs") {
  TempDir a;
  const auto r = run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) + " --cost roofline");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  // The sample's GEMMs (d_model 128-256) are far too small for FP8 to pay: every GEMM the numbers
  // allow in FP8 goes to BF16 for the cost, and says so; the numerics-only plan predicts < 1x.
  CHECK(r.out.find("answer: every GEMM in BF16") != std::string::npos);
  CHECK(r.out.find("(cost: roofline at the captured token count)") != std::string::npos);
  CHECK(r.out.find("--tokens-per-step gives the real token count, --cost none decides") != std::string::npos);
  CHECK(r.out.find("keep in BF16 because FP8 would not pay on h100: 12 GEMMs the numbers allow") !=
        std::string::npos);
  const std::string key = "with every GEMM the numbers allow in FP8, ";
  const auto at = r.out.find(key);
  REQUIRE(at != std::string::npos);
  const auto x = r.out.find("predicts ", at);
  REQUIRE(x != std::string::npos);
  CHECK(std::stod(r.out.substr(x + 9)) < 1.0);
  // Every MXFP8 candidate the H100 cannot run sits on one line with the one reason.
  CHECK(r.out.find("  excluded on h100:\n    mxfp8/e4m3, mxfp8:floor/e4m3: mxfp8 needs sm_100+") != std::string::npos);
  const auto d = nlohmann::json::parse(slurp(a.path / "summary.json")).at("decision");
  CHECK(d.at("cost_source") == "roofline");
  for (const auto& c : d.at("candidates"))
    if (c.at("runnable") == true) CHECK(c.at("fp8_flop_share") == 0.0);
  // recipe.json keeps the numbers' verdict beside the plan: fp8_safe, precision bf16, the reason.
  const auto recipe = nlohmann::json::parse(slurp(a.path / "recipe.json"));
  for (const auto& l : recipe.at("layers"))
    for (const auto& [gemm, g] : l.at("gemms").items()) {
      INFO(l.at("layer") << " " << gemm);
      CHECK(g.at("precision") == "bf16");
      CHECK(g.at("fp8_safe") == true);
      CHECK(g.at("reason").get<std::string>().rfind("FP8 would not pay on h100: ", 0) == 0);
    }
}

TEST_CASE("tokens per step: --tokens-per-step, else the capture's, else the cost is not judged") {
  // The sample records none: the default judges no cost and says what would.
  TempDir none;
  const auto n = run("run --capture " + sample() + " --out " + shell_quote(none.path.string()) + " --quiet");
  INFO(n.err);
  REQUIRE(n.rc == 0);
  CHECK(n.out.find("answer: Float8CurrentScaling(fp8_format=Format.HYBRID)  [current/hybrid]\n") == 0);
  CHECK(n.out.find("  cost: not judged: the capture does not record its tokens per step (--tokens-per-step N: "
                   "global batch x sequence length); the numerics decide; FP8 share of GEMM FLOPs 100.0 %\n") !=
        std::string::npos);
  auto decision = [](const TempDir& d) { return nlohmann::json::parse(slurp(d.path / "summary.json")).at("decision"); };
  CHECK(decision(none).at("cost_source") == "none");
  CHECK(decision(none).at("cost_basis").get<std::string>().rfind("not judged: ", 0) == 0);

  // A capture folder with fp8a_capture.json (TE DumpTensors users write it once).
  TempDir cap;
  for (const char* f : {"step_000100.safetensors", "step_000200.safetensors"})
    std::filesystem::copy_file(kSource / "datasets/sample" / f, cap.path / f);
  const auto describe = [&](const std::string& text) { std::ofstream(cap.path / "fp8a_capture.json") << text; };
  describe("{\"tokens_per_step\": 4194304}\n");
  TempDir rec;
  const auto r = run("run --capture " + shell_quote(cap.path.string()) + " --out " + shell_quote(rec.path.string()) +
                     " --quiet");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string recorded =
      "(cost: roofline at 4194304 tokens a step (recorded in " + (cap.path / "fp8a_capture.json").string() + "))";
  CHECK(r.out.find(recorded) != std::string::npos);
  CHECK(decision(rec).at("cost_source") == "roofline");
  CHECK(nlohmann::json::parse(slurp(rec.path / "recipe.json")).at("predicted").at("cost_basis") ==
        recorded.substr(7, recorded.size() - 8));
  // --tokens-per-step overrides it; --cost none still decides by the numerics alone.
  TempDir opt;
  const auto o = run("run --capture " + shell_quote(cap.path.string()) + " --out " + shell_quote(opt.path.string()) +
                     " --quiet --tokens-per-step 8192");
  REQUIRE(o.rc == 0);
  CHECK(o.out.find("(cost: roofline at 8192 tokens a step (--tokens-per-step))") != std::string::npos);
  TempDir off;
  const auto f = run("run --capture " + shell_quote(cap.path.string()) + " --out " + shell_quote(off.path.string()) +
                     " --quiet --cost none");
  REQUIRE(f.rc == 0);
  CHECK(f.out.find("  cost: none (numerics only); FP8 share") != std::string::npos);

  // A description that is not {"tokens_per_step": N}: one line naming the file, exit 3.
  for (const std::string bad : {"{\"tokens_per_step\": 0}", "{\"tokens_per_step\": 1.5}", "{\"tokens_per_step\": \"8\"}",
                                "{\"tokens_per_step\": 8, \"tokens_per_step\": 9}", "[8]", "{", "{\"tokens\": 8}",
                                "{\"tokens_per_step\": 1000000000001}"}) {
    describe(bad);
    TempDir out;
    const auto b = run("run --capture " + shell_quote(cap.path.string()) + " --out " + shell_quote(out.path.string()));
    INFO(bad << " -> " << b.err);
    CHECK(b.rc == 3);
    CHECK(b.err.find("fp8a.capture.413") != std::string::npos);
    CHECK(b.err.find("fp8a_capture.json: ") != std::string::npos);
    CHECK(std::count(b.err.begin(), b.err.end(), '\n') == 1);
    CHECK_FALSE(std::filesystem::exists(out.path / "recipe.json"));
  }
}

TEST_CASE("a capture without gradients (taken under no_grad): inspect and run say so first") {
  TempDir cap;
  const std::vector<float> values(16 * 8, 0.25f);
  const auto file = [&](const std::vector<fp8a::test::TensorSpec>& specs) {
    const auto bytes = fp8a::test::build_file(specs, {{"step", "3"}});
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  };
  write_bytes(cap.path / "rank0_step_000003.safetensors",
              file({{"layers.0.fc1.activation", "F32", {16, 8}, values},
                    {"layers.0.fc1.weight", "F32", {16, 8}, values},
                    {"layers.1.fc2.activation", "F32", {16, 8}, values},
                    {"layers.1.fc2.weight", "F32", {16, 8}, values}}));
  const auto i = run("inspect " + shell_quote(cap.path.string()));
  REQUIRE(i.rc == 0);
  CHECK(i.out.find("\nmissing: 2 of 2 layer-steps have no gradient (none at all: captured under torch.no_grad() "
                   "or before backward? capture a training step)\n") != std::string::npos);
  CHECK(i.out.find("\ntokens per step: not recorded (run judges no cost without it") != std::string::npos);
  TempDir out;
  const auto r = run("run --capture " + shell_quote(cap.path.string()) + " --out " + shell_quote(out.path.string()) +
                     " --quiet");
  REQUIRE(r.rc == 0);
  const std::string says = "dgrad and wgrad of every layer: the capture holds no gradient (dY); it was taken under "
                           "torch.no_grad() or before backward: capture a training step";
  CHECK(r.err == "fp8-advisor: warning: " + says + "\n");
  // The first of what was not judged, right after the answer's cost line.
  const auto judged = r.out.find("\n  not judged: ");
  REQUIRE(judged != std::string::npos);
  CHECK(r.out.compare(judged, 15 + says.size(), "\n  not judged: " + says) == 0);
  CHECK(nlohmann::json::parse(slurp(out.path / "summary.json")).at("warnings").dump().find(says) != std::string::npos);
  // One layer with its gradient: judged where it can be, the other layer's gap named by inspect.
  write_bytes(cap.path / "rank0_step_000003.safetensors",
              file({{"layers.0.fc1.activation", "F32", {16, 8}, values},
                    {"layers.0.fc1.weight", "F32", {16, 8}, values},
                    {"layers.0.fc1.gradient", "F32", {16, 16}, std::vector<float>(256, 0.5f)},
                    {"layers.1.fc2.activation", "F32", {16, 8}, values},
                    {"layers.1.fc2.weight", "F32", {16, 8}, values}}));
  CHECK(run("inspect " + shell_quote(cap.path.string())).out.find(
            "\nmissing: 1 of 2 layer-steps have no gradient (their dgrad and wgrad are not judged)\n") !=
        std::string::npos);
}

TEST_CASE("a training log from another run: warned, and first among what was not judged") {
  TempDir other;
  const auto r = run("run --capture " + shell_quote((kSource / "datasets/real/lm-sane").string()) +
                     " --training-log " + shell_quote((kSource / "datasets/real/lm-spike/amax_trace_rank0.csv").string()) +
                     " --out " + shell_quote(other.path.string()) + " --gemm-rows 256 --quiet");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string says = "the training log does not match the capture: at 10 of 24 captured (step, tensor) pairs";
  CHECK(r.err.find("fp8-advisor: warning: " + says) != std::string::npos);
  CHECK(r.out.find("\n  not judged: " + says) != std::string::npos);
  // Its own log agrees.
  TempDir own;
  const auto o = run(real_run("lm-sane", own.path, "--gemm-rows 256 --quiet"));
  REQUIRE(o.rc == 0);
  CHECK(o.err.find("does not match") == std::string::npos);
}

TEST_CASE("report.html's plan grid: BF16 cells name the criterion or the cost, FP8 cells are FP8") {
  // lm-spike under TE's default delayed scaling, judged by the underflow element count (the
  // default's rule until the flushed rows were measured): the first layer's dgrad and wgrad fail.
  TempDir spike, policy;
  std::ofstream(policy.path / "by-elements.json")
      << R"({"base": "default", "name": "by-elements", "criteria": {"underflow": {"max_pct_any_energy": 50, )"
         R"("max_lost_rows_pct": null}}})";
  REQUIRE(run(real_run("lm-spike", spike.path,
                       "--recipes delayed --format hybrid --cost none --quiet --gemm-rows 256 --policy " +
                           shell_quote((policy.path / "by-elements.json").string())))
              .rc == 0);
  const std::string page = slurp(spike.path / "report.html");
  const auto grid = page.find("<table class=\"plan\">");
  REQUIRE(grid != std::string::npos);
  const std::string row = page.substr(grid, page.find("</tr>", page.find("<td>layers.0.self_attention", grid)) - grid);
  // Without the reasons on hover (title="..."): the precision and the criterion of each cell.
  const std::string cells = std::regex_replace(row, std::regex(" title=\"[^\"]*\""), "");
  // The dgrad's weight copy also breaches saturation, further over its threshold, but saturation
  // only watches: the cell names underflow, the criterion that sent it, as the answer does.
  CHECK(cells.find("<td>layers.0.self_attention.linear_qkv</td><td class=\"fp8\">FP8</td><td class=\"bf16\">BF16: "
                   "underflow</td><td class=\"bf16\">BF16: underflow</td>") != std::string::npos);
  CHECK(row.find("<td class=\"bf16\" title=\"step ") != std::string::npos);
  CHECK(page.find("4 GEMMs FP8, 2 BF16 for the numbers, 0 BF16 because FP8 would not pay, 0 not judged; FP8 share of "
                  "GEMM FLOPs 71.4 %.") != std::string::npos);
  // The sample priced at a real token count: every GEMM "BF16: cost", the roofline's numbers on hover.
  TempDir cost;
  REQUIRE(run("run --capture " + sample() + " --out " + shell_quote(cost.path.string()) +
              " --quiet --tokens-per-step 1e6")
              .rc == 0);
  const std::string c = slurp(cost.path / "report.html");
  CHECK(count_of(c, "<td class=\"cost\" title=\"FP8 would not pay on h100: ") == 12);
  CHECK(count_of(c, ">BF16: cost</td>") == 12);
}

TEST_CASE("CI gates: --expect-plan and --min-fp8-share exit 4 after writing, saying why") {
  TempDir base, same, moved;
  auto run_on = [&](const TempDir& out, const std::string& extra) {
    return run("run --capture " + sample() + " --format hybrid --out " + shell_quote(out.path.string()) + " --quiet " +
               extra);
  };
  REQUIRE(run_on(base, "").rc == 0);
  const std::string plan = shell_quote((base.path / "recipe.json").string());
  // The same inputs: the same plan, exit 0, nothing on stderr.
  const auto s = run_on(same, "--expect-plan " + plan + " --min-fp8-share 1");
  CHECK(s.rc == 0);
  CHECK(s.err.empty());
  // Priced at a real token count these toy layers all go to BF16: both gates fail, the files are written.
  const auto m = run_on(moved, "--expect-plan " + plan + " --min-fp8-share 0.5 --tokens-per-step 1e6");
  CHECK(m.rc == 4);
  CHECK(std::filesystem::exists(moved.path / "recipe.json"));
  CHECK(m.err.rfind("fp8-advisor: gate: the plan differs from --expect-plan " + (base.path / "recipe.json").string() +
                        " (13 differences):\n  FP8 share of the GEMM FLOPs: 100.0 % -> 0.0 %\n"
                        "  layers.0.mlp.linear_fc2 fprop: fp8 -> bf16: FP8 would not pay on h100: ",
                    0) == 0);
  CHECK(m.err.find("\nfp8-advisor: gate: the plan keeps 0.0 % of the GEMM FLOPs in FP8, under --min-fp8-share "
                   "50.0 %\n") != std::string::npos);
  // Not a recipe.json, or out of range: refused before anything runs.
  TempDir bad;
  const auto j = run_on(bad, "--expect-plan " + shell_quote((base.path / "metrics.csv").string()));
  CHECK(j.rc == 3);
  CHECK(j.err == "fp8-advisor: error: [fp8a.io.107] --expect-plan " + (base.path / "metrics.csv").string() +
                     ": not JSON\n");
  const auto summary = run_on(bad, "--expect-plan " + shell_quote((base.path / "summary.json").string()));
  CHECK(summary.err.find("not a recipe.json (no \"layers\" array or \"predicted\" object)") != std::string::npos);
  CHECK(run_on(bad, "--min-fp8-share 1.5").rc == 2);
  CHECK_FALSE(std::filesystem::exists(bad.path / "recipe.json"));
}

TEST_CASE("edge cases of the advice: one captured step, a policy that rejects everything") {
  // One step, no training log: no trend, and the answer says what that leaves unjudged.
  TempDir a;
  const auto r = run("run --capture " + shell_quote(std::string(FP8A_SOURCE_DIR) +
                                                   "/datasets/sample/step_000100.safetensors") +
                     " --out " + shell_quote(a.path.string()) + " --cost none --quiet");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("  not judged: no amax trend: 1 captured step and no training log of more") !=
        std::string::npos);
  const auto recipe = nlohmann::json::parse(slurp(a.path / "recipe.json"));
  REQUIRE(recipe.at("limits").size() == 1);
  CHECK(recipe.at("limits")[0].get<std::string>().rfind("no amax trend: 1 captured step", 0) == 0);

  // Every tensor over a rel_mse bound it cannot meet: all BF16 with each GEMM's reason, exit 0.
  TempDir b;
  const fs::path policy = b.path / "reject.json";
  write_bytes(policy, R"({"name": "reject-all", "criteria": {"rel_mse_floor": {"action": "fail", "k": 1,
      "floor_e4m3": 1e-30, "floor_e5m2": 1e-30, "floor_bf16": 1e-30}}})");
  const auto x = run("run --capture " + sample() + " --out " + shell_quote((b.path / "out").string()) +
                     " --cost none --quiet --policy " + shell_quote(policy.string()));
  INFO(x.err);
  REQUIRE(x.rc == 0);
  CHECK(x.out.find("answer: every GEMM in BF16 (the chosen ") != std::string::npos);
  CHECK(x.out.find("  keep in BF16 (12 GEMMs):\n") != std::string::npos);
  const auto rj = nlohmann::json::parse(slurp(b.path / "out" / "recipe.json"));
  CHECK(rj.at("predicted").at("fp8_flop_share") == 0.0);
  for (const auto& l : rj.at("layers")) {
    CHECK(l.at("precision") == "bf16");
    for (const auto& [gemm, g] : l.at("gemms").items()) {
      INFO(l.at("layer") << " " << gemm);
      CHECK(g.at("fp8_safe") == false);
      CHECK(g.at("reason").get<std::string>().find("rel_mse") != std::string::npos);
    }
  }
  // No module can be FP8 either: every module of the per-module plan BF16.
  for (const auto& m : rj.at("module_plan").at("modules")) CHECK(m.at("precision") == "bf16");
}

namespace {
// Field 22 of /proc/PID/stat, as rundir/output_lock.cpp writes it (written here again on
// purpose: the test plants a holder's line by the same rule).
std::string proc_start_time(long pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) rest >> field;
  return field;
}
}  // namespace

TEST_CASE("one run per --out: a held lock refuses naming its holder, a dead run's leftovers go") {
  TempDir d;
  const fs::path out = d.path / "out";
  fs::create_directories(out);
  const fs::path lock = out / ".fp8-advisor.lock";
  const std::string cmd = "run --capture " + sample() + " --out " + shell_quote(out.string()) + " --cost none --quiet";
  const long me = static_cast<long>(::getpid());
  {
    // A live holder: this test process takes the kernel lock and names itself, as a run does.
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    const std::string line = std::to_string(me) + " " + proc_start_time(me) + " fp8-advisor run --out elsewhere\n";
    REQUIRE(::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()));
    const auto busy = run(cmd);
    CHECK(busy.rc == 2);
    CHECK(busy.err == "fp8-advisor: error: [fp8a.usage.220] --out " + out.string() +
                          " is in use by another fp8-advisor (pid " + std::to_string(me) +
                          ": fp8-advisor run --out elsewhere); wait for it or choose another --out (a lock "
                          "left by a dead run is taken over: " + lock.string() + ")\n");
    CHECK(slurp(lock) == line);                     // not ours: left alone
    CHECK_FALSE(fs::exists(out / "metrics.csv"));  // nothing written
    ::close(fd);
  }
  // A dead run's lock file (killed: its line still there, its kernel lock dropped by the kernel)
  // with the temporary file and the staging folder it was writing: taken, and they go.
  long dead = 4194303;
  while (dead > 1 && (::kill(static_cast<pid_t>(dead), 0) == 0 || errno != ESRCH)) --dead;
  write_bytes(lock, std::to_string(dead) + " 12345 fp8-advisor run\n");
  const fs::path tmp = out / ("recipe.json.tmp." + std::to_string(dead));
  const fs::path staging = out / (".fp8-advisor-staging." + std::to_string(dead));
  write_bytes(tmp, "{\"half\": ");
  fs::create_directories(staging);
  write_bytes(staging / "metrics.csv", "step,");
  const auto taken = run(cmd);
  INFO(taken.err);
  CHECK(taken.rc == 0);
  CHECK(fs::exists(out / "recipe.json"));
  CHECK_FALSE(fs::exists(tmp));
  CHECK_FALSE(fs::exists(staging));
  // The lock file goes on release.
  CHECK_FALSE(fs::exists(lock));
  CHECK(run(cmd).rc == 0);
  // A lock file planted as a symbolic link (or a FIFO): refused, its target untouched.
  TempDir h;
  const fs::path target = h.path / "precious.txt";
  write_bytes(target, "keep me\n");
  const fs::path trap = h.path / "trap";
  fs::create_directories(trap);
  fs::create_symlink(target, trap / ".fp8-advisor.lock");
  const auto linked = run("run --capture " + sample() + " --out " + shell_quote(trap.string()) + " --cost none --quiet");
  CHECK(linked.rc == 3);
  CHECK(linked.err == "fp8-advisor: error: [fp8a.io.104] " + (trap / ".fp8-advisor.lock").string() +
                          ": cannot write: a symbolic link, not a lock file\n");
  CHECK(slurp(target) == "keep me\n");
  fs::remove(trap / ".fp8-advisor.lock");
  REQUIRE(::mkfifo((trap / ".fp8-advisor.lock").c_str(), 0644) == 0);
  const auto fifo = run("run --capture " + sample() + " --out " + shell_quote(trap.string()) + " --cost none --quiet");
  CHECK(fifo.rc == 3);
  CHECK(fifo.err == "fp8-advisor: error: [fp8a.io.104] " + (trap / ".fp8-advisor.lock").string() +
                        ": cannot write: not a regular file\n");
  // An error with a fresh --out: neither the lock file nor the directory it created is left.
  const fs::path fresh = d.path / "fresh";
  CHECK(run("run --capture " + shell_quote((d.path / "missing").string()) + " --out " +
            shell_quote(fresh.string())).rc == 3);
  CHECK_FALSE(fs::exists(fresh));
}

TEST_CASE("progress on stderr: plain lines in a log, one redrawn line on a terminal, none with --quiet") {
  // Not a terminal (the test's pipe), a line after every unit: both stages, each to its end.
  TempDir a;
  const auto r = run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) +
                     " --cost none --progress-every 0");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.err.find("progress: tensors 1/24 (") != std::string::npos);
  CHECK(r.err.find("progress: tensors 24/24 (100 %), ") != std::string::npos);
  CHECK(r.err.find("progress: GEMM layers 8/8 (100 %), ") != std::string::npos);
  CHECK(r.err.find(" done in ") != std::string::npos);
  CHECK(r.err.find('\r') == std::string::npos);
  // The sample's run is far shorter than the default 10 s: no line at all.
  TempDir b;
  const auto d = run("run --capture " + sample() + " --out " + shell_quote(b.path.string()) + " --cost none");
  CHECK(d.err.find("progress:") == std::string::npos);
  // --quiet: nothing, whatever the interval.
  TempDir c;
  const auto q = run("run --capture " + sample() + " --out " + shell_quote(c.path.string()) +
                     " --cost none --quiet --progress-every 0");
  CHECK(q.err.find("progress") == std::string::npos);
  CHECK(run("run --capture x --out y --progress-every -1").err ==
        "fp8-advisor: error: [fp8a.usage.205] --progress-every -1: expected a finite number >= 0\n");
  // A terminal (util-linux script gives the run a pseudo-terminal): the line is redrawn in place.
  if (::access("/usr/bin/script", X_OK) != 0) {
    MESSAGE("no /usr/bin/script: the terminal case is not tested");
    return;
  }
  TempDir t;
  const std::string inner = shell_quote(kBinary) + " run --capture " + sample() + " --out " +
                            shell_quote((t.path / "o").string()) + " --cost none >/dev/null";
  const std::string cmd = "/usr/bin/script -qec " + shell_quote(inner) + " /dev/null > " +
                          shell_quote((t.path / "tty.txt").string()) + " 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string tty = slurp(t.path / "tty.txt");
  CHECK(tty.find("\r\x1b[Ktensors ") != std::string::npos);
  CHECK(tty.find("\r\x1b[KGEMM layers 8/8 (100 %), ") != std::string::npos);
  CHECK(tty.find("progress:") == std::string::npos);
}

TEST_CASE("--quiet prints only the answer; --gpu, --cost, --tokens-per-step errors; --no-gemms skips") {
  TempDir a, b;
  const auto loud = run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) + " --cost none");
  const auto quiet = run("run --capture " + sample() + " --out " + shell_quote(b.path.string()) + " --cost none --quiet");
  REQUIRE(loud.rc == 0);
  REQUIRE(quiet.rc == 0);
  CHECK(quiet.out.rfind("answer: ", 0) == 0);
  // The same block, with the other output folder in its "wrote" line.
  std::string want = answer_block(loud.out);
  for (auto p = want.find(a.path.string()); p != std::string::npos; p = want.find(a.path.string()))
    want.replace(p, a.path.string().size(), b.path.string());
  CHECK(quiet.out == want);
  CHECK(quiet.out.find("min sqnr dB") == std::string::npos);

  const auto gpu = run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) + " --gpu a1OO");
  CHECK(gpu.rc == 2);
  CHECK(gpu.out.empty());
  CHECK(gpu.err == "fp8-advisor: error: [fp8a.usage.214] --gpu: unknown GPU 'a1OO' (did you mean "
                   "'a100'?); known: a100, l4, l40s, rtx4090, h100, h200, b200, gb200, b300, gb300, rtx5090\n");
  const auto te = run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) + " --te-version 2.3");
  CHECK(te.rc == 2);
  CHECK(te.err == "fp8-advisor: error: [fp8a.usage.242] --te-version '2.3': fp8-advisor writes files for "
                  "Transformer Engine 2.4 to 2.20\n");
  const auto cost = run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) + " --cost rofline");
  CHECK(cost.rc == 2);
  CHECK(cost.err == "fp8-advisor: error: [fp8a.usage.215] --cost 'rofline': expected roofline or none "
                    "(did you mean 'roofline'?)\n");
  CHECK(run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) + " --tokens-per-step -1").rc == 2);

  // Without a cost model the GPU still rules out what it cannot run: FP8 needs sm_89+.
  const auto a100 = run("run --capture " + sample() + " --out " + shell_quote(a.path.string()) +
                        " --cost none --gpu a100 --quiet --recipes current,mxfp8 --format hybrid");
  REQUIRE(a100.rc == 0);
  CHECK(a100.out.rfind("answer: no FP8 recipe can be recommended: none runs on a100\n  excluded on a100:\n"
                       "    current/hybrid: current needs sm_89+ (TE Float8CurrentScaling); a100 is sm_80\n", 0) == 0);
  CHECK(nlohmann::json::parse(slurp(a.path / "summary.json")).at("decision").at("gpu_excluded").size() == 2);

  const auto skip = run("run --no-gemms --capture " + sample() + " --out " + shell_quote(a.path.string()) + " --quiet");
  REQUIRE(skip.rc == 0);
  CHECK(skip.out.rfind("answer: no recommendation: --no-gemms leaves no GEMM evidence to judge\nwrote ", 0) == 0);
  const auto d = nlohmann::json::parse(slurp(a.path / "summary.json")).at("decision");
  CHECK(d.at("chosen").is_null());
  CHECK(d.at("skipped") == "no recommendation: --no-gemms leaves no GEMM evidence to judge");
}

TEST_CASE("gemms.csv: three GEMMs per layer, step and recipe; --no-gemms skips it") {
  TempDir a, b;
  REQUIRE(run("run --recipes current,mxfp8 --format e4m3,hybrid --capture " + sample() + " --out " +
              shell_quote(a.path.string())).rc == 0);
  const auto g = read_csv(slurp(a.path / "gemms.csv"));
  CHECK(g.size() == 2 * 4 * 3 * 2 * 2);  // steps x layers x GEMMs x recipes x formats
  for (const auto& row : g) {
    CHECK(num(row.at("rel_fro_err")) > 0.0);
    CHECK(num(row.at("rel_fro_err")) < 0.2);
    CHECK(row.at("engine") == "emulated");
    CHECK(row.at("sampled") == "false");
  }
  REQUIRE(run("run --no-gemms --recipes current --capture " + sample() + " --out " + shell_quote(b.path.string())).rc == 0);
  CHECK_FALSE(fs::exists(b.path / "gemms.csv"));
  const auto summary = nlohmann::json::parse(slurp(b.path / "summary.json"));
  CHECK(summary["outputs"] == nlohmann::json::array({"metrics.csv", "report.md", "summary.json", "report.html"}));
  // Every file a run can write is either in outputs or in not_written, with why.
  const std::string no_evidence = " not written: --no-gemms leaves no GEMM evidence to judge";
  CHECK(summary["not_written"] ==
        nlohmann::json::array({"gemms.csv not written: --no-gemms", "nvdlfw_stats.csv not written: no --training-log",
                               "recipe.json" + no_evidence, "megatron_args.txt" + no_evidence,
                               "megatron_bridge.yaml" + no_evidence, "te_precision_config.yaml" + no_evidence,
                               "nvdlfw_inspect.yaml" + no_evidence, "te_snippet.py" + no_evidence,
                               "torchao.json" + no_evidence}));
}

TEST_CASE(".npy folders, .npz archives and TE DumpTensors .pt files are captures too") {
  // Fixtures written by real np.save / np.savez / torch.save (scripts/make_*_fixtures.py).
  const auto expected = nlohmann::json::parse(slurp(kSource / "tests/golden/npy/expected.json"));
  auto amax_of = [](const nlohmann::json& values) {
    double a = 0;
    for (const auto& v : values) a = std::max(a, std::fabs(v.get<double>()));
    return a;
  };
  TempDir dir;
  const fs::path step_dir = dir.path / "step_000100";
  fs::create_directories(step_dir);
  fs::copy_file(kSource / "tests/golden/npy/f32_2d.npy", step_dir / "layers.0.fc1.activation.npy");
  fs::copy_file(kSource / "tests/golden/npy/bf16_void.npy", step_dir / "layers.0.fc1.weight.npy");
  const auto refused = run("inspect " + shell_quote(dir.path.string()));
  CHECK(refused.rc == 3);
  CHECK(refused.err.find("[fp8a.npy.603]") != std::string::npos);
  CHECK(refused.err.find("pass --npy-dtype bf16") != std::string::npos);

  const fs::path out = dir.path / "out";
  const auto r = run("run --recipes current --npy-dtype bf16 --capture " + shell_quote(dir.path.string()) + " " +
                     shell_quote((kSource / "tests/golden/npy/capture_step_000300.npz").string()) + " " +
                     shell_quote((kSource / "tests/golden/torch/tensor_dumps").string()) +
                     " --out " + shell_quote(out.string()));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  std::map<std::string, std::map<std::string, std::string>> by;
  for (const auto& row : read_csv(slurp(out / "metrics.csv")))
    by[row.at("step") + " " + row.at("layer") + " " + row.at("tensor")] = row;
  CHECK(by.size() == 2 + 3 + 2);
  REQUIRE(by.count("100 layers.0.fc1 activation") == 1);  // step from the folder name
  CHECK(num(by["100 layers.0.fc1 activation"].at("amax")) ==
        doctest::Approx(amax_of(expected["accepted"]["f32_2d.npy"]["values"])).epsilon(1e-7));
  CHECK(by["100 layers.0.fc1 weight"].at("input_dtype") == "BF16");
  CHECK(num(by["100 layers.0.fc1 weight"].at("amax")) ==
        doctest::Approx(amax_of(expected["accepted"]["bf16_void.npy"]["values"])).epsilon(1e-7));
  CHECK(by.count("300 layers.0.fc1 gradient") == 1);  // .npz, step from the file name
  // TE dumps: <layer>_<tensor>_iter_<N>.pt, the high_precision tensor; TE wrote '.' as '_'.
  const auto manifest = nlohmann::json::parse(slurp(kSource / "tests/golden/torch/manifest.json"));
  for (const auto& f : manifest["files"]) {
    const std::string file = f["file"];
    if (file.find("tensor_dumps") == std::string::npos) continue;
    const std::string key = file.find("fc1") != std::string::npos ? "10 layers_0_fc1 activation"
                                                                  : "20 layers_0_fc2 activation";
    INFO(key);
    REQUIRE(by.count(key) == 1);
    for (const auto& t : f["tensors"])
      if (t["key"] == "high_precision") {
        CHECK(num(by[key].at("amax")) == doctest::Approx(amax_of(t["values"])).epsilon(1e-7));
        CHECK(by[key].at("input_dtype") == t["dtype"].get<std::string>());
      }
  }
  const auto bad = run("inspect --npy-dtype bf8 " + sample());
  CHECK(bad.rc == 2);
  CHECK(bad.err == "fp8-advisor: error: [fp8a.usage.207] --npy-dtype 'bf8': the only value is bf16 (did you mean 'bf16'?)\n");
}

// ---- fp8-advisor synth ------------------------------------------------------------------------

namespace {

// Worst (lowest) value of a metrics.csv column over rows matching layer/tensor/recipe prefix/step.
struct SynthRun {
  Table metrics, gemms;
};

SynthRun synth_and_run(const fs::path& dir, const std::string& preset, const std::string& format) {
  const fs::path cap = dir / ("cap-" + preset);
  if (!fs::exists(cap)) {
    const auto s = run("synth --preset " + preset + " --out " + shell_quote(cap.string()));
    INFO(s.err);
    REQUIRE(s.rc == 0);
  }
  const fs::path out = dir / ("run-" + preset + "-" + format);
  const auto r = run("run --capture " + shell_quote(cap.string()) + " --amax-trace " +
                     shell_quote((cap / "amax_trace.csv").string()) + " --format " + format +
                     " --recipes current,delayed:history=16,block,mxfp8,bf16 --out " +
                     shell_quote(out.string()));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return {read_csv(slurp(out / "metrics.csv")), read_csv(slurp(out / "gemms.csv"))};
}

bool is_fp8(const std::string& recipe) { return recipe != "bf16"; }

// Lowest sqnr_db of a layer over its tensors, steps and FP8 recipes.
double worst_tensor_sqnr(const Table& metrics, const std::string& layer) {
  double worst = INFINITY;
  for (const auto& r : metrics)
    if (r.at("layer") == layer && is_fp8(r.at("recipe"))) worst = std::min(worst, num(r.at("sqnr_db")));
  return worst;
}

// Lowest GEMM-output SQNR (-20 log10 rel_fro_err) of a layer over fprop/dgrad/wgrad, steps and
// the given recipes.
double worst_gemm_sqnr(const Table& gemms, const std::string& layer, bool fp8) {
  double worst = INFINITY;
  for (const auto& r : gemms)
    if (r.at("layer") == layer && is_fp8(r.at("recipe")) == fp8)
      worst = std::min(worst, -20.0 * std::log10(num(r.at("rel_fro_err"))));
  return worst;
}

}  // namespace

TEST_CASE("synth: errors, --help, and the same bytes for the same seed") {
  TempDir dir;
  auto r = run("synth --preset helthy --out " + shell_quote((dir.path / "x").string()));
  CHECK(r.rc == 2);
  CHECK(r.err == "fp8-advisor: error: [fp8a.usage.209] unknown preset 'helthy' (did you mean "
                 "'healthy'?); presets: outlier-growth, wide-gradient, sensitive-ends, healthy, all, "
                "sample, model\n");
  r = run("synth --preset healthy --steps 5,x --out " + shell_quote((dir.path / "x").string()));
  CHECK(r.rc == 2);
  CHECK(r.err.find("[fp8a.usage.210]") != std::string::npos);
  r = run("synth --out " + shell_quote((dir.path / "x").string()));
  CHECK(r.rc == 2);
  CHECK(r.err.find("[fp8a.usage.203]") != std::string::npos);
  const fs::path blocker = dir.path / "file";
  write_bytes(blocker, "x");
  r = run("synth --preset healthy --out " + shell_quote(blocker.string()));
  CHECK(r.rc == 3);
  CHECK(r.err == "fp8-advisor: error: [fp8a.io.104] " + blocker.string() + ": cannot write: not a directory\n");
  r = run("synth --help");
  CHECK(r.rc == 0);
  CHECK(r.out.find("outlier-growth") != std::string::npos);
  CHECK(run("--help").out.find("synth") != std::string::npos);

  const fs::path a = dir.path / "a", b = dir.path / "b", c = dir.path / "c";
  REQUIRE(run("synth --preset all --out " + shell_quote(a.string())).rc == 0);
  REQUIRE(run("synth --preset all --seed 1 --out " + shell_quote(b.string())).rc == 0);
  REQUIRE(run("synth --preset all --seed 2 --out " + shell_quote(c.string())).rc == 0);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(a)) {
    ++files;
    const auto name = e.path().filename();
    CHECK(slurp(e.path()) == slurp(b / name));
    if (name != "ground_truth.json") CHECK(slurp(e.path()) != slurp(c / name));
  }
  CHECK(files == 4);
  const auto truth = nlohmann::json::parse(slurp(a / "ground_truth.json"));
  CHECK(truth["preset"] == "all");
  CHECK(truth["layers"].size() == 7);
}

TEST_CASE("synth outlier-growth: delayed scaling saturates the FC2 input at the last step, current does not") {
  TempDir dir;
  const auto m = synth_and_run(dir.path, "outlier-growth", "hybrid").metrics;
  std::int64_t delayed = -1, current = -1;
  for (const auto& r : m) {
    if (r.at("layer") != "layers.0.mlp.linear_fc2" || r.at("tensor") != "activation" || r.at("step") != "100")
      continue;
    if (r.at("recipe") == "delayed:history=16:algo=max:margin=0") {
      CHECK(r.at("replay") == "exact");
      delayed = std::stoll(r.at("saturated_count"));
    }
    if (r.at("recipe") == "current") current = std::stoll(r.at("saturated_count"));
  }
  CHECK(delayed > 20);  // measured 58 (seed 1)
  CHECK(current == 0);
  // The healthy layer next to it does not saturate under delayed scaling.
  for (const auto& r : m)
    if (r.at("layer") == "layers.0.self_attention.linear_qkv") CHECK(r.at("saturated_count") == "0");
}

TEST_CASE("synth sample: the shipped datasets/sample is the preset's output, and its truths hold") {
  TempDir dir;
  const auto hybrid = synth_and_run(dir.path, "sample", "hybrid").metrics;
  const auto e4m3 = synth_and_run(dir.path, "sample", "e4m3").metrics;
  for (const char* name : {"step_000100.safetensors", "step_000200.safetensors", "amax_trace.csv",
                           "ground_truth.json"}) {
    INFO(name);
    CHECK(slurp(dir.path / "cap-sample" / name) == slurp(kSource / "datasets/sample" / name));
  }
  const auto truth = nlohmann::json::parse(slurp(kSource / "datasets/sample/ground_truth.json"));
  REQUIRE(truth["layers"].size() == 4);
  int lognormal = 0, outliers = 0;
  for (const auto& l : truth["layers"]) {
    const std::string layer = l["layer"];
    INFO(layer);
    if (l["pathology"] == "lognormal-gradient") {
      ++lognormal;
      // Fine with every FP8 recipe in hybrid (E5M2 gradients); all-E4M3 per-tensor scaling
      // flushes a visible share of the gradient.
      for (const auto& r : hybrid)
        if (r.at("layer") == layer && r.at("tensor") == "gradient" && is_fp8(r.at("recipe"))) {
          CHECK(num(r.at("sqnr_db")) > 22.0);        // measured 23.2-30.5
          CHECK(num(r.at("underflow_pct")) < 0.05);  // measured 0-0.012
        }
      double worst = 0;
      for (const auto& r : e4m3)
        if (r.at("layer") == layer && r.at("tensor") == "gradient" && r.at("recipe") == "current")
          worst = std::max(worst, num(r.at("underflow_pct")));
      CHECK(worst > 3.0);  // measured 3.7-32.7
    } else {
      CHECK(l["pathology"] == "outlier-growth");
      ++outliers;
      for (const auto& r : hybrid)
        if (r.at("layer") == layer && r.at("tensor") == "activation" && r.at("step") == "200") {
          if (r.at("recipe") == "current") CHECK(r.at("saturated_count") == "0");
          if (r.at("recipe") == "delayed:history=16:algo=max:margin=0")
            CHECK(std::stoll(r.at("saturated_count")) > 20);  // measured 50 (seed 1)
        }
    }
  }
  CHECK(lognormal == 3);
  CHECK(outliers == 1);
}

TEST_CASE("synth wide-gradient: per-tensor E4M3/E5M2 flush the gradient, 1x128 blocks do not") {
  TempDir dir;
  for (const std::string format : {"e4m3", "hybrid"}) {
    INFO(format);
    const auto m = synth_and_run(dir.path, "wide-gradient", format).metrics;
    int seen = 0;
    for (const auto& r : m) {
      if (r.at("layer") != "layers.0.mlp.linear_fc1" || r.at("tensor") != "gradient") continue;
      const double u = num(r.at("underflow_pct"));
      if (r.at("recipe") == "current") {
        ++seen;
        CHECK(u > (format == "e4m3" ? 40.0 : 8.0));  // measured 50.2 / 10.9-13.2
      }
      if (r.at("recipe") == "block" || r.at("recipe") == "mxfp8") {
        ++seen;
        CHECK(u < 0.5);  // measured 0 (both orientations)
      }
    }
    CHECK(seen == 2 * (1 + 4));  // 2 steps: current + block/mxfp8 rowwise/columnwise
  }
}

TEST_CASE("synth sensitive-ends and healthy: FP8 error of the first/last layer is far above the healthy layers'") {
  TempDir dir;
  for (const std::string format : {"e4m3", "hybrid"}) {
    INFO(format);
    const auto healthy = synth_and_run(dir.path, "healthy", format);
    const double tensor_floor = format == "e4m3" ? 30.0 : 24.0;  // measured >= 31.2 / >= 25.4
    double healthy_gemm = INFINITY;
    for (const char* layer : {"layers.0.self_attention.linear_qkv", "layers.0.mlp.linear_fc1",
                              "layers.0.mlp.linear_fc2"}) {
      INFO(layer);
      CHECK(worst_tensor_sqnr(healthy.metrics, layer) > tensor_floor);
      healthy_gemm = std::min(healthy_gemm, worst_gemm_sqnr(healthy.gemms, layer, true));
    }
    CHECK(healthy_gemm > 23.0);  // measured 24.3 (hybrid) / 28.3 (e4m3)
    const auto ends = synth_and_run(dir.path, "sensitive-ends", format);
    for (const char* layer : {"layers.0.self_attention.linear_qkv", "output_layer"}) {
      INFO(layer);
      const double fp8 = worst_gemm_sqnr(ends.gemms, layer, true);
      CHECK(fp8 < healthy_gemm - 6.0);  // measured 16.3 and 12.1-16.2 dB
      CHECK(worst_gemm_sqnr(ends.gemms, layer, false) > 60.0);  // the BF16 fallback is exact here
    }
    CHECK(worst_gemm_sqnr(ends.gemms, "layers.0.mlp.linear_fc1", true) > 23.0);
  }
}

TEST_CASE("nvdlfw_inspect FP8 statistics are shown beside ours (nvdlfw_stats.csv)") {
  // A LogFp8TensorStats log written from the independent NumPy peer's values for the sample
  // (tests/golden/sample_numpy_all_hybrid.csv), printed as nvdlfw_inspect prints them ({:.4f}):
  // current scaling as a what-if recipe, MXFP8 columnwise copies (scale_inv as TE logs MXFP8
  // scales: the biased E8M0 exponent), and delayed scaling as the training recipe (bare names).
  const Table golden = read_csv(slurp(kSource / "tests/golden/sample_numpy_all_hybrid.csv"));
  const std::string delayed = "delayed:history=16:algo=max:margin=0";
  std::vector<std::pair<int, std::string>> lines;  // (step, line), written in step order as TE does
  std::size_t expected_pairs = 0;
  const auto line = [&](const std::string& layer, const std::string& tensor, const std::string& stat,
                        const std::string& step, double value) {
    char buf[160];
    std::snprintf(buf, sizeof buf, " \t\t\t\t iteration=%06d \t\t\t\t value=%.4f\n",
                  std::atoi(step.c_str()), value);
    lines.emplace_back(std::atoi(step.c_str()), "2026-01-01 00:00:00,000 - INFO - " + layer + "_" + tensor + "_" + stat + buf);
  };
  for (const auto& g : golden) {
    // DumpTensors-style names for one layer: the pairing must match them after sanitising.
    std::string layer = g.at("layer");
    const std::string step = g.at("step"), tensor = g.at("tensor"), recipe = g.at("recipe");
    if (layer == "layers.1.mlp.linear_fc2") layer = "layers_1_mlp_linear_fc2";
    if (recipe == "current") {
      line(layer, tensor, "fp8_current_scaling_underflows%", step, num(g.at("underflow_pct")));
      line(layer, tensor, "fp8_current_scaling_mse", step, num(g.at("mse")));
      line(layer, tensor, "fp8_current_scaling_scale_inv_min", step, num(g.at("scale_inv_min")));
      expected_pairs += 3;
    } else if (recipe == "mxfp8" && g.at("orientation") == "columnwise") {
      line(layer, tensor, "mxfp8_underflows%_columnwise", step, num(g.at("underflow_pct")));
      line(layer, tensor, "mxfp8_scale_inv_max_columnwise", step,
           std::log2(num(g.at("scale_inv_max"))) + 127.0);
      expected_pairs += 2;
    } else if (recipe == delayed) {
      line(layer, tensor, "underflows%", step, num(g.at("underflow_pct")));
      line(layer, tensor, "overflows%", step, num(g.at("overflow_pct")));
      expected_pairs += 2;
    }
  }
  REQUIRE(expected_pairs == 24 * 7);
  // Logged at a step that was not captured, and for the training recipe.
  line("layers.0.mlp.linear_fc2", "gradient", "underflows%", "150", 12.5);
  std::stable_sort(lines.begin(), lines.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string log;
  for (const auto& [step, text] : lines) log += text;

  TempDir dir;
  const fs::path log_path = dir.path / "nvdlfw_inspect_globalrank-0.log";
  write_bytes(log_path, log);
  const std::string args = "run --capture " + sample() + " --no-gemms --recipes current," + delayed +
                           ",mxfp8 --amax-trace " +
                           shell_quote((kSource / "datasets/sample/amax_trace.csv").string()) + " " +
                           shell_quote(log_path.string());
  const fs::path out = dir.path / "out";
  // The log is of a hybrid run; --format hybrid evaluates MXFP8's gradients as E5M2 too.
  const auto r = run(args + " --format hybrid --training-recipe " + delayed + " --out " + shell_quote(out.string()));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const Table rows = read_csv(slurp(out / "nvdlfw_stats.csv"));
  // The value of step 150 is judged as a logged row, not listed (a log of every step would make
  // the file as long as the log): the notes say so.
  REQUIRE(rows.size() == expected_pairs);
  const auto run_summary = nlohmann::json::parse(slurp(out / "summary.json"));
  CHECK(run_summary.at("delayed_replay").at("amax_trace_notes").dump().find(
            "1 logged FP8 statistics of steps no capture holds are judged as logged rows, not listed in "
            "nvdlfw_stats.csv") != std::string::npos);
  std::size_t paired = 0;
  for (const auto& row : rows) {
    INFO(row.at("step") << " " << row.at("layer") << " " << row.at("role") << " "
         << row.at("statistic") << " " << row.at("note"));
    REQUIRE(row.at("note").empty());
    ++paired;
    // The log keeps 4 decimals: our value is within half a unit of the last one.
    CHECK(std::fabs(num(row.at("ours")) - num(row.at("logged"))) <= 0.00005 + 1e-12);
    CHECK(num(row.at("difference")) == doctest::Approx(num(row.at("ours")) - num(row.at("logged"))));
    const std::string stat = row.at("statistic");
    if (stat.rfind("fp8_current_scaling", 0) == 0) CHECK(row.at("recipe") == "current");
    if (stat.rfind("mxfp8", 0) == 0) {
      CHECK(row.at("recipe") == "mxfp8");
      CHECK(row.at("orientation") == "columnwise");
    }
    if (stat == "underflows%" || stat == "overflows%") CHECK(row.at("recipe") == delayed);
  }
  CHECK(paired == expected_pairs);
  const auto summary = nlohmann::json::parse(slurp(out / "summary.json"));
  CHECK(summary["nvdlfw_stats"]["logged"] == expected_pairs);
  CHECK(summary["nvdlfw_stats"]["paired"] == expected_pairs);
  CHECK(summary["nvdlfw_stats"]["training_recipe"] == delayed);
  CHECK(r.out.find("nvdlfw_inspect FP8 statistics: 168 logged, 168 beside our numbers") !=
        std::string::npos);

  // Without --training-recipe the bare statistics stay unpaired, with the reason. Under the
  // default --format auto MXFP8 is evaluated in e4m3 only: its activation and weight statistics
  // (E4M3 in a hybrid run too) pair, its gradients' (E5M2 there) say how to get them.
  const auto r2 = run(args + " --out " + shell_quote((dir.path / "out2").string()));
  REQUIRE(r2.rc == 0);
  std::size_t unpaired = 0, mx_gradient = 0, mx_paired = 0;
  for (const auto& row : read_csv(slurp(dir.path / "out2/nvdlfw_stats.csv"))) {
    if (row.at("note") == "the training run's recipe: name it with --training-recipe") ++unpaired;
    if (row.at("statistic").starts_with("mxfp8") && row.at("role") == "gradient")
      mx_gradient += row.at("note") == "not evaluated as e5m2 (hybrid): mxfp8 is evaluated in e4m3; add --format e4m3,hybrid";
    else if (row.at("statistic").starts_with("mxfp8") && row.at("note").empty()) {
      ++mx_paired;
      CHECK(std::fabs(num(row.at("ours")) - num(row.at("logged"))) <= 0.00005 + 1e-12);
    }
  }
  CHECK(unpaired == 24 * 2);
  CHECK(mx_gradient == 8 * 2);
  CHECK(mx_paired == 16 * 2);

  // Without a --training-log there is nothing the recipe names: a usage error, nothing written.
  const auto no_log = run("run --capture " + sample() + " --no-gemms --recipes current --training-recipe "
                          "current --out " + shell_quote((dir.path / "o4").string()));
  CHECK(no_log.rc == 2);
  CHECK(no_log.err == "fp8-advisor: error: [fp8a.usage.211] --training-recipe names the recipe of "
                      "--training-log's nvdlfw_inspect statistics; give --training-log too\n");
  CHECK_FALSE(fs::exists(dir.path / "o4"));
  // With a log that has no FP8 statistics (an amax trace): a warning, the run goes on.
  const auto no_stats = run("run --capture " + sample() + " --training-log " + sample() + "/amax_trace.csv "
                            "--no-gemms --recipes current --training-recipe current --quiet --out " +
                            shell_quote((dir.path / "o6").string()));
  CHECK(no_stats.rc == 0);
  CHECK(no_stats.err == "fp8-advisor: warning: --training-recipe: no nvdlfw_inspect FP8 statistics "
                        "(LogFp8TensorStats) in the --training-log files, nothing to compare\n");
  CHECK_FALSE(fs::exists(dir.path / "o6/nvdlfw_stats.csv"));
  // An amax trace is a --training-log without FP8 statistics: summary.json says so.
  REQUIRE(run("run --capture " + sample() + " --training-log " + sample() + "/amax_trace.csv --no-gemms --recipes current "
              "--quiet --out " + shell_quote((dir.path / "o5").string())).rc == 0);
  CHECK(nlohmann::json::parse(slurp(dir.path / "o5/summary.json"))["not_written"][1] ==
        "nvdlfw_stats.csv not written: the --training-log files hold no nvdlfw_inspect FP8 statistics (LogFp8TensorStats)");

  const auto bad = run(args + " --training-recipe block --out " + shell_quote((dir.path / "o3").string()));
  CHECK(bad.rc == 2);
  CHECK(bad.err == "fp8-advisor: error: [fp8a.usage.211] --training-recipe block is not among "
                   "--recipes; add it there\n");
  CHECK_FALSE(fs::exists(dir.path / "o3"));
}

TEST_CASE("--rank-timeout must be a number of seconds > 0") {
  for (const char* bad : {"0", "-1", "nan", "inf"}) {
    INFO(bad);
    const auto r = run(std::string("run --capture x --out y --rank-timeout ") + bad);
    CHECK(r.rc == 2);
    CHECK(r.err == "fp8-advisor: error: [fp8a.usage.241] --rank-timeout must be a number of seconds > 0\n");
  }
}

TEST_CASE("run with an amax trace and no --recipes searches delayed scaling's options and says why") {
  const std::string dir = (kSource / "datasets/real/lm-spike").string();
  const std::string in = "run --capture " + shell_quote(dir) + " --training-log " +
                         shell_quote(dir + "/amax_trace_rank0.csv") + " --format hybrid --cost none --quiet";
  TempDir a, b;
  const auto searched = run(in + " --out " + shell_quote(a.path.string()));
  REQUIRE(searched.rc == 0);
  const std::string line = "  delayed scaling's options: 48 options searched on the trace (history 1..1024 "
                           "with algo max, most_recent; margin 0..3), 3 evaluated; best delayed:";
  const auto at = searched.out.find(line);
  REQUIRE(at != std::string::npos);
  const std::string rest = searched.out.substr(at, searched.out.find('\n', at) - at);
  CHECK(rest.find("; TE's default delayed:history=1024:algo=max:margin=0/hybrid: ") != std::string::npos);
  CHECK(rest.find("te_precision_config cannot set delayed options per module") != std::string::npos);
  // The evaluated delayed recipes: the best named in the line among them, TE's default too, and
  // the default list's two delayed recipes replaced.
  std::set<std::string> delayed;
  for (const auto& row : read_csv(slurp(a.path / "metrics.csv")))
    if (row.at("recipe").starts_with("delayed")) delayed.insert(row.at("recipe"));
  CHECK(delayed.size() == 3);
  CHECK(delayed.count("delayed:history=1024:algo=max:margin=0") == 1);
  CHECK(delayed.count("delayed:history=16:algo=most_recent:margin=0") == 0);
  const std::size_t best = line.size() - std::string("delayed:").size();
  const std::string best_spec = rest.substr(best, rest.find("/hybrid", best) - best);
  CHECK(delayed.count(best_spec) == 1);
  // --recipes given: the user's recipes, no search.
  const auto fixed = run(in + " --recipes delayed,bf16 --out " + shell_quote(b.path.string()));
  REQUIRE(fixed.rc == 0);
  CHECK(fixed.out.find("delayed scaling's options") == std::string::npos);
}

TEST_CASE("--out: an empty path or a link to nothing is a usage error naming it; a hard-linked lock is refused") {
  TempDir d;
  const std::string base = "run --capture " + sample() + " --cost none --quiet --out ";
  const auto empty = run(base + "''");
  CHECK(empty.rc == 2);
  CHECK(empty.err == "fp8-advisor: error: [fp8a.usage.243] --out '': an empty path; give the output folder\n");
  const fs::path dangling = d.path / "dangling";
  fs::create_symlink(d.path / "nowhere" / "x", dangling);
  const auto link = run(base + shell_quote(dangling.string()));
  CHECK(link.rc == 2);
  CHECK(link.err == "fp8-advisor: error: [fp8a.usage.243] --out '" + dangling.string() +
                        "': a symbolic link to nothing; give a folder, or a path that does not exist yet\n");
  CHECK(run("synth --preset " + std::string("healthy") + " --out ''").rc == 2);
  // A lock file that is a hard link to someone's file: never truncated and written through.
  const fs::path out = d.path / "out", victim = d.path / "victim.txt";
  fs::create_directories(out);
  write_bytes(victim, "precious\n");
  fs::create_hard_link(victim, out / ".fp8-advisor.lock");
  const auto hard = run(base + shell_quote(out.string()));
  CHECK(hard.rc == 3);
  CHECK(hard.err == "fp8-advisor: error: [fp8a.io.104] " + (out / ".fp8-advisor.lock").string() +
                        ": cannot write: a hard link to another file, not a lock file\n");
  CHECK(slurp(victim) == "precious\n");
  CHECK_FALSE(fs::exists(out / "metrics.csv"));
}

TEST_CASE("the wrote line shows --out escaped: an ESC in the path does not reach the terminal") {
  TempDir d;
  const fs::path out = d.path / "o\x1b[31mx";
  const auto r = run("run --capture " + sample() + " --cost none --out " + shell_quote(out.string()));
  REQUIRE(r.rc == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find("o\\x1b[31mx/metrics.csv") != std::string::npos);
}

TEST_CASE("--te-version: a candidate that release cannot train with is excluded, never the answer") {
  // Issue 38: on TE 2.4 the answer picked current:pow2 while TE 2.4 has no power-of-two current
  // scaling (NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES is read from TE 2.8).
  TempDir d;
  const std::string base = "run --capture " + sample() + " --cost none --format hybrid --quiet --out ";
  const std::string why = "current:pow2/hybrid: power-of-two current scaling needs TE 2.8 "
                          "(NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES); TE 2.4 trains Float8CurrentScaling with FP32 scales\n";
  const auto old = run(base + shell_quote((d.path / "a").string()) + " --te-version 2.4 --recipes current:pow2,current");
  REQUIRE(old.rc == 0);
  CHECK(old.out.rfind("answer: Float8CurrentScaling(fp8_format=Format.HYBRID)  [current/hybrid]\n", 0) == 0);
  CHECK(old.out.find("  excluded on TE 2.4 (--te-version):\n    " + why) != std::string::npos);
  CHECK(slurp(d.path / "a" / "megatron_args.txt").find("NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES") == std::string::npos);
  const auto only = run(base + shell_quote((d.path / "b").string()) + " --te-version 2.4 --recipes current:pow2");
  REQUIRE(only.rc == 0);
  CHECK(only.out.rfind("answer: no FP8 recipe can be recommended: none runs on h100 with TE 2.4 (--te-version)\n", 0) == 0);
  // summary.json says which consumer files were not written, and why, as the terminal does
  // (once: "not written: nvdlfw_inspect.yaml not written: ..." read the words twice).
  CHECK(only.out.find("\n  nvdlfw_inspect.yaml not written: no FP8 candidate was chosen\n") != std::string::npos);
  CHECK(only.out.find("not written: nvdlfw_inspect.yaml") == std::string::npos);
  const auto summary = nlohmann::json::parse(slurp(d.path / "b" / "summary.json"));
  CHECK(summary["not_written"] == nlohmann::json::array({"nvdlfw_stats.csv not written: no --training-log",
                                                         "te_precision_config.yaml not written: no FP8 candidate was chosen",
                                                         "nvdlfw_inspect.yaml not written: no FP8 candidate was chosen"}));
  // From TE 2.8 it can train with it: not excluded.
  const auto now = run(base + shell_quote((d.path / "c").string()) + " --te-version 2.8 --recipes current:pow2");
  REQUIRE(now.rc == 0);
  CHECK(now.out.rfind("answer: Float8CurrentScaling(fp8_format=Format.HYBRID); env "
                      "NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES=1  [current:pow2/hybrid]\n", 0) == 0);
  CHECK(now.out.find("excluded on TE") == std::string::npos);
}

// Issue 39: `run --gpu b200` answers the three-tier question without --recipes: the default list
// gains nvfp4 where the GPU has FP4 tensor cores and the TE release has NVFP4BlockScaling.
TEST_CASE("--gpu with FP4 tensor cores: the default --recipes gain nvfp4") {
  TempDir d;
  const auto has = [](const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; };
  const auto nvfp4_rows = [&](const std::string& name) {
    const std::string csv = slurp(d.path / name / "metrics.csv");
    REQUIRE_FALSE(csv.empty());
    return csv.find(",nvfp4,e4m3,e2m1,") != std::string::npos;
  };
  const auto b200 = run(real_run("lm-spike", d.path / "b200", "--gpu b200 --cost none --quiet"));
  REQUIRE(b200.rc == 0);
  CHECK(nvfp4_rows("b200"));
  // The answer speaks of NVFP4, not FP8, where the chosen recipe is 4-bit.
  // (Every GEMM: the first layer's gradient flushes over half its elements in 16-element blocks,
  // small values in every token, none losing half its energy.)
  CHECK(b200.out.rfind("answer: NVFP4BlockScaling(fp8_format=Format.E4M3)  [nvfp4/e4m3]\n", 0) == 0);
  CHECK(has(b200.out, "keeps 100.0 % of the GEMM FLOPs in NVFP4 with 0 GEMMs to BF16"));
  CHECK(has(b200.out, "\n  kept NVFP4 close to the limit:\n"));
  CHECK(has(b200.out, "kept NVFP4: step 3 fprop underflow"));
  CHECK(has(b200.out, "NVFP4 share of GEMM FLOPs 100.0 %"));
  CHECK_FALSE(has(b200.out, "kept FP8"));
  // Not where it could only be excluded: Hopper, sm_120 (TE's NVFP4 needs 10.x or 11.x), TE 2.7;
  // nor where --recipes names the list.
  int n = 0;
  for (const std::string extra : {"--gpu h100", "--gpu rtx5090", "--gpu b200 --te-version 2.7",
                                  "--gpu gb300 --recipes current,mxfp8"}) {
    INFO(extra);
    const std::string name = "other" + std::to_string(++n);
    REQUIRE(run(real_run("lm-spike", d.path / name, extra + " --cost none --quiet")).rc == 0);
    CHECK_FALSE(nvfp4_rows(name));
  }
  REQUIRE(run(real_run("lm-spike", d.path / "gb300", "--gpu gb300 --cost none --quiet")).rc == 0);
  CHECK(nvfp4_rows("gb300"));
}

TEST_CASE("a sample the answer could hang on is recomputed exactly: the --gemm-rows 0 answer and rows") {
  // wide-gradient with --gemm-rows 16 (16 of 128 tokens): estimates too loose to trust, so the
  // GEMMs they decide are recomputed exactly; gemms.csv then equals the exact run's but for the
  // note saying so, and the answer is the exact run's.
  TempDir dir;
  const auto cap = dir.path / "cap";
  REQUIRE(run("synth --preset wide-gradient --out " + shell_quote(cap.string())).rc == 0);
  const auto sampled = run("run --capture " + shell_quote(cap.string()) + " --out " +
                           shell_quote((dir.path / "s").string()) + " --gemm-rows 16 --cost none --quiet");
  const auto exact = run("run --capture " + shell_quote(cap.string()) + " --out " +
                         shell_quote((dir.path / "e").string()) + " --gemm-rows 0 --cost none --quiet");
  REQUIRE(sampled.rc == 0);
  REQUIRE(exact.rc == 0);
  const auto answer = [](const std::string& out) { return out.substr(0, out.find("\nwrote ")); };  // not the paths
  CHECK(answer(sampled.out) == answer(exact.out));
  CHECK(answer(sampled.out).find("answer: ") == 0);
  const auto s = read_csv(slurp(dir.path / "s" / "gemms.csv")), e = read_csv(slurp(dir.path / "e" / "gemms.csv"));
  REQUIRE(s.size() == e.size());
  int refined = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    for (const auto& [key, value] : e[i])
      if (key != "note") CHECK(s[i].at(key) == value);
    refined += s[i].at("note").find("computed exactly: within 2 standard errors") != std::string::npos;
  }
  CHECK(refined > 0);
  // With every GEMM exact there is nothing to refine.
  for (const auto& r : e) CHECK(r.at("note").find("computed exactly") == std::string::npos);
}

// ---- fp8-advisor log-config ------------------------------------------------------------------

TEST_CASE("log-config: writes the plan's YAML, says what it leaves out, refuses bad options") {
  TempDir dir;
  const fs::path out = dir.path / "debug.yaml";
  auto r = run("log-config --training-recipe current --gpu h100 --out " + shell_quote(out.string()));
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("wrote " + out.string() + " (11 statistics per tensor, 4 what-if casts)") != std::string::npos);
  CHECK(r.out.find("  not logged: mxfp8_*: TE computes it on Blackwell or later only; h100 is sm_90\n") !=
        std::string::npos);
  CHECK(slurp(out) == slurp(fs::path(FP8A_SOURCE_DIR) / "tests/golden/reports/log_config_current_h100.yaml"));
  CHECK(run("--help").out.find("log-config") != std::string::npos);
  for (const char* bad : {"--freq 0", "--freq 1000001", "--start-step -1", "--start-step 9 --end-step 3",
                                 "--layers ''"}) {
    CAPTURE(bad);
    r = run(std::string("log-config --training-recipe current ") + bad + " --out " + shell_quote(out.string()));
    CHECK(r.rc == 2);
    CHECK(r.err.find("[fp8a.usage.247]") != std::string::npos);
  }
  // A pattern with a newline or an invalid byte would not stay one YAML scalar: refused, nothing written.
  fs::remove(out);
  r = run("log-config --training-recipe current --layers " + shell_quote("a\nb") + " --out " + shell_quote(out.string()));
  CHECK(r.rc == 2);
  r = run("log-config --training-recipe current --layers " + shell_quote("a\xff") + " --out " + shell_quote(out.string()));
  CHECK(r.rc == 2);
  CHECK(r.err.find("[fp8a.usage.247] --layers") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  r = run("log-config --training-recipe currnt --out " + shell_quote(out.string()));
  CHECK(r.rc == 2);
  CHECK(r.err.find("[fp8a.usage.201]") != std::string::npos);
  r = run("log-config --training-recipe current --gpu h1000 --out " + shell_quote(out.string()));
  CHECK(r.err.find("[fp8a.usage.214]") != std::string::npos);
  r = run("log-config --training-recipe current --te-version 2.3 --out " + shell_quote(out.string()));
  CHECK(r.err.find("[fp8a.usage.242]") != std::string::npos);
  // A recipe that cannot train on the GPU or the TE release: nothing to log.
  r = run("log-config --training-recipe current --gpu a100 --out " + shell_quote(out.string()));
  CHECK(r.rc == 2);
  CHECK(r.err.find("[fp8a.usage.247] --training-recipe current: current needs sm_89+") != std::string::npos);
  r = run("log-config --training-recipe nvfp4 --gpu b200 --te-version 2.7 --out " + shell_quote(out.string()));
  CHECK(r.rc == 2);
  CHECK(r.err.find("NVFP4BlockScaling exists from TE 2.8") != std::string::npos);
  r = run("log-config --training-recipe current --out " + shell_quote(dir.path.string()));
  CHECK(r.rc == 2);
  CHECK(r.err.find("[fp8a.usage.243]") != std::string::npos);
  r = run("log-config --training-recipe current --out " + shell_quote((dir.path / "no" / "such" / "x.yaml").string()));
  CHECK(r.rc == 3);
  CHECK(r.err.find("[fp8a.io.104]") != std::string::npos);
}

TEST_CASE("run --training-log alone: advice from the logged statistics, what it cannot judge said") {
  TempDir dir;
  // TE's lines for one layer at one step (values worked by hand): the FC2 input's current-scaling
  // cast flushes 60 % at a negligible energy (whether over half its tokens lose over half their
  // energy is not in the log: not evaluated, BF16); its weight and gradient 0.
  const std::string fc2 = "decoder.layers.0.mlp.linear_fc2";
  std::string log;
  const auto line = [&](const std::string& name, double v) {
    log += name + " \t\t\t\t iteration=000010 \t\t\t\t value=" + std::to_string(v) + "\n";
  };
  for (const char* t : {"activation", "weight", "gradient"}) {
    const bool x = std::string(t) == "activation";
    line(fc2 + "_" + t + "_fp8_current_scaling_underflows%", x ? 60.0 : 0.0);
    line(fc2 + "_" + t + "_fp8_current_scaling_mse", 1e-4);
    line(fc2 + "_" + t + "_cur_amax", 4.0);
    line(fc2 + "_" + t + "_mean", 0.0);
    line(fc2 + "_" + t + "_std", 1.0);
  }
  const fs::path path = dir.path / "rank0.log";
  write_bytes(path, log);
  const fs::path out = dir.path / "out";
  auto r = run("run --training-log " + shell_quote(path.string()) + " --out " + shell_quote(out.string()) +
               " --quiet --cost none");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("answer: Float8CurrentScaling(fp8_format=Format.HYBRID)  [current/hybrid]; 2 GEMMs kept in BF16") == 0);
  CHECK(r.out.find("    decoder.layers.0.mlp.linear_fc2 fprop: step 10 activation underflow 60.000 % of "
                   "elements (at most ") != std::string::npos);
  CHECK(r.out.find("): the log cannot tell whether over 50.000 % of its tokens lose over half their energy under "
                   "current/hybrid (logged fp8_current_scaling_underflows%); a capture of the tensor judges it") !=
        std::string::npos);
  CHECK(r.out.find("(logged fp8_current_scaling_underflows%)") != std::string::npos);
  CHECK(r.out.find("not judged: every GEMM judged on its operands' logged statistics alone") != std::string::npos);
  CHECK(fs::exists(out / "te_precision_config.yaml"));
  CHECK(slurp(out / "recipe.json").find("\"decoder.layers.0.mlp.linear_fc2\"") != std::string::npos);
  // What it cannot judge is a warning too: --strict exits 4 after writing.
  CHECK(r.err.find("fp8-advisor: warning: every GEMM judged on its operands' logged statistics alone") != std::string::npos);
  CHECK(run("run --training-log " + shell_quote(path.string()) + " --out " + shell_quote(out.string()) +
            " --quiet --cost none --strict").rc == 4);
  // report.html draws the logged statistics over the steps, per operand.
  const std::string html = slurp(out / "report.html");
  CHECK(html.find("underflow of the activation over the logged steps") != std::string::npos);
  CHECK(html.find("rel_mse of the gradient over the logged steps") != std::string::npos);

  // A delayed-scaling run's own statistics: its rows, and the delayed forecast from the logged amax
  // (a growing FC2 input: the stale scale saturates), its clipping not judged without a tensor.
  std::string delayed;
  for (int step = 0; step < 400; step += 10)
    for (const char* t : {"activation", "weight", "gradient"}) {
      const double amax = std::string(t) == "activation" ? std::exp2(step / 40.0) : 1.0;
      const std::string tail = " iteration=" + std::to_string(step) + " value=";
      delayed += fc2 + "_" + t + "_cur_amax" + tail + std::to_string(amax) + "\n";
      delayed += fc2 + "_" + t + "_fp8_delayed_scaling_underflows%" + tail + "0.5\n";
      delayed += fc2 + "_" + t + "_fp8_delayed_scaling_overflows%" + tail + "0.0\n";
    }
  const fs::path delayed_log = dir.path / "delayed.log";
  write_bytes(delayed_log, delayed);
  const fs::path dl = dir.path / "dl";
  r = run("run --training-log " + shell_quote(delayed_log.string()) + " --training-recipe delayed --out " +
          shell_quote(dl.string()) + " --quiet");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("[delayed:history=1024:algo=max:margin=0/hybrid]") != std::string::npos);
  CHECK(r.err.find("nothing to compare") == std::string::npos);
  CHECK(slurp(dl / "report.html").find("forecast: delayed saturates @") != std::string::npos);

  // No FP8 statistic to judge on, or none under --recipes: exit 3, nothing written.
  const fs::path amax_only = dir.path / "amax.log";
  write_bytes(amax_only, fc2 + "_activation_cur_amax iteration=1 value=1.0\n");
  const fs::path none = dir.path / "none";
  r = run("run --training-log " + shell_quote(amax_only.string()) + " --out " + shell_quote(none.string()));
  CHECK(r.rc == 3);
  CHECK(r.err.find("[fp8a.trace.507] --training-log: no LogFp8TensorStats statistic") != std::string::npos);
  r = run("run --training-log " + shell_quote(path.string()) + " --recipes mxfp8 --out " + shell_quote(none.string()));
  CHECK(r.rc == 3);
  CHECK(r.err.find("[fp8a.trace.507]") != std::string::npos);
  CHECK_FALSE(fs::exists(none / "recipe.json"));

  // A hostile layer name reaches no output raw.
  const std::string evil = "<img_src=x_onerror=alert(1)>\"';$(id)`\x1b[31m";
  std::string bad;
  for (const char* t : {"activation", "weight", "gradient"})
    bad += evil + "_" + t + "_fp8_current_scaling_underflows% iteration=1 value=70.0\n";
  write_bytes(path, bad);
  const fs::path hostile = dir.path / "hostile";
  r = run("run --training-log " + shell_quote(path.string()) + " --out " + shell_quote(hostile.string()) + " --quiet");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(slurp(hostile / "report.html").find("<img") == std::string::npos);
}

TEST_CASE("the shipped sample's TE log: advice from it alone is the capture's") {
  TempDir dir;
  const auto logged = run("run --training-log " + shell_quote((kSource / "datasets/sample-te-log/te_stats.log").string()) +
                          " --out " + shell_quote((dir.path / "l").string()) + " --quiet --cost none");
  const auto captured = run("run --capture " + sample() + " --recipes current,block,mxfp8 --format hybrid --out " +
                            shell_quote((dir.path / "c").string()) + " --quiet --cost none");
  REQUIRE(logged.rc == 0);
  REQUIRE(captured.rc == 0);
  // Both: current scaling, every GEMM in FP8 (TE's what-ifs judged the same 12 GEMMs).
  for (const auto* r : {&logged, &captured}) {
    CHECK(r->out.rfind("answer: Float8CurrentScaling(fp8_format=Format.HYBRID)  [current/hybrid]\n", 0) == 0);
    CHECK(r->out.find("  keep in BF16: nothing, every GEMM FP8\n") != std::string::npos);
  }
}

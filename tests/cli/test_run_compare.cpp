// tests/cli/run_compare.hpp on hand-built tables: what it accepts and what it reports, so that the
// GPU check (test_cli_gpu), which no CPU machine runs, compares by rules already tested here.
#include <doctest/doctest.h>

#include <string>

#include "cli/cli_support.hpp"
#include "cli/run_compare.hpp"

namespace {

namespace ct = fp8a::cli_test;

ct::Row metric(const std::string& layer, const std::string& mse, const std::string& sqnr_db = "30",
               const std::string& numel = "1024") {
  return {{"step", "1"}, {"layer", layer}, {"tensor", "weight"}, {"recipe", "current"},
          {"mse", mse},  {"sqnr_db", sqnr_db}, {"numel", numel}, {"dtype", "bf16"}};
}

// An emulated GEMM row and, unless `cublaslt_err` is empty, the cublaslt row after it.
void add_gemm(ct::Table& t, const std::string& recipe, const std::string& gemm, const std::string& err,
              const std::string& cublaslt_err, const std::string& accumulation, const std::string& note = "") {
  ct::Row e = {{"step", "1"},     {"layer", "l0"},     {"gemm", gemm},     {"recipe", recipe}, {"format", "hybrid"},
               {"m", "100"},      {"n", "72"},         {"k", "200"},       {"engine", "emulated"},
               {"rel_fro_err", err}, {"accumulation", ""}, {"padded_m", ""}, {"padded_n", ""},
               {"padded_k", ""},  {"note", note}};
  t.push_back(e);
  if (cublaslt_err.empty()) return;
  ct::Row r = e;
  r["engine"] = "cublaslt";
  r["rel_fro_err"] = cublaslt_err;
  r["accumulation"] = accumulation;
  r["padded_m"] = "112";
  r["padded_n"] = "80";
  r["padded_k"] = recipe.rfind("block", 0) == 0 ? "256" : "208";
  r["note"] = "cuBLASLt 13.1, reference BF16 x BF16";
  t.push_back(r);
}

}  // namespace

TEST_CASE("run_compare: tables equal up to the rounding tolerances, in any row order") {
  const ct::Table a = {metric("l0", "0.25"), metric("l1", "1e-3")};
  CHECK(ct::compare_run_tables(a, a, "t").ok());
  // Reordered rows, 1e-10 relative apart: equal.
  const ct::Table b = {metric("l1", "1.0000000001e-3"), metric("l0", "0.25")};
  const auto same = ct::compare_run_tables(a, b, "t");
  CHECK(same.ok());
  CHECK(same.summary.find("2 rows x 8 columns, 0 mismatches") != std::string::npos);
  // 1e-8 relative: a mismatch, named.
  const auto off = ct::compare_run_tables(a, {metric("l0", "0.250000003"), metric("l1", "1e-3")}, "t");
  REQUIRE(off.problems.size() == 1);
  CHECK(off.problems[0] == "t: MISMATCH step=1 layer=l0 tensor=weight recipe=current mse: 0.25 vs 0.250000003");
  // ... unless numel is large enough for the sums' rounding bound: 30 * 2^27 * 2^-53 = 4.5e-7.
  CHECK(ct::compare_run_tables({metric("l0", "0.25", "30", "134217728")},
                               {metric("l0", "0.250000003", "30", "134217728")}, "t")
            .ok());
  // The dB column near 0: 1e-10 absolute passes, although relatively far apart.
  CHECK(ct::compare_run_tables({metric("l0", "0.25", "1e-12")}, {metric("l0", "0.25", "-1e-12")}, "t").ok());
  CHECK(!ct::compare_run_tables({metric("l0", "0.25", "1e-8")}, {metric("l0", "0.25", "-1e-8")}, "t").ok());
  // Text must be equal; NaN only against NaN.
  ct::Row text = metric("l0", "0.25");
  text["dtype"] = "fp16";
  CHECK(!ct::compare_run_tables({metric("l0", "0.25")}, {text}, "t").ok());
  CHECK(ct::compare_run_tables({metric("l0", "nan")}, {metric("l0", "-nan")}, "t").ok());
  CHECK(!ct::compare_run_tables({metric("l0", "nan")}, {metric("l0", "0.25")}, "t").ok());
  CHECK(!ct::compare_run_tables({metric("l0", "inf")}, {metric("l0", "-inf")}, "t").ok());
  // Ignored columns, row counts, columns and keys.
  CHECK(ct::compare_run_tables({metric("l0", "0.25")}, {text}, "t", {"dtype"}).ok());
  CHECK(ct::compare_run_tables(a, {metric("l0", "0.25")}, "t").problems ==
        std::vector<std::string>{"t: row count differs: 2 vs 1"});
  ct::Row extra = metric("l0", "0.25");
  extra["cos"] = "1";
  CHECK(!ct::compare_run_tables({metric("l0", "0.25")}, {extra}, "t").ok());
  CHECK(!ct::compare_run_tables({metric("l0", "0.25")}, {metric("l2", "0.25")}, "t").ok());
}

TEST_CASE("run_compare: cublaslt rows against the emulated ones, by accumulation") {
  ct::Table g;
  add_gemm(g, "current", "fprop", "0.03", "0.034", "fast");         // 4e-3 <= 5e-3
  add_gemm(g, "current", "dgrad", "0.03", "0.03005", "split");      // 5e-5 <= 1e-4
  add_gemm(g, "block:1d", "wgrad", "0.02", "0.02", "split");
  add_gemm(g, "bf16", "fprop", "0.002", "0.00202", "fp32");      // 2e-5 <= 1e-4
  add_gemm(g, "mxfp8", "fprop", "0.03", "", "", "cublaslt not run: MXFP8 block scaling needs sm_100+");
  const auto ok = ct::check_cublaslt_rows(g, ct::kCublasltTolGpu);
  INFO(ok.summary);
  CHECK(ok.ok());
  CHECK(ok.summary.rfind("5 emulated rows, 4 cublaslt rows, 1 not run, 0 problems", 0) == 0);
  CHECK(ok.summary.find("not run (1 GEMMs) mxfp8: cublaslt not run: MXFP8") != std::string::npos);
  // The families expected not to run, when given, are exactly those without a row.
  CHECK(ct::check_cublaslt_rows(g, ct::kCublasltTolGpu, std::vector<std::string>{"mxfp8"}).ok());
  CHECK(!ct::check_cublaslt_rows(g, ct::kCublasltTolGpu, std::vector<std::string>{"mxfp8", "bf16"}).ok());
  CHECK(!ct::check_cublaslt_rows(g, ct::kCublasltTolGpu, std::vector<std::string>{}).ok());
  // The emulated cuBLASLt's tighter tolerance rejects the fast-accumulation difference.
  CHECK(ct::check_cublaslt_rows(g, ct::kCublasltTolEmulated).problems.size() == 3);

  const auto one = [](const std::string& recipe, const std::string& gemm, const std::string& cublaslt_err,
                      const std::string& accumulation, const std::string& note = "") {
    ct::Table t;
    add_gemm(t, "bf16", "fprop", "0.002", "0.002", "fp32");
    add_gemm(t, recipe, gemm, "0.03", cublaslt_err, accumulation, note);
    return ct::check_cublaslt_rows(t, ct::kCublasltTolGpu).problems;
  };
  CHECK(one("current", "dgrad", "0.0302", "split").size() == 1);  // 2e-4 > 1e-4
  CHECK(one("current", "fprop", "0.036", "fast").size() == 1);    // 6e-3 > 5e-3
  CHECK(one("current", "fprop", "0.03", "split").size() == 1);    // per-tensor fprop: fast accumulation
  CHECK(one("block:1d", "fprop", "", "") ==
        std::vector<std::string>{"row 2 step=1 layer=l0 gemm=fprop recipe=block:1d: no cublaslt row and no note why"});
  CHECK(one("block:1d", "fprop", "", "", "cublaslt not run: cublasLtMatmulAlgoGetHeuristic: NOT_SUPPORTED").size() ==
        1);
  // No cublaslt row at all.
  ct::Table none;
  add_gemm(none, "mxfp8", "fprop", "0.03", "", "", "cublaslt not run: needs sm_100+");
  CHECK(ct::check_cublaslt_rows(none, ct::kCublasltTolGpu).problems == std::vector<std::string>{"no cublaslt row at all"});
}

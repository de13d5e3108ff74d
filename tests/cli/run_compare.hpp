// The comparison of two `fp8-advisor run` outputs, --device cpu against --device cuda: metrics.csv
// and the emulated rows of gemms.csv equal up to the float64 sums' rounding, and the cuda run's
// cuBLASLt rows against its emulated ones up to what the accumulation explains. Used on the host
// emulation (test_cli_cuda_emu.cpp) and on a GPU (test_cli_gpu.cpp, which scripts/gpu-check.sh
// runs on the sample capture and on its end-to-end capture).
//
// The checks return values (a list of problems, one line each, and a summary line), not doctest
// assertions, so a test can print the summary and assert on the problems with its own context.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/cli_support.hpp"

namespace fp8a::cli_test {

// Numbers of metrics.csv and gemms.csv may differ by this much relative (of the larger magnitude).
// The two backends compute every per-element quantity identically and add the float64 sums in
// another order: at most 2 n 2^-53 relative for n non-negative terms (METRICS.md, "CPU and CUDA
// backends"), below 1e-9 up to ~2.8M elements; derived metrics a few times that.
inline constexpr double kRunRelTol = 1e-9;
// Rows with a numel column: the sums' bound 2 numel 2^-53, times the amplification of derived
// metrics (ratios, square roots, 10 log10 for dB: up to ~13x), rounded up to 30. Larger than
// kRunRelTol above ~4M elements (the end-to-end capture's tensors).
inline constexpr double kRunNumelRoundingFactor = 30.0;
// Log-scaled columns sit near 0 where a relative tolerance means nothing: also this much absolute.
inline constexpr double kRunLogAbsTol = 1e-9;
inline const std::set<std::string> kRunLogColumns = {"sqnr_db", "delayed_vs_current_log2", "dynamic_range_log2"};
// The columns identifying a row (those of them a table has); rows are compared sorted by them.
inline const std::vector<std::string> kRunKeyColumns = {"step",   "layer",  "tensor",     "gemm",
                                                        "recipe", "format", "orientation"};

// How far a cublaslt row's rel_fro_err may be from its emulated row's, by the row's accumulation.
// Same quantised operands, and the capture is BF16, so the BF16 reference has no input rounding:
// only the accumulation differs from the emulation's float64 one.
struct CublasltTolerance {
  double fast;   // FP8 fast accumulation (accumulator ~14 bits, K <= 384 on the sample)
  double split;  // the FP8 accumulator promoted to FP32 periodically (block scaling, dgrad/wgrad)
  double fp32;   // BF16 GEMMs, FP32 accumulation
};
// The real cuBLASLt on a GPU (scripts/gpu-check.sh).
inline constexpr CublasltTolerance kCublasltTolGpu = {5e-3, 1e-4, 1e-4};
// The emulated cuBLASLt of tests/cuda_emu (cublaslt.cpp), which accumulates in FP32 whatever the
// mode: the float64 emulation's error to a few float32 roundings.
inline constexpr CublasltTolerance kCublasltTolEmulated = {1e-5, 1e-5, 1e-5};

// The result of a comparison: problems (empty when it passed) and a one-line account of it.
struct RunComparison {
  std::vector<std::string> problems;
  std::string summary;
  bool ok() const { return problems.empty(); }
};

namespace detail {

inline std::string row_key(const Row& r, const std::vector<std::string>& columns) {
  std::string k;
  for (const auto& c : columns) {
    const auto it = r.find(c);
    if (it == r.end()) continue;
    k += (k.empty() ? "" : " ") + c + "=" + it->second;
  }
  return k;
}

inline std::optional<double> number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

inline std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace detail

// The relative tolerance of one row: kRunRelTol, or the numel rounding bound where larger.
inline double run_row_rel_tol(const Row& r) {
  const auto it = r.find("numel");
  if (it == r.end()) return kRunRelTol;
  const auto n = detail::number(it->second);
  return n ? std::max(kRunRelTol, kRunNumelRoundingFactor * *n * 0x1p-53) : kRunRelTol;
}

// Two tables (read_csv) compared row by row once sorted by kRunKeyColumns: same columns, same
// rows, text equal or numbers within the tolerances above (NaN only against NaN, infinities only
// against themselves). Columns in `ignored` are not compared. `what` names them in the messages.
inline RunComparison compare_run_tables(const Table& a, const Table& b, const std::string& what,
                                        const std::set<std::string>& ignored = {}) {
  RunComparison result;
  const auto fail = [&](std::string line) { result.problems.push_back(what + ": " + std::move(line)); };
  if (a.size() != b.size()) {
    fail("row count differs: " + std::to_string(a.size()) + " vs " + std::to_string(b.size()));
    result.summary = what + ": row count differs";
    return result;
  }
  const auto columns_of = [](const Table& t) {
    std::vector<std::string> c;
    if (!t.empty())
      for (const auto& [name, value] : t.front()) c.push_back(name);
    return c;
  };
  if (columns_of(a) != columns_of(b)) {
    fail("columns differ");
    result.summary = what + ": columns differ";
    return result;
  }
  const auto sorted = [](const Table& t) {
    std::vector<const Row*> rows;
    for (const auto& r : t) rows.push_back(&r);
    std::stable_sort(rows.begin(), rows.end(), [](const Row* x, const Row* y) {
      for (const auto& c : kRunKeyColumns) {
        const auto ix = x->find(c), iy = y->find(c);
        if (ix == x->end() || iy == y->end()) continue;
        if (ix->second != iy->second) return ix->second < iy->second;
      }
      return false;
    });
    return rows;
  };
  const auto ra = sorted(a), rb = sorted(b);
  std::size_t mismatches = 0;
  double worst = 0;
  std::string worst_where;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    const Row &x = *ra[i], &y = *rb[i];
    const std::string key = detail::row_key(x, kRunKeyColumns);
    if (key != detail::row_key(y, kRunKeyColumns)) {
      fail("rows differ: " + key + " vs " + detail::row_key(y, kRunKeyColumns));
      result.summary = what + ": rows differ";
      return result;
    }
    const double rel_tol = run_row_rel_tol(x);
    for (const auto& [column, u] : x) {
      const std::string& v = y.at(column);
      if (u == v || ignored.count(column)) continue;
      const auto p = detail::number(u), q = detail::number(v);
      bool ok = p && q;
      if (ok && (!std::isfinite(*p) || !std::isfinite(*q))) {
        ok = (std::isnan(*p) && std::isnan(*q)) || *p == *q;
      } else if (ok) {
        const double d = std::fabs(*p - *q), m = std::max(std::fabs(*p), std::fabs(*q));
        ok = d <= std::max(rel_tol * m, kRunLogColumns.count(column) ? kRunLogAbsTol : 0.0);
        const double rel = m > 0 ? d / m : 0.0;
        if (rel > worst) {
          worst = rel;
          worst_where = key + " " + column + ": " + u + " vs " + v;
        }
      }
      if (!ok) {
        ++mismatches;
        fail("MISMATCH " + key + " " + column + ": " + u + " vs " + v);
      }
    }
  }
  result.summary = what + ": " + std::to_string(ra.size()) + " rows x " + std::to_string(columns_of(a).size()) +
                   " columns, " + std::to_string(mismatches) + " mismatches; largest relative difference " +
                   detail::format("%.3g", worst) + (worst_where.empty() ? "" : " (" + worst_where + ")");
  return result;
}

// The rows of a gemms.csv that the emulated engine computed (every row of a --device cpu run).
inline Table emulated_gemm_rows(const Table& gemms) {
  Table rows;
  for (const auto& r : gemms)
    if (r.at("engine") == "emulated") rows.push_back(r);
  return rows;
}

// Two run directories (--out of `fp8-advisor run`): metrics.csv compared, and where both have a
// gemms.csv, its emulated rows without the note column (where the cuda run says why cuBLASLt did
// not run a GEMM). The header lines must be equal as text.
inline std::vector<RunComparison> compare_run_dirs(const fs::path& cpu, const fs::path& cuda) {
  std::vector<RunComparison> results;
  for (const char* name : {"metrics.csv", "gemms.csv"}) {
    if (name == std::string("gemms.csv") && !(fs::exists(cpu / name) && fs::exists(cuda / name))) continue;
    const std::string ta = slurp(cpu / name), tb = slurp(cuda / name);
    const bool gemms = name == std::string("gemms.csv");
    const std::string what = gemms ? "gemms.csv emulated rows" : name;
    if (ta.empty() || detail::first_line(ta) != detail::first_line(tb)) {
      results.push_back({{what + ": header differs or file missing: '" + detail::first_line(ta) + "' vs '" +
                          detail::first_line(tb) + "'"},
                         what + ": header differs"});
      continue;
    }
    const Table a = read_csv(ta), b = read_csv(tb);
    results.push_back(gemms ? compare_run_tables(emulated_gemm_rows(a), emulated_gemm_rows(b), what, {"note"})
                            : compare_run_tables(a, b, what));
    if (results.back().ok() && a.empty()) results.back().problems.push_back(what + ": no rows");
  }
  return results;
}

// The cublaslt rows of a --device cuda run's gemms.csv against its emulated rows. Each emulated row
// is followed by the cublaslt row of the same GEMM (same step, layer, GEMM, recipe, format and
// dims) or carries a note "cublaslt not run: <the plan's reason>" (the GPU or the cuBLASLt cannot
// run the recipe), never cuBLASLt refusing a GEMM the plan expected it to run. A cublaslt row has
// TE's accumulation (fast for per-tensor fprop, split for the other FP8 GEMMs, fp32 for BF16), dims
// padded to 16 (K to 128 with block scales), and the emulated rel_fro_err within `tol`.
// `not_run_families`: when given, exactly the recipe families (the part of the recipe before ':')
// that must carry the note; else any family may, for a plan's reason. At least one row must run.
inline RunComparison check_cublaslt_rows(const Table& gemms, const CublasltTolerance& tol,
                                         const std::optional<std::vector<std::string>>& not_run_families = {}) {
  RunComparison result;
  std::size_t emulated = 0, ran = 0, cublaslt = 0;
  std::map<std::string, std::size_t> not_run;
  double worst[3] = {0, 0, 0};
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    const Row& e = gemms[i];
    if (e.at("engine") == "cublaslt") {
      ++cublaslt;
      if (i == 0 || gemms[i - 1].at("engine") != "emulated")
        result.problems.push_back("row " + std::to_string(i) + ": a cublaslt row not after an emulated one");
      continue;
    }
    if (e.at("engine") != "emulated") continue;
    ++emulated;
    const std::string recipe = e.at("recipe"), family = recipe.substr(0, recipe.find(':'));
    const std::string where = "row " + std::to_string(i) + " step=" + e.at("step") + " layer=" + e.at("layer") +
                              " gemm=" + e.at("gemm") + " recipe=" + recipe;
    const auto fail = [&](const std::string& line) { result.problems.push_back(where + ": " + line); };
    const bool has_row = i + 1 < gemms.size() && gemms[i + 1].at("engine") == "cublaslt";
    if (not_run_families) {
      const bool expected = std::find(not_run_families->begin(), not_run_families->end(), family) ==
                            not_run_families->end();
      if (has_row != expected) fail(expected ? "no cublaslt row" : "a cublaslt row where none was expected");
    }
    if (!has_row) {
      const std::string& note = e.at("note");
      if (note.rfind("cublaslt not run: ", 0) != 0) fail("no cublaslt row and no note why");
      else if (note.find("cublasLtMatmulAlgoGetHeuristic") != std::string::npos)
        fail("cuBLASLt refused a GEMM the plan expected it to run: " + note);
      ++not_run[family + ": " + note];
      continue;
    }
    ++ran;
    const Row& r = gemms[i + 1];
    for (const char* column : {"step", "layer", "gemm", "recipe", "format", "m", "n", "k"})
      if (r.at(column) != e.at(column))
        fail(std::string("cublaslt row's ") + column + " " + r.at(column) + " != " + e.at(column));
    const bool per_tensor = family == "current" || family == "delayed";
    const std::string want_acc = family == "bf16" ? "fp32" : per_tensor && e.at("gemm") == "fprop" ? "fast" : "split";
    const std::string& acc = r.at("accumulation");
    if (acc != want_acc) fail("accumulation " + acc + ", want " + want_acc);
    const double k_multiple = per_tensor || family == "bf16" ? 16 : 128;
    if (std::fmod(num(r.at("padded_m")), 16) != 0 || std::fmod(num(r.at("padded_n")), 16) != 0 ||
        std::fmod(num(r.at("padded_k")), k_multiple) != 0 || num(r.at("padded_k")) < num(e.at("k")))
      fail("padded dims " + r.at("padded_m") + "x" + r.at("padded_n") + "x" + r.at("padded_k"));
    if (r.at("note").find("reference BF16 x BF16") == std::string::npos) fail("note: " + r.at("note"));
    const int mode = acc == "fast" ? 0 : acc == "split" ? 1 : 2;
    const double bound = mode == 0 ? tol.fast : mode == 1 ? tol.split : tol.fp32;
    const double d = std::fabs(num(r.at("rel_fro_err")) - num(e.at("rel_fro_err")));
    worst[mode] = std::max(worst[mode], d);
    if (!(d <= bound))
      fail("rel_fro_err emulated " + e.at("rel_fro_err") + " cublaslt " + r.at("rel_fro_err") + " (" + acc +
           " accumulation): differ by " + detail::format("%.3g", d) + " > " + detail::format("%.3g", bound));
  }
  if (ran == 0) result.problems.push_back("no cublaslt row at all");
  if (cublaslt != ran) result.problems.push_back("cublaslt rows not paired with an emulated row");
  result.summary = std::to_string(emulated) + " emulated rows, " + std::to_string(ran) + " cublaslt rows, " +
                   std::to_string(emulated - ran) + " not run, " + std::to_string(result.problems.size()) +
                   " problems; largest rel_fro_err difference fast " + detail::format("%.3g", worst[0]) +
                   ", split " + detail::format("%.3g", worst[1]) + ", fp32 " + detail::format("%.3g", worst[2]);
  for (const auto& [note, n] : not_run)
    result.summary += "\n  not run (" + std::to_string(n) + " GEMMs) " + note;
  return result;
}

// Asserts a comparison passed: its summary always in the test's output; its first problems (at
// most 20) in the failure message.
inline void check_run_comparison(const RunComparison& c) {
  MESSAGE(c.summary);
  std::string first;
  for (std::size_t i = 0; i < c.problems.size() && i < 20; ++i) first += "\n  " + c.problems[i];
  INFO(c.problems.size() << " problems:" << first);
  CHECK(c.ok());
}

}  // namespace fp8a::cli_test

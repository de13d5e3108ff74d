// compare's outputs: compare.csv (every match), compare.md (the top of the ranking and the counts)
// and the ranked list on stdout, all from one CompareResult (policies/compare.hpp).
//
// compare_ranked_table() is the one place that chooses the columns and formats the cells of the
// ranking; the Markdown and text renderers take it, and so can an HTML renderer.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "policies/compare.hpp"
#include "reports/artifact.hpp"

namespace fp8a {

// Provenance and the two inputs, for compare.md.
struct CompareInfo {
  std::string version;
  std::string git_revision;
  std::vector<std::string> command_line;
  std::string backend;  // "" when neither side was evaluated (two run folders)
  std::string device;
  std::string base_path;
  std::string cand_path;
  std::string base_kind;  // "capture" or "run folder"
  std::string cand_kind;
  // The training log each side's capture was evaluated with (--base-training-log,
  // --cand-training-log): its files, empty when none (delayed scaling then replayed from the
  // captured steps alone).
  std::vector<std::string> base_log_files;
  std::vector<std::string> cand_log_files;
};

// The top `top` matches as text cells, one row per match in rank order.
struct RankedTable {
  std::vector<std::string> head;
  std::vector<bool> left;                   // per column: left-aligned text, else a number
  std::vector<std::vector<std::string>> rows;
  std::vector<const CompareMatch*> matches;  // the match behind each row (numbers, colours)
};

// Columns: rank, score, driver, layer, tensor, recipe, format, orientation, step (base -> cand),
// then underflow %, saturated %, SQNR dB and MSE as "base -> cand".
RankedTable compare_ranked_table(const CompareResult& result, std::size_t top);

// Columns of compare.csv: the match's key and steps, then base_, cand_ and delta_ (cand - base) of
// each metric, then the score's terms (term_<metric>, METRICS.md "Divergence score").
inline constexpr const char* kCompareCsvMetrics[] = {
    "mse", "rel_mse", "sqnr_db", "underflow_pct", "saturated_pct", "overflow_pct", "cos", "amax"};

// Every match, in rank order. Note: the number of matches.
Artifact render_compare_csv(const CompareResult& result);

// The inputs, the counts of matched and unmatched rows, the top `top` matches as a table, the
// groups only one side holds, and the provenance.
Artifact render_compare_md(const CompareResult& result, const CompareInfo& info, std::size_t top);

// The top `top` matches as an aligned text table (what stdout shows).
std::string render_compare_list(const CompareResult& result, std::size_t top);

}  // namespace fp8a

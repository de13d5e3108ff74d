// nvdlfw_stats.csv: every FP8 statistic of the nvdlfw_inspect logs (TE LogFp8TensorStats) with
// fp8-advisor's number for the same tensor, step, recipe and copy beside it, or why there is none
// (engine/logged_stats.hpp says how they are paired).
#pragma once

#include <map>
#include <span>
#include <string>

#include "engine/logged_stats.hpp"

namespace fp8a {

inline constexpr const char* kNvdlfwCsvColumns[] = {
    "step", "layer", "role", "statistic", "logged", "ours", "difference",
    "recipe", "orientation", "file", "line", "note",
};

// files: AmaxTrace::files, which LoggedFp8Stat::file indexes.
std::string render_nvdlfw_csv(std::span<const LoggedComparison> rows,
                              std::span<const std::string> files);

// "[<recipe>_]<stat>[_columnwise]": the statistic's name without layer and tensor.
std::string logged_statistic_name(const LoggedFp8Stat& s);

// The facts summary.json and the console report: how many values were logged and paired, and the
// largest |ours - logged| per statistic name among the paired ones.
struct LoggedStatsSummary {
  std::size_t logged = 0;
  std::size_t paired = 0;
  std::map<std::string, double> max_abs_difference;
};
LoggedStatsSummary summarize_logged_stats(std::span<const LoggedComparison> rows);

}  // namespace fp8a

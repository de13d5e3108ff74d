// The verdict on nvdlfw_inspect's FP8 statistics beside ours: how many were logged and paired, and
// the largest |ours - logged| per statistic (engine/logged_stats.hpp pairs them).
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <string>

#include "engine/logged_stats.hpp"

namespace fp8a {

// "[<recipe>_]<stat>[_columnwise]": the statistic's name without layer and tensor.
std::string logged_statistic_name(const LoggedFp8Stat& s);

struct LoggedStatsSummary {
  std::size_t logged = 0;  // values in the logs
  std::size_t paired = 0;  // of those, values with a number of ours beside them
  // Largest |ours - logged| per logged_statistic_name among the paired values; NaN wins.
  std::map<std::string, double> max_abs_difference;
};
LoggedStatsSummary summarize_logged_stats(std::span<const LoggedComparison> rows);

}  // namespace fp8a

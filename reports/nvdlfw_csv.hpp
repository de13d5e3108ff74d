// nvdlfw_stats.csv: every FP8 statistic of the nvdlfw_inspect logs (TE LogFp8TensorStats) with
// fp8-advisor's number for the same tensor, step, recipe and copy beside it, or why there is none
// (engine/logged_stats.hpp says how they are paired).
#pragma once

#include <span>
#include <string>

#include "policies/logged_stats_summary.hpp"
#include "reports/artifact.hpp"

namespace fp8a {

inline constexpr const char* kNvdlfwCsvColumns[] = {
    "step", "layer", "role", "statistic", "logged", "ours", "difference",
    "recipe", "orientation", "file", "line", "note",
};

// files: TrainingLog::files, which LoggedFp8Stat::file indexes. Note: the number of rows.
Artifact render_nvdlfw_csv(std::span<const LoggedComparison> rows,
                           std::span<const std::string> files);

}  // namespace fp8a

// The watch list: the GEMMs the chosen plan keeps in FP8 that came closest to a threshold, what to
// watch in the next run. One list, made once: the answer, recipe.json, nvdlfw_inspect.yaml and the
// reports all name these GEMMs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "policies/fallback_plan.hpp"

namespace fp8a {

// How a watched GEMM stands: kept FP8 though a step or its forecast failed (a plan that keeps
// failing GEMMs, such as a forced recipe's), over a watch-only criterion's threshold, or passed.
enum class WatchStatus : std::uint8_t { kFailed, kWatched, kPassed };
const char* watch_status_name(WatchStatus s);  // "failed", "watched", "passed"

// A GEMM the chosen plan keeps in FP8, at its worst step (GemmJudgement::worst).
struct WatchItem {
  std::string layer;
  Gemm gemm = Gemm::kFprop;
  std::int64_t step = 0;
  Criterion criterion = Criterion::kUnderflow;  // the worst verdict's limiting check
  double measured = 0, threshold = 0, margin = 0;
  WatchStatus status = WatchStatus::kPassed;
};
// How many WatchItems a Recommendation lists at most.
inline constexpr std::size_t kWatchCount = 5;

// The chosen plan's FP8 GEMMs that have a limiting check: failed ones first, then the smallest
// margin (ties: layer, then GEMM order), at most kWatchCount.
std::vector<WatchItem> watch_list(const CandidatePlan& chosen);

}  // namespace fp8a

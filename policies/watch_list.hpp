// The watch list: the tensor copies the chosen plan keeps in FP8 that came closest to a threshold,
// what to watch in the next run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/evaluation_index.hpp"
#include "policies/fallback_plan.hpp"
#include "policies/policy.hpp"

namespace fp8a {

// A tensor copy the chosen plan keeps in FP8 (a GEMM kept FP8 consumes it), at its smallest
// margin over the captured steps: what to watch in the next run.
struct WatchItem {
  std::string layer;
  Role role = Role::kActivation;
  Orientation orientation = Orientation::kRowwise;
  std::int64_t step = 0;  // the step of the smallest margin (the earliest of equal ones)
  Criterion criterion = Criterion::kUnderflow;  // judge_tensor's limiting check there
  double measured = 0, threshold = 0, margin = 0;
};
// How many WatchItems a Recommendation lists at most.
inline constexpr std::size_t kWatchCount = 5;

// The chosen plan's FP8 tensor copies with the smallest judge_tensor margins, smallest first
// (ties: layer, role, orientation), at most kWatchCount.
std::vector<WatchItem> watch_list(const EvaluationIndex& index, const CandidatePlan& chosen,
                                  const Policy& policy);

}  // namespace fp8a

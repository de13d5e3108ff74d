#include "policies/logged_stats_summary.hpp"

#include <cmath>

namespace fp8a {

std::string logged_statistic_name(const LoggedFp8Stat& s) {
  std::string name = logged_recipe_name(s.recipe);
  if (!name.empty()) name += '_';
  name += logged_stat_name(s.stat);
  if (s.columnwise) name += "_columnwise";
  return name;
}

LoggedStatsSummary summarize_logged_stats(std::span<const LoggedComparison> rows) {
  LoggedStatsSummary sum;
  sum.logged = rows.size();
  for (const auto& c : rows) {
    if (!c.paired) continue;
    ++sum.paired;
    const double d = std::fabs(c.ours - c.logged->value);
    auto [it, inserted] = sum.max_abs_difference.try_emplace(logged_statistic_name(*c.logged), d);
    if (!inserted && !(it->second >= d)) it->second = d;  // NaN wins
  }
  return sum;
}

}  // namespace fp8a

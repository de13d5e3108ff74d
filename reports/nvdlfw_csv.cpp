#include "reports/nvdlfw_csv.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "reports/csv.hpp"
#include "reports/number_format.hpp"

namespace fp8a {

std::string logged_statistic_name(const LoggedFp8Stat& s) {
  std::string name = logged_recipe_name(s.recipe);
  if (!name.empty()) name += '_';
  name += logged_stat_name(s.stat);
  if (s.columnwise) name += "_columnwise";
  return name;
}

std::string render_nvdlfw_csv(std::span<const LoggedComparison> rows,
                              std::span<const std::string> files) {
  std::ostringstream out;
  out << csv_header(kNvdlfwCsvColumns);
  for (const auto& c : rows) {
    const LoggedFp8Stat& s = *c.logged;
    out << s.step << ',' << csv_field(s.layer) << ',' << role_name(s.role) << ','
        << csv_field(logged_statistic_name(s)) << ',' << format_number(s.value) << ',';
    if (c.paired) out << format_number(c.ours) << ',' << format_number(c.ours - s.value);
    else out << ',';
    out << ',' << csv_field(c.recipe) << ',' << (c.recipe.empty() ? "" : orientation_name(c.orientation))
        << ',' << csv_field(s.file < files.size() ? files[s.file] : std::string()) << ',' << s.line
        << ',' << csv_field(c.note) << '\n';
  }
  return out.str();
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

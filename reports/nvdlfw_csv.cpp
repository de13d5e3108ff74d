#include "reports/nvdlfw_csv.hpp"

#include <sstream>

#include "reports/csv.hpp"
#include "reports/number_format.hpp"

namespace fp8a {

Artifact render_nvdlfw_csv(std::span<const LoggedComparison> rows,
                           std::span<const std::string> files) {
  std::ostringstream out;
  out << csv_header(kNvdlfwCsvColumns);
  for (const auto& c : rows) {
    const LoggedFp8Stat& s = *c.logged;
    out << s.step << ',' << csv_field(std::string(s.layer)) << ',' << role_name(s.role) << ','
        << csv_field(logged_statistic_name(s)) << ',' << format_number(s.value) << ',';
    if (c.paired) out << format_number(c.ours) << ',' << format_number(c.ours - s.value);
    else out << ',';
    out << ',' << csv_field(c.recipe) << ',' << (c.recipe.empty() ? "" : orientation_name(c.orientation))
        << ',' << csv_field(s.file < files.size() ? files[s.file] : std::string()) << ',' << s.line
        << ',' << csv_field(c.note) << '\n';
  }
  return {"nvdlfw_stats.csv", out.str(), std::to_string(rows.size()) + " rows"};
}

}  // namespace fp8a

#include "reports/gemms_csv.hpp"

#include <sstream>

#include "reports/csv.hpp"
#include "reports/number_format.hpp"

namespace fp8a {

std::string render_gemms_csv(std::span<const GemmRow> rows) {
  std::ostringstream out;
  out << csv_header(kGemmsCsvColumns);
  for (const auto& r : rows)
    out << r.step << ',' << csv_field(r.layer) << ',' << gemm_name(r.gemm) << ','
        << csv_field(r.recipe.spec()) << ',' << training_format_name(r.format) << ','
        << format_number(r.rel_fro_err) << ',' << format_number(r.cos) << ',' << r.m << ','
        << r.n << ',' << r.k << ',' << r.rows_used << ',' << (r.sampled ? "true" : "false")
        << ",emulated\n";
  return out.str();
}

}  // namespace fp8a

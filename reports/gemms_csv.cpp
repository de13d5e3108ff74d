#include "reports/gemms_csv.hpp"

#include <cmath>
#include <sstream>

#include "reports/csv.hpp"
#include "reports/number_format.hpp"

namespace fp8a {

namespace {
// Padded dims are reported for engine rows only (0 = not applicable: an empty field).
std::string dim_field(std::int64_t v) { return v > 0 ? std::to_string(v) : std::string(); }
}  // namespace

Artifact render_gemms_csv(std::span<const GemmRow> rows) {
  std::ostringstream out;
  out << csv_header(kGemmsCsvColumns);
  for (const auto& r : rows)
    out << r.step << ',' << csv_field(r.layer) << ',' << gemm_name(r.gemm) << ','
        << csv_field(r.recipe.spec()) << ',' << training_format_name(r.format) << ','
        << format_number(r.rel_fro_err) << ',' << format_number(r.cos) << ',' << r.m << ','
        << r.n << ',' << r.k << ',' << r.rows_used << ',' << (r.sampled ? "true" : "false") << ','
        << csv_field(r.engine) << ',' << csv_field(r.accumulation) << ',' << dim_field(r.m_padded)
        << ',' << dim_field(r.n_padded) << ',' << dim_field(r.k_padded) << ','
        << csv_field(r.note) << ',' << format_number(r.zeroed_pct) << ','
        << format_number(r.sign_flip_pct) << ',' << format_number(r.median_rel_err) << ','
        << (std::isnan(r.noise_sign_flip_pct) ? std::string() : format_number(r.noise_sign_flip_pct))
        << ',' << (std::isnan(r.rel_fro_err_se) ? std::string() : format_number(r.rel_fro_err_se)) << ','
        << r.cols_used << ',' << (std::isnan(r.zeroed_pct_se) ? std::string() : format_number(r.zeroed_pct_se))
        << ',' << (std::isnan(r.sign_flip_pct_se) ? std::string() : format_number(r.sign_flip_pct_se)) << '\n';
  return {"gemms.csv", out.str(), std::to_string(rows.size()) + " rows"};
}

}  // namespace fp8a

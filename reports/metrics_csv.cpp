#include "reports/metrics_csv.hpp"

#include <sstream>

#include "reports/number_format.hpp"

namespace fp8a {

namespace {

// RFC 4180 quoting for fields that need it (layer names and paths are user data).
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::string render_metrics_csv(std::span<const EvaluationRow> rows) {
  std::ostringstream out;
  bool first = true;
  for (const char* c : kMetricsCsvColumns) {
    out << (first ? "" : ",") << c;
    first = false;
  }
  out << '\n';
  for (const auto& r : rows) {
    if (!r.applicability.ok) continue;
    const auto& m = r.metrics;
    const auto& s = r.stats;
    out << r.key.step << ',' << csv_field(r.key.layer) << ',' << role_name(r.key.role) << ','
        << csv_field(r.recipe.spec()) << ',' << training_format_name(r.format) << ','
        << kFp8Traits[static_cast<int>(r.fp8)].name << ',' << format_number(m.scale) << ','
        << format_number(s.amax) << ',' << format_number(m.mse) << ',' << format_number(m.rel_mse)
        << ',' << format_number(m.sqnr_db) << ',' << format_number(m.cos) << ','
        << format_number(m.underflow_pct) << ',' << format_number(m.overflow_pct) << ','
        << format_number(m.scale_inv) << ','
        << format_number(s.amin_nonzero < std::numeric_limits<float>::infinity() ? s.amin_nonzero
                                                                                 : 0.0f)
        << ',' << format_number(s.dynamic_range_log2()) << ',' << s.numel << ','
        << m.sums.underflow_count << ',' << m.sums.overflow_count << ',' << s.nan_count << ','
        << s.inf_count << ',' << dtype_name(r.input_dtype) << ',' << shape_text(r.shape) << ','
        << csv_field(r.file) << '\n';
  }
  return out.str();
}

}  // namespace fp8a

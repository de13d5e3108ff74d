#include "reports/metrics_csv.hpp"

#include <cmath>
#include <sstream>

#include "core/text.hpp"
#include "reports/csv.hpp"
#include "reports/number_format.hpp"

namespace fp8a {

namespace {

// Per-tensor values; blocked recipes have none (NaN), written as an empty field.
std::string optional_number(float v) { return std::isnan(v) ? std::string() : format_number(v); }

}  // namespace

Artifact render_metrics_csv(std::span<const EvaluationRow> rows) {
  std::ostringstream out;
  out << csv_header(kMetricsCsvColumns);
  std::size_t written = 0;
  for (const auto& r : rows) {
    if (!r.applicability.ok) continue;
    ++written;
    const auto& m = r.metrics;
    const auto& s = r.stats;
    const bool delayed = replays_history(r.recipe.kind);
    out << r.key.step << ',' << csv_field(r.key.layer) << ',' << role_name(r.key.role) << ','
        << csv_field(r.recipe.spec()) << ',' << training_format_name(r.format) << ','
        << cast_type_name(r.recipe.kind, r.fp8)
        << ',' << optional_number(m.scale) << ',' << format_number(s.amax) << ','
        << format_number(m.mse) << ',' << format_number(m.rel_mse) << ','
        << format_number(m.sqnr_db) << ',' << format_number(m.cos) << ','
        << format_number(m.underflow_pct) << ',' << format_number(m.overflow_pct) << ','
        << orientation_name(r.orientation) << ','
        << (delayed ? format_number(delayed_vs_current_log2(r)) : std::string()) << ','
        << format_number(m.saturated_pct) << ',' << m.sums.saturated_count << ','
        << optional_number(m.scale_inv) << ','
        << format_number(m.scale_inv_min) << ',' << format_number(m.scale_inv_max) << ','
        << format_number(s.amin_nonzero < std::numeric_limits<float>::infinity() ? s.amin_nonzero
                                                                                 : 0.0f)
        << ',' << format_number(s.dynamic_range_log2()) << ',' << s.numel << ','
        << m.sums.underflow_count << ',' << m.sums.overflow_count << ',' << s.nan_count << ','
        << s.inf_count << ',' << dtype_name(r.input_dtype) << ','
        << shape_text(r.shape, ShapeStyle::kCrossed) << ','
        << r.ranks << ',' << (delayed ? replay_mode_name(r.replay.mode) : "") << ',' << csv_field(r.file) << ','
        << format_number(m.underflow_energy_pct) << '\n';
  }
  return {"metrics.csv", out.str(), std::to_string(written) + " rows"};
}

}  // namespace fp8a

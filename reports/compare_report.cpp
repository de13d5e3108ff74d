#include "reports/compare_report.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "reports/csv.hpp"
#include "reports/name_text.hpp"
#include "reports/number_format.hpp"
#include "reports/text_table.hpp"

namespace fp8a {

namespace {

std::string printf_number(const char* fmt, double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string arrow(const char* fmt, double b, double c) {
  return printf_number(fmt, b) + " -> " + printf_number(fmt, c);
}

std::string steps_cell(const CompareMatch& m) {
  return m.same_step ? std::to_string(m.base.key.step)
                     : std::to_string(m.base.key.step) + " -> " + std::to_string(m.cand.key.step);
}

double metric(const MetricsRecord& r, int i) {
  const double v[] = {r.mse, r.rel_mse, r.sqnr_db, r.underflow_pct, r.saturated_pct, r.overflow_pct,
                      r.cos, r.amax};
  return v[i];
}

// "worse", "better", or "same" (a score of 0).
const char* change_text(const CompareMatch& m) { return m.worse ? "worse" : m.score > 0 ? "better" : "same"; }

// The recipe cell: one spec, or "base -> cand" for delayed options matched by kind.
std::string recipe_cell(const CompareMatch& m) {
  return m.base.recipe == m.cand.recipe ? m.base.recipe : m.base.recipe + " -> " + m.cand.recipe;
}

// amax "base -> cand (+N.N binades)"; the binades left out when either amax is 0 or not finite.
std::string amax_cell(const CompareMatch& m) {
  std::string s = arrow("%.4g", m.base.amax, m.cand.amax);
  if (std::isfinite(m.amax_log2)) s += printf_number(" (%+.1f binades)", m.amax_log2);
  return s;
}

std::string group_text(const CompareGroup& g) {
  return g.layer + " " + role_name(g.role) + " " + g.recipe + " " + g.format + " " + g.orientation;
}

std::string md_cell(const std::string& s) { return markdown_text(s, false); }

}  // namespace

RankedTable compare_ranked_table(const CompareResult& result, std::size_t top) {
  RankedTable t;
  t.head = {"rank", "change", "score", "driver", "layer", "tensor", "recipe", "format", "orientation",
            "step", "underflow %", "saturated %", "sqnr dB", "amax", "mse"};
  t.left = {false, true, false, true, true, true, true, true, true, false, false, false, false, false, false};
  for (const auto& m : result.matches) {
    if (t.rows.size() == top) break;
    t.rows.push_back({std::to_string(m.rank), change_text(m), printf_number("%.3f", m.score),
                      kDivergenceTermNames[m.driver], m.base.key.layer, role_name(m.base.key.role),
                      recipe_cell(m), m.base.format, m.base.orientation, steps_cell(m),
                      arrow("%.3f", m.base.underflow_pct, m.cand.underflow_pct),
                      arrow("%.3f", m.base.saturated_pct, m.cand.saturated_pct),
                      arrow("%.2f", m.base.sqnr_db, m.cand.sqnr_db), amax_cell(m),
                      arrow("%.3g", m.base.mse, m.cand.mse)});
    t.matches.push_back(&m);
  }
  return t;
}

Artifact render_compare_csv(const CompareResult& result) {
  std::ostringstream out;
  out << "rank,change,score,driver,layer,tensor,recipe,cand_recipe,format,orientation,base_step,cand_step,step_note";
  for (const char* name : kCompareCsvMetrics) out << ",base_" << name << ",cand_" << name << ",delta_" << name;
  for (const char* name : kDivergenceTermNames) out << ",term_" << name;
  out << ",amax_log2\n";
  for (const auto& m : result.matches) {
    out << m.rank << ',' << change_text(m) << ',' << format_number(m.score) << ',' << kDivergenceTermNames[m.driver]
        << ',' << csv_field(m.base.key.layer) << ',' << role_name(m.base.key.role) << ',' << csv_field(m.base.recipe)
        << ',' << csv_field(m.cand.recipe) << ',' << m.base.format << ',' << m.base.orientation << ',' << m.base.key.step << ','
        << m.cand.key.step << ',' << csv_field(m.step_note);
    for (int i = 0; i < static_cast<int>(std::size(kCompareCsvMetrics)); ++i) {
      const double b = metric(m.base, i), c = metric(m.cand, i);
      out << ',' << format_number(b) << ',' << format_number(c) << ',' << format_number(c - b);
    }
    for (double term : {m.terms.rel_mse, m.terms.underflow, m.terms.saturated})
      out << ',' << format_number(term);
    out << ',' << format_number(m.amax_log2) << '\n';
  }
  return {"compare.csv", out.str(), std::to_string(result.matches.size()) + " matches"};
}

Artifact render_compare_md(const CompareResult& result, const CompareInfo& info, std::size_t top) {
  std::ostringstream out;
  const auto log_text = [](const std::vector<std::string>& files) {
    std::string s;
    for (const auto& f : files) s += (s.empty() ? "; training log " : ", ") + markdown_code(f);
    return s.empty() ? s : s + " (delayed scaling replayed exactly)";
  };
  out << "# fp8-advisor compare\n\n"
      << "- base: " << markdown_code(info.base_path) << " (" << md_cell(info.base_kind) << ", " << result.base_rows
      << " rows, steps";
  for (auto s : result.base_steps) out << ' ' << s;
  out << log_text(info.base_log_files) << ")\n- cand: " << markdown_code(info.cand_path) << " ("
      << md_cell(info.cand_kind) << ", " << result.cand_rows << " rows, steps";
  for (auto s : result.cand_steps) out << ' ' << s;
  out << log_text(info.cand_log_files) << ")\n- matched: " << result.matches.size() << " ("
      << result.same_step_matches
      << " at the same step, " << result.matches.size() - result.same_step_matches
      << " at the nearest step)\n- unmatched: " << result.base_unmatched_rows << " base rows in "
      << result.base_only.size() << " groups, " << result.cand_unmatched_rows << " cand rows in "
      << result.cand_only.size() << " groups\n\n";
  const RankedTable t = compare_ranked_table(result, top);
  std::size_t worse = 0;
  for (const auto& m : result.matches) worse += m.worse ? 1 : 0;
  out << "## Largest divergences, what got worse first (top " << t.rows.size() << " of " << result.matches.size()
      << ", " << worse << " worse)\n\n"
      << "score = the largest of |log10(cand/base)| of rel_mse (= |delta SQNR| / 10 dB) and "
         "|delta| / 10 percentage points of underflow and of saturation (METRICS.md \"Divergence "
         "score\"); driver = the term that sets it; change = whether cand is worse on it. amax: "
         "its growth in binades.\n\n|";
  for (const auto& h : t.head) out << ' ' << h << " |";
  out << "\n|";
  for (bool left : t.left) out << (left ? " --- |" : " ---: |");
  out << '\n';
  for (const auto& row : t.rows) {
    out << '|';
    for (const auto& cell : row) out << ' ' << md_cell(cell) << " |";
    out << '\n';
  }
  for (const auto* side : {&result.base_only, &result.cand_only}) {
    if (side->empty()) continue;
    out << "\n## Only in " << (side == &result.base_only ? "base" : "cand") << "\n\n";
    for (const auto& g : *side) out << "- " << markdown_text(group_text(g)) << '\n';
  }
  out << "\n---\nfp8-advisor " << info.version << " (git " << info.git_revision << ")";
  if (!info.backend.empty()) out << ", backend " << md_cell(info.backend) << " (" << md_cell(info.device) << ")";
  out << "; command:";
  for (const auto& a : info.command_line) out << ' ' << md_cell(a);
  out << '\n';
  return {"compare.md", out.str(), "top " + std::to_string(t.rows.size())};
}

std::string render_compare_list(const CompareResult& result, std::size_t top) {
  const RankedTable t = compare_ranked_table(result, top);
  return render_text_table(t.head, t.rows, t.left);
}

}  // namespace fp8a

#include "reports/whatif_table.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <vector>

#include "core/text.hpp"
#include "reports/number_format.hpp"
#include "reports/text_table.hpp"

namespace fp8a {

namespace {

// Scientific, kWhatifRelErrDigits after the point.
std::string scientific(double v) {
  if (!std::isfinite(v)) return format_fixed(v, 0);
  return format_text("%.*e", kWhatifRelErrDigits, v);
}
std::string pct(double v) { return format_fixed(v, kWhatifPctDecimals); }
std::string cosine(double v) { return format_fixed(v, kWhatifCosDecimals); }

// A metric column: where it sits in the table, whether its worst value is the lowest, its values.
struct MetricColumn {
  std::size_t column;
  bool lower_is_worse;
  std::vector<double> values;
};

// marks[r][c] for the worst value of each column, where the column's values differ.
std::vector<std::vector<bool>> worst_marks(const std::vector<MetricColumn>& columns, std::size_t rows,
                                           std::size_t width) {
  std::vector<std::vector<bool>> marks(rows, std::vector<bool>(width, false));
  for (const MetricColumn& m : columns) {
    double worst = std::nan(""), best = std::nan("");
    for (double v : m.values) {
      if (std::isnan(v)) continue;
      const bool worse = m.lower_is_worse ? v < worst : v > worst;
      const bool better = m.lower_is_worse ? v > best : v < best;
      if (std::isnan(worst) || worse) worst = v;
      if (std::isnan(best) || better) best = v;
    }
    if (std::isnan(worst) || worst == best) continue;
    for (std::size_t r = 0; r < m.values.size(); ++r) marks[r][m.column] = m.values[r] == worst;
  }
  return marks;
}

std::string candidate_text(const Recipe& recipe, TrainingFormat format) {
  return recipe.spec() + "/" + training_format_name(format);
}

std::string tensor_table(std::vector<const EvaluationRow*> rows, bool highlight,
                         std::vector<std::string>* not_applicable) {
  // (step, role, orientation), then the evaluation order (format, recipe).
  std::stable_sort(rows.begin(), rows.end(), [](const EvaluationRow* a, const EvaluationRow* b) {
    return std::tie(a->key.step, a->key.role, a->orientation) <
           std::tie(b->key.step, b->key.role, b->orientation);
  });
  const std::vector<std::string> head = {"step", "tensor", "orientation", "candidate", "dtype",
                                         "sqnr dB", "rel_mse", "underflow %", "saturated %", "cos",
                                         "replay"};
  const std::vector<bool> left = {false, true, true, true, true, false, false, false, false, false, true};
  std::vector<std::vector<std::string>> cells;
  std::vector<MetricColumn> metrics = {{5, true, {}}, {6, false, {}}, {7, false, {}}, {8, false, {}},
                                       {9, true, {}}};
  std::set<std::string> seen;
  for (const EvaluationRow* r : rows) {
    const std::string candidate = candidate_text(r->recipe, r->format);
    if (!r->applicability.ok) {
      const std::string why = candidate + " on " + role_name(r->key.role) + ": " + r->applicability.reason;
      if (seen.insert(why).second) not_applicable->push_back(why);
      continue;
    }
    const QuantMetrics& m = r->metrics;
    cells.push_back({std::to_string(r->key.step), role_name(r->key.role), orientation_name(r->orientation),
                     candidate, cast_type_name(r->recipe.kind, r->fp8),
                     format_fixed(m.sqnr_db, kWhatifSqnrDecimals), scientific(m.rel_mse),
                     pct(m.underflow_pct), pct(m.saturated_pct),
                     cosine(m.cos),
                     replays_history(r->recipe.kind) ? replay_mode_name(r->replay.mode) : ""});
    metrics[0].values.push_back(m.sqnr_db);
    metrics[1].values.push_back(m.rel_mse);
    metrics[2].values.push_back(m.underflow_pct);
    metrics[3].values.push_back(m.saturated_pct);
    metrics[4].values.push_back(m.cos);
  }
  return render_text_table(head, cells, left,
                           highlight ? worst_marks(metrics, cells.size(), head.size())
                                     : std::vector<std::vector<bool>>{});
}

std::string gemm_table(std::vector<const GemmRow*> gemms, bool highlight) {
  std::stable_sort(gemms.begin(), gemms.end(), [](const GemmRow* a, const GemmRow* b) {
    return std::tie(a->step, a->gemm) < std::tie(b->step, b->gemm);
  });
  const std::vector<std::string> head = {"step", "gemm", "candidate", "engine", "rel_fro_err", "cos",
                                         "zeroed %", "sign flip %"};
  const std::vector<bool> left = {false, true, true, true, false, false, false, false};
  std::vector<std::vector<std::string>> cells;
  std::vector<MetricColumn> metrics = {{4, false, {}}, {5, true, {}}, {6, false, {}}, {7, false, {}}};
  for (const GemmRow* g : gemms) {
    cells.push_back({std::to_string(g->step), gemm_name(g->gemm), candidate_text(g->recipe, g->format),
                     g->engine, scientific(g->rel_fro_err), cosine(g->cos),
                     pct(g->zeroed_pct), pct(g->sign_flip_pct)});
    metrics[0].values.push_back(g->rel_fro_err);
    metrics[1].values.push_back(g->cos);
    metrics[2].values.push_back(g->zeroed_pct);
    metrics[3].values.push_back(g->sign_flip_pct);
  }
  return render_text_table(head, cells, left,
                           highlight ? worst_marks(metrics, cells.size(), head.size())
                                     : std::vector<std::vector<bool>>{});
}

}  // namespace

std::string render_whatif_table(const std::string& layer, std::span<const EvaluationRow> rows,
                                std::span<const GemmRow> gemms, bool highlight) {
  std::vector<const EvaluationRow*> layer_rows;
  std::set<std::int64_t> steps;
  for (const EvaluationRow& r : rows)
    if (r.key.layer == layer) {
      layer_rows.push_back(&r);
      steps.insert(r.key.step);
    }
  std::vector<const GemmRow*> layer_gemms;
  for (const GemmRow& g : gemms)
    if (g.layer == layer) layer_gemms.push_back(&g);
  std::string step_list;
  for (std::int64_t s : steps) step_list += (step_list.empty() ? "" : ", ") + std::to_string(s);
  std::string s = "layer " + visible_text(layer) + " (step" + (steps.size() == 1 ? " " : "s ") + step_list + ")\n\n";
  std::vector<std::string> not_applicable;
  s += tensor_table(layer_rows, highlight, &not_applicable);
  for (const std::string& n : not_applicable) s += "not applicable: " + n + "\n";
  s += "\n";
  if (layer_gemms.empty())
    s += "GEMM error: none (activation, weight and gradient were not all captured at a step)\n";
  else
    s += "GEMM-output error (gemms.csv):\n" + gemm_table(layer_gemms, highlight);
  return s;
}

}  // namespace fp8a

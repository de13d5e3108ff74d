#include "reports/report_md.hpp"

#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "core/text.hpp"
#include "reports/console_table.hpp"
#include "reports/consumers/consumer_plan.hpp"
#include "reports/name_text.hpp"
#include "reports/number_format.hpp"
#include "reports/consumers/te_recipe.hpp"

namespace fp8a {

namespace {

// A table cell: text, escaped by markdown_cell, or Markdown already (a code span).
struct MdCell {
  std::string text;
  bool markup = false;
  MdCell(std::string t) : text(std::move(t)) {}  // NOLINT: text is the common case
  MdCell(const char* t) : text(t) {}             // NOLINT
  MdCell(std::string t, bool m) : text(std::move(t)), markup(m) {}
};

MdCell code(const std::string& text) { return {markdown_code(text), true}; }

// A Markdown table: the header, the delimiter row (right-aligned where !left[c]), the rows; every
// text cell escaped.
std::string markdown_table(const std::vector<std::string>& head,
                           const std::vector<std::vector<MdCell>>& rows,
                           const std::vector<bool>& left) {
  const auto line = [](const std::vector<MdCell>& cells) {
    std::string s = "|";
    for (const auto& c : cells) s += " " + (c.markup ? c.text : markdown_cell(c.text)) + " |";
    return s + "\n";
  };
  std::vector<MdCell> head_cells(head.begin(), head.end());
  std::string s = line(head_cells) + "|";
  for (std::size_t c = 0; c < head.size(); ++c) s += c < left.size() && !left[c] ? " ---: |" : " --- |";
  s += "\n";
  for (const auto& r : rows) s += line(r);
  return s;
}

// A list of text items, each escaped (a line break in one becomes <br>).
std::string bullets(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += "- " + markdown_text(i) + "\n";
  return s;
}

std::string recommendation_section(const AnswerContext& a) {
  std::string s = "## Recommendation\n\n";
  if (a.recommendation == nullptr) return s + markdown_text(a.skipped.why) + "\n\n";
  const Recommendation& rec = *a.recommendation;
  std::optional<ConsumerPlan> own;
  const ConsumerPlan& plan = a.consumers ? *a.consumers : own.emplace(rec);
  if (!rec.chosen) {
    s += "**No FP8 recipe can be recommended**" + markdown_text(no_recipe_reason(rec, a.gpu_name()), false);
    s += "; every GEMM stays in BF16.\n\n";
  } else {
    const CandidatePlan& c = rec.candidates[*rec.chosen];
    const std::string call = code(te_recipe_call(te_recipe_for(c.candidate, rec.te_version))).text;
    s += plan.fp8 ? "**Recipe:** " + call + " (" + candidate_name(c.candidate) + ")\n\n"
                         : "**Every GEMM in BF16** (the chosen " + call + ", " +
                               candidate_name(c.candidate) + ", keeps none in FP8)\n\n";
  }
  s += "- why: " + markdown_text(rec.why) + "\n";
  if (!rec.calibration.empty()) s += "- criteria: " + markdown_text(rec.calibration) + "\n";
  if (rec.chosen) {
    const CandidatePlan& c = rec.candidates[*rec.chosen];
    if (c.speedup)
      s += format_text("- predicted GEMM speedup over all-BF16: %.3fx on %s (cost: %s); FP8 share of "
                       "GEMM FLOPs %.1f %%\n",
                       *c.speedup, markdown_text(a.gpu_name()).c_str(), markdown_text(a.cost_basis()).c_str(),
                       100.0 * c.fp8_flop_share);
    else
      s += format_text("- cost: %s; FP8 share of GEMM FLOPs %.1f %%\n", markdown_text(a.cost_basis()).c_str(),
                       100.0 * c.fp8_flop_share);
  }
  for (const std::string& t : trained_plan_lines(plan, a.gpu_name()))
    s += "- what the files train: " + markdown_text(t) + "\n";
  if (rec.module_plan) {
    const ModulePlan& mp = *rec.module_plan;
    s += (plan.precision_config_mixes ? "- per module (te_precision_config.yaml: what Megatron trains): "
                                      : "- an alternative no file holds, per module: ") +
         markdown_text(mp.why) + "\n";
    // Each tier: what it costs (threshold load) and buys (GEMM time against BF16).
    const double total = rec.candidates[mp.base].total_flops;
    for (const ModuleTier& t : mp.tiers) {
      s += format_text("  - %s: %d module%s, %.1f %% of the GEMM FLOPs",
                       t.candidate ? markdown_text(candidate_name(rec.candidates[*t.candidate].candidate)).c_str() : "BF16",
                       t.modules, t.modules == 1 ? "" : "s", total > 0 ? 100.0 * t.flops / total : 0.0);
      if (t.candidate && t.gemms > 0) s += format_text(", mean threshold load %.2f", t.risk / t.gemms);
      if (t.seconds)
        s += format_text(", %.4g ms of GEMM time against %.4g in BF16", *t.seconds * 1e3, *t.bf16_seconds * 1e3);
      s += "\n";
    }
  }
  else if (!rec.module_plan_note.empty()) s += "- per module: " + markdown_text(rec.module_plan_note) + "\n";
  s += "\n";

  const PlanFallbacks f = plan_fallbacks(rec);
  if (rec.chosen) {
    s += "### Kept in BF16\n\n";
    if (f.bf16.empty()) s += f.not_paying == 0 ? "Nothing: every GEMM FP8.\n" : "Nothing for the numbers.\n";
    s += bullets(f.bf16);
    if (f.not_paying > 0)
      s += format_text("- %zu GEMM%s the numbers allow in FP8, because FP8 would not pay on %s "
                       "(recipe.json has each)\n",
                       f.not_paying, f.not_paying == 1 ? "" : "s", markdown_text(a.gpu_name()).c_str());
    s += "\n";
  }
  if (!f.close.empty()) s += "### Kept FP8 close to the limit\n\n" + bullets(f.close) + "\n";
  if (!rec.watch.empty()) {  // the recommendation's watch list, as the answer names it
    std::vector<std::string> items;
    for (const WatchItem& w : rec.watch) items.push_back(watch_item_text(w));
    s += "### Watch next run\n\n" + bullets(items) + "\n";
  }
  if (!rec.advisories.empty()) {
    std::vector<std::string> items;
    for (const Advisory& adv : rec.advisories) items.push_back(adv.text + " [" + adv.source + "]");
    s += "### From the field\n\n" + bullets(items) + "\n";
  }
  if (!rec.limits.empty()) s += "### Not judged\n\n" + bullets(rec.limits) + "\n";
  std::vector<std::pair<std::string, std::string>> on_gpu;
  for (const GpuExclusion& e : rec.gpu_excluded) on_gpu.emplace_back(e.candidate, e.reason);
  std::vector<std::string> evaluation_only, release;
  for (const CandidatePlan& c : rec.candidates) {
    if (c.runnable) continue;
    if (!c.evaluation_only && !c.release_excluded) on_gpu.emplace_back(candidate_name(c.candidate), c.excluded);
    else
      (c.evaluation_only ? evaluation_only : release)
          .push_back(candidate_name(c.candidate) + ": " +
                     (c.release_excluded ? c.release_reason : c.excluded));
  }
  const std::vector<std::string> excluded = join_by_reason(on_gpu);
  if (!excluded.empty()) s += "### Excluded on " + markdown_text(a.gpu_name()) + "\n\n" + bullets(excluded) + "\n";
  if (!release.empty())
    s += "### Excluded on TE " + te_version_text(rec.te_version) + " (--te-version)\n\n" + bullets(release) + "\n";
  if (!evaluation_only.empty()) s += "### Evaluation only (TE cannot train them)\n\n" + bullets(evaluation_only) + "\n";
  return s;
}

std::string run_section(const RunInfo& info, std::span<const EvaluationRow> rows) {
  std::set<std::string> layers;
  std::set<std::tuple<std::int64_t, std::string, Role>> tensors;
  std::set<std::int64_t> steps;
  int approximate = 0;
  for (const EvaluationRow& r : rows) {
    layers.insert(r.key.layer);
    tensors.emplace(r.key.step, r.key.layer, r.key.role);
    steps.insert(r.key.step);
    approximate += replays_history(r.recipe.kind) && r.replay.mode == ReplayMode::kApproximate;
  }
  std::string step_list;
  for (std::int64_t st : steps) step_list += (step_list.empty() ? "" : ", ") + std::to_string(st);
  std::string command;
  for (const auto& w : info.command_line) command += (command.empty() ? "" : " ") + w;
  std::string s = "## Run\n\n";
  s += markdown_table({"run", ""},
                      {{"layers", std::to_string(layers.size())},
                       {"tensors", std::to_string(tensors.size())},
                       {"steps", std::to_string(steps.size()) + (steps.empty() ? "" : " (" + step_list + ")")},
                       {"recipes", std::to_string(info.recipes.size())},
                       {"format", info.format_description},
                       {"backend", info.backend + " (" + info.device + ")"},
                       {"version", info.version + " (git " + info.git_revision + ")"},
                       {"command", code(command)}},
                      {true, true});
  s += "\n### Inputs\n\n";
  std::vector<std::vector<MdCell>> inputs;
  for (const CaptureFile& f : info.inputs)
    inputs.push_back({code(f.path), std::to_string(f.step), f.rank < 0 ? "" : std::to_string(f.rank),
                      std::to_string(f.tensor_count), f.note});
  s += markdown_table({"file", "step", "rank", "tensors", "note"}, inputs,
                      {true, false, false, false, true});
  for (const auto& l : info.log_files) s += "\ntraining log: " + code(l).text + "\n";
  std::vector<std::string> warnings = info.warnings;
  if (approximate > 0)
    warnings.push_back(format_text("%d delayed-scaling evaluation%s replayed approximately "
                                   "(summary.json delayed_replay names each)",
                                   approximate, approximate == 1 ? "" : "s"));
  s += "\n### Warnings\n\n" + (warnings.empty() ? std::string("None.\n") : bullets(warnings));
  return s + "\n";
}

std::string gemm_cell(const GemmDecision& g) {
  if (!g.judged) return "not judged";
  return precision_name(g.precision);
}

std::string decisions_section(const Recommendation& rec) {
  std::vector<std::vector<MdCell>> cells;
  for (const LayerDecision& l : rec.layers) {
    // The reasons, one per GEMM that has one; the same reason for all three once.
    std::string reasons;
    const bool same = l.gemms[0].reason == l.gemms[1].reason && l.gemms[1].reason == l.gemms[2].reason;
    if (same) reasons = l.gemms[0].reason;
    else
      for (const GemmDecision& g : l.gemms)
        if (!g.reason.empty()) {
          // A reason that names its GEMM first is not prefixed again.
          const std::string name = std::string(gemm_name(g.gemm)) + ":";
          reasons += (reasons.empty() ? "" : "\n") + (g.reason.starts_with(name) ? "" : name + " ") + g.reason;
        }
    cells.push_back({l.layer + (l.incomplete ? " (incomplete)" : ""), precision_name(l.precision),
                     l.fp8_safe ? "yes" : "no", gemm_cell(l.gemms[0]), gemm_cell(l.gemms[1]),
                     gemm_cell(l.gemms[2]), reasons});
  }
  return "## Per-layer decisions\n\n" +
         markdown_table({"layer", "precision", "fp8_safe", "fprop", "dgrad", "wgrad", "reasons"}, cells, {}) +
         "\n";
}

std::string metrics_section(std::span<const LayerSummary> layers) {
  std::vector<std::vector<MdCell>> cells;
  for (const LayerSummary& l : layers)
    cells.push_back({l.layer, l.recipe, training_format_name(l.format),
                     format_fixed(l.min_sqnr_db.value, 2), worst_where(l.min_sqnr_db),
                     format_fixed(l.min_cos.value, 6), format_text("%.3g", l.max_rel_mse.value),
                     format_fixed(l.max_underflow_pct.value, 3), format_fixed(l.max_saturated_pct.value, 3),
                     std::to_string(l.nonfinite_count)});
  return "## Per-layer worst metrics\n\nOver each layer's tensors and steps (metrics.csv has every "
         "value, METRICS.md defines them).\n\n" +
         markdown_table({"layer", "recipe", "format", "min SQNR dB", "(where)", "min cos", "max rel_mse",
                         "max underflow %", "max saturated %", "NaN/Inf"},
                        cells, {true, true, true, false, true, false, false, false, false, false});
}

}  // namespace

std::string markdown_cell(std::string_view text) { return markdown_text(text, false); }

Artifact render_report_md(const RunInfo& info, std::span<const EvaluationRow> rows,
                          std::span<const LayerSummary> layers, const AnswerContext& answer) {
  std::string s = "# fp8-advisor report\n\n";
  s += recommendation_section(answer);
  s += run_section(info, rows);
  if (answer.recommendation != nullptr) s += decisions_section(*answer.recommendation);
  s += metrics_section(layers);
  return {"report.md", s, ""};
}

}  // namespace fp8a

#include "reports/report_html.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "core/text.hpp"
#include "engine/delayed_replay.hpp"
#include "reports/answer_text.hpp"
#include "reports/html_page.hpp"
#include "reports/svg_plot.hpp"
#include "reports/consumers/te_recipe.hpp"

namespace fp8a {

namespace {

using svg::Markup;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using html::Cell;
using html::list;
using html::paragraph;
using html::table;

std::string num(double v) { return html::number(v); }
std::string pct(double v) { return num(v) + " %"; }

const char* fp8_name(Fp8Format f) { return f == Fp8Format::kE4M3 ? "e4m3" : "e5m2"; }

// An id for an anchor: the layer's position and its name with every other character '-'.
std::string layer_anchor(std::size_t position, const std::string& layer) {
  std::string s = "layer-" + std::to_string(position) + "-";
  for (char c : layer) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return s;
}

// ---- what the page is built from ----------------------------------------------------------------

struct Page {
  const ReportInputs& in;
  EvaluationIndex index;
  std::vector<RunCandidate> candidates;   // the heatmaps' columns
  std::vector<std::string> layers;        // model order
  std::map<std::string, std::size_t> position;  // layer -> its place in `layers`
  const CandidatePlan* chosen = nullptr;
  int chosen_column = -1;
  // What the files train (the run's own plan when the answer carries it); set with a recommendation.
  std::optional<ConsumerPlan> own_consumers;
  const ConsumerPlan* consumers = nullptr;

  explicit Page(const ReportInputs& inputs) : in(inputs), index(inputs.rows) {
    candidates = index_candidates(index);
    layers = html::model_order(index.layers());
    for (std::size_t i = 0; i < layers.size(); ++i) position[layers[i]] = i;
    if (in.recommendation)
      consumers = in.answer && in.answer->consumers ? &*in.answer->consumers
                                                    : &own_consumers.emplace(*in.recommendation);
    if (in.recommendation && in.recommendation->chosen) {
      chosen = &in.recommendation->candidates[*in.recommendation->chosen];
      for (std::size_t c = 0; c < candidates.size(); ++c)
        if (candidates[c] == chosen->candidate) chosen_column = static_cast<int>(c);
    }
  }
  const LayerDecision* decision(const std::string& layer) const {
    if (!in.recommendation) return nullptr;
    for (const LayerDecision& d : in.recommendation->layers)
      if (d.layer == layer) return &d;
    return nullptr;
  }
  std::string anchor(const std::string& layer) const { return layer_anchor(position.at(layer), layer); }
};

// ---- summary --------------------------------------------------------------------------------------

// The plan at a glance: one row per layer, one cell per GEMM coloured by the precision the chosen
// plan gives it: FP8, BF16 for the numbers (the limiting criterion named in the cell, the whole
// reason in its title), BF16 because FP8 would not pay, or not judged.
void render_plan_grid(Markup& m, const Page& p) {
  const Recommendation& rec = *p.in.recommendation;
  const CandidatePlan& c = *p.chosen;
  m.open("table", {{"class", "plan"}}).open("thead").open("tr");
  for (const char* h : {"layer", "fprop", "dgrad", "wgrad"}) m.element("th", {}, h);
  m.close().close().open("tbody");
  std::size_t counts[4] = {};  // fp8, bf16 numbers, bf16 cost, not judged
  std::map<std::string, std::size_t> position;  // layer -> index into rec.layers
  for (std::size_t li = 0; li < rec.layers.size(); ++li) position.emplace(rec.layers[li].layer, li);
  for (const std::string& name : p.layers) {  // model order
    const auto at = position.find(name);
    if (at == position.end()) continue;
    const std::size_t li = at->second;
    const LayerDecision& l = rec.layers[li];
    m.open("tr").element("td", {}, l.layer);
    for (const GemmDecision& g : l.gemms) {
      const auto gi = static_cast<std::size_t>(g.gemm);
      const std::string cost = li < c.not_paying.size() ? c.not_paying[li][gi] : std::string();
      const GemmJudgement* j = li < c.layers.size() ? &c.layers[li].gemms[gi] : nullptr;
      std::string cls, text, title = g.reason;
      if (!g.judged) {
        cls = "unjudged", text = "not judged", ++counts[3];
      } else if (g.precision == Precision::kFp8) {
        cls = "fp8", text = "FP8", ++counts[0];
      } else if (!cost.empty()) {
        cls = "cost", text = "BF16: cost", title = cost, ++counts[2];
      } else {
        cls = "bf16", text = "BF16", ++counts[1];
        if (j != nullptr && j->judged && !j->fp8_safe)
          if (const Verdict& v = failing_verdict(*j); v.failing || v.limiting)
            text += std::string(": ") + criterion_name(v.failing ? *v.failing : *v.limiting);
      }
      if (title.empty()) m.element("td", {{"class", cls}}, text);
      else m.element("td", {{"class", cls}, {"title", title}}, text);
    }
    m.close();
  }
  m.close().close();
  m.element("p", {{"class", "note"}},
            format_text("%zu GEMMs FP8, %zu BF16 for the numbers, %zu BF16 because FP8 would not pay, %zu not "
                        "judged; FP8 share of GEMM FLOPs %.1f %%%s. Hover a cell for its reason; the layer cards "
                        "below have the numbers.",
                        counts[0], counts[1], counts[2], counts[3], 100.0 * c.fp8_flop_share,
                        c.speedup ? format_text(", predicted GEMM speedup %.3fx", *c.speedup).c_str() : ""));
  // The candidates side by side, in the recommendation's ranking (the runnable ones; then those
  // excluded, in evaluation order): what each would keep in FP8 and what it would gain.
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> classes;
  std::vector<std::size_t> order = rec.ranking;
  for (std::size_t i = 0; i < rec.candidates.size(); ++i)
    if (!rec.candidates[i].runnable) order.push_back(i);
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    const CandidatePlan& k = rec.candidates[order[rank]];
    rows.push_back({{k.runnable ? std::to_string(rank + 1) : std::string("-"), true}, {candidate_name(k.candidate)},
                    {format_text("%.1f %%", 100.0 * k.fp8_flop_share), true},
                    {k.speedup ? format_text("%.3fx", *k.speedup) : std::string("-"), true},
                    {std::to_string(k.gemms_to_bf16), true}, {std::to_string(k.gemms_not_paying), true},
                    {k.runnable ? (&k == &c ? std::string("chosen") : std::string()) : k.excluded}});
    classes.push_back(&k == &c ? "top" : "");
  }
  for (const GpuExclusion& e : rec.gpu_excluded) {
    rows.push_back({{"-", true}, {e.candidate}, {"-", true}, {"-", true}, {"-", true}, {"-", true}, {e.reason}});
    classes.push_back("");
  }
  m.element("h3", {}, "The candidates side by side");
  table(m, {"rank", "candidate", "FP8 share of GEMM FLOPs", "predicted speedup", "GEMMs to BF16 (numbers)",
            "to BF16 (cost)", "note"},
        rows, classes);
}

// The per-module plan at a glance (te_precision_config.yaml): one row per module, one cell per
// GEMM coloured by its tier (a 4-bit recipe, the base's 8-bit one, another, BF16), each cell's
// title why; then what each tier costs (its threshold load) and buys (its GEMM time against BF16
// on the roofline, when there is a cost model).
void render_module_tiers(Markup& m, const Page& p) {
  const Recommendation& rec = *p.in.recommendation;
  const ModulePlan& mp = *rec.module_plan;
  const auto tier_class = [&](std::optional<std::size_t> c) -> std::string {
    if (!c) return "bf16";
    const bool base = *c == mp.base;
    if (operand_bits(rec.candidates[*c].candidate.recipe.kind) == 4) return base ? "fp4" : "fp4alt";
    return base ? "fp8" : "alt";
  };
  const auto tier_name = [&](std::optional<std::size_t> c) {
    return c ? candidate_name(rec.candidates[*c].candidate) : std::string("BF16");
  };
  const CandidatePlan& base = rec.candidates[mp.base];
  m.element("h3", {}, p.consumers->precision_config_mixes
                          ? "The per-module plan at a glance (te_precision_config.yaml: what Megatron trains)"
                          : "An alternative no file holds: mixing recipes per module");
  m.open("table", {{"class", "plan"}}).open("thead").open("tr");
  for (const char* h : {"module", "fprop", "dgrad", "wgrad"}) m.element("th", {}, h);
  m.close().close().open("tbody");
  std::map<std::string, std::size_t> position;  // layer -> index into mp.modules
  std::vector<std::string> names;
  for (std::size_t li = 0; li < mp.modules.size(); ++li) {
    position.emplace(mp.modules[li].layer, li);
    names.push_back(mp.modules[li].layer);
  }
  for (const std::string& name : html::model_order(names)) {
    const std::size_t li = position.at(name);
    const ModuleChoice& mc = mp.modules[li];
    m.open("tr").element("td", {}, mc.layer);
    const LayerJudgement& under = rec.candidates[mc.candidate.value_or(mp.base)].layers[li];
    for (const GemmJudgement& j : under.gemms) {
      if (!j.judged) {
        m.element("td", {{"class", "unjudged"}}, "not judged");
        continue;
      }
      std::string title = mc.reason;
      // Where the module left the base, what the base's numbers say of this GEMM.
      const GemmJudgement& b = base.layers[li].gemms[static_cast<std::size_t>(j.gemm)];
      if (mc.candidate != mp.base && b.judged)
        title += std::string(title.empty() ? "" : "; ") + "under " + candidate_name(base.candidate) + ": " +
                 (b.fp8_safe ? std::string("passes") : failing_verdict(b).reason);
      if (title.empty()) m.element("td", {{"class", tier_class(mc.candidate)}}, tier_name(mc.candidate));
      else m.element("td", {{"class", tier_class(mc.candidate)}, {"title", title}}, tier_name(mc.candidate));
    }
    m.close();
  }
  m.close().close();
  m.element("p", {{"class", "note"}}, mp.why + ". Hover a cell for its reason.");
  // What each tier costs and buys.
  double plan_saving = 0;
  for (const ModuleTier& t : mp.tiers)
    if (t.seconds) plan_saving += *t.bf16_seconds - *t.seconds;
  const auto ms = [](const std::optional<double>& s) { return s ? format_text("%.4g", *s * 1e3) : std::string("-"); };
  m.open("table", {{"class", "plan"}}).open("thead").open("tr");
  for (const char* h : {"tier", "modules", "GEMMs", "share of GEMM FLOPs", "mean threshold load",
                        "GEMM time in BF16 (ms)", "in the tier (ms)", "saves (ms)", "share of the saving"})
    m.element("th", {}, h);
  m.close().close().open("tbody");
  for (const ModuleTier& t : mp.tiers) {
    m.open("tr").element("td", {{"class", tier_class(t.candidate)}}, tier_name(t.candidate));
    const double saving = t.seconds ? *t.bf16_seconds - *t.seconds : 0.0;
    for (const std::string& v :
         {std::to_string(t.modules), std::to_string(t.gemms),
          format_text("%.1f %%", base.total_flops > 0 ? 100.0 * t.flops / base.total_flops : 0.0),
          t.candidate && t.gemms > 0 ? format_text("%.2f", t.risk / t.gemms) : std::string("-"), ms(t.bf16_seconds),
          ms(t.seconds), t.seconds ? ms(saving) : std::string("-"),
          t.seconds && plan_saving > 0 ? format_text("%.1f %%", 100.0 * saving / plan_saving) : std::string("-")})
      m.element("td", {{"class", "num"}}, v);
    m.close();
  }
  m.close().close();
  m.element("p", {{"class", "note"}},
            std::string("Threshold load: each GEMM's closest criterion as a fraction of its failing value (docs/POLICY.md); "
                        "times: one rank's GEMMs and their casts on ") +
                (rec.gpu ? rec.gpu->name : "no GPU") + " by the roofline, one module at a time" +
                (mp.speedup ? format_text("; the whole plan %.3fx over all-BF16", *mp.speedup) : std::string(
                                  " (no cost model: --cost none or no token count)")) + ".");
}

// The recommendation in a few sentences: the recipe (or every GEMM in BF16), why, the cost and
// what the files train.
void render_answer_box(Markup& m, const Page& p) {
  const Recommendation* rec = p.in.recommendation;
  m.open("div", {{"class", "answer"}});
  if (!rec) {
    m.element("p", {}, p.in.answer && !p.in.answer->skipped.why.empty() ? p.in.answer->skipped.why : "no recommendation");
  } else if (!p.chosen) {
    m.element("p", {}, "No FP8 recipe can be recommended.");
    m.element("p", {}, rec->why);
  } else {
    const CandidatePlan& c = *p.chosen;
    // As the answer says it: a chosen recipe whose plan keeps no GEMM in FP8 is "every GEMM in
    // BF16", never "Recommended: <FP8 recipe>" beside an FP8 share of 0 %.
    if (p.consumers->fp8) {
      m.open("p").text("Recommended: ");
      m.element("code", {}, te_recipe_call(te_recipe_for(c.candidate, rec->te_version)));
      m.text("  [" + candidate_name(c.candidate) + "]").close();
    } else {
      m.open("p").text("Recommended: every GEMM in BF16 (the chosen ");
      m.element("code", {}, te_recipe_call(te_recipe_for(c.candidate, rec->te_version)));
      m.text("  [" + candidate_name(c.candidate) + "] keeps none in FP8)").close();
    }
    m.element("p", {}, "Why: " + rec->why);
    std::string cost = c.speedup ? format_text("predicted GEMM speedup over all-BF16 %.3fx on %s (cost: %s); ",
                                               *c.speedup, rec->gpu ? rec->gpu->name : "?", rec->cost_basis.c_str())
                                 : "cost: " + rec->cost_basis + "; ";
    m.element("p", {}, cost + format_text("FP8 share of GEMM FLOPs %.1f %%.", 100.0 * c.fp8_flop_share));
    const std::vector<std::string> trained = trained_plan_lines(*p.consumers, rec->gpu ? rec->gpu->name : "?");
    if (trained.size() == 1) {
      m.element("p", {}, "What the files train: " + trained[0] + ".");
    } else if (!trained.empty()) {
      m.element("p", {}, "What the files train:");
      m.open("ul");
      for (const std::string& t : trained) m.element("li", {}, t);
      m.close();
    }
  }
  m.close();
}

// The BF16 fallbacks, each with its reason, and the watch list as the answer, recipe.json and
// nvdlfw_inspect.yaml name it.
void render_fallbacks_and_watch(Markup& m, const Page& p) {
  const Recommendation& rec = *p.in.recommendation;
  std::vector<std::vector<Cell>> rows;
  for (std::size_t li = 0; li < rec.layers.size(); ++li) {
    const LayerDecision& l = rec.layers[li];
    for (const GemmDecision& g : l.gemms) {
      if (!g.judged || g.precision != Precision::kBf16) continue;
      std::string reason = g.reason;
      if (li < p.chosen->not_paying.size() && !p.chosen->not_paying[li][static_cast<int>(g.gemm)].empty())
        reason = p.chosen->not_paying[li][static_cast<int>(g.gemm)];
      rows.push_back({{l.layer}, {gemm_name(g.gemm)}, {reason}});
    }
  }
  m.element("h3", {}, format_text("GEMMs kept in BF16: %zu", rows.size()));
  if (!rows.empty()) table(m, {"layer", "GEMM", "reason"}, rows);
  if (!rec.watch.empty()) {
    m.element("h3", {}, "Watch next run");
    std::vector<std::string> items;
    for (const WatchItem& w : rec.watch) items.push_back(watch_item_text(w));
    list(m, items);
  }
}

// The run's counts and provenance.
void render_run_facts(Markup& m, const Page& p) {
  const RunInfo& info = *p.in.info;
  std::set<std::int64_t> steps;
  std::set<std::tuple<std::int64_t, std::string, Role>> tensors;
  for (const EvaluationRow& r : p.in.rows) {
    steps.insert(r.key.step);
    tensors.emplace(r.key.step, r.key.layer, r.key.role);
  }
  std::string step_list;
  for (std::int64_t s : steps) step_list += (step_list.empty() ? "" : ", ") + std::to_string(s);
  std::string recipes;
  for (const Recipe& r : p.index.recipes()) recipes += (recipes.empty() ? "" : ", ") + r.spec();
  std::string formats = info.format_description;  // as the run was asked; else the table's
  if (formats.empty())
    for (TrainingFormat f : p.index.formats()) formats += (formats.empty() ? "" : ", ") + std::string(training_format_name(f));
  std::string command;
  for (const auto& a : info.command_line) command += (command.empty() ? "" : " ") + a;
  std::vector<std::vector<Cell>> facts = {
      {{"layers"}, {std::to_string(p.layers.size()), true}},
      {{"tensors (step, layer, role)"}, {std::to_string(tensors.size()), true}},
      {{"steps"}, {std::to_string(steps.size()) + (step_list.empty() ? "" : ": " + step_list)}},
      {{"evaluation rows"}, {std::to_string(p.in.rows.size()), true}},
      {{"GEMM rows"}, {std::to_string(p.in.gemms.size()), true}},
      {{"recipes"}, {recipes}},
      {{"formats"}, {formats}},
      {{"backend"}, {info.backend + " (" + info.device + "), --device " + info.requested_device}},
      {{"fp8-advisor"}, {info.version + " (" + info.git_revision + ")"}},
      {{"command"}, {command}},
  };
  if (p.in.answer) facts.push_back({{"GPU / cost"}, {p.in.answer->gpu_name() + " / " + p.in.answer->cost_basis()}});
  m.element("h3", {}, "The run");
  table(m, {"", ""}, facts);
}

// The capture files and training logs read, at most kReportMaxInputsListed of the files.
void render_inputs(Markup& m, const RunInfo& info) {
  m.element("h3", {}, format_text("Inputs: %zu capture file(s)", info.inputs.size()));
  std::vector<std::string> inputs;
  for (std::size_t i = 0; i < info.inputs.size() && i < kReportMaxInputsListed; ++i) {
    const CaptureFile& f = info.inputs[i];
    inputs.push_back(f.path + format_text(" (step %lld, %zu tensors)", static_cast<long long>(f.step), f.tensor_count) +
                     (f.note.empty() ? "" : "; " + f.note));
  }
  if (info.inputs.size() > kReportMaxInputsListed)
    inputs.push_back(format_text("... and %zu more (summary.json lists all)", info.inputs.size() - kReportMaxInputsListed));
  for (const auto& l : info.log_files) inputs.push_back("training log: " + l);
  for (const auto& n : info.log_notes) inputs.push_back("training log: " + n);
  list(m, inputs);
}

// What the run warned of and could not judge, and the field's advisories.
void render_warnings(Markup& m, const Page& p) {
  const Recommendation* rec = p.in.recommendation;
  std::vector<std::string> warnings = p.in.info->warnings;
  if (rec)
    for (const auto& l : rec->limits) warnings.push_back("not judged: " + l);
  for (const EvaluationRow& r : p.in.rows)
    if (replays_history(r.recipe.kind) && r.replay.mode == ReplayMode::kApproximate) {
      warnings.push_back("some delayed-scaling replays are approximate (no amax of every step): see metrics.csv's replay column");
      break;
    }
  m.element("h3", {}, format_text("Warnings and limits: %zu", warnings.size()));
  if (!warnings.empty()) list(m, warnings);
  if (rec && !rec->advisories.empty()) {
    m.element("h3", {}, "From the field");
    std::vector<std::string> adv;
    for (const Advisory& a : rec->advisories) adv.push_back(a.text + " [" + a.source + "]");
    list(m, adv);
  }
}

void render_summary(Markup& m, const Page& p) {
  const Recommendation* rec = p.in.recommendation;
  m.open("section", {{"id", "summary"}});
  m.element("h2", {}, "Summary");
  render_answer_box(m, p);
  if (rec && p.chosen) render_plan_grid(m, p);
  if (rec && p.chosen && rec->module_plan) render_module_tiers(m, p);
  if (rec && p.chosen) render_fallbacks_and_watch(m, p);
  render_run_facts(m, p);
  render_inputs(m, *p.in.info);
  render_warnings(m, p);
  if (p.in.answer) {
    m.element("h3", {}, "The answer as printed by run");
    m.element("pre", {}, render_answer(*p.in.answer));
  }
  m.close();
}

// ---- heatmaps -------------------------------------------------------------------------------------

enum class HeatMetric { kSqnr, kUnderflow, kSaturated };

// The worst value of the metric over the layer's steps for (role, copy, candidate); NaN if none
// was evaluated. A per-tensor recipe's one copy serves both orientations (find_for_use).
double worst_value(const Page& p, const std::string& layer, Role role, Orientation o, const RunCandidate& c,
                   HeatMetric metric) {
  double worst = kNaN;
  std::set<std::int64_t> steps;
  for (const EvaluationRow* r : p.index.rows_of(layer)) steps.insert(r->key.step);
  for (std::int64_t step : steps) {
    const EvaluationRow* r = p.index.find_for_use({step, layer, role}, c.recipe, c.format, o);
    if (r == nullptr || !r->applicability.ok) continue;
    const double v = metric == HeatMetric::kSqnr        ? r->metrics.sqnr_db
                     : metric == HeatMetric::kUnderflow ? r->metrics.underflow_pct
                                                        : r->metrics.saturated_pct;
    if (std::isnan(v)) continue;
    if (std::isnan(worst)) worst = v;
    else worst = metric == HeatMetric::kSqnr ? std::min(worst, v) : std::max(worst, v);
  }
  return worst;
}

void render_heatmaps(Markup& m, const Page& p, std::vector<std::string>* thinned) {
  m.open("section", {{"id", "heatmaps"}});
  m.element("h2", {}, "Heatmaps: layer x candidate");
  paragraph(m,
            "Each cell is the worst value over the captured steps of one operand copy of the layer under "
            "one candidate (recipe/format). Dark is worse in every map: low SQNR, high underflow, high "
            "saturation. Percentages are on a log scale from 0.0001 %, zeros drawn as the lowest. Hatched "
            "cells were not evaluated (the recipe does not fit the shape, or no such copy). The chosen "
            "candidate's cell is outlined in layers the plan keeps (partly) in FP8. Layer names link to "
            "their card.",
            "note");
  std::vector<std::string> rows = p.layers;
  if (rows.size() > kReportMaxHeatmapRows) {
    thinned->push_back(format_text("heatmaps show the first %zu of %zu layers (model order)", kReportMaxHeatmapRows,
                                   rows.size()));
    rows.resize(kReportMaxHeatmapRows);
  }
  std::vector<std::string> labels, links;
  std::vector<int> marked;
  for (const auto& l : rows) {
    const LayerDecision* d = p.decision(l);
    const bool bf16 = d != nullptr && d->precision == Precision::kBf16;
    labels.push_back(l + (bf16 ? " [BF16]" : ""));
    links.push_back("#" + p.anchor(l));
    marked.push_back(bf16 ? -1 : p.chosen_column);
  }
  std::vector<std::string> cols;
  for (const RunCandidate& c : p.candidates) cols.push_back(candidate_name(c));
  if (cols.empty()) {
    paragraph(m, "No FP8 candidate was evaluated.", "note");
    m.close();
    return;
  }
  // Folded: the plan and the answer come first; the maps are a click away (and not printed).
  m.open("details", {{"class", "fold"}});
  m.element("summary", {}, format_text("Show the heatmaps (%zu layers x %zu candidates)", rows.size(), cols.size()));
  struct MetricInfo {
    HeatMetric metric;
    const char* id;
    const char* name;
    const char* unit;
  };
  constexpr MetricInfo kMetrics[] = {{HeatMetric::kSqnr, "sqnr", "SQNR", "SQNR (dB)"},
                                     {HeatMetric::kUnderflow, "underflow", "underflow", "underflow (%)"},
                                     {HeatMetric::kSaturated, "saturated", "saturated", "saturated (%)"}};
  for (Role role : {Role::kActivation, Role::kWeight, Role::kGradient}) {
    for (Orientation o : {Orientation::kRowwise, Orientation::kColumnwise}) {
      // A columnwise map only where some recipe evaluates a separate columnwise copy of the role.
      bool any = false, separate = o == Orientation::kRowwise;
      for (const EvaluationRow& r : p.in.rows)
        if (r.key.role == role) {
          any = true;
          separate = separate || r.orientation == o;
        }
      if (!any || !separate) continue;
      const std::string what = std::string(role_name(role)) + ", " + orientation_name(o) + " copy";
      m.element("h3", {{"id", std::string("heat-") + role_name(role) + "-" + orientation_name(o)}}, what);
      for (const MetricInfo& mi : kMetrics) {
        svg::HeatmapSpec h;
        h.id = std::string("hm-") + role_name(role) + "-" + orientation_name(o) + "-" + mi.id;
        h.title = std::string(mi.name) + " of the " + what + " (worst over steps)";
        h.row_labels = labels;
        h.row_links = links;
        h.col_labels = cols;
        h.marked_col = marked;
        h.row_title = "layer (model order)";
        h.col_title = "candidate (recipe/format)";
        h.missing_label = "not evaluated";
        h.marked_label = "chosen candidate";
        for (const auto& l : rows)
          for (const RunCandidate& c : p.candidates) h.values.push_back(worst_value(p, l, role, o, c, mi.metric));
        h.show_values = h.values.size() <= 240;
        if (mi.metric == HeatMetric::kSqnr) {
          h.value_title = mi.unit;
          // An absolute scale, at least 0 to 40 dB: a map of well-scaled tensors (25-35 dB) stays
          // light however small its spread, instead of spanning the palette.
          const auto [lo, hi] = svg::value_range(h.values, svg::ScaleKind::kLinear, {0, 40});
          h.colour_lo = std::min(lo, 0.0);
          h.colour_hi = std::max(hi, 40.0);
        } else {
          // Percentages span decades: a log scale from 1e-4 % (zeros drawn at that end).
          h.colour_kind = svg::ScaleKind::kLog10;
          h.reverse = true;
          auto [lo, hi] = svg::value_range(h.values, svg::ScaleKind::kLog10, {1e-4, 1});
          // At least up to 10 %: a map whose worst is 0.01 % stays light (the policy's underflow
          // bound is 5 %, saturation's 0.05 %).
          h.colour_lo = std::max(1e-4, lo);
          h.colour_hi = std::max({hi, h.colour_lo * 10, 10.0});
          h.value_title = std::string(mi.unit) + ", log";
        }
        m.append(svg::heatmap(h));
      }
    }
  }
  m.close();  // details
  m.close();
}

// ---- layer cards ----------------------------------------------------------------------------------

// The worst of one metric over steps, with the step it came from.
struct Worst {
  double value = kNaN;
  std::int64_t step = 0;
  void take(double v, std::int64_t s, bool lower_is_worse) {
    if (std::isnan(v)) return;
    if (std::isnan(value) || (lower_is_worse ? v < value : v > value)) {
      value = v;
      step = s;
    }
  }
  std::string text(bool percent, bool with_step) const {
    if (std::isnan(value)) return "";
    return (percent ? pct(value) : num(value)) + (with_step ? " @" + std::to_string(step) : "");
  }
};

void render_operands(Markup& m, const Page& p, const std::string& layer, bool several_steps) {
  // Grouped by (role, copy, recipe, FP8 type): formats that give the tensor the same type share
  // one evaluation, listed once with both formats named.
  struct Group {
    Role role;
    Orientation orientation;
    std::string recipe;
    std::string type;
    std::vector<std::string> formats;
    Worst sqnr, rel_mse, underflow, energy, saturated, amax;
    std::string not_applicable;
    std::size_t first = 0;  // table order
  };
  std::map<std::tuple<Role, Orientation, std::string, std::string>, Group> groups;
  std::size_t order = 0;
  for (const EvaluationRow* r : p.index.rows_of(layer)) {
    const bool bf16 = !is_fp8(r->recipe.kind);
    const std::string type = bf16 ? "bf16" : fp8_name(r->fp8);
    auto [it, fresh] = groups.try_emplace({r->key.role, r->orientation, r->recipe.spec(), type});
    Group& g = it->second;
    if (fresh) {
      g.role = r->key.role;
      g.orientation = r->orientation;
      g.recipe = r->recipe.spec();
      g.type = type;
      g.first = order++;
    }
    const std::string f = training_format_name(r->format);
    if (std::find(g.formats.begin(), g.formats.end(), f) == g.formats.end()) g.formats.push_back(f);
    if (!r->applicability.ok) {
      g.not_applicable = r->applicability.reason;
      continue;
    }
    g.sqnr.take(r->metrics.sqnr_db, r->key.step, true);
    g.rel_mse.take(r->metrics.rel_mse, r->key.step, false);
    g.underflow.take(r->metrics.underflow_pct, r->key.step, false);
    g.energy.take(r->metrics.underflow_energy_pct, r->key.step, false);
    g.saturated.take(r->metrics.saturated_pct, r->key.step, false);
    g.amax.take(r->stats.amax, r->key.step, false);
  }
  std::vector<const Group*> sorted;
  for (const auto& [k, g] : groups) sorted.push_back(&g);
  std::sort(sorted.begin(), sorted.end(), [](const Group* a, const Group* b) {
    return std::tie(a->role, a->orientation, a->first) < std::tie(b->role, b->orientation, b->first);
  });
  std::vector<std::vector<Cell>> rows;
  for (const Group* g : sorted) {
    std::string formats;
    for (const auto& f : g->formats) formats += (formats.empty() ? "" : ", ") + f;
    rows.push_back({{role_name(g->role)}, {orientation_name(g->orientation)}, {g->recipe}, {formats}, {g->type},
                    {g->sqnr.text(false, several_steps), true}, {g->rel_mse.text(false, several_steps), true},
                    {g->underflow.text(true, several_steps), true}, {g->energy.text(true, false), true},
                    {g->saturated.text(true, several_steps), true}, {g->amax.text(false, several_steps), true},
                    {g->not_applicable.empty() ? "" : "not evaluated: " + g->not_applicable}});
  }
  m.element("h4", {}, "Operands under every recipe");
  if (several_steps) paragraph(m, "Worst value over the captured steps, '@' the step.", "note");
  table(m, {"role", "copy", "recipe", "format", "type", "SQNR (dB)", "rel. MSE", "underflow", "underflow energy",
            "saturated", "amax", "note"},
        rows);
}

void render_gemms(Markup& m, const Page& p, const std::string& layer, bool several_steps) {
  struct Group {
    Gemm gemm;
    std::string recipe, format, engine;
    Worst err, zeroed, flips, noise;
    std::string note;
  };
  std::vector<Group> groups;
  for (const GemmRow& g : p.in.gemms) {
    if (g.layer != layer) continue;
    const std::string recipe = g.recipe.spec(), format = training_format_name(g.format);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& x) {
      return x.gemm == g.gemm && x.recipe == recipe && x.format == format && x.engine == g.engine;
    });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{g.gemm, recipe, format, g.engine, {}, {}, {}, {}, ""});
    it->err.take(g.rel_fro_err, g.step, false);
    it->zeroed.take(g.zeroed_pct, g.step, false);
    it->flips.take(g.sign_flip_pct, g.step, false);
    it->noise.take(g.noise_sign_flip_pct, g.step, false);
    if (!g.note.empty()) it->note = g.note;
  }
  if (groups.empty()) return;
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.gemm < b.gemm; });
  std::vector<std::vector<Cell>> rows;
  for (const Group& g : groups)
    rows.push_back({{gemm_name(g.gemm)}, {g.recipe}, {g.format}, {g.engine}, {g.err.text(false, several_steps), true},
                    {g.zeroed.text(true, several_steps), true}, {g.flips.text(true, several_steps), true},
                    {g.gemm == Gemm::kWgrad ? g.noise.text(true, several_steps) : "", true}, {g.note}});
  m.element("h4", {}, "GEMM-output error (gemms.csv)");
  table(m, {"GEMM", "recipe", "format", "engine", "rel. Frobenius error", "zeroed", "sign flips", "noise sign flips", "note"},
        rows);
}

void render_decision(Markup& m, const Page& p, const std::string& layer) {
  const LayerDecision* d = p.decision(layer);
  if (d == nullptr) return;
  m.element("h4", {}, std::string("Decision: ") + precision_name(d->precision) +
                          (p.chosen ? " under " + candidate_name(p.chosen->candidate) : std::string()) +
                          (d->incomplete ? " (not all operands captured at every step)" : ""));
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> classes;
  for (const GemmDecision& g : d->gemms) {
    rows.push_back({{gemm_name(g.gemm)}, {g.judged ? precision_name(g.precision) : "not judged"}, {g.reason}});
    classes.push_back(g.precision == Precision::kBf16 ? "bf16" : "");
  }
  table(m, {"GEMM", "precision", "reason"}, rows, classes);
}

// The charts of one operand side by side: 560 px each fits two in the page's 1200 px.
constexpr double kOperandChartWidth = 560;

// What DelayedScaling casts step t with, as an amax: the window amax its replayed scale comes
// from (engine/delayed_replay.hpp, TE's rule: the window's maximum, the step before's scale where
// that is 0, inf or NaN) times 2^margin: the amax above which step t saturates. NaN at step 0 and
// where the replay has no amax (METRICS.md "scale (delayed)").
std::vector<double> delayed_threshold(const AmaxByStep& amax_by_step, const Recipe& recipe) {
  const double factor = std::ldexp(1.0, recipe.margin);
  std::vector<double> out;
  // The format only scales the scale: the amax it came from is the same in E4M3 and E5M2.
  const DelayedReplay replay(amax_by_step, recipe, Fp8Format::kE4M3);
  for (const auto& [step, amax] : amax_by_step) {
    const ReplayedScale rs = replay.at(step);
    out.push_back(rs.mode == ReplayMode::kUnavailable || std::isnan(rs.amax) ? kNaN : factor * rs.amax);
  }
  return out;
}

// A delayed recipe's spec without the options at their defaults' names: "delayed",
// "delayed:history=16:algo=most_recent" (the legend names the full spec).
std::string short_delayed_name(const std::string& spec) {
  std::string s = spec;
  for (const char* d : {":margin=0", ":algo=max", ":history=1024"})
    if (const auto i = s.find(d); i != std::string::npos) s.erase(i, std::string(d).size());
  return s;
}

// The amax trace of one operand: the logged amax, each delayed recipe's threshold, and the
// advice's fitted trend extended past the last step with the forecast saturation steps.
void render_amax_chart(Markup& m, const Page& p, const std::string& layer, Role role, std::vector<std::string>* notes) {
  const TrainingLog* log = p.in.training_log;
  const AmaxSeries* s = log ? log->find(layer, role) : nullptr;
  if (s == nullptr || s->amax_by_step.empty()) return;
  svg::LineChartSpec c;
  c.title = "amax of the " + std::string(role_name(role)) + " over the training log's steps";
  c.x_title = "training step";
  c.y_title = "amax (|x| max, log scale)";
  c.y_kind = svg::ScaleKind::kLog10;
  c.width = kOperandChartWidth;
  svg::Series amax{"amax (training log)", {}, {}, 0, ""};
  for (const auto& [step, a] : s->amax_by_step) {
    amax.x.push_back(static_cast<double>(step));
    amax.y.push_back(a);
  }
  c.series.push_back(amax);
  std::size_t colour = 1;
  std::map<std::string, std::size_t> recipe_colour;
  for (const Recipe& r : p.in.info->recipes) {
    if (!replays_history(r.kind) || recipe_colour.count(r.spec())) continue;
    recipe_colour[r.spec()] = colour;
    svg::Series t{r.spec() + (r.margin == 0 ? ": window max" : ": window max x 2^" + std::to_string(r.margin)), amax.x,
                  delayed_threshold(s->amax_by_step, r), colour, svg::series_dash(colour)};
    c.series.push_back(std::move(t));
    ++colour;
  }
  // The forecasts of this operand: one fitted trend, a saturation step per recipe (every FP8 type
  // of a recipe has the same one: the threshold is relative to the window max).
  const DelayedForecast* trend = nullptr;
  std::int64_t end = s->amax_by_step.rbegin()->first;
  std::set<std::pair<std::string, std::int64_t>> marked;
  std::set<std::string> reasons;
  for (const DelayedForecast& f : p.in.forecasts) {
    if (f.layer != layer || f.role != role) continue;
    if (reasons.insert(f.recipe).second) notes->push_back(f.recipe + " (" + fp8_name(f.fp8) + "): " + f.reason);
    if (!f.has_trend) continue;
    if (trend == nullptr) trend = &f;
    // The extension reaches the forecast step when it lies within one fitted span past now.
    const std::int64_t reach = f.step + std::max<std::int64_t>(f.steps_spanned, 10);
    end = std::max(end, std::min(reach, f.saturation_step.value_or(f.step + std::max<std::int64_t>(f.steps_spanned / 4, 5))));
  }
  if (trend != nullptr) {
    const auto line = [&](std::int64_t step) {
      return std::exp2(trend->fitted_log2_at_last +
                       trend->slope_log2_per_1000 / 1000.0 * static_cast<double>(step - trend->fit_last_step));
    };
    c.series.push_back({format_text("fitted trend (%+.2f binades / 1000 steps), extended", trend->slope_log2_per_1000),
                        {static_cast<double>(trend->fit_first_step), static_cast<double>(end)},
                        {line(trend->fit_first_step), line(end)},
                        6,
                        "7 4"});
    std::string beyond;  // the forecasts past the chart's end, or none
    for (const DelayedForecast& f : p.in.forecasts) {
      if (f.layer != layer || f.role != role || !f.has_trend) continue;
      if (!marked.insert({f.recipe, f.saturation_step.value_or(-1)}).second) continue;
      const std::string name = short_delayed_name(f.recipe);
      if (f.saturation_step && *f.saturation_step <= end)
        c.markers.push_back({static_cast<double>(*f.saturation_step), line(*f.saturation_step),
                             "forecast: " + name + " saturates @" + std::to_string(*f.saturation_step),
                             recipe_colour.count(f.recipe) ? recipe_colour[f.recipe] : 6});
      else if (f.saturation_step)
        beyond += (beyond.empty() ? "" : ", ") + name + " saturates @" + std::to_string(*f.saturation_step);
    }
    if (c.markers.empty())
      c.markers.push_back({static_cast<double>(end), line(end),
                           "forecast: " + (beyond.empty() ? std::string("no saturation") : beyond), 6});
  }
  m.append(svg::line_chart(c));
}

// The window of one scale factor (dequantisation factor scale_inv) in log2 |x|: from the element
// type's smallest subnormal to its max finite (FP8's, or NVFP4's E2M1), times scale_inv.
std::pair<double, double> scale_window(const Fp8Traits& t, double scale_inv) {
  const double l = std::log2(scale_inv);
  return {t.min_normal_exp - t.mantissa_bits + l, std::log2(static_cast<double>(t.max_finite)) + l};
}

// The window of one candidate's row in log2 |x|: per-tensor recipes the scale's; blocked ones
// from the smallest block scale's smallest subnormal to the largest block scale's max finite.
// Appends it to `windows` and returns it, with a note of its numbers.
std::pair<double, double> candidate_window(const EvaluationRow& r, const std::string& who, bool shaded,
                                           std::size_t colour, std::vector<svg::Window>* windows, std::string* note) {
  const Fp8Traits& t = element_traits(r.recipe.kind, r.fp8);
  const double lo = scale_window(t, r.metrics.scale_inv_min).first;
  const double hi = scale_window(t, r.metrics.scale_inv_max).second;
  const bool per_tensor = is_per_tensor(r.recipe.kind);
  windows->push_back({lo, hi, (per_tensor ? "window of " : "block scales' windows of ") + who, shaded, colour});
  *note = format_text("%s: representable |x| from 2^%.1f to 2^%.1f", who.c_str(), lo, hi) +
          (per_tensor ? std::string()
                      : format_text(" over all blocks (block scale_inv from 2^%.1f to 2^%.1f)",
                                    std::log2(r.metrics.scale_inv_min), std::log2(r.metrics.scale_inv_max))) +
          "; underflow " + pct(r.metrics.underflow_pct) + ", saturated " + pct(r.metrics.saturated_pct) + ".";
  return {lo, hi};
}

// The log2|x| histogram of one operand with the chosen candidate's window over it (bars coloured
// by it), and the window of the candidate that leaves the most elements outside.
void render_histogram(Markup& m, const Page& p, const std::string& layer, Role role, std::vector<std::string>* notes) {
  const OperandHistogram* oh = nullptr;
  for (const OperandHistogram& h : p.in.histograms)
    if (h.choice.key.layer == layer && h.choice.key.role == role) oh = &h;
  if (oh == nullptr) return;
  const HistogramChoice& choice = oh->choice;
  const Log2Histogram& h = oh->histogram;
  const std::int64_t step = choice.key.step;
  svg::HistogramSpec c;
  c.title = format_text("log2 |x| of the %s at step %lld", role_name(role), static_cast<long long>(step));
  c.x_title = "log2 |x| (binade)";
  c.y_title = "elements (log scale)";
  c.y_kind = svg::ScaleKind::kLog10;
  c.width = kOperandChartWidth;
  c.bar_label = "elements";
  // Binade edges, the outer two moved in to the smallest and largest |x| (so that no bar reaches
  // past the data into a window's outside).
  for (std::size_t i = 0; i <= h.counts.size(); ++i) c.edges.push_back(h.min_exp + static_cast<double>(i));
  for (std::int64_t n : h.counts) c.counts.push_back(static_cast<double>(n));
  if (h.counts.empty()) {
    c.edges = {0};
  } else {
    c.edges.front() = std::log2(static_cast<double>(h.amin_nonzero));
    c.edges.back() = std::max(c.edges[c.edges.size() - 2] + 0.05, std::log2(static_cast<double>(h.amax_finite)));
  }
  std::string why = "the latest captured step (no candidate leaves an element outside its window)";
  if (choice.worst)
    why = "the step where a candidate, " + candidate_name(*choice.worst) + ", leaves the most elements outside its window (" +
          pct(choice.outside_pct) + ")";
  std::vector<std::string> window_notes;
  const auto row_of = [&](const RunCandidate& rc) {
    const EvaluationRow* r = p.index.find({step, layer, role}, rc.recipe, rc.format, Orientation::kRowwise);
    return r != nullptr && r->applicability.ok && is_fp8(r->recipe.kind) ? r : nullptr;
  };
  if (p.chosen) {
    if (const EvaluationRow* r = row_of(p.chosen->candidate)) {
      std::string note;
      c.split = candidate_window(*r, "chosen " + candidate_name(p.chosen->candidate) + " (" + fp8_name(r->fp8) + ")",
                                 true, 5, &c.windows, &note);
      c.below_label = "below the chosen window (underflow)";
      c.above_label = "above the chosen window (saturates)";
      window_notes.push_back(note);
    } else {
      window_notes.push_back("no chosen window: " + candidate_name(p.chosen->candidate) + " was not evaluated on it.");
    }
  }
  if (choice.worst && (!p.chosen || !(*choice.worst == p.chosen->candidate)))
    if (const EvaluationRow* r = row_of(*choice.worst)) {
      std::string note;
      candidate_window(*r, candidate_name(*choice.worst) + " (" + fp8_name(r->fp8) + ")", false, 3, &c.windows, &note);
      window_notes.push_back(note);
    }
  std::string text = format_text("Histogram at step %lld, ", static_cast<long long>(step)) + why +
                     format_text("; %lld elements, of them %lld zeros, %lld NaN and %lld Inf not drawn.",
                                 static_cast<long long>(h.numel), static_cast<long long>(h.zeros),
                                 static_cast<long long>(h.nan_count), static_cast<long long>(h.inf_count));
  for (const auto& n : window_notes) text += " " + n;
  notes->push_back(text);
  m.append(svg::histogram(c));
}

// The statistics a training log gave this operand, over its logged steps: each candidate copy's
// underflow % and, where the log determines it, rel_mse.
void render_logged_charts(Markup& m, const Page& p, const std::string& layer, Role role,
                          std::vector<std::string>* notes) {
  std::map<std::string, svg::Series> underflow, rel_mse;  // by copy: "current", "mxfp8 (columnwise)"
  for (const LoggedSeries& ls : p.in.logged_series) {
    if (ls.layer != layer || ls.role != role) continue;
    const std::string copy = candidate_name({ls.recipe, ls.format}) +
                             (ls.orientation == Orientation::kColumnwise ? " (columnwise)" : "");
    svg::Series u{copy, {}, {}}, e{copy, {}, {}};
    for (std::size_t i = 0; i < ls.steps.size(); ++i) {
      const double step = static_cast<double>(ls.steps[i]);
      if (!std::isnan(ls.underflow_pct[i])) u.x.push_back(step), u.y.push_back(ls.underflow_pct[i]);
      if (!std::isnan(ls.rel_mse[i])) e.x.push_back(step), e.y.push_back(ls.rel_mse[i]);
    }
    if (!u.x.empty()) underflow.emplace(copy, std::move(u));
    if (!e.x.empty()) rel_mse.emplace(copy, std::move(e));
  }
  if (underflow.empty() && rel_mse.empty()) return;
  const auto chart = [&](std::map<std::string, svg::Series>& series, const std::string& title, const std::string& y,
                         svg::ScaleKind kind) {
    if (series.empty()) return;
    svg::LineChartSpec c;
    c.title = title;
    c.x_title = "training step";
    c.y_title = y;
    c.y_kind = kind;
    c.width = kOperandChartWidth;
    for (auto& [copy, s] : series) c.series.push_back(std::move(s));
    m.append(svg::line_chart(c));
  };
  chart(underflow, "underflow of the " + std::string(role_name(role)) + " over the logged steps",
        "underflow (% of elements)", svg::ScaleKind::kLinear);
  chart(rel_mse, "rel_mse of the " + std::string(role_name(role)) + " over the logged steps",
        "rel_mse (log scale)", svg::ScaleKind::kLog10);
  notes->push_back(format_text("Underflow and rel_mse from the training log (TE's LogFp8TensorStats; rel_mse over "
                               "LogTensorStats' std^2 + mean^2, where the log determines it), at every logged step "
                               "(past %zu steps, each point the worst of its run of steps); the decision above names "
                               "the step that decided it.",
                               kLoggedSeriesPoints));
}

void render_operand_views(Markup& m, const Page& p, const std::string& layer) {
  bool heading = false;
  const bool logged_charts = std::any_of(p.in.logged_series.begin(), p.in.logged_series.end(),
                                         [&](const LoggedSeries& s) { return s.layer == layer; });
  for (Role role : {Role::kActivation, Role::kWeight, Role::kGradient}) {
    Markup charts;
    std::vector<std::string> notes;
    render_amax_chart(charts, p, layer, role, &notes);
    render_logged_charts(charts, p, layer, role, &notes);
    render_histogram(charts, p, layer, role, &notes);
    if (charts.size() == 0) continue;
    if (!heading)
      m.element("h4", {},
                logged_charts ? "Amax trace, logged statistics and magnitudes per operand" : "Amax trace and magnitudes per operand");
    heading = true;
    m.element("h5", {}, role_name(role));
    m.open("div", {{"class", "plots"}}).append(charts).close();
    if (!notes.empty()) {
      m.open("ul", {{"class", "note"}});
      for (const auto& n : notes) m.element("li", {}, n);
      m.close();
    }
  }
}

void render_cards(Markup& m, const Page& p, std::vector<std::string>* thinned) {
  m.open("section", {{"id", "layers"}});
  m.element("h2", {}, "Layers");
  std::set<std::int64_t> steps;
  for (const EvaluationRow& r : p.in.rows) steps.insert(r.key.step);
  const bool several = steps.size() > 1;
  const std::size_t start = m.size();
  std::size_t shown = 0;
  for (const std::string& layer : p.layers) {
    if (m.size() - start > kReportCardBytes) break;
    m.open("div", {{"class", "card"}, {"id", p.anchor(layer)}});
    m.element("h3", {}, layer);
    render_decision(m, p, layer);
    // The decision open; its evidence (every copy under every candidate, the GEMM errors, the
    // charts) folded: 17 layers printed to 111 pages with all of it open (issue 37).
    m.open("details", {{"class", "fold"}});
    m.element("summary", {}, "Show the evidence: operand copies, GEMM errors, amax traces and histograms");
    render_operands(m, p, layer, several);
    render_gemms(m, p, layer, several);
    render_operand_views(m, p, layer);
    m.close();
    m.close();
    ++shown;
  }
  if (shown < p.layers.size()) {
    const std::string t = format_text("layer cards: the first %zu of %zu layers (the page's size limit); "
                                      "metrics.csv and gemms.csv have every layer",
                                      shown, p.layers.size());
    thinned->push_back(t);
    paragraph(m, t, "note");
  }
  m.close();
}

}  // namespace

Artifact render_report_html(const ReportInputs& in) {
  FP8A_CHECK(in.info != nullptr, "render_report_html: RunInfo is required");
  const Page page(in);
  html::PageHead head;
  head.title = "fp8-advisor report";
  head.subtitle = "fp8-advisor " + in.info->version + " (" + in.info->git_revision + "), backend " + in.info->backend +
                  ". One self-contained page: no script, nothing loaded from elsewhere.";
  head.nav = {{"summary", "Summary"}, {"heatmaps", "Heatmaps"}, {"layers", "Layers"}};
  Markup body;
  render_summary(body, page);
  render_heatmaps(body, page, &head.thinned);
  render_cards(body, page, &head.thinned);
  return html::document("report.html", head, body);
}

}  // namespace fp8a

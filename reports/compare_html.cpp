#include "reports/compare_html.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "core/text.hpp"
#include "reports/html_page.hpp"
#include "reports/svg_plot.hpp"

namespace fp8a {

namespace {

using html::Cell;
using svg::Markup;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string steps_text(const std::vector<std::int64_t>& steps) {
  std::string s;
  for (std::int64_t v : steps) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s.empty() ? "none" : s;
}

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// A heatmap column inside one training format's map: a recipe and an orientation.
using Column = std::pair<std::string, std::string>;  // recipe, orientation

std::string column_label(const Column& c) { return c.first + (c.second == "columnwise" ? " col" : ""); }

// The format as an id fragment: letters, digits, '-' and '_' kept, anything else '_'.
std::string id_part(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return out;
}

// Narrower than the run report's cells, so that a format's 13 columns of the default recipes
// stay under ~1,100 px next to long layer names (the page is at most 1,200 px wide).
constexpr double kCompareCellWidth = 50;

void render_inputs(Markup& m, const CompareResult& r, const CompareInfo& info) {
  m.open("section", {{"id", "inputs"}});
  m.element("h2", {}, "Inputs");
  html::table(m, {"side", "path", "kind", "rows", "steps"},
              {{{"base"}, {info.base_path}, {info.base_kind}, {std::to_string(r.base_rows), true}, {steps_text(r.base_steps)}},
               {{"cand"}, {info.cand_path}, {info.cand_kind}, {std::to_string(r.cand_rows), true}, {steps_text(r.cand_steps)}}});
  const std::size_t nearest = r.matches.size() - r.same_step_matches;
  html::table(m, {"", ""},
              {{{"matched"}, {std::to_string(r.matches.size()), true}},
               {{"  at the same step"}, {std::to_string(r.same_step_matches), true}},
               {{"  at the nearest step"}, {std::to_string(nearest), true}},
               {{"unmatched base rows (groups)"},
                {format_text("%zu (%zu)", r.base_unmatched_rows, r.base_only.size()), true}},
               {{"unmatched cand rows (groups)"},
                {format_text("%zu (%zu)", r.cand_unmatched_rows, r.cand_only.size()), true}},
               {{"fp8-advisor"}, {info.version + " (" + info.git_revision + ")"}},
               {{"backend"}, {info.backend.empty() ? "none (both sides read from run folders)"
                                                   : info.backend + " (" + info.device + ")"}},
               {{"command"}, {joined(info.command_line, " ")}}});
  if (!r.matches.empty()) {
    const CompareMatch& t = r.matches.front();
    m.open("div", {{"class", "answer"}});
    m.element("p", {}, format_text("%s: %s %s under %s/%s (%s), score %s, driven by %s.",
                                   t.worse ? "Got worse the most" : "Nothing got worse; the largest change",
                                   visible_text(t.base.key.layer).c_str(), role_name(t.base.key.role), t.base.recipe.c_str(),
                                   t.base.format.c_str(), t.base.orientation.c_str(), html::number(t.score).c_str(),
                                   kDivergenceTermNames[t.driver]));
    m.element("p", {}, "underflow " + html::number(t.base.underflow_pct) + " % -> " +
                           html::number(t.cand.underflow_pct) + " %, saturated " + html::number(t.base.saturated_pct) +
                           " % -> " + html::number(t.cand.saturated_pct) + " %, SQNR " + html::number(t.base.sqnr_db) +
                           " -> " + html::number(t.cand.sqnr_db) + " dB, MSE " + html::number(t.base.mse) + " -> " +
                           html::number(t.cand.mse) + ", amax " + html::number(t.base.amax) + " -> " +
                           html::number(t.cand.amax) + " (base -> cand; " + t.step_note + ")");
    m.close();
  }
  m.close();
}

void render_ranking(Markup& m, const CompareResult& r, std::size_t top) {
  const RankedTable t = compare_ranked_table(r, top);
  m.open("section", {{"id", "ranking"}});
  m.element("h2", {}, format_text("Largest divergences, what got worse first: the top %zu of %zu matches",
                                  t.rows.size(), r.matches.size()));
  html::paragraph(m,
                  "score = the largest of |log10(cand/base)| of rel_mse (= |Δ SQNR| / 10 dB) and |Δ| / 10 "
                  "percentage points of underflow and of saturation (METRICS.md \"Divergence score\"); driver = "
                  "the term that sets it; change = whether cand is worse on it (worse rows come first). amax: its "
                  "growth in binades. Values are base -> cand; compare.csv has every match.",
                  "note");
  std::vector<std::vector<Cell>> rows;
  std::vector<std::string> classes;
  for (const auto& row : t.rows) {
    std::vector<Cell> cells;
    for (std::size_t c = 0; c < row.size(); ++c) cells.push_back({row[c], !t.left[c]});
    rows.push_back(std::move(cells));
    classes.push_back(rows.size() == 1 ? "top" : "");
  }
  html::table(m, t.head, rows, classes);
  m.close();
}

void render_heatmaps(Markup& m, const CompareResult& r, std::vector<std::string>* thinned) {
  m.open("section", {{"id", "heatmaps"}});
  m.element("h2", {}, "Heatmaps: layer x recipe, one map per training format");
  html::paragraph(m,
                  "One map per tensor role, training format and metric. Each cell is the group's (layer, tensor, "
                  "recipe, format, orientation) highest-scoring match over the steps; Δ is cand - base. Dark is "
                  "worse in every map: a high score, more underflow, a lower SQNR. Hatched cells have no match: "
                  "one side lacks the group, or a value is not finite. \"col\" marks a columnwise copy.",
                  "note");
  for (Role role : {Role::kActivation, Role::kWeight, Role::kGradient}) {
    // The group's first match in rank order is its highest-scoring one.
    std::map<std::tuple<std::string, std::string, Column>, const CompareMatch*> best;  // layer, format, column
    std::set<std::string> layer_set;
    std::map<std::string, std::set<Column>> column_sets;  // by format
    for (const CompareMatch& x : r.matches) {
      if (x.base.key.role != role) continue;
      const Column c{x.base.recipe, x.base.orientation};
      best.try_emplace({x.base.key.layer, x.base.format, c}, &x);
      layer_set.insert(x.base.key.layer);
      column_sets[x.base.format].insert(c);
    }
    for (const auto* side : {&r.base_only, &r.cand_only})
      for (const CompareGroup& g : *side)
        if (g.role == role) {
          layer_set.insert(g.layer);
          column_sets[g.format].insert({g.recipe, g.orientation});
        }
    if (best.empty()) continue;
    // Every format's maps have the same rows, so that a layer sits at the same height in each.
    std::vector<std::string> layers = html::model_order({layer_set.begin(), layer_set.end()});
    const std::string what = role_name(role);
    if (layers.size() > kCompareMaxHeatmapRows) {
      thinned->push_back(format_text("%s heatmaps: the first %zu of %zu layers (model order)", what.c_str(),
                                     kCompareMaxHeatmapRows, layers.size()));
      layers.resize(kCompareMaxHeatmapRows);
    }
    m.element("h3", {{"id", "heat-" + what}}, "The " + what);
    for (const auto& [format, column_set] : column_sets) {
      std::vector<Column> columns(column_set.begin(), column_set.end());
      if (columns.size() > kCompareMaxHeatmapCols) {
        thinned->push_back(format_text("%s heatmaps, format %s: the first %zu of %zu recipe columns", what.c_str(),
                                       format.c_str(), kCompareMaxHeatmapCols, columns.size()));
        columns.resize(kCompareMaxHeatmapCols);
      }
      std::vector<std::string> col_labels;
      for (const Column& c : columns) col_labels.push_back(column_label(c));
      if (column_sets.size() > 1) m.element("h4", {}, "The " + what + ", format " + format);

      struct MetricInfo {
        const char* id;
        const char* name;
        const char* unit;
        bool reverse;  // high values dark
      };
      constexpr MetricInfo kMetrics[] = {{"score", "Divergence score", "score", true},
                                         {"underflow", "Δ underflow", "Δ underflow (pp)", true},
                                         {"sqnr", "Δ SQNR", "Δ SQNR (dB)", false}};
      for (const MetricInfo& mi : kMetrics) {
        const std::string metric = mi.id;
        svg::HeatmapSpec h;
        h.id = "cmp-" + what + "-" + id_part(format) + "-" + metric;
        h.title = metric == "score" ? "Divergence score of the " + what + ", " + format + " (highest over steps)"
                                    : std::string(mi.name) + " of the " + what + ", " + format +
                                          ", cand - base (highest-scoring match per group)";
        h.row_labels = layers;
        h.col_labels = col_labels;
        h.row_title = "layer (model order)";
        h.col_title = "recipe (format " + format + ")";
        h.value_title = mi.unit;
        h.missing_label = "no match";
        h.marked_label = "rank 1";
        h.reverse = mi.reverse;
        h.cell_width = kCompareCellWidth;
        for (std::size_t li = 0; li < layers.size(); ++li) {
          int marked = -1;
          for (std::size_t ci = 0; ci < columns.size(); ++ci) {
            const auto it = best.find({layers[li], format, columns[ci]});
            const CompareMatch* x = it == best.end() ? nullptr : it->second;
            if (x != nullptr && x->rank == 1) marked = static_cast<int>(ci);
            const double v = x == nullptr            ? kNaN
                             : metric == "score"     ? x->score
                             : metric == "underflow" ? x->cand.underflow_pct - x->base.underflow_pct
                                                     : x->cand.sqnr_db - x->base.sqnr_db;
            h.values.push_back(v);
          }
          h.marked_col.push_back(marked);
        }
        h.show_values = h.values.size() <= 240;
        auto [lo, hi] = svg::value_range(h.values, svg::ScaleKind::kLinear, {0, 1});
        h.colour_lo = std::min(lo, 0.0);  // zero, "no change", always on the scale
        h.colour_hi = std::max(hi, metric == "score" ? 1.0 : 0.0);
        if (h.colour_hi <= h.colour_lo) h.colour_hi = h.colour_lo + 1;
        m.append(svg::heatmap(h));
      }
    }
  }
  m.close();
}

void render_distribution(Markup& m, const CompareResult& r, std::size_t top) {
  m.open("section", {{"id", "distribution"}});
  m.element("h2", {}, "Distribution of the scores");
  std::vector<double> scores;
  std::size_t non_finite = 0;
  for (const CompareMatch& x : r.matches) {
    if (std::isfinite(x.score)) scores.push_back(x.score);
    else ++non_finite;
  }
  double hi = 0;
  for (double s : scores) hi = std::max(hi, s);
  if (!(hi > 0)) hi = 1;
  svg::HistogramSpec h;
  h.title = format_text("Divergence score of every match (%zu)", r.matches.size());
  h.x_title = "divergence score";
  h.y_title = "matches";
  h.width = 640;
  h.height = 240;
  for (std::size_t i = 0; i <= kCompareHistogramBins; ++i)
    h.edges.push_back(hi * static_cast<double>(i) / static_cast<double>(kCompareHistogramBins));
  h.counts.assign(kCompareHistogramBins, 0);
  for (double s : scores) {
    const auto bin = static_cast<std::size_t>(s / hi * static_cast<double>(kCompareHistogramBins));
    h.counts[std::min(bin, kCompareHistogramBins - 1)] += 1;
  }
  // The ranked table's range: from its last row's score to the largest.
  const std::size_t shown = std::min(top, r.matches.size());
  if (shown > 0 && shown < r.matches.size() && std::isfinite(r.matches[shown - 1].score))
    h.windows.push_back({r.matches[shown - 1].score, hi, format_text("ranked table (top %zu)", shown)});
  m.append(svg::histogram(h));
  if (non_finite > 0)
    html::paragraph(m, format_text("%zu match(es) with a non-finite score (one side non-finite) are not drawn.", non_finite),
                    "note");
  m.close();
}

void render_one_side(Markup& m, const CompareResult& r, std::vector<std::string>* thinned) {
  m.open("section", {{"id", "one-side"}});
  m.element("h2", {}, "Only one side");
  for (const auto* side : {&r.base_only, &r.cand_only}) {
    const char* name = side == &r.base_only ? "base" : "cand";
    m.element("h3", {}, format_text("Only in %s: %zu group(s)", name, side->size()));
    if (side->empty()) continue;
    std::vector<std::vector<Cell>> rows;
    for (const CompareGroup& g : *side) {
      if (rows.size() == kCompareMaxGroupsListed) {
        thinned->push_back(format_text("only in %s: the first %zu of %zu groups (compare.md lists all)", name,
                                       kCompareMaxGroupsListed, side->size()));
        break;
      }
      rows.push_back({{g.layer}, {role_name(g.role)}, {g.recipe}, {g.format}, {g.orientation}});
    }
    html::table(m, {"layer", "tensor", "recipe", "format", "orientation"}, rows);
  }
  m.close();
}

}  // namespace

Artifact render_compare_html(const CompareResult& result, const CompareInfo& info, std::size_t top) {
  html::PageHead head;
  head.title = "fp8-advisor compare";
  head.subtitle = "base " + info.base_path + " against cand " + info.cand_path + "; fp8-advisor " + info.version +
                  " (" + info.git_revision + "). One self-contained page: no script, nothing loaded from elsewhere.";
  head.nav = {{"inputs", "Inputs"},
              {"ranking", "Ranking"},
              {"heatmaps", "Heatmaps"},
              {"distribution", "Distribution"},
              {"one-side", "Only one side"}};
  Markup body;
  render_inputs(body, result, info);
  render_ranking(body, result, top);
  render_heatmaps(body, result, &head.thinned);
  render_distribution(body, result, top);
  render_one_side(body, result, &head.thinned);
  return html::document("compare.html", head, body);
}

}  // namespace fp8a

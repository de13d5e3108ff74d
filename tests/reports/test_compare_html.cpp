// compare.html from hand-built comparisons, golden-free: the sections, the ranked table with
// NVIDIA's FC2 example on top, every chart with its title, axis titles and legend, layers in
// model order, the one-side groups hatched and listed, nothing that refers outside the file,
// well-formed markup. check_html.py --compare runs a real parser on a real comparison.
#include <doctest/doctest.h>

#include "reports/compare_fixture.hpp"
#include "reports/compare_html.hpp"
#include "reports/markup_check.hpp"

using namespace fp8a;
using fp8a::test::chart_error;
using fp8a::test::count_of;
using fp8a::test::page_error;
using fp8a::test::svgs_of;

namespace {

void check_self_contained(const std::string& s) {
  CHECK(page_error(s) == "");
  for (const std::string& c : svgs_of(s)) CHECK(chart_error(c) == "");
}

}  // namespace

TEST_CASE("compare.html: sections, NVIDIA's example on top, heatmaps, distribution, one-side groups") {
  const CompareResult r = testing::nvidia_comparison();
  const Artifact a = render_compare_html(r, testing::fixed_compare_info(), 50);
  const std::string& s = a.contents;
  CHECK(a.name == "compare.html");
  CHECK(a.note.ends_with(" kB"));
  check_self_contained(s);
  for (const char* id : {"inputs", "ranking", "heatmaps", "distribution", "one-side"}) {
    CHECK(s.find(std::string("<section id=\"") + id + "\">") != std::string::npos);
    CHECK(s.find(std::string("<a href=\"#") + id + "\">") != std::string::npos);
  }
  // Inputs: both sides, the counts, the largest divergence in words.
  CHECK(s.find("<td>good</td><td>capture</td><td class=\"num\">9</td><td>100, 200</td>") != std::string::npos);
  CHECK(s.find("<td>bad</td><td>run folder</td><td class=\"num\">9</td><td>100, 250</td>") != std::string::npos);
  CHECK(s.find("<td>matched</td><td class=\"num\">8</td>") != std::string::npos);
  CHECK(s.find("<td>  at the same step</td><td class=\"num\">7</td>") != std::string::npos);
  CHECK(s.find("<td>  at the nearest step</td><td class=\"num\">1</td>") != std::string::npos);
  CHECK(s.find("<td>unmatched base rows (groups)</td><td class=\"num\">1 (1)</td>") != std::string::npos);
  CHECK(s.find("Got worse the most: layers.3.mlp.linear_fc2 activation under current/hybrid (rowwise), score 7.9, "
               "driven by underflow_pct.") != std::string::npos);
  CHECK(s.find("underflow 1 % -&gt; 80 %, saturated 0 % -&gt; 0 %, SQNR 30 -&gt; 20 dB, MSE 0.01 -&gt; 1e+03") !=
        std::string::npos);
  // Ranking: every match, rank 1 (the FC2 input) highlighted and first.
  CHECK(s.find("Largest divergences, what got worse first: the top 8 of 8 matches") != std::string::npos);
  const std::size_t ranking = s.find("<section id=\"ranking\">");
  const std::size_t first_row = s.find("<tbody><tr", ranking);
  CHECK(s.find("<tbody><tr class=\"top\"><td class=\"num\">1</td><td>worse</td><td class=\"num\">7.900</td>",
               ranking) == first_row);
  CHECK(s.find("<td>layers.3.mlp.linear_fc2</td><td>activation</td>", first_row) <
        s.find("</tr>", first_row));
  CHECK(count_of(s, "<tr class=\"top\">") == 1);
  CHECK(s.find("<td class=\"num\">1.00 -&gt; 80.00</td>") == std::string::npos);  // cells as compare.md's
  CHECK(s.find("<td class=\"num\">1.000 -&gt; 80.000</td>") != std::string::npos);
  // Heatmaps: activation, weight, gradient x score, Δ underflow, Δ SQNR (one format, so one map
  // each and no per-format heading); then the histogram.
  const auto charts = svgs_of(s);
  REQUIRE(charts.size() == 3 * 3 + 1);
  CHECK(count_of(s, "<h4>") == 0);
  CHECK(charts[0].find("<title>Divergence score of the activation, hybrid (highest over steps)</title>") !=
        std::string::npos);
  CHECK(charts[1].find("<title>Δ underflow of the activation, hybrid, cand - base") != std::string::npos);
  CHECK(charts[2].find("<title>Δ SQNR of the activation, hybrid, cand - base") != std::string::npos);
  CHECK(charts[0].find(">recipe (format hybrid)</text>") != std::string::npos);
  CHECK(charts[0].find("<pattern id=\"cmp-activation-hybrid-score-missing\"") != std::string::npos);
  // Model order (layers.0, layers.3, layers.10) and the columns, columnwise copies marked.
  CHECK(charts[0].find(">layers.0.self_attention.linear_qkv</text>") < charts[0].find(">layers.3.mlp.linear_fc2</text>"));
  CHECK(charts[0].find(">layers.3.mlp.linear_fc2</text>") < charts[0].find(">layers.10.mlp.linear_fc1</text>"));
  CHECK(charts[0].find(">mxfp8 col</text>") != std::string::npos);
  CHECK(charts[0].find("/hybrid</text>") == std::string::npos);  // the format is in the title, not the labels
  CHECK(charts[0].find(">7.9</text>") != std::string::npos);  // the FC2 cell's score
  CHECK(charts[1].find(">79</text>") != std::string::npos);   // its Δ underflow, pp
  CHECK(charts[2].find(">-10</text>") != std::string::npos);  // its Δ SQNR, dB
  // Rank 1 outlined in each activation map (and the legend key in all nine).
  CHECK(count_of(charts[0], "stroke=\"#000\" stroke-width=\"1.5\"") == 2);
  CHECK(count_of(charts[3], "stroke=\"#000\" stroke-width=\"1.5\"") == 1);
  // Hatched: the activation maps' empty cells (3 layers x 3 columns, 5 matched); the gradient's
  // 2 x 2 has one match (fc2 current): fc1's cand-only block copy is no match either.
  CHECK(count_of(charts[0], "class=\"missing\"") == 4);
  CHECK(count_of(charts[6], "class=\"missing\"") == 3);
  CHECK(charts[9].find("<title>Divergence score of every match (8)</title>") != std::string::npos);
  CHECK(charts[9].find("ranked table") == std::string::npos);  // every match is in the table
  // Only one side.
  CHECK(s.find("<h3>Only in base: 1 group(s)</h3>") != std::string::npos);
  CHECK(s.find("<td>layers.11.mlp.linear_fc1</td><td>weight</td><td>current</td>") != std::string::npos);
  CHECK(s.find("<td>layers.10.mlp.linear_fc1</td><td>gradient</td><td>block</td><td>hybrid</td><td>columnwise</td>") !=
        std::string::npos);
}

TEST_CASE("compare.html: the top 50 of many, a non-finite score, escaping") {
  std::vector<MetricsRecord> base, cand;
  for (int l = 0; l < 60; ++l) {
    const std::string layer = "layers." + std::to_string(l) + ".mlp.linear_fc1";
    base.push_back(testing::compare_row(1, layer, Role::kActivation, "current", "rowwise", 0, 1, 1e-3));
    cand.push_back(testing::compare_row(1, layer, Role::kActivation, "current", "rowwise", l, 1, 1e-3));
  }
  const std::string s = render_compare_html(compare_records(base, cand), testing::fixed_compare_info(), 50).contents;
  check_self_contained(s);
  CHECK(s.find("Largest divergences, what got worse first: the top 50 of 60 matches") != std::string::npos);
  const std::size_t ranking = s.find("<section id=\"ranking\">");
  const std::string table = s.substr(ranking, s.find("</section>", ranking) - ranking);
  CHECK(count_of(table, "<tr") == 1 + 50);
  CHECK(table.find("<td>layers.59.mlp.linear_fc1</td>") < table.find("<td>layers.58.mlp.linear_fc1</td>"));
  CHECK(s.find(">ranked table (top 50)</text>") != std::string::npos);

  CompareInfo info = testing::fixed_compare_info();
  info.backend = "";
  const std::string e = render_compare_html(testing::escaping_comparison(), info, 50).contents;
  check_self_contained(e);
  CHECK(e.find("blocks.0.&lt;attn&gt;|&quot;q,k&quot;&amp;v") != std::string::npos);
  CHECK(e.find("<td>none (both sides read from run folders)</td>") != std::string::npos);
  CHECK(e.find("1 match(es) with a non-finite score (one side non-finite) are not drawn.") != std::string::npos);
  CHECK(e.find("<td class=\"num\">inf</td>") != std::string::npos);
  CHECK(e.find("<h3>Only in cand: 1 group(s)</h3>") != std::string::npos);
}

TEST_CASE("compare.html: one map per training format, rank 1 outlined only in its format's map") {
  std::vector<MetricsRecord> base, cand;
  const std::vector<std::string> recipes = {"current", "delayed:history=16:algo=most_recent:margin=0", "mxfp8"};
  for (const char* format : {"e4m3", "hybrid"})
    for (const std::string& recipe : recipes)
      for (int l = 0; l < 2; ++l) {
        const std::string layer = "layers." + std::to_string(l) + ".mlp.linear_fc1";
        // The worst: layers.1 under current/e4m3 (80 % underflow in cand).
        const double under = std::string(format) == "e4m3" && recipe == "current" && l == 1 ? 80 : 1;
        MetricsRecord b = testing::compare_row(1, layer, Role::kActivation, recipe, "rowwise", 1, 1e-2, 1e-3);
        MetricsRecord c = testing::compare_row(1, layer, Role::kActivation, recipe, "rowwise", under, 1e-2, 1e-3);
        b.format = c.format = format;
        base.push_back(b);
        cand.push_back(c);
      }
  const std::string s = render_compare_html(compare_records(base, cand), testing::fixed_compare_info(), 50).contents;
  check_self_contained(s);
  CHECK(s.find("<h4>The activation, format e4m3</h4>") < s.find("<h4>The activation, format hybrid</h4>"));
  const auto charts = svgs_of(s);
  REQUIRE(charts.size() == 2 * 3 + 1);  // e4m3's three maps, hybrid's three, the histogram
  CHECK(charts[0].find("<title>Divergence score of the activation, e4m3 (highest over steps)</title>") !=
        std::string::npos);
  CHECK(charts[3].find("<title>Divergence score of the activation, hybrid (highest over steps)</title>") !=
        std::string::npos);
  for (std::size_t i = 0; i < 6; ++i) {
    // Three recipe columns, labelled by recipe alone; 2 x 3 cells, none missing.
    CHECK(count_of(charts[i], "transform=\"rotate(-35 ") == 3);
    CHECK(charts[i].find(">delayed:history=16:algo=most_recent:margin=0</text>") != std::string::npos);
    CHECK(count_of(charts[i], "class=\"missing\"") == 0);
    CHECK(count_of(charts[i], "width=\"50\" height=\"15\"") == 6);  // the compare page's narrower cells
    // The rank-1 cell's outline in e4m3's maps only (every map has the legend's key).
    CHECK(count_of(charts[i], "stroke=\"#000\" stroke-width=\"1.5\"") == (i < 3 ? 2 : 1));
  }
  CHECK(charts[1].find(">79</text>") != std::string::npos);  // e4m3's Δ underflow of layers.1/current
  CHECK(charts[4].find(">79</text>") == std::string::npos);
}

// The plotting module on its own: escaping, value-to-pixel mapping, tick choice, the colour scale,
// and that every chart is well-formed markup with its axes, axis titles and legend.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "reports/markup_check.hpp"
#include "reports/svg_plot.hpp"

using namespace fp8a;
using namespace fp8a::svg;
using fp8a::test::count_of;
using fp8a::test::markup_error;

namespace {
// Pixel positions are exact in double for these round numbers; 1e-9 only absorbs log10 rounding.
constexpr double kPxTolerance = 1e-9;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> tick_values(const std::vector<Tick>& ticks) {
  std::vector<double> v;
  for (const Tick& t : ticks) v.push_back(t.value);
  return v;
}
std::vector<std::string> tick_labels(const std::vector<Tick>& ticks) {
  std::vector<std::string> v;
  for (const Tick& t : ticks) v.push_back(t.label);
  return v;
}
// The markup of the first <g class="cls"> up to its first </g> (the groups read here hold no
// nested group); "" when there is none.
std::string group_of(const std::string& svg, const std::string& cls) {
  const std::size_t a = svg.find("<g class=\"" + cls + "\"");
  if (a == std::string::npos) return "";
  return svg.substr(a, svg.find("</g>", a) + 4 - a);
}
// The values of attribute `name` on every element of `markup`, in order.
std::vector<std::string> attr_values(const std::string& markup, const std::string& name) {
  std::vector<std::string> v;
  const std::string key = " " + name + "=\"";
  for (std::size_t p = markup.find(key); p != std::string::npos; p = markup.find(key, p + 1)) {
    const std::size_t b = p + key.size();
    v.push_back(markup.substr(b, markup.find('"', b) - b));
  }
  return v;
}
}  // namespace

TEST_CASE("escape: the five XML specials, nothing else") {
  CHECK(escape("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  CHECK(escape("layers.3.mlp × µ") == "layers.3.mlp × µ");
  Markup m;
  m.open("g", {{"class", "x\"><script>"}}).element("text", {}, "</g><script>alert(1)</script>").close();
  CHECK(m.str().find("<script") == std::string::npos);
  CHECK(markup_error(m.str()) == "");
}

TEST_CASE("Markup: elements closed in order; an open element is an invariant failure") {
  Markup m;
  m.open("svg", {{"width", "10"}}).leaf("rect", {{"x", "1"}}).element("text", {{"x", "2"}}, "a").close();
  CHECK(m.str() == "<svg width=\"10\"><rect x=\"1\"/><text x=\"2\">a</text></svg>");
  Markup open;
  open.open("g");
  CHECK_THROWS(open.str());
  Markup none;
  CHECK_THROWS(none.close());
}

TEST_CASE("px: one decimal, no trailing zero, no -0") {
  CHECK(px(12) == "12");
  CHECK(px(12.25) == "12.3");
  CHECK(px(-0.01) == "0");
  CHECK(px(kNaN) == "0");
}

TEST_CASE("Scale: linear and log10 value -> pixel") {
  const Scale lin{ScaleKind::kLinear, 0, 100, 50, 250};
  CHECK(lin.to_px(0) == doctest::Approx(50).epsilon(kPxTolerance));
  CHECK(lin.to_px(25) == doctest::Approx(100).epsilon(kPxTolerance));
  CHECK(lin.to_px(100) == doctest::Approx(250).epsilon(kPxTolerance));
  const Scale up{ScaleKind::kLinear, -10, 10, 200, 0};  // a y axis: larger values higher up
  CHECK(up.to_px(0) == doctest::Approx(100).epsilon(kPxTolerance));
  CHECK(up.to_px(10) == doctest::Approx(0).epsilon(kPxTolerance));
  const Scale log{ScaleKind::kLog10, 1e-3, 1e3, 0, 600};
  CHECK(log.to_px(1) == doctest::Approx(300).epsilon(kPxTolerance));
  CHECK(log.to_px(10) == doctest::Approx(400).epsilon(kPxTolerance));
  CHECK(log.to_px(0) == 0);  // non-positive values sit at the low end
  CHECK(log.to_px(-5) == 0);
}

TEST_CASE("ticks: 1-2-5 steps inside the range; decades on log scales") {
  CHECK(tick_values(linear_ticks(0, 100, 5)) == std::vector<double>{0, 20, 40, 60, 80, 100});
  CHECK(tick_labels(linear_ticks(0, 1, 5)) == std::vector<std::string>{"0", "0.2", "0.4", "0.6", "0.8", "1"});
  CHECK(tick_labels(linear_ticks(-3, 47, 5)) == std::vector<std::string>{"0", "10", "20", "30", "40"});
  CHECK(tick_labels(linear_ticks(12.5, 38.1, 5)) == std::vector<std::string>{"15", "20", "25", "30", "35"});
  CHECK(linear_ticks(1, 1, 5).empty());
  CHECK(tick_labels(log10_ticks(1e-3, 100, 6)) ==
        std::vector<std::string>{"0.001", "0.01", "0.1", "1", "10", "100"});
  // Many decades: every n-th, at most about `target`.
  CHECK(tick_labels(log10_ticks(1e-12, 1e6, 6)) ==
        std::vector<std::string>{"1e-12", "1e-08", "0.0001", "1", "1e+04"});
  // Less than a decade: the ends.
  CHECK(tick_labels(log10_ticks(2, 5, 5)) == std::vector<std::string>{"2", "5"});
  const Scale s{ScaleKind::kLog10, 0.5, 5000, 0, 1};
  CHECK(tick_labels(s.ticks(5)) == std::vector<std::string>{"1", "10", "100", "1e+03"});
}

TEST_CASE("value_range: finite (and for log, positive) values; degenerate ranges widened") {
  CHECK(value_range({1, kNaN, 5, -2}, ScaleKind::kLinear, {0, 1}) == std::pair<double, double>{-2, 5});
  CHECK(value_range({0, 1e-3, 10}, ScaleKind::kLog10, {0.1, 1}) == std::pair<double, double>{1e-3, 10});
  CHECK(value_range({kNaN}, ScaleKind::kLinear, {0, 1}) == std::pair<double, double>{0, 1});
  CHECK(value_range({3, 3}, ScaleKind::kLog10, {0.1, 1}) == std::pair<double, double>{0.3, 30});
}

TEST_CASE("viridis: the ends, and luminance rising monotonically (readable in greyscale)") {
  CHECK(hex(viridis(0)) == "#440154");
  CHECK(hex(viridis(1)) == "#fde725");
  CHECK(hex(viridis(-1)) == "#440154");
  CHECK(hex(viridis(kNaN)) == "#440154");
  double last = -1;
  for (int i = 0; i <= 200; ++i) {
    const double l = relative_luminance(viridis(i / 200.0));
    CHECK(l > last);
    last = l;
  }
  CHECK(hex(text_colour_on(viridis(0))) == "#ffffff");
  CHECK(hex(text_colour_on(viridis(1))) == "#000000");
  CHECK(series_dash(0).empty());
  CHECK(series_dash(1) != series_dash(2));
}

TEST_CASE("heatmap: cells, missing hatched, marked outlined, axis titles and legend") {
  HeatmapSpec h;
  h.id = "hm-sqnr";
  h.title = "SQNR <activation>";
  h.row_labels = {"layers.0.fc1", "layers.1.fc1"};
  h.row_links = {"#layer-0", "#layer-1"};
  h.col_labels = {"current/hybrid", "delayed/hybrid", "mxfp8/e4m3"};
  h.values = {30.5, 12, kNaN, 31, 29, 25};
  h.marked_col = {0, -1};
  h.row_title = "layer (model order)";
  h.col_title = "candidate (recipe/format)";
  h.value_title = "SQNR (dB)";
  h.colour_lo = 10;
  h.colour_hi = 35;
  const std::string s = heatmap(h).str();
  CHECK(markup_error(s) == "");
  CHECK(s.starts_with("<svg "));
  CHECK(s.find("SQNR &lt;activation&gt;") != std::string::npos);
  CHECK(count_of(s, "class=\"axis-title\"") == 2);
  CHECK(s.find(">layer (model order)</text>") != std::string::npos);
  CHECK(s.find(">candidate (recipe/format)</text>") != std::string::npos);
  CHECK(s.find("class=\"legend\"") != std::string::npos);
  CHECK(s.find(">SQNR (dB)</text>") != std::string::npos);
  CHECK(count_of(s, "class=\"missing\"") == 1);
  CHECK(s.find("fill=\"url(#hm-sqnr-missing)\"") != std::string::npos);
  CHECK(s.find("<pattern id=\"hm-sqnr-missing\"") != std::string::npos);
  CHECK(count_of(s, "<a href=\"#layer-") == 2);
  // The marked cell's two outlines; one row marked.
  CHECK(count_of(s, "stroke=\"#000\" stroke-width=\"1.5\"") == 2);  // the cell and the legend key
  CHECK(s.find(">30.5</text>") != std::string::npos);
  CHECK(s.find(">not evaluated</text>") != std::string::npos);
  // Colour: the low end dark, the high end bright (reverse swaps them).
  CHECK(s.find("fill=\"" + hex(viridis(0.08)) + "\"") != std::string::npos);  // 12 dB
  h.reverse = true;
  const std::string r = heatmap(h).str();
  CHECK(r.find("fill=\"" + hex(viridis(0.92)) + "\"") != std::string::npos);
  h.values.pop_back();
  CHECK_THROWS(heatmap(h));
}

TEST_CASE("line chart: axes with ticks and titles, one path per series, legend, band") {
  LineChartSpec c;
  c.title = "amax over steps";
  c.x_title = "step";
  c.y_title = "amax (log scale)";
  c.y_kind = ScaleKind::kLog10;
  c.series = {{"activation", {0, 1, 2, 3}, {1, 2, kNaN, 4}}, {"gradient", {0, 1, 2, 3}, {1e-3, 0, 2e-3, 1e-2}}};
  c.band = Band{0.5, 2, "history window"};
  const std::string s = line_chart(c).str();
  CHECK(markup_error(s) == "");
  CHECK(count_of(s, "class=\"axis-title\"") == 2);
  CHECK(s.find(">amax (log scale)</text>") != std::string::npos);
  CHECK(count_of(s, "<path ") == 2);
  // The NaN and the zero (on a log axis) break their lines: two pieces each.
  CHECK(count_of(s, " M") == 2);
  CHECK(s.find("class=\"band\"") != std::string::npos);
  CHECK(s.find(">history window</text>") != std::string::npos);
  CHECK(s.find(">activation</text>") != std::string::npos);
  CHECK(s.find("class=\"legend\"") != std::string::npos);
  CHECK(s.find(">0.001</text>") != std::string::npos);  // a decade tick
  CHECK(s.find("stroke-dasharray=\"6 3\"") != std::string::npos);  // the second series dashed
}

TEST_CASE("histogram: bars, shaded windows, axes and legend") {
  HistogramSpec h;
  h.title = "log2|x| of activation";
  h.x_title = "log2 |x|";
  h.y_title = "elements";
  h.edges = {-20, -15, -10, -5, 0, 5};
  h.counts = {1, 0, 10, 100, 5};
  h.windows = {{-9, 8.8, "E4M3 normal range"}};
  const std::string s = histogram(h).str();
  CHECK(markup_error(s) == "");
  CHECK(count_of(s, "class=\"axis-title\"") == 2);
  CHECK(count_of(s, "class=\"window\"") == 1);
  CHECK(s.find(">E4M3 normal range</text>") != std::string::npos);
  CHECK(s.find("class=\"legend\"") != std::string::npos);
  CHECK(count_of(s, "<g class=\"bars\"") == 1);
  h.counts.pop_back();
  CHECK_THROWS(histogram(h));
}

TEST_CASE("log10 ticks: one decade inside the range gets its 2x and 5x neighbours") {
  CHECK(tick_labels(log10_ticks(1.5, 60, 5)) == std::vector<std::string>{"2", "5", "10", "20", "50"});
  CHECK(tick_values(log10_ticks(3, 15, 5)) == std::vector<double>{5, 10});
  CHECK(tick_labels(log10_ticks(0.015, 0.6, 5)) == std::vector<std::string>{"0.02", "0.05", "0.1", "0.2", "0.5"});
  // Two decades: no neighbours added.
  CHECK(tick_labels(log10_ticks(5, 150, 5)) == std::vector<std::string>{"10", "100"});
  // On a chart's log y axis: the five labels, each with its tick and grid line.
  LineChartSpec c;
  c.title = "amax";
  c.x_title = "step";
  c.y_title = "amax";
  c.y_kind = ScaleKind::kLog10;
  c.series = {{"a", {0, 1}, {1.5, 60}}};
  const std::string s = line_chart(c).str();
  for (const char* label : {">2</text>", ">5</text>", ">10</text>", ">20</text>", ">50</text>"})
    CHECK(count_of(s, label) == 1);
  CHECK(count_of(group_of(s, "ticks"), "stroke=\"#ddd\"") == 5);
}

TEST_CASE("line chart: labelled markers, left of the point where they fit, else right of it") {
  LineChartSpec c;
  c.title = "forecast";
  c.x_title = "step";
  c.y_title = "amax";
  c.series = {{"a", {0, 10}, {0, 10}}};
  c.markers = {{5, 5, "step 5", 2}, {0, 10, "start", 0}, {kNaN, 1, "not drawn", 0}};
  const std::string s = line_chart(c).str();
  CHECK(markup_error(s) == "");
  // The frame: x 64 .. 640 - legend (6.2 px x 1 char + 34) - 12 = 587.8, y 216 (bottom) .. 32 (top).
  const std::string g = group_of(s, "markers");
  CHECK(count_of(g, "<circle ") == 2);  // the NaN marker is skipped
  CHECK(attr_values(g, "cx") == std::vector<std::string>{"325.9", "64"});
  CHECK(attr_values(g, "cy") == std::vector<std::string>{"124", "32"});
  CHECK(attr_values(g, "stroke") ==
        std::vector<std::string>{hex(series_colour(2)), "#fff", hex(series_colour(0)), "#fff"});
  // "step 5" (37.2 px) fits left of its point: anchored at its end 7 px left, 7 px above.
  CHECK(g.find("<text class=\"marker-label\" x=\"318.9\" y=\"117\" text-anchor=\"end\"") != std::string::npos);
  CHECK(g.find(">step 5</text>") != std::string::npos);
  // "start" sits on the frame's left edge and the top: right of it, kept 10 px inside the top.
  CHECK(g.find("<text class=\"marker-label\" x=\"71\" y=\"42\" text-anchor=\"start\"") != std::string::npos);
  CHECK(g.find(">not drawn</text>") == std::string::npos);
  // Markers widen the axes: one at x 20 moves x 10 from the right edge to the middle.
  c.markers = {{20, 5, "far", 0}};
  const std::string w = line_chart(c).str();
  CHECK(attr_values(group_of(w, "markers"), "cx") == std::vector<std::string>{"587.8"});
}

TEST_CASE("line chart: a series' own colour and dash, shared colours differing in dash") {
  LineChartSpec c;
  c.title = "t";
  c.x_title = "x";
  c.y_title = "y";
  Series solid{"base", {0, 1}, {0, 1}};
  solid.colour = 1;
  solid.dash = "";
  Series dashed{"cand", {0, 1}, {1, 0}};
  dashed.colour = 1;  // dash unset: series_dash(1)
  Series plain{"other", {0, 1}, {0.5, 0.5}};  // both unset: its index, 2
  c.series = {solid, dashed, plain};
  const std::string s = line_chart(c).str();
  CHECK(markup_error(s) == "");
  const std::string g = group_of(s, "series");
  CHECK(count_of(g, "<path ") == 3);
  CHECK(attr_values(g, "stroke") == std::vector<std::string>{hex(series_colour(1)), hex(series_colour(1)),
                                                             hex(series_colour(2))});
  CHECK(attr_values(g, "stroke-dasharray") == std::vector<std::string>{series_dash(1), series_dash(2)});
  CHECK(series_dash(1) == "6 3");
  // The legend draws the same three lines.
  const std::string l = group_of(s, "legend");
  CHECK(attr_values(l, "stroke") == attr_values(g, "stroke"));
  CHECK(attr_values(l, "stroke-dasharray") == attr_values(g, "stroke-dasharray"));
}

TEST_CASE("line chart: a legend wider than a third of the chart goes below it, and the chart grows") {
  LineChartSpec c;
  c.title = "t";
  c.x_title = "x";
  c.y_title = "y";
  c.series = {{"short", {0, 1}, {0, 1}}, {"b", {0, 1}, {1, 0}}};
  const std::string right = line_chart(c).str();
  CHECK(right.find("<svg class=\"chart\" width=\"640\" height=\"260\"") == 0);
  // Right: the legend column starts 10 px right of the frame (640 - (5 x 6.2 + 34) - 12 = 563).
  CHECK(attr_values(group_of(right, "legend"), "x1") == std::vector<std::string>{"573", "573"});
  // 40 characters: 248 + 34 px > 640 / 3.
  c.series[0].name = std::string(40, 'n');
  const std::string below = line_chart(c).str();
  CHECK(markup_error(below) == "");
  // Two entries of 16 px and 6 px of margin below the 260 px: the frame keeps its height.
  CHECK(below.find("<svg class=\"chart\" width=\"640\" height=\"298\"") == 0);
  const std::string l = group_of(below, "legend");
  CHECK(attr_values(l, "x1") == std::vector<std::string>{"64", "64"});  // the frame's left edge
  CHECK(attr_values(l, "y1") == std::vector<std::string>{"268", "284"});  // 52 px under the frame's bottom (216)
  CHECK(l.find(">" + std::string(40, 'n') + "</text>") != std::string::npos);
  // The frame spans the width less 16 px: the axis rect 64 .. 624.
  CHECK(group_of(below, "axis").find("width=\"560\"") != std::string::npos);
}

TEST_CASE("histogram: unshaded windows as dashed edges and stacked range bars, over the bars") {
  HistogramSpec h;
  h.title = "t";
  h.x_title = "x";
  h.y_title = "n";
  h.edges = {0, 10};
  h.counts = {5};
  h.windows = {{2, 4, "w1", false}, {6, 8, "w2", false}, {1, 9, "shaded"}};
  const std::string s = histogram(h).str();
  CHECK(markup_error(s) == "");
  // The shaded one under the axes, the edges after the bars.
  CHECK(s.find("<g class=\"windows\"") < s.find("<g class=\"bars\""));
  CHECK(s.find("<g class=\"bars\"") < s.find("<g class=\"window-edges\""));
  CHECK(count_of(group_of(s, "windows"), "<rect class=\"window\"") == 1);
  const std::string e = group_of(s, "window-edges");
  // Per window: a 4 px range bar (6 px below the previous one) and two dashed edges.
  CHECK(count_of(e, "<line ") == 6);
  CHECK(count_of(e, "stroke-width=\"4\"") == 2);
  CHECK(count_of(e, "stroke-dasharray=\"5 3\"") == 4);
  // x 0..10 onto 64 .. 640 - (6 x 6.2 + 34) - 12 = 556.8: 2 -> 162.6, 4 -> 261.1.
  CHECK(e.find("<line class=\"window\" x1=\"162.6\" y1=\"35\" x2=\"261.1\" y2=\"35\" stroke=\"" +
               hex(series_colour(5)) + "\"") != std::string::npos);
  CHECK(e.find("y1=\"41\"") != std::string::npos);  // the second bar
  CHECK(e.find("x1=\"162.6\" y1=\"32\" x2=\"162.6\" y2=\"196\"") != std::string::npos);  // an edge, top to bottom
  CHECK(attr_values(e, "stroke").front() == hex(series_colour(5)));
  CHECK(e.find("stroke=\"" + hex(series_colour(6)) + "\"") != std::string::npos);  // the second window's colour
  // The legend: the bars' swatch, dashed lines for the edge windows, a swatch for the shaded one.
  const std::string l = group_of(s, "legend");
  CHECK(count_of(l, "<line ") == 2);
  CHECK(count_of(l, "<rect ") == 2);
  CHECK(l.find(">w2</text>") != std::string::npos);
  // A window's own colour overrides 5 + its index.
  h.windows[0].colour = 1;
  CHECK(group_of(histogram(h).str(), "window-edges").find("stroke=\"" + hex(series_colour(1)) + "\"") !=
        std::string::npos);
}

TEST_CASE("histogram: bars split by a range, one colour per side, a bar cut where it crosses") {
  HistogramSpec h;
  h.title = "t";
  h.x_title = "x";
  h.y_title = "n";
  h.edges = {0, 2, 4, 6, 8, 10};
  h.counts = {1, 2, 3, 4, 0};
  h.split = std::pair<double, double>{3, 7};
  h.below_label = "underflows";
  h.above_label = "saturates";
  const std::string s = histogram(h).str();
  CHECK(markup_error(s) == "");
  const std::string inside = group_of(s, "bars"), below = group_of(s, "bars-below"), above = group_of(s, "bars-above");
  CHECK(inside.find("fill=\"#355f8d\"") != std::string::npos);
  CHECK(below.find("fill=\"#bbbbbb\"") != std::string::npos);
  CHECK(above.find("fill=\"#d55e00\"") != std::string::npos);
  // Bins 0-2 and 2-3 below; 3-4, 4-6, 6-7 inside; 7-8 above; the empty bin 8-10 nowhere.
  CHECK(count_of(below, "<rect ") == 2);
  CHECK(count_of(inside, "<rect ") == 3);
  CHECK(count_of(above, "<rect ") == 1);
  // The cut at 3 ends the below piece of bin 2-4 where its inside piece starts.
  const auto below_x = attr_values(below, "x"), inside_x = attr_values(inside, "x");
  const auto below_w = attr_values(below, "width");
  REQUIRE(below_x.size() == 2);
  REQUIRE(inside_x.size() == 3);
  CHECK(std::stod(below_x[1]) + std::stod(below_w[1]) == doctest::Approx(std::stod(inside_x[0])).epsilon(0.01));
  // The same bar's pieces share its height.
  CHECK(attr_values(below, "y")[1] == attr_values(inside, "y")[0]);
  CHECK(attr_values(inside, "y")[2] == attr_values(above, "y")[0]);
  const std::string l = group_of(s, "legend");
  CHECK(attr_values(l, "fill") == std::vector<std::string>{"#355f8d", "#bbbbbb", "#d55e00"});
  CHECK(l.find(">underflows</text>") != std::string::npos);
  CHECK(l.find(">saturates</text>") != std::string::npos);
  // No split: one group of bars, whole.
  h.split.reset();
  const std::string whole = histogram(h).str();
  CHECK(count_of(whole, "class=\"bars-") == 0);
  CHECK(count_of(group_of(whole, "bars"), "<rect ") == 4);
}

TEST_CASE("markup_error: the checker itself catches what it must") {
  CHECK(markup_error("<a><b></a></b>") != "");
  CHECK(markup_error("<a x=1></a>") != "");
  CHECK(markup_error("<a>&nbsp;</a>") != "");
  CHECK(markup_error("<a>1 < 2</a>") != "");
  CHECK(markup_error("<a>") != "");
  CHECK(markup_error("<!DOCTYPE html><html><br/><p a=\"&amp;\">x</p></html>") == "");
}

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

TEST_CASE("markup_error: the checker itself catches what it must") {
  CHECK(markup_error("<a><b></a></b>") != "");
  CHECK(markup_error("<a x=1></a>") != "");
  CHECK(markup_error("<a>&nbsp;</a>") != "");
  CHECK(markup_error("<a>1 < 2</a>") != "");
  CHECK(markup_error("<a>") != "");
  CHECK(markup_error("<!DOCTYPE html><html><br/><p a=\"&amp;\">x</p></html>") == "");
}

// The one small plotting module of the reports: a markup builder (escaped text and attributes,
// every element closed: the page parses as XML), value-to-pixel scales with their ticks, a colour
// scale readable in greyscale and for colour-blind readers, and the charts the HTML report draws
// (heatmap, line chart, histogram). Each chart is one self-contained <svg> with its axes, axis
// titles (with units) and legend; nothing in it refers outside the element.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp8a::svg {

// Text for XML/HTML content and attribute values: & < > " ' escaped, after core/text.hpp
// terminal_text made the rest visible (a control byte other than \n and \t, a byte outside UTF-8,
// a line separator or bidi override shows as \xNN, \r as \r: XML allows none of them raw, and
// a browser would hide or act on them).
std::string escape(std::string_view text);

// A pixel coordinate as markup text: at most one decimal, no trailing zeros ("12", "12.5").
std::string px(double v);

struct Attr {
  std::string_view name;
  std::string value;  // escaped on output
};
using Attrs = std::vector<Attr>;

// Builds markup element by element. Tag and attribute names are the caller's literals; every
// attribute value and text is escaped. str() requires every opened element closed.
class Markup {
 public:
  Markup& open(std::string_view tag, const Attrs& attrs = {});  // <tag a="v">
  Markup& close();                                              // the innermost open element
  Markup& leaf(std::string_view tag, const Attrs& attrs = {});  // <tag a="v"/>
  // <tag a="v">text</tag>
  Markup& element(std::string_view tag, const Attrs& attrs, std::string_view text);
  Markup& text(std::string_view text);     // escaped
  Markup& append(const Markup& fragment);  // a finished fragment (all of its elements closed)
  std::size_t size() const { return out_.size(); }
  const std::string& str() const;  // FP8A_CHECKs that nothing is left open

 private:
  void write_start(std::string_view tag, const Attrs& attrs);
  std::string out_;
  std::vector<std::string> open_;
};

// ---- scales -----------------------------------------------------------------------------------

enum class ScaleKind : std::uint8_t { kLinear, kLog10 };

struct Tick {
  double value = 0;
  std::string label;
};

// Values lo..hi mapped onto pixels px_lo..px_hi (px_hi < px_lo for a y axis pointing up).
// kLog10 needs 0 < lo < hi; values <= 0 map to px_lo. Values outside lo..hi map outside the
// pixel range (callers clamp where they want to).
struct Scale {
  ScaleKind kind = ScaleKind::kLinear;
  double lo = 0, hi = 1;
  double px_lo = 0, px_hi = 1;
  double to_px(double v) const;
  // About `target` ticks inside lo..hi: linear ones at 1, 2 or 5 x 10^k steps; log ones at powers
  // of ten (every n-th decade when there are many).
  std::vector<Tick> ticks(int target = 5) const;
};

// A short tick label: "0", "0.25", "40", "1e-05", "1e+06" (%g with 3 significant digits).
std::string tick_label(double v);
std::vector<Tick> linear_ticks(double lo, double hi, int target);
std::vector<Tick> log10_ticks(double lo, double hi, int target);

// The lo..hi of a scale holding every finite value of `values` (and, for kLog10, only the
// positive ones); a degenerate range is widened. `fallback` when there is no such value.
std::pair<double, double> value_range(const std::vector<double>& values, ScaleKind kind,
                                      std::pair<double, double> fallback);

// ---- colour -----------------------------------------------------------------------------------

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
};
std::string hex(Rgb c);  // "#440154"
// Viridis (matplotlib's, sampled at 11 points and interpolated): dark blue-purple at 0 to yellow
// at 1, luminance rising monotonically, so it reads in greyscale and with colour-vision
// deficiencies. t is clamped to 0..1.
Rgb viridis(double t);
// WCAG relative luminance, 0 (black) .. 1 (white).
double relative_luminance(Rgb c);
// Black or white, whichever reads better on `background`.
Rgb text_colour_on(Rgb background);
// A series' colour and dash pattern by index (Okabe-Ito's colour-blind-safe palette, and a dash
// pattern per index so the series also differ in greyscale).
Rgb series_colour(std::size_t i);
std::string series_dash(std::size_t i);  // "" (solid), "6 3", ...

// ---- charts -----------------------------------------------------------------------------------

// Rows x columns of values, each cell coloured by `colour` (a scale onto 0..1 of viridis).
struct HeatmapSpec {
  std::string id;     // unique in the page: prefixes the svg's internal ids
  std::string title;  // the chart's heading (also its accessible name)
  std::vector<std::string> row_labels;
  std::vector<std::string> row_links;  // "#anchor" per row, or empty: labels are not links
  std::vector<std::string> col_labels;
  std::vector<double> values;          // row-major rows x cols; NaN = missing (drawn hatched)
  std::vector<int> marked_col;         // per row: the column outlined, -1 for none; or empty
  std::string row_title;               // the y axis title, e.g. "layer (model order)"
  std::string col_title;               // the x axis title, e.g. "candidate (recipe/format)"
  std::string value_title;             // the legend's title with unit, e.g. "SQNR (dB)"
  ScaleKind colour_kind = ScaleKind::kLinear;
  double colour_lo = 0, colour_hi = 1;  // values at the ends of the colour scale (clamped)
  bool reverse = false;                 // true: high values dark (so that "bad" is dark)
  bool show_values = true;              // print each value in its cell
  double cell_width = 58;               // px; 50 still holds a 10 px "-0.0123"
  std::string missing_label = "not evaluated";  // the legend's entry for NaN cells
  std::string marked_label = "chosen";          // the legend's entry for the outline
};
Markup heatmap(const HeatmapSpec& spec);

struct Series {
  std::string name;
  std::vector<double> x, y;  // equal lengths; a non-finite y (or a y <= 0 on a log axis) breaks the line
  // The colour (series_colour index) and dash pattern (stroke-dasharray, "" solid); unset: the
  // series' own index for both, so that related series can share a colour and differ in dash.
  std::optional<std::size_t> colour = std::nullopt;
  std::optional<std::string> dash = std::nullopt;
};
// A point drawn as a ring, with its label next to it (e.g. a forecast's step).
struct Marker {
  double x = 0, y = 0;
  std::string label;
  std::size_t colour = 0;  // series_colour index
};
struct Band {
  double lo = 0, hi = 0;  // a shaded horizontal band between these y values
  std::string label;
};
struct LineChartSpec {
  std::string title;
  std::string x_title, y_title;  // with units
  ScaleKind x_kind = ScaleKind::kLinear, y_kind = ScaleKind::kLinear;
  std::vector<Series> series;
  std::optional<Band> band;
  std::vector<Marker> markers;  // inside the axes' ranges (they widen them)
  // The minimum size; the legend goes below the axes when it would take over a third of the
  // width, and the chart grows to hold it.
  double width = 640, height = 260;
};
Markup line_chart(const LineChartSpec& spec);

struct Window {
  double lo = 0, hi = 0;  // a vertical window between these x values
  std::string label;
  // Shaded over the plot; otherwise drawn as dashed edges and a range bar along the top, so that
  // it reads over a shaded one.
  bool shaded = true;
  std::optional<std::size_t> colour = std::nullopt;  // series_colour index; unset: 5 + its index
};
struct HistogramSpec {
  std::string title;
  std::string x_title, y_title;  // with units
  std::vector<double> edges;     // bins' edges, ascending: counts.size() + 1 of them
  std::vector<double> counts;
  ScaleKind y_kind = ScaleKind::kLinear;  // kLog10: empty bins are not drawn
  std::vector<Window> windows;  // the x axis spans the bins and every window
  // Bars coloured by where they lie against this x range (lo, hi): the parts left of it, inside
  // and right of it in three colours, named in the legend by these labels.
  std::optional<std::pair<double, double>> split;
  std::string below_label = "below the window", above_label = "above the window";
  std::string bar_label = "count";  // the legend's name of the bars (inside the window)
  double width = 640, height = 240;  // the minimum size, as LineChartSpec's
};
Markup histogram(const HistogramSpec& spec);

}  // namespace fp8a::svg

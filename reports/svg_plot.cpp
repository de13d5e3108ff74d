#include "reports/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.hpp"
#include "core/text.hpp"

namespace fp8a::svg {

std::string escape(std::string_view text) {
  std::string s;
  s.reserve(text.size());
  for (char c : terminal_text(text)) {
    switch (c) {
      case '&': s += "&amp;"; break;
      case '<': s += "&lt;"; break;
      case '>': s += "&gt;"; break;
      case '"': s += "&quot;"; break;
      case '\'': s += "&#39;"; break;
      default: s += c;
    }
  }
  return s;
}

std::string px(double v) {
  if (!std::isfinite(v)) return "0";
  const double r = std::round(v * 10.0) / 10.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", r == 0 ? 0.0 : r);  // no "-0.0"
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

void Markup::write_start(std::string_view tag, const Attrs& attrs) {
  out_ += '<';
  out_ += tag;
  for (const Attr& a : attrs) {
    out_ += ' ';
    out_ += a.name;
    out_ += "=\"";
    out_ += escape(a.value);
    out_ += '"';
  }
}

Markup& Markup::open(std::string_view tag, const Attrs& attrs) {
  write_start(tag, attrs);
  out_ += '>';
  open_.emplace_back(tag);
  return *this;
}

Markup& Markup::close() {
  FP8A_CHECK(!open_.empty(), "Markup::close without an open element");
  out_ += "</" + open_.back() + ">";
  open_.pop_back();
  return *this;
}

Markup& Markup::leaf(std::string_view tag, const Attrs& attrs) {
  write_start(tag, attrs);
  out_ += "/>";
  return *this;
}

Markup& Markup::element(std::string_view tag, const Attrs& attrs, std::string_view text) {
  write_start(tag, attrs);
  out_ += '>';
  out_ += escape(text);
  out_ += "</";
  out_ += tag;
  out_ += '>';
  return *this;
}

Markup& Markup::text(std::string_view text) {
  out_ += escape(text);
  return *this;
}

Markup& Markup::append(const Markup& fragment) {
  out_ += fragment.str();
  return *this;
}

const std::string& Markup::str() const {
  FP8A_CHECK(open_.empty(), "Markup::str with an element left open");
  return out_;
}

// ---- scales -----------------------------------------------------------------------------------

double Scale::to_px(double v) const {
  double t = 0;
  if (kind == ScaleKind::kLog10) {
    if (!(v > 0)) return px_lo;
    t = (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  } else {
    t = (v - lo) / (hi - lo);
  }
  return px_lo + t * (px_hi - px_lo);
}

std::vector<Tick> Scale::ticks(int target) const {
  return kind == ScaleKind::kLog10 ? log10_ticks(lo, hi, target) : linear_ticks(lo, hi, target);
}

std::string tick_label(double v) {
  if (v == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::vector<Tick> linear_ticks(double lo, double hi, int target) {
  std::vector<Tick> ticks;
  if (!(hi > lo) || target < 1) return ticks;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  const double eps = step * 1e-9;
  for (double k = std::ceil((lo - eps) / step); k * step <= hi + eps; k += 1) {
    const double v = std::abs(k * step) < eps ? 0.0 : k * step;
    ticks.push_back({v, tick_label(v)});
  }
  return ticks;
}

std::vector<Tick> log10_ticks(double lo, double hi, int target) {
  std::vector<Tick> ticks;
  if (!(lo > 0) || !(hi > lo) || target < 1) return ticks;
  const int first = static_cast<int>(std::ceil(std::log10(lo) - 1e-9));
  const int last = static_cast<int>(std::floor(std::log10(hi) + 1e-9));
  const int decades = last - first + 1;
  const int stride = std::max(1, (decades + target - 1) / target);
  for (int e = first; e <= last; ++e) {
    if ((e - first) % stride != 0) continue;
    const double v = std::pow(10.0, e);
    ticks.push_back({v, tick_label(v)});
  }
  if (ticks.size() == 1) {  // one decade tick: add its 2x and 5x neighbours inside the range
    for (int e = first - 1; e <= last; ++e)
      for (double k : {2.0, 5.0})
        if (const double v = k * std::pow(10.0, e); v >= lo && v <= hi) ticks.push_back({v, tick_label(v)});
    std::sort(ticks.begin(), ticks.end(), [](const Tick& a, const Tick& b) { return a.value < b.value; });
  }
  if (ticks.empty()) {  // less than a decade: the ends
    ticks.push_back({lo, tick_label(lo)});
    ticks.push_back({hi, tick_label(hi)});
  }
  return ticks;
}

std::pair<double, double> value_range(const std::vector<double>& values, ScaleKind kind,
                                      std::pair<double, double> fallback) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values) {
    if (!std::isfinite(v) || (kind == ScaleKind::kLog10 && !(v > 0))) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (!(lo <= hi)) return fallback;
  if (hi == lo) {
    if (kind == ScaleKind::kLog10) return {lo / 10, hi * 10};
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    return {lo - pad, hi + pad};
  }
  return {lo, hi};
}

// ---- colour -----------------------------------------------------------------------------------

std::string hex(Rgb c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

namespace {
// matplotlib's viridis at 0, 0.1, ..., 1.
constexpr Rgb kViridis[] = {{0x44, 0x01, 0x54}, {0x48, 0x24, 0x75}, {0x41, 0x44, 0x87},
                            {0x35, 0x5f, 0x8d}, {0x2a, 0x78, 0x8e}, {0x21, 0x91, 0x8c},
                            {0x22, 0xa8, 0x84}, {0x44, 0xbf, 0x70}, {0x7a, 0xd1, 0x51},
                            {0xbd, 0xdf, 0x26}, {0xfd, 0xe7, 0x25}};
// Okabe & Ito, "Color Universal Design" (2008): blue, vermillion, bluish green, reddish purple,
// orange, sky blue, black, yellow.
constexpr Rgb kSeries[] = {{0x00, 0x72, 0xb2}, {0xd5, 0x5e, 0x00}, {0x00, 0x9e, 0x73},
                           {0xcc, 0x79, 0xa7}, {0xe6, 0x9f, 0x00}, {0x56, 0xb4, 0xe9},
                           {0x00, 0x00, 0x00}, {0xf0, 0xe4, 0x42}};
constexpr const char* kDashes[] = {"", "6 3", "2 2", "8 3 2 3", "1 3", "10 4"};

double srgb_to_linear(std::uint8_t c) {
  const double v = c / 255.0;
  return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
}
}  // namespace

Rgb viridis(double t) {
  if (!(t > 0)) return kViridis[0];
  if (t >= 1) return kViridis[10];
  const double x = t * 10;
  const int i = static_cast<int>(x);
  const double f = x - i;
  const Rgb a = kViridis[i], b = kViridis[i + 1];
  const auto mix = [f](std::uint8_t p, std::uint8_t q) {
    return static_cast<std::uint8_t>(std::lround(p + f * (q - p)));
  };
  return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}

double relative_luminance(Rgb c) {
  return 0.2126 * srgb_to_linear(c.r) + 0.7152 * srgb_to_linear(c.g) + 0.0722 * srgb_to_linear(c.b);
}

Rgb text_colour_on(Rgb background) {
  // The contrast ratios against black and white (WCAG), whichever is larger.
  const double l = relative_luminance(background);
  return (l + 0.05) / 0.05 > 1.05 / (l + 0.05) ? Rgb{0, 0, 0} : Rgb{255, 255, 255};
}

Rgb series_colour(std::size_t i) { return kSeries[i % std::size(kSeries)]; }
std::string series_dash(std::size_t i) { return kDashes[i % std::size(kDashes)]; }

// ---- charts -----------------------------------------------------------------------------------

namespace {

constexpr double kCharWidth = 6.2;  // px per character of the 11 px labels (sans-serif, average)
constexpr double kTitleHeight = 22;

double text_width(std::string_view s, double char_width = kCharWidth) {
  return static_cast<double>(s.size()) * char_width;
}

void open_svg(Markup& m, double width, double height, const std::string& title) {
  m.open("svg", {{"class", "chart"},
                 {"width", px(width)},
                 {"height", px(height)},
                 {"viewBox", "0 0 " + px(width) + " " + px(height)},
                 {"role", "img"},
                 {"aria-label", title},
                 {"font-family", "sans-serif"},
                 {"font-size", "11"}});
  m.element("title", {}, title);
  m.element("text", {{"class", "chart-title"}, {"x", "4"}, {"y", "15"}, {"font-size", "13"},
                     {"font-weight", "bold"}},
            title);
}

// The plot area in pixels.
struct Frame {
  double left, top, right, bottom;
};

// Both axes of an x-y chart: the frame, ticks with labels and the axis titles.
void draw_axes(Markup& m, const Frame& f, const Scale& x, const Scale& y, const std::string& x_title,
               const std::string& y_title) {
  m.open("g", {{"class", "axis"}, {"stroke", "#000"}, {"fill", "none"}});
  m.leaf("rect", {{"x", px(f.left)}, {"y", px(f.top)}, {"width", px(f.right - f.left)},
                  {"height", px(f.bottom - f.top)}});
  m.close();
  m.open("g", {{"class", "ticks"}, {"fill", "#000"}});
  for (const Tick& t : x.ticks(6)) {
    const double p = x.to_px(t.value);
    m.leaf("line", {{"x1", px(p)}, {"y1", px(f.bottom)}, {"x2", px(p)}, {"y2", px(f.bottom + 4)},
                    {"stroke", "#000"}});
    m.element("text", {{"x", px(p)}, {"y", px(f.bottom + 15)}, {"text-anchor", "middle"}}, t.label);
  }
  for (const Tick& t : y.ticks(5)) {
    const double p = y.to_px(t.value);
    m.leaf("line", {{"x1", px(f.left - 4)}, {"y1", px(p)}, {"x2", px(f.left)}, {"y2", px(p)},
                    {"stroke", "#000"}});
    m.leaf("line", {{"x1", px(f.left)}, {"y1", px(p)}, {"x2", px(f.right)}, {"y2", px(p)},
                    {"stroke", "#ddd"}});
    m.element("text", {{"x", px(f.left - 6)}, {"y", px(p + 4)}, {"text-anchor", "end"}}, t.label);
  }
  m.close();
  m.element("text", {{"class", "axis-title"}, {"x", px((f.left + f.right) / 2)},
                     {"y", px(f.bottom + 32)}, {"text-anchor", "middle"}},
            x_title);
  const double cy = (f.top + f.bottom) / 2;
  m.element("text", {{"class", "axis-title"}, {"x", "14"}, {"y", px(cy)}, {"text-anchor", "middle"},
                     {"transform", "rotate(-90 14 " + px(cy) + ")"}},
            y_title);
}

// Where `v` sits on the colour scale, 0..1 (clamped).
double colour_position(const HeatmapSpec& s, double v) {
  const Scale scale{s.colour_kind, s.colour_lo, s.colour_hi, 0, 1};
  double t = std::clamp(scale.to_px(v), 0.0, 1.0);
  return s.reverse ? 1 - t : t;
}

}  // namespace

namespace {

// Where a heatmap's parts go: its cells' grid, left of the legend, below the title and the
// rotated column labels.
struct HeatmapLayout {
  static constexpr double kCellH = 15;
  std::size_t rows = 0, cols = 0;
  double cell_w = 0, left = 0, top = 0, grid_w = 0, grid_h = 0, width = 0, height = 0;
  double cell_x(std::size_t c) const { return left + cell_w * static_cast<double>(c); }
  double cell_y(std::size_t r) const { return top + kCellH * static_cast<double>(r); }
};

HeatmapLayout heatmap_layout(const HeatmapSpec& s) {
  HeatmapLayout g;
  g.rows = s.row_labels.size();
  g.cols = s.col_labels.size();
  g.cell_w = s.cell_width;
  const double legend_w = std::max({150.0, text_width(s.value_title) + 10, text_width(s.missing_label) + 30,
                                    text_width(s.marked_label) + 30});
  double label_w = 40;
  for (const auto& l : s.row_labels) label_w = std::max(label_w, text_width(l));
  double col_label_h = 30;  // column labels rotated 35 degrees above the cells
  for (const auto& l : s.col_labels) col_label_h = std::max(col_label_h, text_width(l) * 0.58 + 14);
  g.left = 28 + label_w + 6;
  g.top = kTitleHeight + 22 + col_label_h;
  g.grid_w = g.cell_w * static_cast<double>(g.cols);
  g.grid_h = HeatmapLayout::kCellH * static_cast<double>(g.rows);
  g.width = g.left + g.grid_w + 24 + legend_w;
  g.height = std::max(g.top + g.grid_h + 16, g.top + 230.0);
  return g;
}

// Axis titles (the candidates above the column labels, the layers left of the row labels) and
// the labels, rows linked where the spec gives a link.
void heatmap_axes(Markup& m, const HeatmapSpec& s, const HeatmapLayout& g) {
  m.element("text", {{"class", "axis-title"}, {"x", px(g.left + g.grid_w / 2)}, {"y", px(kTitleHeight + 14)},
                     {"text-anchor", "middle"}},
            s.col_title);
  const double cy = g.top + g.grid_h / 2;
  m.element("text", {{"class", "axis-title"}, {"x", "14"}, {"y", px(cy)}, {"text-anchor", "middle"},
                     {"transform", "rotate(-90 14 " + px(cy) + ")"}},
            s.row_title);
  m.open("g", {{"class", "axis"}});
  for (std::size_t c = 0; c < g.cols; ++c) {
    const double x = g.left + g.cell_w * (static_cast<double>(c) + 0.5);
    m.element("text", {{"x", px(x)}, {"y", px(g.top - 6)}, {"transform", "rotate(-35 " + px(x) + " " + px(g.top - 6) + ")"}},
              s.col_labels[c]);
  }
  for (std::size_t r = 0; r < g.rows; ++r) {
    const Attrs at{{"x", px(g.left - 6)}, {"y", px(g.cell_y(r) + 11)}, {"text-anchor", "end"}};
    if (r < s.row_links.size() && !s.row_links[r].empty()) {
      m.open("a", {{"href", s.row_links[r]}});
      m.element("text", at, s.row_labels[r]);
      m.close();
    } else {
      m.element("text", at, s.row_labels[r]);
    }
  }
  m.close();
}

// The cells (hatched where missing, valued where show_values), then the marked ones: a black
// outline inside a white one, visible on dark and bright cells.
void heatmap_cells(Markup& m, const HeatmapSpec& s, const HeatmapLayout& g, const std::string& hatch) {
  constexpr double kCellH = HeatmapLayout::kCellH;
  m.open("g", {{"class", "cells"}, {"text-anchor", "middle"}, {"font-size", "10"}});
  for (std::size_t r = 0; r < g.rows; ++r)
    for (std::size_t c = 0; c < g.cols; ++c) {
      const double v = s.values[r * g.cols + c];
      const double x = g.cell_x(c), y = g.cell_y(r);
      if (!std::isfinite(v)) {
        m.leaf("rect", {{"class", "missing"}, {"x", px(x)}, {"y", px(y)}, {"width", px(g.cell_w)},
                        {"height", px(kCellH)}, {"fill", "url(#" + hatch + ")"}});
        continue;
      }
      const Rgb fill = viridis(colour_position(s, v));
      m.leaf("rect", {{"x", px(x)}, {"y", px(y)}, {"width", px(g.cell_w)}, {"height", px(kCellH)}, {"fill", hex(fill)}});
      if (s.show_values)
        m.element("text", {{"x", px(x + g.cell_w / 2)}, {"y", px(y + 11)}, {"fill", hex(text_colour_on(fill))}},
                  tick_label(v));
    }
  m.close();
  m.open("g", {{"class", "marked"}, {"fill", "none"}});
  for (std::size_t r = 0; r < g.rows && r < s.marked_col.size(); ++r) {
    if (s.marked_col[r] < 0 || static_cast<std::size_t>(s.marked_col[r]) >= g.cols) continue;
    const double x = g.left + g.cell_w * s.marked_col[r], y = g.cell_y(r);
    m.leaf("rect", {{"x", px(x + 1)}, {"y", px(y + 1)}, {"width", px(g.cell_w - 2)}, {"height", px(kCellH - 2)},
                    {"stroke", "#fff"}, {"stroke-width", "2"}});
    m.leaf("rect", {{"x", px(x + 2.5)}, {"y", px(y + 2.5)}, {"width", px(g.cell_w - 5)}, {"height", px(kCellH - 5)},
                    {"stroke", "#000"}, {"stroke-width", "1.5"}});
  }
  m.close();
}

// The legend: a vertical colour bar with the scale's ticks, then the missing and marked keys.
void heatmap_legend(Markup& m, const HeatmapSpec& s, const HeatmapLayout& g, const std::string& hatch) {
  const double lx = g.left + g.grid_w + 24, ly = g.top;
  constexpr double kBarH = 140, kBarW = 14, kSteps = 28;
  m.open("g", {{"class", "legend"}});
  m.element("text", {{"x", px(lx)}, {"y", px(ly - 8)}}, s.value_title);
  const Scale bar{s.colour_kind, s.colour_lo, s.colour_hi, ly + kBarH, ly};
  for (int i = 0; i < kSteps; ++i) {
    const double t0 = i / kSteps, t1 = (i + 1) / kSteps;
    const double t = (t0 + t1) / 2;
    m.leaf("rect", {{"x", px(lx)}, {"y", px(ly + kBarH * (1 - t1))}, {"width", px(kBarW)},
                    {"height", px(kBarH / kSteps + 0.5)}, {"fill", hex(viridis(s.reverse ? 1 - t : t))}});
  }
  for (const Tick& t : bar.ticks(5)) {
    const double p = bar.to_px(t.value);
    m.leaf("line", {{"x1", px(lx + kBarW)}, {"y1", px(p)}, {"x2", px(lx + kBarW + 4)}, {"y2", px(p)}, {"stroke", "#000"}});
    m.element("text", {{"x", px(lx + kBarW + 7)}, {"y", px(p + 4)}}, t.label);
  }
  const double ky = ly + kBarH + 18;
  m.leaf("rect", {{"x", px(lx)}, {"y", px(ky)}, {"width", px(kBarW)}, {"height", "12"}, {"fill", "url(#" + hatch + ")"},
                  {"stroke", "#888"}});
  m.element("text", {{"x", px(lx + kBarW + 7)}, {"y", px(ky + 10)}}, s.missing_label);
  m.leaf("rect", {{"x", px(lx)}, {"y", px(ky + 20)}, {"width", px(kBarW)}, {"height", "12"}, {"fill", "#fff"},
                  {"stroke", "#000"}, {"stroke-width", "1.5"}});
  m.element("text", {{"x", px(lx + kBarW + 7)}, {"y", px(ky + 30)}}, s.marked_label);
  m.close();
}

}  // namespace

Markup heatmap(const HeatmapSpec& s) {
  FP8A_CHECK(s.values.size() == s.row_labels.size() * s.col_labels.size(), "heatmap: values must be rows x cols");
  const HeatmapLayout g = heatmap_layout(s);
  Markup m;
  open_svg(m, g.width, g.height, s.title);
  const std::string hatch = s.id + "-missing";
  m.open("defs");
  m.open("pattern", {{"id", hatch}, {"width", "6"}, {"height", "6"}, {"patternUnits", "userSpaceOnUse"},
                     {"patternTransform", "rotate(45)"}});
  m.leaf("rect", {{"width", "6"}, {"height", "6"}, {"fill", "#fff"}});
  m.leaf("line", {{"x1", "0"}, {"y1", "0"}, {"x2", "0"}, {"y2", "6"}, {"stroke", "#888"}, {"stroke-width", "2"}});
  m.close().close();
  heatmap_axes(m, s, g);
  heatmap_cells(m, s, g, hatch);
  heatmap_legend(m, s, g, hatch);
  m.close();  // svg
  return m;
}

namespace {

// One legend entry: a line (stroke and dash) or a filled swatch.
struct LegendEntry {
  std::string label;
  Rgb colour;
  bool line = true;
  std::string dash = "";   // lines only
  double opacity = 1.0;    // swatches only
};

// Where the legend goes: right of the axes while it takes at most a third of the width, else
// below them, one entry per row. The frame and the chart's height follow from it.
struct LegendLayout {
  bool below = false;
  double width = 0;   // of the right-hand column (0 when below)
  double height = 0;  // extra height below the axes (0 when right)
};
LegendLayout layout_legend(const std::vector<LegendEntry>& entries, double chart_width) {
  double w = 40;
  for (const LegendEntry& e : entries) w = std::max(w, text_width(e.label) + 34);
  if (w <= chart_width / 3) return {false, w, 0};
  return {true, 0, 16.0 * static_cast<double>(entries.size()) + 6};
}

void draw_legend(Markup& m, const std::vector<LegendEntry>& entries, double x0, double y0) {
  m.open("g", {{"class", "legend"}});
  double ly = y0;
  for (const LegendEntry& e : entries) {
    if (e.line) {
      Attrs a{{"x1", px(x0)}, {"y1", px(ly)}, {"x2", px(x0 + 24)}, {"y2", px(ly)}, {"stroke", hex(e.colour)},
              {"stroke-width", "1.8"}};
      if (!e.dash.empty()) a.push_back({"stroke-dasharray", e.dash});
      m.leaf("line", a);
    } else {
      Attrs a{{"x", px(x0)}, {"y", px(ly - 5)}, {"width", "24"}, {"height", "10"}, {"fill", hex(e.colour)}};
      if (e.opacity < 1) a.push_back({"fill-opacity", format_text("%g", e.opacity)});
      m.leaf("rect", a);
    }
    m.element("text", {{"x", px(x0 + 28)}, {"y", px(ly + 4)}}, e.label);
    ly += 16;
  }
  m.close();
}

// The frame of an x-y chart of at least width x height with this legend, and the chart's size.
struct ChartBox {
  Frame frame;
  double width, height;
  LegendLayout legend;
};
ChartBox chart_box(double width, double height, const std::vector<LegendEntry>& entries) {
  const LegendLayout l = layout_legend(entries, width);
  const double right = l.below ? width - 16 : width - l.width - 12;
  return {Frame{64, kTitleHeight + 10, right, height - 44}, width, height + l.height, l};
}
void draw_box_legend(Markup& m, const ChartBox& b, const std::vector<LegendEntry>& entries) {
  if (b.legend.below) draw_legend(m, entries, b.frame.left, b.frame.bottom + 52);
  else draw_legend(m, entries, b.frame.right + 10, b.frame.top + 8);
}

constexpr Rgb kBarColour{0x35, 0x5f, 0x8d};
constexpr Rgb kBelowColour{0xbb, 0xbb, 0xbb};  // light grey: underflow side
constexpr Rgb kAboveColour{0xd5, 0x5e, 0x00};  // vermillion: saturating side
constexpr Rgb kBandColour{0xbb, 0xbb, 0xbb};

}  // namespace

Markup line_chart(const LineChartSpec& s) {
  std::vector<double> xs, ys;
  for (const Series& se : s.series) {
    xs.insert(xs.end(), se.x.begin(), se.x.end());
    ys.insert(ys.end(), se.y.begin(), se.y.end());
  }
  for (const Marker& mk : s.markers) {
    xs.push_back(mk.x);
    ys.push_back(mk.y);
  }
  if (s.band) {
    ys.push_back(s.band->lo);
    ys.push_back(s.band->hi);
  }
  const auto [x_lo, x_hi] = value_range(xs, s.x_kind, {0, 1});
  const auto [y_lo, y_hi] = value_range(ys, s.y_kind, {s.y_kind == ScaleKind::kLog10 ? 0.1 : 0, 1});
  const auto colour_of = [](const Series& se, std::size_t i) { return series_colour(se.colour.value_or(i)); };
  const auto dash_of = [](const Series& se, std::size_t i) { return se.dash.value_or(series_dash(se.colour.value_or(i))); };
  std::vector<LegendEntry> legend;
  for (std::size_t i = 0; i < s.series.size(); ++i)
    legend.push_back({s.series[i].name, colour_of(s.series[i], i), true, dash_of(s.series[i], i)});
  if (s.band) legend.push_back({s.band->label, kBandColour, false, "", 0.45});
  const ChartBox box = chart_box(s.width, s.height, legend);
  const Frame& f = box.frame;
  const Scale x{s.x_kind, x_lo, x_hi, f.left, f.right};
  const Scale y{s.y_kind, y_lo, y_hi, f.bottom, f.top};

  Markup m;
  open_svg(m, box.width, box.height, s.title);
  if (s.band) {
    const double a = y.to_px(s.band->lo), b = y.to_px(s.band->hi);
    m.leaf("rect", {{"class", "band"}, {"x", px(f.left)}, {"y", px(std::min(a, b))},
                    {"width", px(f.right - f.left)}, {"height", px(std::abs(a - b))}, {"fill", hex(kBandColour)},
                    {"fill-opacity", "0.45"}});
  }
  draw_axes(m, f, x, y, s.x_title, s.y_title);
  m.open("g", {{"class", "series"}, {"fill", "none"}, {"stroke-width", "1.8"}});
  for (std::size_t i = 0; i < s.series.size(); ++i) {
    const Series& se = s.series[i];
    std::string d;
    bool pen_down = false;
    for (std::size_t j = 0; j < se.x.size() && j < se.y.size(); ++j) {
      const bool ok = std::isfinite(se.y[j]) && std::isfinite(se.x[j]) &&
                      (s.y_kind != ScaleKind::kLog10 || se.y[j] > 0);
      if (!ok) {
        pen_down = false;
        continue;
      }
      d += (pen_down ? " L" : (d.empty() ? "M" : " M")) + px(x.to_px(se.x[j])) + " " + px(y.to_px(se.y[j]));
      pen_down = true;
    }
    if (d.empty()) continue;
    Attrs a{{"d", d}, {"stroke", hex(colour_of(se, i))}};
    if (const std::string dash = dash_of(se, i); !dash.empty()) a.push_back({"stroke-dasharray", dash});
    m.leaf("path", a);
  }
  m.close();
  if (!s.markers.empty()) {
    m.open("g", {{"class", "markers"}});
    for (const Marker& mk : s.markers) {
      if (!std::isfinite(mk.x) || !std::isfinite(mk.y) || (s.y_kind == ScaleKind::kLog10 && !(mk.y > 0))) continue;
      const double cx = x.to_px(mk.x), cy = y.to_px(mk.y);
      m.leaf("circle", {{"cx", px(cx)}, {"cy", px(cy)}, {"r", "4"}, {"fill", "#fff"},
                        {"stroke", hex(series_colour(mk.colour))}, {"stroke-width", "2"}});
      // The label above the point: left of it when it fits there, else right of it, else from the
      // frame's left edge.
      const double w = text_width(mk.label);
      const bool left = cx - 7 - w >= f.left;
      const double tx = left ? cx - 7 : std::min(cx + 7, std::max(f.left + 4, f.right - 4 - w));
      m.element("text", {{"class", "marker-label"}, {"x", px(tx)}, {"y", px(std::max(f.top + 10, cy - 7))},
                         {"text-anchor", left ? "end" : "start"}, {"stroke", "#fff"}, {"stroke-width", "3"},
                         {"paint-order", "stroke"}},
                mk.label);
    }
    m.close();
  }
  draw_box_legend(m, box, legend);
  m.close();
  return m;
}

Markup histogram(const HistogramSpec& s) {
  FP8A_CHECK(s.edges.size() == s.counts.size() + 1, "histogram: edges must be counts + 1");
  std::vector<double> xs = s.edges;
  for (const Window& w : s.windows) {
    xs.push_back(w.lo);
    xs.push_back(w.hi);
  }
  if (s.split) {
    xs.push_back(s.split->first);
    xs.push_back(s.split->second);
  }
  const auto [x_lo, x_hi] = value_range(xs, ScaleKind::kLinear, {0, 1});
  std::vector<double> ys = s.counts;
  if (s.y_kind == ScaleKind::kLinear) ys.push_back(0);
  auto [y_lo, y_hi] = value_range(ys, s.y_kind, {s.y_kind == ScaleKind::kLog10 ? 0.1 : 0, 1});
  y_hi *= s.y_kind == ScaleKind::kLog10 ? 2.0 : 1.08;  // room above the tallest bar for the range bars
  std::vector<LegendEntry> legend{{s.bar_label, kBarColour, false}};
  if (s.split) {
    legend.push_back({s.below_label, kBelowColour, false});
    legend.push_back({s.above_label, kAboveColour, false});
  }
  const auto window_colour = [&](std::size_t i) { return series_colour(s.windows[i].colour.value_or(i + 5)); };
  for (std::size_t i = 0; i < s.windows.size(); ++i) {
    if (s.windows[i].shaded) legend.push_back({s.windows[i].label, window_colour(i), false, "", 0.25});
    else legend.push_back({s.windows[i].label, window_colour(i), true, "5 3"});
  }
  const ChartBox box = chart_box(s.width, s.height, legend);
  const Frame& f = box.frame;
  const Scale x{ScaleKind::kLinear, x_lo, x_hi, f.left, f.right};
  const Scale y{s.y_kind, s.y_kind == ScaleKind::kLog10 ? y_lo : std::min(0.0, y_lo), y_hi, f.bottom, f.top};

  Markup m;
  open_svg(m, box.width, box.height, s.title);
  const auto draw_windows = [&](bool shaded) {
    m.open("g", {{"class", shaded ? "windows" : "window-edges"}});
    double bar_y = f.top + 3;
    for (std::size_t i = 0; i < s.windows.size(); ++i) {
      if (s.windows[i].shaded != shaded) continue;
      const double a = std::clamp(x.to_px(s.windows[i].lo), f.left, f.right);
      const double b = std::clamp(x.to_px(s.windows[i].hi), f.left, f.right);
      const std::string c = hex(window_colour(i));
      if (shaded)
        m.leaf("rect", {{"class", "window"}, {"x", px(a)}, {"y", px(f.top)}, {"width", px(b - a)},
                        {"height", px(f.bottom - f.top)}, {"fill", c}, {"fill-opacity", "0.25"}});
      else
        m.leaf("line", {{"class", "window"}, {"x1", px(a)}, {"y1", px(bar_y)}, {"x2", px(b)}, {"y2", px(bar_y)},
                        {"stroke", c}, {"stroke-width", "4"}});
      for (double e : {a, b}) {
        Attrs at{{"x1", px(e)}, {"y1", px(f.top)}, {"x2", px(e)}, {"y2", px(f.bottom)}, {"stroke", c},
                 {"stroke-width", shaded ? "1.2" : "1.8"}};
        if (!shaded) at.push_back({"stroke-dasharray", "5 3"});
        m.leaf("line", at);
      }
      if (!shaded) bar_y += 6;
    }
    m.close();
  };
  draw_windows(true);
  draw_axes(m, f, x, y, s.x_title, s.y_title);
  // Each bar in up to three pieces: left of the split window, inside it, right of it.
  const double split_lo = s.split ? x.to_px(s.split->first) : -1e300;
  const double split_hi = s.split ? x.to_px(s.split->second) : 1e300;
  struct Piece {
    const char* cls;
    Rgb colour;
    double from, to;  // pixel clip
  };
  const Piece pieces[] = {{"bars", kBarColour, split_lo, split_hi},
                          {"bars-below", kBelowColour, -1e300, split_lo},
                          {"bars-above", kAboveColour, split_hi, 1e300}};
  for (std::size_t k = 0; k < std::size(pieces); ++k) {
    if (!s.split && k > 0) continue;
    const Piece& pc = pieces[k];
    Markup bars;
    for (std::size_t i = 0; i < s.counts.size(); ++i) {
      const double c = s.counts[i];
      if (!std::isfinite(c) || !(c > 0)) continue;
      const double a = std::max(x.to_px(s.edges[i]), pc.from), b = std::min(x.to_px(s.edges[i + 1]) - 0.5, pc.to);
      if (!(b > a)) continue;
      const double top = y.to_px(c), base = f.bottom;
      bars.leaf("rect", {{"x", px(a)}, {"y", px(top)}, {"width", px(std::max(0.5, b - a))},
                         {"height", px(std::max(0.0, base - top))}});
    }
    m.open("g", {{"class", pc.cls}, {"fill", hex(pc.colour)}, {"stroke", "#000"}, {"stroke-width", "0.3"}});
    m.append(bars);
    m.close();
  }
  draw_windows(false);  // over the bars
  draw_box_legend(m, box, legend);
  m.close();
  return m;
}

}  // namespace fp8a::svg

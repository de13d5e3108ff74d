#include "reports/html_page.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/layer_name.hpp"
#include "core/text.hpp"

namespace fp8a::html {

namespace {

// Printable, plain: no external font, colours that survive greyscale printing.
constexpr const char* kCss = R"(
body { font-family: sans-serif; font-size: 14px; line-height: 1.4; margin: 1.5em auto; max-width: 1200px; padding: 0 1em; color: #111; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { border-bottom: 2px solid #444; padding-bottom: 0.1em; margin-top: 2em; }
h3 { margin-bottom: 0.3em; }
code, pre { font-family: monospace; font-size: 0.92em; }
pre { background: #f4f4f4; border: 1px solid #ccc; padding: 0.6em; white-space: pre-wrap; }
table { border-collapse: collapse; margin: 0.4em 0 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 0.15em 0.45em; text-align: left; vertical-align: top; }
th { background: #e8e8e8; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bf16 td { font-weight: bold; }
tr.top td { font-weight: bold; background: #fff2b3; }
.answer { font-size: 1.15em; border: 2px solid #333; padding: 0.6em; background: #f8f8f8; }
table.plan td.fp8 { background: #b7e4b0; }
table.plan td.bf16 { background: #f4a9a0; font-weight: bold; }
table.plan td.cost { background: #d9d9d9; }
table.plan td.fp4 { background: #4daf4a; color: #fff; }
table.plan td.fp4alt { background: #1b7837; color: #fff; }
table.plan td.alt { background: #a6cee3; }
table.plan td.unjudged { background: #fff; color: #777; font-style: italic; }
.note { color: #444; font-style: italic; }
.card { border: 1px solid #999; padding: 0.4em 0.9em; margin: 1.2em 0; page-break-inside: avoid; }
.plots { display: flex; flex-wrap: wrap; gap: 0 1em; }
svg.chart { display: block; margin: 0.6em 0; max-width: 100%; height: auto; }
nav ul { columns: 2; }
details.fold summary { cursor: pointer; color: #0645ad; margin: 0.4em 0; }
@media print { body { max-width: none; margin: 0; } h2 { page-break-before: always; } .card { page-break-inside: avoid; } a { color: inherit; text-decoration: none; } }
)";

}  // namespace

void table(svg::Markup& m, const std::vector<std::string>& header, const std::vector<std::vector<Cell>>& rows,
           const std::vector<std::string>& row_classes) {
  m.open("table").open("thead").open("tr");
  for (const auto& h : header) m.element("th", {}, h);
  m.close().close().open("tbody");
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (r < row_classes.size() && !row_classes[r].empty()) m.open("tr", {{"class", row_classes[r]}});
    else m.open("tr");
    for (const Cell& c : rows[r]) {
      if (c.numeric) m.element("td", {{"class", "num"}}, c.text);
      else m.element("td", {}, c.text);
    }
    m.close();
  }
  m.close().close();
}

void paragraph(svg::Markup& m, const std::string& text, const char* cls) {
  if (cls) m.element("p", {{"class", cls}}, text);
  else m.element("p", {}, text);
}

void list(svg::Markup& m, const std::vector<std::string>& items) {
  m.open("ul");
  for (const auto& i : items) m.element("li", {}, i);
  m.close();
}

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return format_text("%.3g", v);
}

namespace {

// Where a module runs within its transformer layer: the attention's input projection (QKV), the
// rest of the attention (its output projection), the MLP's first GEMM, the rest of the MLP; 4 for
// a name none of these describes.
int module_rank(const std::string& name) {
  const auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("qkv") || has("q_proj") || has("k_proj") || has("v_proj") || has("c_attn") || has("query")) return 0;
  if (has("attn") || has("attention")) return 1;
  if (has("fc1") || has("up_proj") || has("gate_proj") || has("c_fc") || has("layernorm_mlp")) return 2;
  if (has("fc2") || has("down_proj") || has("mlp")) return 3;
  return 4;
}

}  // namespace

std::vector<std::string> model_order(const std::vector<std::string>& layers) {
  std::vector<std::string> v = layers;
  const auto key = [](const std::string& name) {
    const auto t = split_transformer_layer(name);
    if (!t) return std::make_tuple(1, std::string(), 0, 0, name);
    return std::make_tuple(0, name.substr(0, t->start), t->index, module_rank(t->suffix), name);
  };
  std::stable_sort(v.begin(), v.end(), [&](const std::string& a, const std::string& b) { return key(a) < key(b); });
  return v;
}

Artifact document(const std::string& name, const PageHead& head, const svg::Markup& body) {
  svg::Markup m;
  m.open("html", {{"lang", "en"}}).open("head");
  m.leaf("meta", {{"charset", "utf-8"}});
  m.leaf("meta", {{"name", "viewport"}, {"content", "width=device-width, initial-scale=1"}});
  m.element("title", {}, head.title);
  m.element("style", {}, kCss);
  m.close().open("body");
  m.element("h1", {}, head.title);
  paragraph(m, head.subtitle, "note");
  m.open("nav").open("ul");
  for (const auto& [id, label] : head.nav) m.open("li").element("a", {{"href", "#" + id}}, label).close();
  m.close().close();
  if (!head.thinned.empty()) {
    paragraph(m, "Thinned to keep the page small:", "note");
    list(m, head.thinned);
  }
  m.append(body);
  m.close().close();
  std::string contents = "<!DOCTYPE html>\n" + m.str() + "\n";
  const std::string note = format_text("%.1f kB", static_cast<double>(contents.size()) / 1000.0);
  return {name, std::move(contents), note};
}

}  // namespace fp8a::html

// The pieces every HTML page of the reports shares (report.html, compare.html): the page itself
// (doctype, head, the one printable stylesheet, the heading, the navigation, what was thinned),
// tables, paragraphs, lists, number cells and model order. Built on svg::Markup, so the page is
// well-formed XML as well as HTML5; nothing in it refers outside the file.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "reports/artifact.hpp"
#include "reports/svg_plot.hpp"

namespace fp8a::html {

// A table cell; numeric cells are right-aligned (class "num").
struct Cell {
  std::string text;
  bool numeric = false;
};

// <table> with a header row and one row per entry of `rows`; row_classes[r], when not empty, is
// the class of row r ("bf16": bold, "top": bold on a highlight).
void table(svg::Markup& m, const std::vector<std::string>& header, const std::vector<std::vector<Cell>>& rows,
           const std::vector<std::string>& row_classes = {});
void paragraph(svg::Markup& m, const std::string& text, const char* cls = nullptr);  // <p class=cls>
void list(svg::Markup& m, const std::vector<std::string>& items);                     // <ul>

// A number for a cell: %.3g, "nan", "inf", "-inf".
std::string number(double v);

// Layer names in model order: the stack (what precedes "layers.<N>."), the transformer-layer
// index (core/layer_name.hpp), then where the module runs in its layer (QKV, attention output,
// MLP's first GEMM, the rest of the MLP, by the usual names of Megatron, TE, Hugging Face and
// GPT-2), then the name; names without an index after the indexed ones.
std::vector<std::string> model_order(const std::vector<std::string>& layers);

// What frames the body of a page.
struct PageHead {
  std::string title;     // <title> and <h1>
  std::string subtitle;  // the note under the heading (provenance)
  std::vector<std::pair<std::string, std::string>> nav;  // (section id, label), in page order
  std::vector<std::string> thinned;  // what was left out to keep the page small; listed when any
};

// The whole page as Artifact `name` (note: its size in kB): "<!DOCTYPE html>", <html lang="en">,
// the head with the stylesheet, then the heading, the navigation, the thinned list and `body`.
Artifact document(const std::string& name, const PageHead& head, const svg::Markup& body);

}  // namespace fp8a::html

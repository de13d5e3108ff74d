// A minimal well-formedness check for the markup the reports write (XML rules: every element
// closed in order, attribute values quoted, '&' only in the five XML entities or a numeric
// reference, no '<' in text). Not a parser: check_html.py runs lxml's strict one on a real page.
#pragma once

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace fp8a::test {

// "" when well-formed; else what is wrong and the byte offset.
inline std::string markup_error(std::string_view s) {
  std::vector<std::string> stack;
  std::size_t i = 0;
  const auto at = [&](const std::string& what) { return what + " at offset " + std::to_string(i); };
  while (i < s.size()) {
    const char c = s[i];
    if (c == '&') {
      const std::size_t semi = s.find(';', i);
      if (semi == std::string_view::npos || semi - i > 8) return at("bare '&'");
      const std::string_view ref = s.substr(i, semi - i + 1);
      if (ref != "&amp;" && ref != "&lt;" && ref != "&gt;" && ref != "&quot;" && ref != "&apos;" &&
          !ref.starts_with("&#"))
        return at("unknown entity " + std::string(ref));
      i = semi + 1;
      continue;
    }
    if (c == '>') return at("'>' in text");
    if (c != '<') {
      ++i;
      continue;
    }
    if (s.substr(i, 4) == "<!--") {
      const std::size_t end = s.find("-->", i);
      if (end == std::string_view::npos) return at("unclosed comment");
      i = end + 3;
      continue;
    }
    if (s.substr(i, 2) == "<!") {  // <!DOCTYPE html>
      const std::size_t end = s.find('>', i);
      if (end == std::string_view::npos) return at("unclosed declaration");
      i = end + 1;
      continue;
    }
    const bool closing = s.substr(i, 2) == "</";
    std::size_t j = i + (closing ? 2 : 1);
    const std::size_t name_start = j;
    while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '-' || s[j] == ':')) ++j;
    const std::string name(s.substr(name_start, j - name_start));
    if (name.empty()) return at("'<' without a tag name");
    // Attributes: name="value" pairs, values without '<'.
    bool self_closing = false;
    while (true) {
      while (j < s.size() && s[j] == ' ') ++j;
      if (j >= s.size()) return at("unterminated tag <" + name);
      if (s[j] == '>') break;
      if (s.substr(j, 2) == "/>") {
        self_closing = true;
        ++j;
        break;
      }
      if (closing) return at("attributes in </" + name + ">");
      const std::size_t eq = s.find('=', j);
      if (eq == std::string_view::npos || s[eq + 1] != '"') return at("unquoted attribute in <" + name);
      const std::size_t end = s.find('"', eq + 2);
      if (end == std::string_view::npos) return at("unterminated attribute in <" + name);
      if (s.substr(eq + 2, end - eq - 2).find('<') != std::string_view::npos)
        return at("'<' in an attribute of <" + name);
      j = end + 1;
    }
    if (closing) {
      if (stack.empty() || stack.back() != name)
        return at("</" + name + "> closes " + (stack.empty() ? std::string("nothing") : "<" + stack.back() + ">"));
      stack.pop_back();
    } else if (!self_closing) {
      stack.push_back(name);
    }
    i = j + 1;
    // The contents of <style> are CSS: skip to its end tag (CSS must not hold '<').
    if (!closing && !self_closing && name == "style") {
      const std::size_t end = s.find("</style>", i);
      if (end == std::string_view::npos) return at("unclosed <style>");
      if (s.substr(i, end - i).find_first_of("<&") != std::string_view::npos) return at("'<' or '&' in <style>");
      i = end;
    }
  }
  if (!stack.empty()) return "<" + stack.back() + "> never closed";
  return "";
}

// How often `needle` occurs in `s`.
inline std::size_t count_of(std::string_view s, std::string_view needle) {
  std::size_t n = 0;
  for (std::size_t p = s.find(needle); p != std::string_view::npos; p = s.find(needle, p + needle.size())) ++n;
  return n;
}

// Every <svg ...>...</svg> of a page, in order.
inline std::vector<std::string> svgs_of(std::string_view page) {
  std::vector<std::string> v;
  for (std::size_t p = page.find("<svg "); p != std::string_view::npos; p = page.find("<svg ", p + 1))
    v.emplace_back(page.substr(p, page.find("</svg>", p) + 6 - p));
  return v;
}

// "" when a report page is self-contained: the doctype first, well-formed, no URL, script, link
// or image, every url() a reference inside the page; else what is wrong.
inline std::string page_error(std::string_view s) {
  if (!s.starts_with("<!DOCTYPE html>\n<html lang=\"en\">")) return "no doctype and <html lang=\"en\"> first";
  if (std::string e = markup_error(s); !e.empty()) return e;
  for (const char* bad : {"http", "<script", "<link", "<img"})
    if (s.find(bad) != std::string_view::npos) return std::string(bad) + " in the page";
  if (count_of(s, "url(") != count_of(s, "url(#")) return "a url() that is not an anchor of the page";
  return "";
}

// "" when a chart has its title, both axis titles and a legend; else what is missing.
inline std::string chart_error(std::string_view svg) {
  if (std::string e = markup_error(svg); !e.empty()) return e;
  if (count_of(svg, "<title>") != 1) return "not one <title>";
  if (count_of(svg, "class=\"axis-title\"") != 2) return "not two axis titles";
  if (svg.find("class=\"legend\"") == std::string_view::npos) return "no legend";
  return "";
}

}  // namespace fp8a::test

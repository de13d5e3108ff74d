#include "reports/name_text.hpp"

#include <algorithm>
#include <cctype>

#include "core/text.hpp"

namespace fp8a {

namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_hex(std::string& out, unsigned v, int digits) {
  for (int d = digits - 1; d >= 0; --d) out += kHex[(v >> (4 * d)) & 0xF];
}

bool ascii_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

}  // namespace

std::string python_suffix_regex(std::string_view name, bool any_dot) {
  std::string r = "(^|\\.)";
  for (std::size_t i = 0; i < name.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_char(name.substr(i), &cp);
    if (n == 0 || (n == 1 && (cp < 0x20 || cp == 0x7F))) {
      r += "\\x";
      append_hex(r, static_cast<unsigned char>(name[i]), 2);
      ++i;
      continue;
    }
    if (is_layout_control(cp)) {
      r += "\\u";
      append_hex(r, static_cast<unsigned>(cp), 4);
    } else if (any_dot && name[i] == '_') {
      r += "[._]";
    } else {
      if (n == 1 && std::string_view(".^$*+?()[]{}|\\").find(name[i]) != std::string_view::npos) r += '\\';
      r.append(name.substr(i, n));
    }
    i += n;
  }
  return r + "$";
}

std::string fnmatch_exact_glob(std::string_view name, bool any_dot) {
  std::string g;
  for (std::size_t i = 0; i < name.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_char(name.substr(i), &cp);
    if (n == 0) {  // a byte outside UTF-8: U+FFFD
      g += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (any_dot && cp == '_') g += '?';
    else if (cp == '*' || cp == '?' || cp == '[') g += std::string("[") + static_cast<char>(cp) + "]";
    else g.append(name.substr(i, n));
    i += n;
  }
  return g;
}

std::string yaml_key_text(std::string_view name) {
  std::string k;
  for (char c : name) k += ascii_alnum(c) || c == '_' || c == '-' ? c : '_';
  return k;
}

std::string markdown_text(std::string_view text, bool starts_block) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != '\n' && text[i] != '\r') continue;
    const std::string line = visible_text(text.substr(start, i - start));
    for (std::size_t k = 0; k < line.size(); ++k) {
      const char c = line[k];
      switch (c) {
        case '<': out += "&lt;"; break;
        case '&': out += "&amp;"; break;
        case '_':
          if (k > 0 && k + 1 < line.size() && ascii_alnum(line[k - 1]) && ascii_alnum(line[k + 1])) out += c;
          else out += "\\_";
          break;
        default:
          // At the start, a block marker would make the text a quote, heading or list.
          if (std::string_view("\\`*[]|~").find(c) != std::string_view::npos ||
              (starts_block && out.empty() && std::string_view("#>-+=").find(c) != std::string_view::npos))
            out += '\\';
          out += c;
      }
    }
    if (i == text.size()) break;
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    out += "<br>";
    start = i + 1;
  }
  return out;
}

std::string markdown_code(std::string_view text) {
  const std::string shown = visible_text(text);
  std::size_t longest = 0;
  for (std::size_t i = 0, run = 0; i < shown.size(); ++i) {
    run = shown[i] == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  // A span that starts or ends with a backtick needs a space inside the fence (CommonMark strips
  // one space from each side).
  const bool pad = !shown.empty() && (shown.front() == '`' || shown.back() == '`');
  std::string body;
  for (char c : shown) body += c == '|' ? std::string("\\|") : std::string(1, c);
  return fence + (pad ? " " : "") + body + (pad ? " " : "") + fence;
}

}  // namespace fp8a

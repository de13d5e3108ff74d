#include "core/text.hpp"

#include <cstdarg>
#include <cstdio>
#include <optional>


namespace fp8a {

std::string format_text(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

std::string shape_text(std::span<const std::int64_t> shape, ShapeStyle style) {
  const bool tuple = style == ShapeStyle::kTuple;
  const char* separator = style == ShapeStyle::kCrossed ? "x" : ", ";
  std::string s = tuple ? "(" : "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? separator : "") + std::to_string(shape[i]);
  if (tuple && shape.size() == 1) s += ",";  // (4,): a one-element tuple
  return s + (tuple ? ")" : "]");
}

namespace {

// Length of the valid UTF-8 character at the start of s (2 to 4 bytes), 0 when s does not start
// with one. Rejects overlong forms, surrogates and code points beyond U+10FFFF (RFC 3629).
std::size_t utf8_length(std::string_view s, char32_t* code_point) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = b(0);
  const std::size_t n = lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
                      : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
  if (n == 0 || s.size() < n) return 0;
  constexpr char32_t kLeadBits[] = {0, 0, 0x1F, 0x0F, 0x07};
  constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  char32_t cp = lead & kLeadBits[n];
  for (std::size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i) & 0x3F);
  }
  if (cp < kSmallest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  *code_point = cp;
  return n;
}

void append_hex(std::string& out, unsigned char c) {
  constexpr char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 0xF];
}

// What differs between the escaped forms.
struct EscapeRules {
  bool keep_lines = false;        // \n and \t as they are (terminal_text)
  bool escape_backslash = true;   // \ -> \\ (not terminal_text)
  bool escape_quote = false;      // ' -> \' (quoted_input)
};

// Appends bytes escaped by `rules` to out, at most max_chars characters of them; returns the
// number of bytes shown.
std::size_t append_escaped(std::string& out, std::string_view bytes, std::size_t max_chars,
                           EscapeRules rules) {
  std::size_t i = 0;
  for (std::size_t shown = 0; i < bytes.size() && shown < max_chars; ++shown) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7F) {
      if ((c == '\\' && rules.escape_backslash) || (c == '\'' && rules.escape_quote)) out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (rules.keep_lines && (c == '\n' || c == '\t')) {
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\n' || c == '\r' || c == '\t') {
      out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t";
      ++i;
    } else if (char32_t cp = 0; c >= 0x80) {
      const std::size_t n = utf8_length(bytes.substr(i), &cp);
      if (n == 0) {
        append_hex(out, c);
        ++i;
      } else {
        for (std::size_t k = 0; k < n; ++k) {
          if (is_layout_control(cp)) append_hex(out, static_cast<unsigned char>(bytes[i + k]));
          else out += bytes[i + k];
        }
        i += n;
      }
    } else {
      append_hex(out, c);
      ++i;
    }
  }
  return i;
}

constexpr EscapeRules kQuotedRules{false, true, true};

std::string length_note(std::string_view bytes) { return " (" + std::to_string(bytes.size()) + " bytes)"; }

}  // namespace

std::string utf8_lossless(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (char32_t cp = 0; const std::size_t n = utf8_char(bytes.substr(i), &cp)) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      append_hex(out, c);
      ++i;
    }
  }
  return out;
}

std::string utf8_lossless_decode(std::string_view text) {
  const auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\\') {
      out += '\\';
      ++i;
    } else if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] == 'x' && hex(text[i + 2]) >= 0 &&
               hex(text[i + 3]) >= 0) {
      out += static_cast<char>(hex(text[i + 2]) * 16 + hex(text[i + 3]));
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string quoted_input(std::string_view bytes, std::size_t max_chars) {
  std::string out = "'";
  if (append_escaped(out, bytes, max_chars, kQuotedRules) == bytes.size()) return out + "'";
  return out + "...'" + length_note(bytes);
}

std::string escaped_input(std::string_view bytes, std::size_t max_chars) {
  std::string out;
  if (append_escaped(out, bytes, max_chars, kQuotedRules) == bytes.size()) return out;
  return out + "..." + length_note(bytes);
}

std::size_t utf8_char(std::string_view s, char32_t* code_point) {
  if (s.empty()) return 0;
  const auto c = static_cast<unsigned char>(s[0]);
  if (c < 0x80) {
    *code_point = c;
    return 1;
  }
  return utf8_length(s, code_point);
}

bool is_layout_control(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) ||
         cp == 0xFEFF || cp == 0xFFFE || cp == 0xFFFF;
}

std::string visible_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  append_escaped(out, bytes, bytes.size(), {false, true, false});
  return out;
}

std::string terminal_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_escaped(out, text, text.size(), {true, false, false});
  return out;
}

bool is_valid_utf8(std::string_view bytes) { return !first_invalid_utf8(bytes).has_value(); }

std::string printable_text(std::string_view bytes, std::size_t max_chars) {
  std::string out;
  if (append_escaped(out, bytes, max_chars, {false, false, false}) == bytes.size()) return out;
  return out + "..." + length_note(bytes);
}

std::optional<std::size_t> first_invalid_utf8(std::string_view bytes) {
  for (std::size_t i = 0; i < bytes.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_char(bytes.substr(i), &cp);
    if (n == 0) return i;
    i += n;
  }
  return std::nullopt;
}

std::string utf16_or_utf32_bom(std::string_view bytes) {
  struct Bom {
    std::string_view bytes, hex, encoding;
  };
  // UTF-32LE's mark begins with UTF-16LE's: it is looked for first.
  static constexpr Bom kBoms[] = {{std::string_view("\x00\x00\xFE\xFF", 4), "00 00 FE FF", "UTF-32BE"},
                                  {std::string_view("\xFF\xFE\x00\x00", 4), "FF FE 00 00", "UTF-32LE"},
                                  {"\xFE\xFF", "FE FF", "UTF-16BE"},
                                  {"\xFF\xFE", "FF FE", "UTF-16LE"}};
  for (const Bom& b : kBoms)
    if (bytes.starts_with(b.bytes))
      return std::string(b.encoding) + " (it starts with the byte order mark " + std::string(b.hex) + ")";
  return {};
}

}  // namespace fp8a

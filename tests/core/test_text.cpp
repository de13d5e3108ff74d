// Shapes and quoted names as messages and reports write them (core/text.hpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/text.hpp"

using fp8a::ShapeStyle;

TEST_CASE("shape_text: the three spellings, scalars and 1-D shapes included") {
  const std::vector<std::int64_t> s2{4, 8}, s1{4}, s0{}, s3{2, 0, -1};
  CHECK(fp8a::shape_text(s2) == "[4, 8]");
  CHECK(fp8a::shape_text(s1) == "[4]");
  CHECK(fp8a::shape_text(s0) == "[]");
  CHECK(fp8a::shape_text(s3) == "[2, 0, -1]");
  CHECK(fp8a::shape_text(s2, ShapeStyle::kCrossed) == "[4x8]");
  CHECK(fp8a::shape_text(s1, ShapeStyle::kCrossed) == "[4]");
  CHECK(fp8a::shape_text(s0, ShapeStyle::kCrossed) == "[]");
  CHECK(fp8a::shape_text(s2, ShapeStyle::kTuple) == "(4, 8)");
  CHECK(fp8a::shape_text(s1, ShapeStyle::kTuple) == "(4,)");
  CHECK(fp8a::shape_text(s0, ShapeStyle::kTuple) == "()");
}

namespace {

// RFC 3629's table of well-formed UTF-8 byte sequences (section 4), written out: an independent
// check of utf8_lossless's output.
bool well_formed_utf8(std::string_view s) {
  const auto in = [](unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
  for (std::size_t i = 0; i < s.size();) {
    const auto b = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
    const unsigned char c = b(0);
    std::size_t n = 0;
    if (c <= 0x7F) n = 1;
    else if (in(c, 0xC2, 0xDF) && in(b(1), 0x80, 0xBF)) n = 2;
    else if (c == 0xE0 && in(b(1), 0xA0, 0xBF) && in(b(2), 0x80, 0xBF)) n = 3;
    else if ((in(c, 0xE1, 0xEC) || in(c, 0xEE, 0xEF)) && in(b(1), 0x80, 0xBF) && in(b(2), 0x80, 0xBF)) n = 3;
    else if (c == 0xED && in(b(1), 0x80, 0x9F) && in(b(2), 0x80, 0xBF)) n = 3;
    else if (c == 0xF0 && in(b(1), 0x90, 0xBF) && in(b(2), 0x80, 0xBF) && in(b(3), 0x80, 0xBF)) n = 4;
    else if (in(c, 0xF1, 0xF3) && in(b(1), 0x80, 0xBF) && in(b(2), 0x80, 0xBF) && in(b(3), 0x80, 0xBF)) n = 4;
    else if (c == 0xF4 && in(b(1), 0x80, 0x8F) && in(b(2), 0x80, 0xBF) && in(b(3), 0x80, 0xBF)) n = 4;
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace

TEST_CASE("utf8_lossless: valid UTF-8 kept, \\ doubled, other bytes as \\xNN; decode gives the bytes back") {
  using fp8a::utf8_lossless;
  using fp8a::utf8_lossless_decode;
  CHECK(utf8_lossless("caps/step_1.safetensors") == "caps/step_1.safetensors");
  CHECK(utf8_lossless("d\xC3\xA9j\xC3\xA0/\xE4\xB8\xAD/\xF0\x9F\x98\x80") == "d\xC3\xA9j\xC3\xA0/\xE4\xB8\xAD/\xF0\x9F\x98\x80");
  CHECK(utf8_lossless(std::string("a\0b\r\n", 5)) == std::string("a\0b\r\n", 5));  // JSON escapes these itself
  CHECK(utf8_lossless("a\\b") == "a\\\\b");
  CHECK(utf8_lossless("caps\xFF/x") == "caps\\xff/x");
  CHECK(utf8_lossless("\\xff") == "\\\\xff");  // the text "\xff", not the byte
  CHECK(utf8_lossless("\xC3") == "\\xc3");              // a lead byte cut short
  CHECK(utf8_lossless("\xC0\xAF") == "\\xc0\\xaf");     // overlong '/'
  CHECK(utf8_lossless("\xED\xA0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(utf8_lossless("\xF4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // beyond U+10FFFF
  CHECK(utf8_lossless("\x80\xC3\xA9") == "\\x80\xC3\xA9");  // a stray continuation, then é
  CHECK(utf8_lossless_decode("caps\\xff/x") == "caps\xFF/x");
  CHECK(utf8_lossless_decode("\\\\xff") == "\\xff");
  CHECK(utf8_lossless_decode("\\xFF") == "\xFF");
  // Not the form: kept as it is.
  CHECK(utf8_lossless_decode("a\\b\\x4") == "a\\b\\x4");
  CHECK(utf8_lossless_decode("\\xg0\\") == "\\xg0\\");

  // Every byte and every pair of bytes, then random strings of bytes biased to UTF-8's lead and
  // continuation ranges: well-formed out, the same bytes back.
  std::vector<std::string> cases;
  for (int a = 0; a < 256; ++a)
    for (int b = 0; b < 256; ++b) cases.push_back({static_cast<char>(a), static_cast<char>(b)});
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  const auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  const unsigned char pool[] = {'a', '\\', 'x', 'f', '0', 0x80, 0xBF, 0xC2, 0xC3, 0xE0, 0xED, 0xF0, 0xF4, 0xFF, 0xA0};
  for (int i = 0; i < 20000; ++i) {
    std::string s(next() % 12, '\0');
    for (char& c : s) c = static_cast<char>(next() % 3 == 0 ? next() % 256 : pool[next() % sizeof pool]);
    cases.push_back(s);
  }
  for (const std::string& s : cases) {
    const std::string e = utf8_lossless(s);
    const bool kept = !well_formed_utf8(s) || s.find('\\') != std::string::npos || e == s;
    if (!well_formed_utf8(e) || utf8_lossless_decode(e) != s || !kept) {
      FAIL_CHECK("bytes " << fp8a::quoted_input(s) << " -> " << fp8a::quoted_input(e));
      break;
    }
  }
}

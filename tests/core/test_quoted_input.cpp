// quoted_input (core/error.hpp): input bytes quoted for a one-line message.
#include <doctest/doctest.h>

#include <string>

#include "core/text.hpp"

using fp8a::quoted_input;

TEST_CASE("quoted_input: printable ASCII as it is, in single quotes; \\ and ' escaped") {
  CHECK(quoted_input("") == "''");
  CHECK(quoted_input("layers.0.weight") == "'layers.0.weight'");
  CHECK(quoted_input("it's") == "'it\\'s'");
  CHECK(quoted_input("a\\b") == "'a\\\\b'");
}

TEST_CASE("quoted_input: control bytes escaped, so the message stays on one line") {
  CHECK(quoted_input("a\nb\tc\rd") == "'a\\nb\\tc\\rd'");
  CHECK(quoted_input(std::string("\0\x01\x1f\x7f", 4)) == "'\\x00\\x01\\x1f\\x7f'");
  CHECK(quoted_input("\x1b[2J") == "'\\x1b[2J'");  // a terminal escape sequence is not run
}

TEST_CASE("quoted_input: valid UTF-8 kept, other high bytes as \\xNN") {
  CHECK(quoted_input("caf\xC3\xA9 \xE5\xB1\x82.weight \xF0\x9F\x98\x80") ==
        "'caf\xC3\xA9 \xE5\xB1\x82.weight \xF0\x9F\x98\x80'");
  CHECK(quoted_input("\x93NUMPY") == "'\\x93NUMPY'");           // stray continuation byte
  CHECK(quoted_input("\xC3") == "'\\xc3'");                     // cut sequence
  CHECK(quoted_input("\xC3(") == "'\\xc3('");                   // bad continuation
  CHECK(quoted_input("\xC0\xAF") == "'\\xc0\\xaf'");            // overlong '/'
  CHECK(quoted_input("\xED\xA0\x80") == "'\\xed\\xa0\\x80'");   // surrogate U+D800
  CHECK(quoted_input("\xF4\x90\x80\x80") == "'\\xf4\\x90\\x80\\x80'");  // beyond U+10FFFF
  CHECK(quoted_input("\xFF\xFE") == "'\\xff\\xfe'");
  // Valid UTF-8 that breaks or reorders a line: C1 NEL, LINE SEPARATOR, RIGHT-TO-LEFT OVERRIDE.
  CHECK(quoted_input("a\xC2\x85" "b") == "'a\\xc2\\x85b'");
  CHECK(quoted_input("a\xE2\x80\xA8" "b") == "'a\\xe2\\x80\\xa8b'");
  CHECK(quoted_input("a\xE2\x80\xAE" "b") == "'a\\xe2\\x80\\xaeb'");
}

TEST_CASE("quoted_input: long text cut at max_chars characters, with its length in bytes") {
  CHECK(quoted_input(std::string(80, 'x')) == "'" + std::string(80, 'x') + "'");
  CHECK(quoted_input(std::string(81, 'x')) == "'" + std::string(80, 'x') + "...' (81 bytes)");
  CHECK(quoted_input("abcdef", 3) == "'abc...' (6 bytes)");
  // A character is one UTF-8 character or one escaped byte; never cut inside one.
  CHECK(quoted_input("\xC3\xA9\xC3\xA9\xC3\xA9", 2) == "'\xC3\xA9\xC3\xA9...' (6 bytes)");
  CHECK(quoted_input("\n\n\n\n", 2) == "'\\n\\n...' (4 bytes)");
  CHECK(quoted_input("abc", 0) == "'...' (3 bytes)");
}

TEST_CASE("escaped_input: the same escaping without the quotes") {
  CHECK(fp8a::escaped_input("archive/data.pkl") == "archive/data.pkl");
  CHECK(fp8a::escaped_input("a\n\xff") == "a\\n\\xff");
  CHECK(fp8a::escaped_input("abcdef", 3) == "abc... (6 bytes)");
}

TEST_CASE("visible_text: the escapes in full, ' kept, no cut") {
  CHECK(fp8a::visible_text("layers.0.fc1") == "layers.0.fc1");
  CHECK(fp8a::visible_text(std::string("a\r\n\t\0'\\", 7)) == "a\\r\\n\\t\\x00'\\\\");
  CHECK(fp8a::visible_text("\xC2\x85\xE2\x80\xA9\xEF\xBB\xBF\xEF\xBF\xBE\xFF") ==
        "\\xc2\\x85\\xe2\\x80\\xa9\\xef\\xbb\\xbf\\xef\\xbf\\xbe\\xff");
  CHECK(fp8a::visible_text(std::string(500, 'x')) == std::string(500, 'x'));
}

TEST_CASE("terminal_text: \\n and \\t kept, \\ kept, every other control visible") {
  CHECK(fp8a::terminal_text("a\n\tb\\c") == "a\n\tb\\c");
  CHECK(fp8a::terminal_text("\x1b[31m\r\x07") == "\\x1b[31m\\r\\x07");
}

TEST_CASE("utf8_lossless: lossless valid UTF-8, and back") {
  CHECK(fp8a::utf8_lossless("caf\xC3\xA9") == "caf\xC3\xA9");
  CHECK(fp8a::utf8_lossless("caf\xE9") == "caf\\xe9");
  CHECK(fp8a::utf8_lossless("a\\xe9") == "a\\\\xe9");
  for (const std::string& s : {std::string("caf\xE9"), std::string("a\\xe9"), std::string("\\\\\xFF\\"), std::string()})
    CHECK(fp8a::utf8_lossless_decode(fp8a::utf8_lossless(s)) == s);
  CHECK(fp8a::is_valid_utf8("\xE5\xB1\x82"));
  CHECK_FALSE(fp8a::is_valid_utf8("\xED\xA0\x80"));
}

TEST_CASE("printable_text: escaped_input's escapes, \\ and ' kept, for a message that quotes in its own way") {
  CHECK(fp8a::printable_text("last read: '\"a\\b'") == "last read: '\"a\\b'");
  CHECK(fp8a::printable_text("x\x1b[31m\xff\xe2\x80\xae\n") == "x\\x1b[31m\\xff\\xe2\\x80\\xae\\n");
  CHECK(fp8a::printable_text("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(fp8a::printable_text("abcdef", 3) == "abc... (6 bytes)");
}

TEST_CASE("first_invalid_utf8: the offset of the first byte that begins no UTF-8 character") {
  CHECK(!fp8a::first_invalid_utf8("").has_value());
  CHECK(!fp8a::first_invalid_utf8(std::string_view("a\0\x1b\x7f", 4)).has_value());  // controls are UTF-8
  CHECK(!fp8a::first_invalid_utf8("caf\xc3\xa9 \xe2\x80\xae \xf0\x9f\x98\x80").has_value());
  CHECK(fp8a::first_invalid_utf8("ab\xff") == 2u);
  CHECK(fp8a::first_invalid_utf8("\xc3") == 0u);              // cut short
  CHECK(fp8a::first_invalid_utf8("a\xc0\xaf") == 1u);         // overlong '/'
  CHECK(fp8a::first_invalid_utf8("\xc3\xa9\xed\xa0\x80") == 2u);  // a surrogate
  CHECK(fp8a::first_invalid_utf8("\xf4\x90\x80\x80") == 0u);  // beyond U+10FFFF
}

TEST_CASE("utf16_or_utf32_bom: the encoding a byte order mark names") {
  CHECK(fp8a::utf16_or_utf32_bom("\xff\xfe{") == "UTF-16LE (it starts with the byte order mark FF FE)");
  CHECK(fp8a::utf16_or_utf32_bom("\xfe\xff") == "UTF-16BE (it starts with the byte order mark FE FF)");
  CHECK(fp8a::utf16_or_utf32_bom(std::string_view("\xff\xfe\0\0", 4)) ==
        "UTF-32LE (it starts with the byte order mark FF FE 00 00)");
  CHECK(fp8a::utf16_or_utf32_bom(std::string_view("\0\0\xfe\xff", 4)) ==
        "UTF-32BE (it starts with the byte order mark 00 00 FE FF)");
  CHECK(fp8a::utf16_or_utf32_bom("\xef\xbb\xbf{}").empty());  // UTF-8's mark
  CHECK(fp8a::utf16_or_utf32_bom("{}").empty());
  CHECK(fp8a::utf16_or_utf32_bom("\xff").empty());
}

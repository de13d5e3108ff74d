// Text for messages and reports: printf-style formatting, a tensor shape, and text from an input
// file quoted for a one-line message.
// (A suffix test is std::string_view::ends_with.)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace fp8a {

// printf into a std::string of whatever length the result needs.
std::string format_text(const char* format, ...) __attribute__((format(printf, 1, 2)));

// How shape_text() writes a shape; each example is the shape {4, 8} (and {4}).
enum class ShapeStyle : std::uint8_t {
  kList,     // [4, 8]          ([4]; [] for a scalar): messages, `inspect`
  kCrossed,  // [4x8]           ([4]; []): metrics.csv's shape column
  kTuple,    // (4, 8)          ((4,); ()): numpy's spelling, for .npy/.npz messages
};

// The dims of a shape as text, in `style`. Dims are written as they are (negative ones too).
std::string shape_text(std::span<const std::int64_t> shape, ShapeStyle style = ShapeStyle::kList);

// Text that came from an input file (a key, a name, a dtype string, a line), for a message: in
// single quotes, on one line, readable whatever the bytes are.
// - \n \r \t, and \xNN for the other control bytes (0x00-0x1f, 0x7f), for bytes that are not
//   valid UTF-8 (stray continuation bytes, overlong forms, surrogates, beyond U+10FFFF), and for
//   the bytes of valid UTF-8 characters that control or reorder a line: C1 controls
//   (U+0080-U+009F), U+2028-U+202E, U+2066-U+2069. `\` and `'` become \\ and \'.
// - Other valid UTF-8 (a tensor name in Chinese, a "×") is kept as it is.
// - At most max_chars characters of `bytes` are shown (a character: one UTF-8 character, or one
//   escaped byte); longer text is cut there and ends in "...", followed by its length outside
//   the quotes: 'abc...' (1234 bytes).
std::string quoted_input(std::string_view bytes, std::size_t max_chars = 80);
// The same without the quotes, for text that a message shows bare (a zip member path in a list):
// 'abc' -> abc, a cut one ends in "... (1234 bytes)".
std::string escaped_input(std::string_view bytes, std::size_t max_chars = 80);
// A message that quotes input bytes in its own way (a JSON parser's, an option parser's), made
// one readable line: escaped_input's escapes, except that `\` and `'` are kept as they are.
std::string printable_text(std::string_view bytes, std::size_t max_chars = 400);

// The offset of the first byte of `bytes` that does not begin a valid UTF-8 character (RFC 3629,
// quoted_input's rules), or unset when all of it is UTF-8. ASCII control bytes are valid UTF-8.
std::optional<std::size_t> first_invalid_utf8(std::string_view bytes);

// A UTF-16 or UTF-32 byte order mark at the start of `bytes`, for a message that a file is not
// UTF-8: "UTF-16LE (it starts with the byte order mark FF FE)"; empty when there is none.
std::string utf16_or_utf32_bom(std::string_view bytes);

// The longest tensor / layer name a capture may hold, in bytes (fp8a.capture.410 above it). Real
// module names are under 300 bytes; the bound keeps every report's size proportional to the
// number of layers, not to a hostile name.
inline constexpr std::size_t kMaxNameBytes = 4096;

// Text from an input file (a layer name) shown in full on one line of an output that is not a
// message: a YAML comment, a Markdown cell. quoted_input's escapes (\\ \n \r \t \xNN, the same bytes
// escaped), without the quotes, `'` kept, no length cut. Lossless: every `\` of the result starts
// one of those escapes, so the original bytes can be read back.
std::string visible_text(std::string_view bytes);

// Text for a terminal or an HTML page, where lines are fine but nothing may move the cursor,
// reorder the line or be invalid UTF-8: `\n` and `\t` kept, every other byte that visible_text
// escapes written as \r or \xNN; `\` kept (a display form: not reversible).
std::string terminal_text(std::string_view text);

// Whether the bytes are valid UTF-8 (RFC 3629: no overlong forms, surrogates, or code points
// beyond U+10FFFF).
bool is_valid_utf8(std::string_view bytes);

// The length of the character at the start of `s` (non-empty): 1 for an ASCII byte (code point
// = the byte), 2-4 for a valid UTF-8 character, 0 for a byte that does not start one.
std::size_t utf8_char(std::string_view s, char32_t* code_point);
// Valid UTF-8 characters that visible_text escapes: C1 controls (U+0080-U+009F, NEL U+0085 a YAML
// line break), U+2028-U+202E (line and paragraph separators, bidi embedding and overrides),
// U+2066-U+2069 (bidi isolates), U+FEFF (byte order mark), U+FFFE and U+FFFF (noncharacters, which
// YAML readers refuse).
bool is_layout_control(char32_t code_point);

// Bytes (a path, a command-line word: POSIX gives them no encoding) as valid UTF-8 that gives the
// bytes back, for JSON, whose strings must be UTF-8. The form is documented in docs/FORMATS.md:
// - every `\` is written `\\` (two of them);
// - each byte that is not part of a valid UTF-8 character (stray continuation bytes, overlong
//   forms, surrogates, beyond U+10FFFF; utf8_length's rules) is written `\xNN`, lowercase hex;
// - everything else, control characters included (JSON escapes those itself), is kept.
// Valid UTF-8 without a backslash comes out as it went in.
std::string utf8_lossless(std::string_view bytes);
// The inverse: utf8_lossless_decode(utf8_lossless(b)) == b for every b. Text not in the form (a
// `\` before anything but `\` or `x` and two hex digits) is kept as it is.
std::string utf8_lossless_decode(std::string_view text);

}  // namespace fp8a

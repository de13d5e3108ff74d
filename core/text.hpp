// Text for messages and reports: printf-style formatting, a tensor shape, and text from an input
// file quoted for a one-line message.
// (A suffix test is std::string_view::ends_with.)
#pragma once

#include <cstdint>
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

// Bytes (a path, a command-line word: POSIX gives them no encoding) as valid UTF-8 that gives the
// bytes back, for JSON, whose strings must be UTF-8. The form is documented in README.md:
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

// Text for messages and reports: a tensor shape, a name quoted for a one-line message.
// (A suffix test is std::string_view::ends_with.)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace fp8a {

// How shape_text() writes a shape; each example is the shape {4, 8} (and {4}).
enum class ShapeStyle : std::uint8_t {
  kList,     // [4, 8]          ([4]; [] for a scalar): messages, `inspect`
  kCrossed,  // [4x8]           ([4]; []): metrics.csv's shape column
  kTuple,    // (4, 8)          ((4,); ()): numpy's spelling, for .npy/.npz messages
};

// The dims of a shape as text, in `style`. Dims are written as they are (negative ones too).
std::string shape_text(std::span<const std::int64_t> shape, ShapeStyle style = ShapeStyle::kList);

// How quoted() writes text that may hold any bytes (a name read from a file). The default: escaped,
// at most 120 bytes.
struct QuoteStyle {
  // Control bytes (< 0x20, 0x7F), ' and \ written as \xNN (two lower-case hex digits), so the
  // message stays on one line and the quotes stay unambiguous.
  bool escape = true;
  // At most this many bytes of the text are shown; when it is longer, "..." follows them.
  std::size_t max_bytes = 120;
};

// `s` in single quotes for a message, written as `style` says.
std::string quoted(std::string_view s, QuoteStyle style = {});

}  // namespace fp8a

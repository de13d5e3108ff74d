// Plain-text tables for the terminal: columns padded to their widest cell, two spaces apart.
#pragma once

#include <string>
#include <vector>

namespace fp8a {

// left[c] says whether column c is left-aligned (text) or right-aligned (numbers); columns past
// the end of `left` are left-aligned. Trailing spaces are not written. A cell's control bytes and
// bytes that are not UTF-8 are written escaped (printable_text): one line per row, no terminal codes.
// marked[r][c] (rows past its end, or cells past a row's end: unmarked) wraps the cell of row r in
// kTerminalMark ... kTerminalReset, outside the padding, so the columns stay aligned on a terminal.
std::string render_text_table(const std::vector<std::string>& head,
                              const std::vector<std::vector<std::string>>& rows,
                              const std::vector<bool>& left,
                              const std::vector<std::vector<bool>>& marked = {});

// ANSI SGR bold + reverse video, and the reset after it.
inline constexpr const char* kTerminalMark = "\x1b[1;7m";
inline constexpr const char* kTerminalReset = "\x1b[0m";

}  // namespace fp8a

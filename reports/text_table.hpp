// Plain-text tables for the terminal: columns padded to their widest cell, two spaces apart.
#pragma once

#include <string>
#include <vector>

namespace fp8a {

// left[c] says whether column c is left-aligned (text) or right-aligned (numbers); columns past
// the end of `left` are left-aligned. Trailing spaces are not written.
std::string render_text_table(const std::vector<std::string>& head,
                              const std::vector<std::vector<std::string>>& rows,
                              const std::vector<bool>& left);

}  // namespace fp8a

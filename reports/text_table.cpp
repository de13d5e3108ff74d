#include "reports/text_table.hpp"

#include <algorithm>
#include "core/text.hpp"

namespace fp8a {

std::string render_text_table(const std::vector<std::string>& head_in,
                              const std::vector<std::vector<std::string>>& rows_in,
                              const std::vector<bool>& left,
                              const std::vector<std::vector<bool>>& marked_in) {
  // A cell is one line on a terminal whatever bytes a name brings (core/text.hpp visible_text).
  const auto shown = [](const std::vector<std::string>& row) {
    std::vector<std::string> v;
    for (const auto& c : row) v.push_back(visible_text(c));
    return v;
  };
  const std::vector<std::string> head = shown(head_in);
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : rows_in) rows.push_back(shown(r));
  const auto& marked = marked_in;
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& row, const std::vector<bool>* marks) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::size_t pad = width[c] - row[c].size();
      const bool is_left = c >= left.size() || left[c];
      const bool mark = marks != nullptr && c < marks->size() && (*marks)[c];
      if (!is_left) line.append(pad, ' ');
      line += mark ? kTerminalMark + row[c] + kTerminalReset : row[c];
      if (c + 1 < row.size()) line.append((is_left ? pad : 0) + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + '\n';
  };
  emit(head, nullptr);
  for (std::size_t r = 0; r < rows.size(); ++r) emit(rows[r], r < marked.size() ? &marked[r] : nullptr);
  return out;
}

}  // namespace fp8a

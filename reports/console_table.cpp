#include "reports/console_table.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace fp8a {

namespace {

std::string fixed(double v, int decimals) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string where(const WorstValue& w) { return w.tensor + "@" + std::to_string(w.step); }

}  // namespace

std::string render_layer_table(std::span<const LayerSummary> layers) {
  const std::vector<std::string> head = {"layer", "recipe", "min sqnr dB", "(where)", "min cos",
                                         "max underflow %", "max overflow %"};
  std::vector<std::vector<std::string>> cells;
  for (const auto& l : layers)
    cells.push_back({l.layer, l.recipe, fixed(l.min_sqnr_db.value, 2), where(l.min_sqnr_db),
                     fixed(l.min_cos.value, 6), fixed(l.max_underflow_pct.value, 3),
                     fixed(l.max_overflow_pct.value, 3)});
  std::vector<std::size_t> width(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::size_t pad = width[c] - row[c].size();
      // Text columns left-aligned, numbers right-aligned.
      const bool left = c < 2 || c == 3;
      if (!left) out.append(pad, ' ');
      out += row[c];
      if (left && c + 1 < row.size()) out.append(pad, ' ');
      if (c + 1 < row.size()) out += "  ";
    }
    out += '\n';
  };
  emit(head);
  for (const auto& row : cells) emit(row);
  return out;
}

}  // namespace fp8a

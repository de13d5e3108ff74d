// "did you mean ...?" for unknown names.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/text.hpp"

namespace fp8a {

inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The candidates within a few edits of name (at most max(2, |name| / 3)), closest first (ties in
// the candidates' order), at most max_count of them.
inline std::vector<std::string> closest_names(std::string_view name,
                                              const std::vector<std::string>& candidates,
                                              std::size_t max_count) {
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  std::vector<std::pair<std::size_t, std::string>> near;
  for (const auto& c : candidates) {
    // The distance is at least the difference in length: a 50 kB captured name is not compared
    // character by character with a short one.
    const std::size_t longer = std::max(name.size(), c.size()), shorter = std::min(name.size(), c.size());
    if (longer - shorter > limit) continue;
    if (const std::size_t d = edit_distance(name, c); d <= limit) near.emplace_back(d, c);
  }
  std::stable_sort(near.begin(), near.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < near.size() && i < max_count; ++i) out.push_back(near[i].second);
  return out;
}

// " (did you mean 'x'?)", or " (did you mean 'x' or 'y'?)" for up to max_count of the closest
// candidates (closest_names), each as quoted_input shows it (a candidate may be a captured name);
// "" when none is close.
inline std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates,
                                std::size_t max_count = 1) {
  constexpr std::size_t kShownChars = 200;
  const std::vector<std::string> near = closest_names(name, candidates, max_count);
  if (near.empty()) return {};
  std::string s = " (did you mean ";
  for (std::size_t i = 0; i < near.size(); ++i)
    s += (i == 0 ? "" : i + 1 == near.size() ? " or " : ", ") + quoted_input(near[i], kShownChars);
  return s + "?)";
}

}  // namespace fp8a

#include "reports/console_table.hpp"

#include <vector>

#include "reports/number_format.hpp"
#include "reports/text_table.hpp"

namespace fp8a {

std::string worst_where(const WorstValue& w) { return w.tensor + "@" + std::to_string(w.step); }

std::string render_layer_table(std::span<const LayerSummary> layers) {
  bool several_formats = false;
  for (const auto& l : layers) several_formats = several_formats || l.format != layers.front().format;
  std::vector<std::string> head = {"layer", "recipe", "min sqnr dB", "(where)", "min cos",
                                   "max underflow %", "max saturated %"};
  std::vector<bool> left = {true, true, false, true, false, false, false};
  if (several_formats) {
    head.insert(head.begin() + 2, "format");
    left.insert(left.begin() + 2, true);
  }
  std::vector<std::vector<std::string>> cells;
  for (const auto& l : layers) {
    cells.push_back({l.layer, l.recipe, format_fixed(l.min_sqnr_db.value, 2), worst_where(l.min_sqnr_db),
                     format_fixed(l.min_cos.value, 6), format_fixed(l.max_underflow_pct.value, 3),
                     format_fixed(l.max_saturated_pct.value, 3)});
    if (several_formats) cells.back().insert(cells.back().begin() + 2, training_format_name(l.format));
  }
  return render_text_table(head, cells, left);
}

std::string render_logged_stats_line(const LoggedStatsSummary& s, bool training_recipe_given) {
  std::string line = "nvdlfw_inspect FP8 statistics: " + std::to_string(s.logged) + " logged, " +
                     std::to_string(s.paired) + " beside our numbers";
  if (!s.max_abs_difference.empty()) {
    line += " (largest |ours - logged|:";
    bool first = true;
    for (const auto& [name, d] : s.max_abs_difference) {
      line += (first ? " " : ", ") + name + " " + format_number(d);
      first = false;
    }
    line += ")";
  }
  if (s.paired < s.logged)
    line += std::string("; the others are for tensors or steps not captured") +
            (training_recipe_given ? "" : " or for the training recipe (--training-recipe)") +
            ", see the note column";
  return line + "\n";
}

}  // namespace fp8a

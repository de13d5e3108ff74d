#include "engine/logged_stats.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "engine/evaluation_index.hpp"

namespace fp8a {

namespace {

double our_value(const LoggedFp8Stat& s, const EvaluationRow& row) {
  const QuantMetrics& m = row.metrics;
  // TE logs E8M0 scales (MXFP8) as their raw codes.
  const bool e8m0 = recipe_kind_traits(row.recipe.kind).scale_type == ScaleType::kE8M0;
  switch (s.stat) {
    case LoggedStatKind::kUnderflowPct: return m.underflow_pct;
    case LoggedStatKind::kOverflowPct: return m.overflow_pct;
    case LoggedStatKind::kMse: return m.mse;
    case LoggedStatKind::kScaleInvMin:
      return e8m0 ? std::log2(static_cast<double>(m.scale_inv_min)) + 127.0 : m.scale_inv_min;
    case LoggedStatKind::kScaleInvMax:
      return e8m0 ? std::log2(static_cast<double>(m.scale_inv_max)) + 127.0 : m.scale_inv_max;
  }
  return 0.0;
}

}  // namespace

std::string sanitized_layer_name(std::string_view layer) {
  std::string out(layer);
  for (char& c : out) {
    switch (c) {
      case '/': case '\\': case ':': case '*': case '?': case '"': case '<': case '>': case '|':
      case ' ': case '.':
        c = '_';
        break;
      default:
        break;
    }
  }
  return out;
}

std::vector<LoggedComparison> compare_logged_stats(std::span<const LoggedFp8Stat> logged,
                                                   std::span<const EvaluationRow> rows,
                                                   const std::optional<Recipe>& training_recipe) {
  const EvaluationIndex index(rows);
  // The training run's format, as its log's statistics were cast in (TE's debug features quantise
  // every logged recipe with the run's FP8 types): hybrid when the table holds it, else its first.
  const auto& formats = index.formats();
  const TrainingFormat format =
      formats.empty() || std::find(formats.begin(), formats.end(), TrainingFormat::kHybrid) != formats.end()
          ? TrainingFormat::kHybrid
          : formats.front();
  // A recipe's row of the tensor cast to the FP8 type the format gives its role, in whichever
  // format the table holds it (activations and weights are E4M3 in both): under --format auto an
  // MXFP8 recipe is evaluated in e4m3 only, which serves every role but hybrid's gradients.
  const auto find_row = [&](const CaptureKey& tensor, const Recipe& recipe, Orientation o) -> const EvaluationRow* {
    const Fp8Format type = fp8_format_for(format, tensor.role);
    for (const TrainingFormat f : formats)
      if (const EvaluationRow* row = index.find(tensor, recipe, f, o); row != nullptr && row->fp8 == type) return row;
    return nullptr;
  };
  // Captured layers by sanitised name; a sanitised name shared by two layers matches neither.
  std::map<std::string, std::set<std::string>> layers_of;
  for (const auto& layer : index.layers()) layers_of[sanitized_layer_name(layer)].insert(layer);
  // The captured layer a logged name is: the one with its sanitised name, else of two or more
  // such, the one named exactly; "" if none.
  const auto captured_layer = [&](std::string_view layer) -> std::string {
    const auto it = layers_of.find(sanitized_layer_name(layer));
    if (it == layers_of.end()) return {};
    if (it->second.size() == 1) return *it->second.begin();
    return it->second.count(std::string(layer)) != 0 ? std::string(layer) : std::string();
  };

  std::vector<LoggedComparison> out;
  out.reserve(logged.size());
  for (const auto& s : logged) {
    LoggedComparison c;
    c.logged = &s;
    c.orientation = s.columnwise ? Orientation::kColumnwise : Orientation::kRowwise;
    std::optional<Recipe> recipe;
    switch (s.recipe) {
      case LoggedRecipe::kTraining:
        if (training_recipe)
          recipe = training_recipe;
        else
          c.note = "the training run's recipe: name it with --training-recipe";
        break;
      case LoggedRecipe::kDelayed:
        if (training_recipe && replays_history(training_recipe->kind))
          recipe = training_recipe;
        else
          c.note = "fp8_delayed_scaling is logged for the training recipe only: name it with "
                   "--training-recipe delayed:...";
        break;
      case LoggedRecipe::kCurrent: recipe = parse_recipe("current"); break;
      case LoggedRecipe::kBlock: recipe = parse_recipe("block:2d"); break;
      case LoggedRecipe::kMxfp8: recipe = parse_recipe("mxfp8"); break;
      case LoggedRecipe::kNvfp4:
        if (training_recipe && two_level_scale(training_recipe->kind))
          recipe = training_recipe;
        else
          c.note = "nvfp4_ statistics are the NVFP4 training run's own: name it with --training-recipe nvfp4";
        break;
    }
    const CaptureKey tensor{s.step, captured_layer(s.layer), s.role};
    if (!recipe) {
      // note set above
    } else if (tensor.layer.empty() || !index.has_tensor(tensor)) {
      c.note = "not captured at this step";
    } else if (!index.has_recipe(*recipe)) {
      c.note = "recipe " + recipe->spec() + " not in --recipes";
    } else {
      c.recipe = recipe->spec();
      const auto copies = orientations_for(*recipe, s.role);
      bool has_copy = false;
      for (const auto o : copies) has_copy = has_copy || o == c.orientation;
      if (!has_copy) c.orientation = Orientation::kRowwise;  // both copies have the same numbers
      const EvaluationRow* row = find_row(tensor, *recipe, c.orientation);
      if (row == nullptr && !index.has(*recipe, format)) {
        c.note = std::string("not evaluated as ") + kFp8Traits[static_cast<int>(fp8_format_for(format, s.role))].name +
                 " (" + training_format_name(format) + "): " + recipe->spec() + " is evaluated in " +
                 (index.has(*recipe, TrainingFormat::kE4M3) ? "e4m3" : "hybrid") + "; add --format e4m3,hybrid";
      } else if (row == nullptr) {
        c.note = "not evaluated";
      } else if (!row->applicability.ok) {
        c.note = "not applicable: " + row->applicability.reason;
      } else {
        c.paired = true;
        c.ours = our_value(s, *row);
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace fp8a

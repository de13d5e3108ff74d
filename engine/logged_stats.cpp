#include "engine/logged_stats.hpp"

#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace fp8a {

namespace {

// (step, layer, role) of a captured tensor, the layer in sanitised form.
using TensorKey = std::tuple<std::int64_t, std::string, Role>;
// ... plus the recipe spec and the copy.
using RowKey = std::tuple<std::int64_t, std::string, Role, std::string, Orientation>;

double our_value(const LoggedFp8Stat& s, const EvaluationRow& row) {
  const QuantMetrics& m = row.metrics;
  const bool e8m0 = row.recipe.kind == RecipeKind::kMx;  // TE logs MXFP8 scales as raw E8M0 codes
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
  // Captured layers by sanitised name; a sanitised name shared by two layers matches neither.
  std::map<std::string, std::set<std::string>> layers_of;
  for (const auto& r : rows) layers_of[sanitized_layer_name(r.key.layer)].insert(r.key.layer);
  const auto layer_key = [&](const std::string& layer) -> std::string {
    const auto it = layers_of.find(sanitized_layer_name(layer));
    if (it == layers_of.end()) return {};
    if (it->second.size() == 1) return it->first;
    return it->second.count(layer) != 0 ? layer : std::string();
  };
  const auto row_layer_key = [&](const std::string& layer) {
    const std::string s = sanitized_layer_name(layer);
    return layers_of[s].size() == 1 ? s : layer;
  };

  std::set<TensorKey> captured;
  std::set<std::string> evaluated;
  std::map<RowKey, const EvaluationRow*> by_key;
  for (const auto& r : rows) {
    const std::string layer = row_layer_key(r.key.layer);
    captured.emplace(r.key.step, layer, r.key.role);
    evaluated.insert(r.recipe.spec());
    by_key.emplace(RowKey(r.key.step, layer, r.key.role, r.recipe.spec(), r.orientation), &r);
  }

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
        if (training_recipe && training_recipe->kind == RecipeKind::kPerTensorDelayed)
          recipe = training_recipe;
        else
          c.note = "fp8_delayed_scaling is logged for the training recipe only: name it with "
                   "--training-recipe delayed:...";
        break;
      case LoggedRecipe::kCurrent: recipe = parse_recipe("current"); break;
      case LoggedRecipe::kBlock: recipe = parse_recipe("block:2d"); break;
      case LoggedRecipe::kMxfp8: recipe = parse_recipe("mxfp8"); break;
    }
    const std::string layer = layer_key(s.layer);
    if (!recipe) {
      // note set above
    } else if (layer.empty() || captured.count(TensorKey(s.step, layer, s.role)) == 0) {
      c.note = "not captured at this step";
    } else if (evaluated.count(recipe->spec()) == 0) {
      c.note = "recipe " + recipe->spec() + " not in --recipes";
    } else {
      c.recipe = recipe->spec();
      const auto copies = orientations_for(*recipe, s.role);
      bool has_copy = false;
      for (const auto o : copies) has_copy = has_copy || o == c.orientation;
      if (!has_copy) c.orientation = Orientation::kRowwise;  // both copies have the same numbers
      const auto it = by_key.find(RowKey(s.step, layer, s.role, c.recipe, c.orientation));
      if (it == by_key.end()) {
        c.note = "not evaluated";
      } else if (!it->second->applicability.ok) {
        c.note = "not applicable: " + it->second->applicability.reason;
      } else {
        c.paired = true;
        c.ours = our_value(s, *it->second);
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace fp8a

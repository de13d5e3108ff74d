#include "reports/consumers/te_recipe.hpp"

#include "core/recipe_options.hpp"
#include "core/te_version.hpp"

namespace fp8a {

TeRecipe te_recipe_for(const RunCandidate& c, TeVersion te) {
  const Recipe& r = c.recipe;
  TeRecipe t;
  t.class_name = recipe_kind_traits(r.kind).te_recipe;
  t.fp8_format = carry_format(r.kind, c.format, Consumer::kTe).value;
  // The option rows (core/recipe_options.hpp): fields in TE's declaration order, each written
  // with its default marked; environment variables; a note for what TE cannot take.
  for (const RecipeOptionRow* row : field_rows(r.kind, Consumer::kTe))
    t.fields.push_back({row->by[static_cast<int>(Consumer::kTe)].name, row->value(r), !row->set(r)});
  for (const OptionCarriage& o : carry_options(r, Consumer::kTe, te)) {
    if (o.carrier == Carrier::kEnv) t.env.emplace_back(o.env_name, o.env_value);
    else if (!o.note.empty()) t.notes.push_back(o.note);
  }
  return t;
}

std::string te_recipe_call(const TeRecipe& t) {
  std::string s = t.class_name + "(fp8_format=Format." + t.fp8_format;
  for (const TeRecipeField& f : t.fields) {
    if (f.te_default) continue;
    s += ", " + f.name + "=";
    if (const bool* b = std::get_if<bool>(&f.value)) s += *b ? "True" : "False";
    else if (const int* i = std::get_if<int>(&f.value)) s += std::to_string(*i);
    else s += "\"" + std::get<std::string>(f.value) + "\"";
  }
  s += ")";
  for (const auto& [name, value] : t.env) s += "; env " + name + "=" + value;
  for (const std::string& n : t.notes) s += "; " + n;
  return s;
}

}  // namespace fp8a

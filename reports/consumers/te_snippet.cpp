#include "reports/consumers/te_snippet.hpp"

#include <string>
#include <variant>

#include "core/te_version.hpp"
#include "core/text.hpp"
#include "reports/consumers/layer_names.hpp"
#include "reports/consumers/te_recipe.hpp"

namespace fp8a {

namespace {

// A comment line whatever bytes the text brings (visible_text keeps it on one line).
std::string comment(const std::string& text) { return "# " + visible_text(text) + "\n"; }

// A Python string literal of text made of printable ASCII (TE's field values and env values).
std::string py_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '\\' || ch == '"') out += '\\';
    out += ch;
  }
  return out + "\"";
}

std::string py_value(const std::variant<bool, int, std::string>& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "True" : "False";
  if (const int* i = std::get_if<int>(&v)) return std::to_string(*i);
  return py_string(std::get<std::string>(v));
}

constexpr const char* kCallNote = "\"\"\"model(*args, **kwargs) under the recommended recipe; call backward on the result as usual.\"\"\"";

}  // namespace

Artifact render_te_snippet(const ConsumerPlan& plan) {
  const Recommendation& rec = *plan.rec;
  const TeVersion te = rec.te_version;
  const bool autocast = te_has_autocast(te);
  std::string s = comment("Transformer Engine code for the recommended recipe (fp8-advisor te_snippet.py).");
  s += comment("Written for Transformer Engine " + te_version_text(te) + " (--te-version): " +
               (autocast ? "te.autocast(recipe=...), TE 2.9+; --te-version 2.8 or older writes te.fp8_autocast."
                         : "te.fp8_autocast(fp8_recipe=...); TE 2.9+ name it te.autocast(recipe=...)."));
  const RunCandidate* c = plan.candidate;
  if (c == nullptr || !plan.fp8) {
    s += c == nullptr ? comment("No FP8 candidate was chosen: train in BF16, no FP8 autocast.")
                      : comment("The plan keeps no GEMM in FP8 (" + candidate_name(*c) +
                                " chosen, every GEMM BF16): train in BF16, no FP8 autocast,") +
                            comment("so TE runs every module in BF16, those never captured too.");
    s += "\n\ndef forward(model, *args, **kwargs):\n"
         "    \"\"\"model(*args, **kwargs) in BF16: the plan keeps no GEMM in FP8.\"\"\"\n"
         "    return model(*args, **kwargs)\n";
    return {"te_snippet.py", s, "BF16, no autocast"};
  }
  const TeRecipe& t = plan.te;
  s += comment("Recipe " + candidate_name(*c) + ": every module under the autocast runs it. The plan's BF16 fallbacks");
  s += comment("are not here: nvdlfw_inspect.yaml (per GEMM) and te_precision_config.yaml (per module) have them.");
  for (const std::string& n : t.notes) s += comment(n);
  if (!t.env.empty()) s += "import os\n\n";
  for (const auto& [name, value] : t.env)
    s += "os.environ[" + py_string(name) + "] = " + py_string(value) + "  # TE reads it at import: set it first\n";
  s += "import transformer_engine.pytorch as te\n";
  s += "from transformer_engine.common.recipe import " + t.class_name + ", Format\n\n";
  s += "fp8_recipe = " + t.class_name + "(fp8_format=Format." + t.fp8_format;
  for (const TeRecipeField& f : t.fields) s += ", " + f.name + "=" + py_value(f.value);
  s += ")\n\n\n";
  s += "def forward(model, *args, **kwargs):\n";
  s += std::string("    ") + kCallNote + "\n";
  s += autocast ? "    with te.autocast(enabled=True, recipe=fp8_recipe):\n"
                : "    with te.fp8_autocast(enabled=True, fp8_recipe=fp8_recipe):\n";
  s += "        return model(*args, **kwargs)\n";
  return {"te_snippet.py", s, std::string(autocast ? "te.autocast, " : "te.fp8_autocast, ") + t.class_name};
}

}  // namespace fp8a

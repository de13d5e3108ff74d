#include "reports/consumers/recipe_json.hpp"

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/te_version.hpp"
#include "core/text.hpp"
#include "reports/advice_json.hpp"
#include "reports/json_number.hpp"
#include "reports/json_text.hpp"
#include "reports/consumers/layer_names.hpp"
#include "reports/consumers/te_recipe.hpp"

namespace fp8a {

namespace {

using nlohmann::ordered_json;

// The GEMMs' reasons, GEMMs with the same reason named together: "dgrad, wgrad: ...".
ordered_json layer_reasons(const LayerDecision& l) {
  std::vector<std::pair<std::string, std::string>> groups;  // (GEMM names, reason)
  for (const GemmDecision& g : l.gemms) {
    if (g.reason.empty()) continue;
    // A reason that already starts with its GEMM's name ("dgrad: no operand copy captured").
    const std::string prefix = std::string(gemm_name(g.gemm)) + ": ";
    const std::string text = g.reason.starts_with(prefix) ? g.reason.substr(prefix.size()) : g.reason;
    bool joined = false;
    for (auto& [names, reason] : groups)
      if (reason == text) {
        names += std::string(", ") + gemm_name(g.gemm);
        joined = true;
      }
    if (!joined) groups.emplace_back(gemm_name(g.gemm), text);
  }
  ordered_json out = ordered_json::array();
  for (const auto& [names, reason] : groups) out.push_back(names + ": " + reason);
  return out;
}

ordered_json verdict_json(const Verdict& v) {
  ordered_json j;
  j["passed"] = v.passed;
  j["criterion"] = v.limiting ? ordered_json(criterion_name(*v.limiting)) : ordered_json(nullptr);
  j["measured"] = json_number(v.measured);
  j["threshold"] = json_number(v.threshold);
  j["margin"] = json_number(v.margin);
  return j;
}

ordered_json evidence_json(const CandidatePlan& c) {
  ordered_json out = ordered_json::array();
  for (const LayerJudgement& l : c.layers) {
    ordered_json gemms;
    for (const GemmJudgement& g : l.gemms) {
      if (!g.judged) {
        gemms[gemm_name(g.gemm)] = nullptr;
        continue;
      }
      ordered_json e = verdict_json(g.worst);
      e["step"] = g.worst_step;
      e["steps"] = g.steps;
      e["failed_steps"] = g.failed_steps;
      e["forecast"] = g.forecast ? verdict_json(*g.forecast) : ordered_json(nullptr);
      gemms[gemm_name(g.gemm)] = std::move(e);
    }
    out.push_back({{"layer", json_name(l.layer)}, {"gemms", std::move(gemms)}});
  }
  return out;
}

}  // namespace

Artifact render_recipe_json(const ConsumerPlan& plan, const RunInfo& info) {
  const Recommendation& rec = *plan.rec;
  const CandidatePlan* chosen = rec.chosen ? &rec.candidates[*rec.chosen] : nullptr;
  ordered_json j;
  j["schema_version"] = kRecipeJsonSchemaVersion;
  j["te_version"] = te_version_text(rec.te_version);
  const TeRecipe& te = plan.te;
  // A plan with no FP8 GEMM trains BF16: no recipe object, whoever was chosen.
  j["recipe"] = plan.fp8 ? te_recipe_json(te) : ordered_json(nullptr);
  j["candidate"] = chosen ? candidate_ref(chosen->candidate) : ordered_json(nullptr);
  j["recipe_notes"] = te.notes;
  j["why"] = rec.why;
  j["calibration"] = rec.calibration;
  FP8A_CHECK(rec.gpu != nullptr, "recipe.json: the recommendation names no GPU");
  j["gpu"] = {{"name", rec.gpu->name}, {"product", rec.gpu->product}, {"sm", rec.gpu->sm}};
  ordered_json layers = ordered_json::array();
  std::size_t fp8 = 0, bf16 = 0, mixed = 0;
  for (const LayerDecision& l : rec.layers) {
    ordered_json gemms;
    for (const GemmDecision& g : l.gemms)
      gemms[gemm_name(g.gemm)] = {{"precision", precision_name(g.precision)},
                                  {"judged", g.judged},
                                  {"fp8_safe", g.fp8_safe},
                                  {"watched", g.watched},
                                  {"reason", g.reason}};
    (l.precision == Precision::kFp8 ? fp8 : l.precision == Precision::kBf16 ? bf16 : mixed)++;
    layers.push_back({{"layer", json_name(l.layer)},
                      {"precision", precision_name(l.precision)},
                      {"fp8_safe", l.fp8_safe},
                      {"incomplete", l.incomplete},
                      {"gemms", std::move(gemms)},
                      {"reasons", layer_reasons(l)}});
  }
  j["layers"] = std::move(layers);
  ordered_json trained = ordered_json::array();
  for (const TrainedPlan& t : plan.trained) {
    ordered_json tl = ordered_json::array();
    for (std::size_t li = 0; li < t.precision.size(); ++li) {
      // The name the group's consumer selects it by: nvdlfw_inspect's per GEMM, Megatron's module path per module.
      const std::string& layer = rec.layers[li].layer;
      const MappedName name = t.granularity == std::string("gemm") ? nvdlfw_layer_name(layer) : megatron_module_path(layer);
      ordered_json e = {{"layer", json_name(layer)},
                        {"name", json_name(name.name)},
                        {"candidate", t.candidate[li] ? ordered_json(candidate_name(rec.candidates[*t.candidate[li]].candidate))
                                                      : ordered_json(nullptr)}};
      for (int g = 0; g < 3; ++g) e[gemm_name(static_cast<Gemm>(g))] = precision_name(t.precision[li][static_cast<std::size_t>(g)]);
      tl.push_back(std::move(e));
    }
    trained.push_back({{"granularity", t.granularity},
                       {"files", t.files},
                       {"fp8_flop_share", json_number(t.fp8_flop_share)},
                       {"gemm_speedup_vs_bf16", json_number(t.speedup)},
                       {"differs", utf8_lossless(t.differs)},
                       {"layers", std::move(tl)}});
  }
  j["predicted"] = {
      {"gemm_speedup_vs_bf16", chosen ? json_number(chosen->speedup) : ordered_json(nullptr)},
      {"fp8_flop_share", json_number(chosen ? chosen->fp8_flop_share : 0.0)},
      {"cost_source", rec.cost_source},
      {"cost_basis", utf8_lossless(rec.cost_basis)}};
  j["trained"] = std::move(trained);
  add_recommendation_lists(j, rec);
  j["evidence"] = chosen ? evidence_json(*chosen) : ordered_json::array();
  ordered_json watch = ordered_json::array();
  for (const WatchItem& w : rec.watch)
    watch.push_back({{"layer", json_name(w.layer)},
                     {"gemm", gemm_name(w.gemm)},
                     {"step", w.step},
                     {"criterion", criterion_name(w.criterion)},
                     {"measured", json_number(w.measured)},
                     {"threshold", json_number(w.threshold)},
                     {"margin", json_number(w.margin)},
                     {"status", watch_status_name(w.status)}});
  j["watch"] = std::move(watch);
  ordered_json command_line = ordered_json::array();  // bytes, kept losslessly (utf8_lossless)
  for (const auto& w : info.command_line) command_line.push_back(utf8_lossless(w));
  j["provenance"] = {{"version", info.version},
                     {"git_revision", info.git_revision},
                     {"command_line", command_line},
                     {"backend", info.backend},
                     {"device", info.device}};
  const std::string note = std::to_string(rec.layers.size()) + " layers: " + std::to_string(fp8) +
                           " fp8, " + std::to_string(mixed) + " mixed, " + std::to_string(bf16) +
                           " bf16";
  return {"recipe.json", json_document(std::move(j), 2), note};
}

namespace {

// A recipe.json's plan: the chosen candidate, the FP8 share, per layer the GEMMs' precision and
// reason. Unset when the text is not a recipe.json.
struct PlanView {
  std::string candidate = "none";
  double fp8_share = 0;
  std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> layers;
};

std::optional<PlanView> plan_view(std::string_view text, std::string* why) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *why = "not JSON";
    return std::nullopt;
  }
  const auto layers = j.find("layers");
  const auto predicted = j.find("predicted");
  if (layers == j.end() || !layers->is_array() || predicted == j.end() || !predicted->is_object()) {
    *why = "not a recipe.json (no \"layers\" array or \"predicted\" object)";
    return std::nullopt;
  }
  PlanView v;
  if (const auto c = j.find("candidate"); c != j.end() && c->is_object() && c->contains("name") &&
                                          (*c)["name"].is_string())
    v.candidate = (*c)["name"].get<std::string>();
  if (const auto s = predicted->find("fp8_flop_share"); s != predicted->end() && s->is_number())
    v.fp8_share = s->get<double>();
  for (const auto& l : *layers) {
    if (!l.is_object() || !l.contains("layer") || !l["layer"].is_string() || !l.contains("gemms") ||
        !l["gemms"].is_object()) {
      *why = "not a recipe.json (a layer without \"layer\" or \"gemms\")";
      return std::nullopt;
    }
    auto& gemms = v.layers[l["layer"].get<std::string>()];
    for (const auto& [gemm, g] : l["gemms"].items()) {
      if (!g.is_object() || !g.contains("precision") || !g["precision"].is_string()) continue;
      const std::string reason = g.contains("reason") && g["reason"].is_string() ? g["reason"].get<std::string>() : "";
      gemms[gemm] = {g["precision"].get<std::string>(), reason};
    }
  }
  return v;
}

}  // namespace

std::optional<std::vector<std::string>> plan_differences(std::string_view before, std::string_view after,
                                                         std::string* why) {
  const std::optional<PlanView> b = plan_view(before, why);
  if (!b) return std::nullopt;
  const std::optional<PlanView> a = plan_view(after, why);
  if (!a) return std::nullopt;
  std::vector<std::string> out;
  if (b->candidate != a->candidate)
    out.push_back("candidate: " + visible_text(b->candidate) + " -> " + visible_text(a->candidate));
  if (std::abs(b->fp8_share - a->fp8_share) >= 0.0005)
    out.push_back(format_text("FP8 share of the GEMM FLOPs: %.1f %% -> %.1f %%", 100 * b->fp8_share, 100 * a->fp8_share));
  for (const auto& [layer, gemms] : b->layers)
    if (a->layers.count(layer) == 0) out.push_back(visible_text(layer) + ": only in the earlier plan");
  for (const auto& [layer, gemms] : a->layers)
    if (b->layers.count(layer) == 0) out.push_back(visible_text(layer) + ": only in the new plan");
  for (const auto& [layer, gemms] : a->layers) {
    const auto old = b->layers.find(layer);
    if (old == b->layers.end()) continue;
    for (const char* gemm : {"fprop", "dgrad", "wgrad"}) {
      const auto now = gemms.find(gemm);
      const auto was = old->second.find(gemm);
      const std::string p_now = now == gemms.end() ? "none" : now->second.first;
      const std::string p_was = was == old->second.end() ? "none" : was->second.first;
      if (p_now == p_was) continue;
      std::string line = visible_text(layer) + " " + gemm + ": " + visible_text(p_was) + " -> " + visible_text(p_now);
      if (now != gemms.end() && !now->second.second.empty()) line += ": " + visible_text(now->second.second);
      out.push_back(std::move(line));
    }
  }
  return out;
}

}  // namespace fp8a

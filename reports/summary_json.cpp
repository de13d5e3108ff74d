#include "reports/summary_json.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "reports/advice_json.hpp"
#include "reports/json_number.hpp"
#include "reports/json_text.hpp"
#include "reports/consumers/te_recipe.hpp"

namespace fp8a {

namespace {

using nlohmann::ordered_json;

// Paths and command-line words are bytes: kept losslessly (core/text.hpp utf8_lossless).
ordered_json lossless(const std::vector<std::string>& words) {
  ordered_json a = ordered_json::array();
  for (const auto& w : words) a.push_back(utf8_lossless(w));
  return a;
}

ordered_json worst(const WorstValue& w) {
  return {{"value", json_number(w.value)}, {"tensor", w.tensor}, {"step", w.step}};
}

ordered_json decision_json(const AnswerContext& a) {
  ordered_json d;
  d["gpu"] = a.gpu_name();
  d["cost_source"] = a.cost_source();
  d["cost_basis"] = utf8_lossless(a.cost_basis());
  if (a.recommendation == nullptr) {
    d["chosen"] = nullptr;
    d["skipped"] = a.skipped.why;
    return d;
  }
  const Recommendation& rec = *a.recommendation;
  if (rec.chosen) {
    const CandidatePlan& c = rec.candidates[*rec.chosen];
    ordered_json chosen = candidate_ref(c.candidate);
    chosen["te_recipe"] = te_recipe_call(te_recipe_for(c.candidate, rec.te_version));
    chosen["fp8_flop_share"] = json_number(c.fp8_flop_share);
    chosen["gemm_speedup_vs_bf16"] = json_number(c.speedup);
    chosen["gemms_to_bf16"] = c.gemms_to_bf16;
    chosen["gemms_not_paying"] = c.gemms_not_paying;
    d["chosen"] = chosen;
  } else {
    d["chosen"] = nullptr;
  }
  d["why"] = rec.why;
  d["calibration"] = rec.calibration;
  ordered_json layers = ordered_json::array();
  for (const LayerDecision& l : rec.layers) {
    ordered_json gemms = ordered_json::object();
    ordered_json reasons = ordered_json::array();
    for (const GemmDecision& g : l.gemms) {
      gemms[gemm_name(g.gemm)] = {{"precision", precision_name(g.precision)},
                                  {"fp8_safe", g.fp8_safe},
                                  {"watched", g.watched},
                                  {"judged", g.judged}};
      if (!g.reason.empty()) reasons.push_back(std::string(gemm_name(g.gemm)) + ": " + g.reason);
    }
    layers.push_back({{"layer", json_name(l.layer)},
                      {"precision", precision_name(l.precision)},
                      {"fp8_safe", l.fp8_safe},
                      {"incomplete", l.incomplete},
                      {"gemms", gemms},
                      {"reasons", reasons}});
  }
  d["layers"] = layers;
  add_recommendation_lists(d, rec);
  ordered_json excluded = ordered_json::array();
  for (const GpuExclusion& e : rec.gpu_excluded) excluded.push_back({{"candidate", e.candidate}, {"reason", e.reason}});
  d["gpu_excluded"] = excluded;
  return d;
}

}  // namespace

Artifact render_summary_json(const RunInfo& info, std::span<const EvaluationRow> rows,
                             std::span<const LayerSummary> layers, const AnswerContext* decision) {
  ordered_json j;
  j["tool"] = {{"name", "fp8-advisor"}, {"version", info.version}, {"git_revision", info.git_revision}};
  j["command_line"] = lossless(info.command_line);
  j["backend"] = {{"requested", info.requested_device},
                  {"name", info.backend},
                  {"device", info.device},
                  {"cuda_compiled", info.cuda_compiled},
                  {"cuda_devices", info.cuda_devices},
                  {"gemm_path", info.gemm_path}};
  ordered_json inputs = ordered_json::array();
  for (const auto& f : info.inputs)
    inputs.push_back({{"file", utf8_lossless(f.path)},
                      {"step", f.step},
                      {"step_source", f.step_source},
                      {"tensors", f.tensor_count},
                      {"bytes", f.bytes}});
  j["inputs"] = inputs;
  ordered_json recipes = ordered_json::array();
  for (const auto& r : info.recipes) recipes.push_back(r.spec());
  j["recipes"] = recipes;
  // As --format takes it ("auto", "hybrid", "e4m3,hybrid"). Entries below name their format only
  // when the run evaluated several (a single-format run's summary is the one it has always been).
  j["format"] = info.format_option;
  const bool several_formats = info.formats.size() > 1;
  j["amax_reduction"] = info.amax_reduction == AmaxReduction::kTp ? "tp" : "none";
  j["timings_s"] = {{"read", info.read_seconds},
                    {"evaluate", info.evaluate_seconds},
                    {"gemms", info.gemm_seconds}};
  std::size_t evaluated = 0;
  ordered_json skipped = ordered_json::array();
  for (const auto& r : rows) {
    if (r.applicability.ok) {
      ++evaluated;
    } else {
      ordered_json entry = {{"step", r.key.step},
                            {"layer", json_name(r.key.layer)},
                            {"tensor", role_name(r.key.role)},
                            {"recipe", r.recipe.spec()}};
      if (several_formats) entry["format"] = training_format_name(r.format);
      entry["orientation"] = orientation_name(r.orientation);
      entry["reason"] = r.applicability.reason;
      skipped.push_back(std::move(entry));
    }
  }
  j["evaluations"] = evaluated;
  // Delayed scaling: how each replay went. Exact needs every step of every history window.
  std::size_t by_mode[3] = {0, 0, 0};
  ordered_json replay_details = ordered_json::array();
  for (const auto& r : rows) {
    if (!replays_history(r.recipe.kind)) continue;
    ++by_mode[static_cast<int>(r.replay.mode)];
    if (r.replay.mode == ReplayMode::kExact) continue;
    ordered_json entry = {{"step", r.key.step},
                          {"layer", json_name(r.key.layer)},
                          {"tensor", role_name(r.key.role)},
                          {"recipe", r.recipe.spec()}};
    if (several_formats) entry["format"] = training_format_name(r.format);
    entry["mode"] = replay_mode_name(r.replay.mode);
    entry["detail"] = r.replay.detail;
    replay_details.push_back(std::move(entry));
  }
  j["delayed_replay"] = {{"exact", by_mode[0]},
                         {"approximate", by_mode[1]},
                         {"unavailable", by_mode[2]},
                         {"amax_trace", lossless(info.log_files)},
                         {"amax_trace_rounded", info.log_rounded},
                         {"amax_trace_notes", lossless(info.log_notes)},
                         {"not_exact", replay_details}};
  if (info.logged_stats) {
    ordered_json diffs = ordered_json::object();
    for (const auto& [name, d] : info.logged_stats->max_abs_difference) diffs[name] = json_number(d);
    j["nvdlfw_stats"] = {{"logged", info.logged_stats->logged},
                         {"paired", info.logged_stats->paired},
                         {"training_recipe", info.training_recipe},
                         {"max_abs_difference", diffs}};
  }
  j["not_applicable"] = skipped;
  j["outputs"] = info.outputs;
  j["not_written"] = info.not_written;
  ordered_json out_layers = ordered_json::array();
  for (const auto& l : layers) {
    ordered_json entry = {{"layer", json_name(l.layer)}, {"recipe", l.recipe}};
    if (several_formats) entry["format"] = training_format_name(l.format);
    entry["evaluations"] = l.evaluations;
    entry["worst"] = {{"sqnr_db", worst(l.min_sqnr_db)},
                      {"cos", worst(l.min_cos)},
                      {"rel_mse", worst(l.max_rel_mse)},
                      {"underflow_pct", worst(l.max_underflow_pct)},
                      {"overflow_pct", worst(l.max_overflow_pct)},
                      {"saturated_pct", worst(l.max_saturated_pct)}};
    entry["nonfinite_count"] = l.nonfinite_count;
    out_layers.push_back(std::move(entry));
  }
  j["layers"] = out_layers;
  if (decision != nullptr) j["decision"] = decision_json(*decision);
  j["warnings"] = info.warnings;
  return {"summary.json", json_document(std::move(j), 2), ""};
}

}  // namespace fp8a

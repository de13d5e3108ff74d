#include "reports/answer_text.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "core/layer_name.hpp"
#include "core/text.hpp"
#include "reports/consumers/consumer_plan.hpp"
#include "reports/consumers/te_recipe.hpp"

namespace fp8a {

PlanFallbacks plan_fallbacks(const Recommendation& rec) {
  PlanFallbacks f;
  if (!rec.chosen) return f;
  const CandidatePlan& c = rec.candidates[*rec.chosen];
  // The grouped modules' sibling fallbacks: per (module, GEMM, reason) the line's index in bf16
  // and the experts' numbers.
  struct Folded {
    std::size_t line = 0;
    std::string module, gemm, reason;
    std::vector<std::string> experts;
  };
  std::vector<Folded> folded;
  // Not judged: one line per (GEMM, reason), naming its layers; the reason without the
  // decision's "not judged: " (the lines stand under that heading).
  std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> unjudged;  // gemm, reason, layers
  for (std::size_t li = 0; li < rec.layers.size(); ++li) {
    const LayerDecision& l = rec.layers[li];
    f.gemms += l.gemms.size();
    for (const GemmDecision& g : l.gemms) {
      if (g.forced) {
        ++f.forced_gemms;
        const std::string line = l.layer + ": " + g.reason;
        if (f.forced.empty() || f.forced.back() != line) f.forced.push_back(line);
        continue;
      }
      if (!g.judged) {
        ++f.unjudged_gemms;
        const std::string reason = g.reason.starts_with(kNotJudged) ? g.reason.substr(kNotJudged.size()) : g.reason;
        auto it = std::find_if(unjudged.begin(), unjudged.end(), [&](const auto& u) {
          return std::get<0>(u) == gemm_name(g.gemm) && std::get<1>(u) == reason;
        });
        if (it == unjudged.end()) it = unjudged.insert(unjudged.end(), {gemm_name(g.gemm), reason, {}});
        std::get<2>(*it).push_back(l.layer);
        continue;
      }
      if (g.precision == Precision::kBf16 && li < c.not_paying.size() &&
          !c.not_paying[li][static_cast<int>(g.gemm)].empty())
        ++f.not_paying;
      else if (const std::string module = grouped_module_of(l.layer);
               g.precision == Precision::kBf16 && !module.empty() && li < c.grouped.size() &&
               !c.grouped[li][static_cast<int>(g.gemm)].empty()) {
        ++f.bf16_gemms;
        const std::string expert = l.layer.substr(module.size() + 7);  // after ".expert"
        auto it = std::find_if(folded.begin(), folded.end(), [&](const Folded& x) {
          return x.module == module && x.gemm == gemm_name(g.gemm) && x.reason == g.reason;
        });
        if (it == folded.end()) {
          folded.push_back({f.bf16.size(), module, gemm_name(g.gemm), g.reason, {}});
          f.bf16.emplace_back();
          it = folded.end() - 1;
        }
        it->experts.push_back(expert);
      } else if (g.precision == Precision::kBf16) {
        f.bf16.push_back(l.layer + " " + gemm_name(g.gemm) + ": " + g.reason);
        ++f.bf16_gemms;
      }
      else if (g.watched)
        f.watched.push_back(l.layer + " " + gemm_name(g.gemm) + ": " + g.reason);
      else if (!g.reason.empty())
        f.close.push_back(l.layer + " " + gemm_name(g.gemm) + ": " + g.reason);
    }
  }
  for (const auto& [gemm, reason, layers] : unjudged) {
    std::string names;
    for (std::size_t i = 0; i < layers.size() && i < 3; ++i) names += (i == 0 ? "" : ", ") + layers[i];
    if (layers.size() > 3) names += format_text(" and %zu more", layers.size() - 3);
    f.unjudged.push_back(gemm + " of " + names + ": " + reason);
  }
  for (const Folded& x : folded) {
    std::string list;
    for (const std::string& e : x.experts) list += (list.empty() ? "" : ",") + e;
    f.bf16[x.line] = x.module + ".expert" + (x.experts.size() > 1 ? "{" + list + "}" : list) + " " + x.gemm + ": " +
                     x.reason;
  }
  return f;
}

std::string watch_item_text(const WatchItem& w) {
  return w.layer + " " + gemm_name(w.gemm) +
         format_text(": %s margin %.3g (%s at step %lld)", criterion_name(w.criterion), w.margin,
                     watch_status_name(w.status), static_cast<long long>(w.step));
}

std::string AnswerContext::gpu_name() const {
  const GpuTarget* gpu = recommendation != nullptr ? recommendation->gpu : skipped.gpu;
  FP8A_CHECK(gpu != nullptr, "the answer names no GPU");
  return gpu->name;
}

std::vector<std::string> join_by_reason(const std::vector<std::pair<std::string, std::string>>& excluded) {
  std::vector<std::pair<std::string, std::string>> lines;  // (names, why)
  for (const auto& [name, why] : excluded) {
    auto it = std::find_if(lines.begin(), lines.end(), [&](const auto& l) { return l.second == why; });
    if (it == lines.end()) lines.emplace_back(name, why);
    else it->first += ", " + name;
  }
  std::vector<std::string> out;
  for (const auto& [names, why] : lines) out.push_back(names + ": " + why);
  return out;
}

const char* AnswerContext::cost_source() const {
  return recommendation != nullptr ? recommendation->cost_source : skipped.cost_source;
}

const std::string& AnswerContext::cost_basis() const {
  return recommendation != nullptr ? recommendation->cost_basis : skipped.cost_basis;
}

std::string no_recipe_reason(const Recommendation& rec, const std::string& gpu) {
  if (const std::string none = nothing_judged(rec.candidates); !none.empty()) return ": " + none;
  if (rec.candidates.empty() && rec.gpu_excluded.empty()) return " (no FP8 candidate evaluated)";
  return ": none runs on " + gpu + on_release(rec);
}

std::vector<std::string> trained_plan_lines(const ConsumerPlan& plan, const std::string& gpu) {
  if (plan.trained.size() < 2) return {};
  const auto files = [](const TrainedPlan& t) {
    std::string f;
    for (const std::string& x : t.files) f += (f.empty() ? "" : ", ") + x;
    return f;
  };
  const auto numbers = [&](const TrainedPlan& t) {
    return format_text("%.1f %% of the GEMM FLOPs in FP8", 100.0 * t.fp8_flop_share) +
           (t.speedup ? format_text(", predicted %.3fx on %s", *t.speedup, gpu.c_str()) : std::string());
  };
  const TrainedPlan& gemm = plan.trained[0];
  const TrainedPlan& module = plan.trained[1];
  if (gemm.differs.empty() && module.differs.empty() && plan.trained.size() == 2)
    return {"this plan, every file (" + files(gemm) + "; " + files(module) + ")"};
  const auto what = [](const TrainedPlan& t) { return t.differs.empty() ? std::string("this plan") : t.differs; };
  std::vector<std::string> lines = {"per GEMM (" + files(gemm) + "): " + what(gemm) + "; " + numbers(gemm),
                                    "per module (" + files(module) + "): " + what(module) + "; " + numbers(module)};
  for (std::size_t i = 2; i < plan.trained.size(); ++i)
    lines.push_back("per module (" + files(plan.trained[i]) + "): " + what(plan.trained[i]) + "; " +
                    numbers(plan.trained[i]));
  return lines;
}

namespace {

std::string trained_lines(const ConsumerPlan& plan, const std::string& gpu) {
  const std::vector<std::string> lines = trained_plan_lines(plan, gpu);
  if (lines.empty()) return "";
  std::string s = lines.size() == 1 ? "  what the files train: " + lines[0] + "\n" : "  what the files train:\n";
  for (std::size_t i = 0; lines.size() > 1 && i < lines.size(); ++i) s += "    " + lines[i] + "\n";
  // The two files number a transformer layer differently: said once, where both name one.
  const bool numbered = std::any_of(plan.rec->layers.begin(), plan.rec->layers.end(), [](const LayerDecision& l) {
    return transformer_layer_index(l.layer).has_value();
  });
  if (numbered && !plan.nvdlfw_omitted && !plan.precision_config_omitted)
    s += "    layer numbers: te_precision_config.yaml names Megatron's module paths, counted from 0 as captured "
         "(decoder.layers.0); nvdlfw_inspect.yaml TE's layer_number, from 1 (decoder.layers.1 is the same layer)\n";
  return s;
}

// The first line: the recipe the files train (or that none is FP8), for how many of the GEMMs.
std::string headline(const Recommendation& rec, const ConsumerPlan& plan, const PlanFallbacks& fallbacks) {
  const CandidatePlan& c = rec.candidates[*rec.chosen];
  const std::string low = low_precision_name(c.candidate.recipe.kind);  // "NVFP4" or "FP8"
  // The GEMMs it answers for, when not all were judged: "judged 3 of 9 GEMMs: ".
  const std::string judged = fallbacks.unjudged_gemms == 0
                                 ? std::string()
                                 : format_text("judged %zu of %zu GEMMs: ", fallbacks.gemms - fallbacks.unjudged_gemms,
                                               fallbacks.gemms);
  // A plan that keeps GEMMs in BF16 for their numbers says so on the first line: the line a
  // person (or a CI log's grep) reads must tell a healthy capture from one that is not.
  const std::string kept = fallbacks.bf16_gemms == 0
                               ? std::string()
                               : format_text("; %zu GEMM%s kept in BF16 for %s numbers", fallbacks.bf16_gemms,
                                             fallbacks.bf16_gemms == 1 ? "" : "s",
                                             fallbacks.bf16_gemms == 1 ? "its" : "their");
  if (plan.fp8)
    return "answer: " + judged + te_recipe_call(plan.te) + "  [" + candidate_name(c.candidate) + "]" + kept + "\n";
  return "answer: " + judged + "every " + (judged.empty() ? "" : "judged ") + "GEMM in BF16 (the chosen " +
         te_recipe_call(plan.te) + "  [" + candidate_name(c.candidate) + "] keeps none in " + low + ")\n";
}

// "  <title> (N GEMMs):" and the lines, at most kWatchListLength, "and N more" for the rest.
std::string capped_block(const std::string& title, const std::vector<std::string>& lines) {
  std::string s = title;
  for (std::size_t i = 0; i < lines.size() && i < kWatchListLength; ++i) s += "    " + lines[i] + "\n";
  if (lines.size() > kWatchListLength)
    s += format_text("    and %zu more (recipe.json has each)\n", lines.size() - kWatchListLength);
  return s;
}

// Which GEMMs train in BF16 and why (the numbers, whatever the numbers, not judged, not paying),
// and those kept close to a limit or over a watch-only threshold.
std::string fallback_lines(const PlanFallbacks& fallbacks, const std::string& low, const std::string& gpu) {
  std::string s;
  const std::vector<std::string>& bf16 = fallbacks.bf16;
  const std::size_t not_paying = fallbacks.not_paying;
  if (bf16.empty() && not_paying == 0) {
    s += "  keep in BF16: nothing, every " + std::string(fallbacks.unjudged.empty() ? "" : "judged ") + "GEMM " + low +
         "\n";
  } else if (bf16.empty()) {
    s += "  keep in BF16 for the numbers: nothing\n";
  } else {
    s += format_text("  keep in BF16 (%zu GEMM%s):\n", fallbacks.bf16_gemms, fallbacks.bf16_gemms == 1 ? "" : "s");
    for (const auto& b : bf16) s += "    " + b + "\n";
  }
  if (!fallbacks.forced.empty()) {
    s += format_text("  BF16 whatever the numbers (%zu GEMM%s):\n", fallbacks.forced_gemms,
                     fallbacks.forced_gemms == 1 ? "" : "s");
    for (const auto& b : fallbacks.forced) s += "    " + b + "\n";
  }
  if (!fallbacks.unjudged.empty())
    s += capped_block(format_text("  not judged (%zu GEMM%s):\n", fallbacks.unjudged_gemms,
                                  fallbacks.unjudged_gemms == 1 ? "" : "s"),
                      fallbacks.unjudged);
  if (not_paying > 0)
    s += format_text("  keep in BF16 because %s would not pay on %s: %zu GEMM%s the numbers allow in "
                     "%s (their casts cost more than the faster GEMMs save; recipe.json has each)\n",
                     low.c_str(), gpu.c_str(), not_paying, not_paying == 1 ? "" : "s", low.c_str());
  if (!fallbacks.close.empty()) {
    s += "  kept " + low + " close to the limit:\n";
    for (const auto& b : fallbacks.close) s += "    " + b + "\n";
  }
  if (const std::vector<std::string>& w = fallbacks.watched; !w.empty())
    s += capped_block(format_text("  kept %s over a watch-only threshold (%zu GEMM%s; training showed no harm from "
                                  "these criteria's breaches, docs/POLICY.md \"Watch\"):\n",
                                  low.c_str(), w.size(), w.size() == 1 ? "" : "s"),
                      w);
  return s;
}

// The predicted speedup and FP8 share, on what cost basis; or why no cost was judged.
std::string cost_lines(const AnswerContext& a, const Recommendation& rec, const CandidatePlan& c,
                       std::size_t not_paying, const std::string& low) {
  if (!c.speedup)
    return format_text("  cost: %s; %s share of GEMM FLOPs %.1f %%\n", visible_text(a.cost_basis()).c_str(),
                       low.c_str(), 100.0 * c.fp8_flop_share);
  std::string s = format_text("  predicted GEMM speedup over all-BF16: %.3fx on %s (cost: %s); %s share of GEMM "
                              "FLOPs %.1f %%\n",
                              *c.speedup, a.gpu_name().c_str(), visible_text(a.cost_basis()).c_str(), low.c_str(),
                              100.0 * c.fp8_flop_share);
  // Where the numbers allow FP8 but the cost says no: what the numerics-only plan predicts.
  if (not_paying > 0 && c.numerics_speedup)
    s += format_text("  with every GEMM the numbers allow in %s, %s predicts %.3fx on %s; %s--cost none "
                     "decides by the numerics alone\n",
                     low.c_str(), candidate_name(c.candidate).c_str(), *c.numerics_speedup, a.gpu_name().c_str(),
                     rec.at_captured_tokens ? "--tokens-per-step gives the real token count, " : "");
  return s;
}

// The chosen plan: its first line, why, the criteria's record, the fallbacks, the cost, what the
// files train and what to watch.
std::string chosen_lines(const AnswerContext& a, const Recommendation& rec, const ConsumerPlan& plan) {
  const CandidatePlan& c = rec.candidates[*rec.chosen];
  const std::string low = low_precision_name(c.candidate.recipe.kind);
  const PlanFallbacks fallbacks = plan_fallbacks(rec);
  std::string s = headline(rec, plan, fallbacks);
  s += "  why: " + rec.why + "\n";
  if (!rec.calibration.empty()) s += "  criteria: " + rec.calibration + "\n";
  s += fallback_lines(fallbacks, low, a.gpu_name());
  s += cost_lines(a, rec, c, fallbacks.not_paying, low);
  s += trained_lines(plan, a.gpu_name());
  // Watch next run: the recommendation's one watch list.
  if (!rec.watch.empty()) {
    s += "  watch next run:\n";
    for (const WatchItem& w : rec.watch) s += "    " + visible_text(watch_item_text(w)) + "\n";
  }
  return s;
}

// One other kind's line: how many of its GEMMs fail (or could not be evaluated), at which steps,
// and the worst failure where most fail (the first check of its reason).
std::string other_recipe_line(const CandidatePlan& best) {
  // GEMMs that could not be evaluated (no amax history before the step, a shape the recipe
  // cannot quantise) are said so, not counted as failing a criterion.
  const int not_evaluated = best.gemms_not_evaluated, failing = best.gemms_to_bf16 - not_evaluated;
  std::string line = candidate_name(best.candidate) + ": ";
  if (failing > 0) line += format_text("%d GEMM%s", failing, failing == 1 ? " fails" : "s fail");
  if (failing > 0 && not_evaluated > 0) line += format_text(", %d more not evaluated", not_evaluated);
  if (failing == 0) line += format_text("%d GEMM%s not evaluated", not_evaluated, not_evaluated == 1 ? "" : "s");
  const CandidatePlan::StepFailures* most = nullptr;
  std::string steps;
  for (const auto& f : best.failures_by_step) {
    steps += format_text("%s%lld (%d)", steps.empty() ? "" : ", ", static_cast<long long>(f.step), f.gemms);
    if (most == nullptr || f.gemms > most->gemms) most = &f;
  }
  if (most == nullptr) return line + ": " + best.worst_failure;  // the forecast alone
  const std::string& w = most->worst;
  return line + " at steps " + steps + "; at step " + std::to_string(most->step) + ": " + w.substr(0, w.find("; step "));
}

// Why not the other recipe kinds: for each kind but the chosen one, its best-ranked runnable
// candidate (Recommendation::ranking, the one ranking), when it fails somewhere (recipe.json's
// candidates have every candidate and all of it).
std::string other_recipes_lines(const Recommendation& rec) {
  std::string s;
  const RecipeKind chosen_kind = rec.candidates[*rec.chosen].candidate.recipe.kind;
  for (RecipeKind kind : kCandidatePreference) {
    if (kind == chosen_kind) continue;
    const CandidatePlan* best = nullptr;  // the kind's first in the recommendation's ranking
    for (const std::size_t i : rec.ranking)
      if (best == nullptr && rec.candidates[i].candidate.recipe.kind == kind) best = &rec.candidates[i];
    if (best == nullptr || best->worst_failure.empty()) continue;
    s += (s.empty() ? "  not the other recipes:\n" : "") + std::string("    ") + other_recipe_line(*best) + "\n";
  }
  return s;
}

// The per-module plan, whether a file holds it or it is an alternative.
std::string module_plan_lines(const Recommendation& rec, const ConsumerPlan& plan) {
  if (!rec.module_plan) return "";
  const ModulePlan& mp = *rec.module_plan;
  std::string s = plan.precision_config_mixes ? "  mixing recipes per module (te_precision_config.yaml: what Megatron trains): "
                                              : "  an alternative no file holds, mixing recipes per module: ";
  s += mp.why + "\n";
  for (const ModuleChoice& m : mp.modules)
    if (!m.candidate || *m.candidate != mp.base)
      s += "    " + m.layer + ": " +
           (m.candidate ? candidate_name(rec.candidates[*m.candidate].candidate) : std::string("BF16")) + ": " +
           m.reason + "\n";
  return s;
}

// The candidates that could not be chosen: on the GPU, on the TE release, evaluation only.
std::string excluded_lines(const Recommendation& rec, const std::string& gpu) {
  std::vector<std::pair<std::string, std::string>> excluded;
  for (const GpuExclusion& e : rec.gpu_excluded) excluded.emplace_back(e.candidate, e.reason);
  std::string evaluation_only, release, s;
  for (const CandidatePlan& c : rec.candidates)
    if (c.evaluation_only)
      evaluation_only += (evaluation_only.empty() ? "" : ", ") + candidate_name(c.candidate);
    else if (c.release_excluded)
      release += "    " + candidate_name(c.candidate) + ": " + c.release_reason + "\n";
    else if (!c.runnable)
      excluded.emplace_back(candidate_name(c.candidate), c.excluded);
  if (!excluded.empty()) {
    s += "  excluded on " + gpu + ":\n";
    for (const std::string& line : join_by_reason(excluded)) s += "    " + line + "\n";
  }
  if (!release.empty()) s += "  excluded on TE " + te_version_text(rec.te_version) + " (--te-version):\n" + release;
  if (!evaluation_only.empty())
    s += "  evaluation only (TE cannot train them; recipe.json has why): " + evaluation_only + "\n";
  return s;
}

std::string answer_lines(const AnswerContext& a) {
  if (a.recommendation == nullptr) return "answer: " + a.skipped.why + "\n";
  const Recommendation& rec = *a.recommendation;
  std::optional<ConsumerPlan> own;
  const ConsumerPlan& plan = a.consumers ? *a.consumers : own.emplace(rec);
  std::string s;
  if (!rec.chosen)
    s += "answer: no FP8 recipe can be recommended" + no_recipe_reason(rec, a.gpu_name()) +
         (nothing_judged(rec.candidates).empty() ? "" : "; no FP8 config is written") + "\n";
  else
    s += chosen_lines(a, rec, plan) + other_recipes_lines(rec);
  s += module_plan_lines(rec, plan);
  // Captured layers a config cannot tell apart (two stacks, two wrappers) get one plan there: said
  // here too, not only in the file, when their plans differ.
  for (const std::string& m : plan.merged_modules) s += "  one module in the configs: " + m + "\n";
  if (!a.delayed_search.empty()) s += "  delayed scaling's options: " + a.delayed_search + "\n";
  for (const std::string& l : rec.limits) s += "  not judged: " + l + "\n";
  if (!rec.advisories.empty()) {
    s += "  from the field:\n";
    for (const Advisory& adv : rec.advisories) s += "    " + adv.text + " [" + adv.source + "]\n";
  }
  s += excluded_lines(rec, a.gpu_name());
  for (const std::string& why : a.not_written) s += "  " + why + "\n";  // "X not written: why"
  return s;
}

}  // namespace

// Names and reasons quoting them reach a terminal: no control byte but the line breaks.
std::string render_answer(const AnswerContext& a) { return terminal_text(answer_lines(a)); }

}  // namespace fp8a

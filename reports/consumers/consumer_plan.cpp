#include "reports/consumers/consumer_plan.hpp"

#include <algorithm>
#include <map>

#include "core/te_version.hpp"
#include "core/text.hpp"

namespace fp8a {

LayerDecision merged_decision(const std::vector<LayerDecision>& layers, const ModuleGroup& group) {
  std::vector<MemberPlan> members;  // one recipe: the members' candidates all unset
  for (std::size_t i : group.layers) {
    MemberPlan& p = members.emplace_back();
    for (std::size_t g = 0; g < p.precision.size(); ++g)
      p.precision[g] = is_fallback(layers[i].gemms[g]) ? Precision::kBf16 : Precision::kFp8;
  }
  const MergedMembers rule = merge_members(members);
  // Each GEMM as the first member that decided it so: BF16 with its reason, else the first judged.
  LayerDecision merged = layers[group.layers.front()];
  for (std::size_t g = 0; g < merged.gemms.size(); ++g)
    for (std::size_t i : group.layers) {
      const GemmDecision& d = layers[i].gemms[g];
      if (rule.precision[g] == Precision::kBf16 ? is_fallback(d) : d.judged) {
        merged.gemms[g] = d;
        break;
      }
    }
  return merged;
}

bool group_plans_differ(const std::vector<LayerDecision>& layers, const ModuleGroup& group) {
  return std::any_of(group.layers.begin(), group.layers.end(), [&](std::size_t i) {
    return fallback_gemm_list(layers[i]) != fallback_gemm_list(layers[group.layers.front()]);
  });
}

std::string group_note(const std::vector<LayerDecision>& layers, const ModuleGroup& group, const std::string& scheme) {
  if (group.layers.size() < 2) return "";
  std::string names;
  for (std::size_t i : group.layers) names += (names.empty() ? "" : ", ") + layers[i].layer;
  std::string note = std::to_string(group.layers.size()) + " captured layers are one module '" + group.name.name +
                     "' in " + scheme + " (" + names + ")";
  if (group_plans_differ(layers, group))
    note += ": their plans differ, so each GEMM that any of them keeps in BF16 is BF16 here";
  return note;
}

std::string on_release(const Recommendation& rec) {
  const bool any = std::any_of(rec.candidates.begin(), rec.candidates.end(),
                               [](const CandidatePlan& c) { return c.release_excluded; });
  return any ? " with TE " + te_version_text(rec.te_version) + " (--te-version)" : "";
}

const RunCandidate* chosen_candidate(const Recommendation& rec) {
  if (!rec.chosen || *rec.chosen >= rec.candidates.size()) return nullptr;
  return &rec.candidates[*rec.chosen].candidate;
}

bool plan_all_bf16(const Recommendation& rec) {
  return chosen_candidate(rec) != nullptr &&
         std::none_of(rec.layers.begin(), rec.layers.end(), [](const LayerDecision& l) {
           return std::any_of(l.gemms.begin(), l.gemms.end(),
                              [](const GemmDecision& g) { return g.precision == Precision::kFp8; });
         });
}

bool is_fallback(const GemmDecision& gemm) { return gemm.judged && gemm.precision == Precision::kBf16; }

bool has_bf16_gemm(const LayerDecision& layer) {
  return std::any_of(layer.gemms.begin(), layer.gemms.end(), is_fallback);
}

std::string fallback_gemm_list(const LayerDecision& layer) {
  std::string s;
  for (const GemmDecision& g : layer.gemms)
    if (is_fallback(g)) s += std::string(s.empty() ? "" : ",") + gemm_name(g.gemm);
  return s;
}

bool whole_layer_fallback(const LayerDecision& layer) {
  return has_bf16_gemm(layer) &&
         std::none_of(layer.gemms.begin(), layer.gemms.end(),
                      [](const GemmDecision& g) { return g.judged && g.precision != Precision::kBf16; });
}

std::string first_bf16_reason(const LayerDecision& layer) {
  for (const GemmDecision& g : layer.gemms)
    if (is_fallback(g) && !g.reason.empty()) return g.reason;
  return "";
}

FirstLastBf16 first_last_bf16(const Recommendation& rec) {
  std::map<int, bool> all_bf16;  // index -> every captured module of it is all-BF16
  for (const LayerDecision& l : rec.layers) {
    const auto i = transformer_layer_index(l.layer);
    if (!i) continue;
    const auto [it, fresh] = all_bf16.emplace(*i, true);
    it->second = it->second && whole_layer_fallback(l);
  }
  FirstLastBf16 r;
  if (all_bf16.empty()) return r;
  r.last_index = all_bf16.rbegin()->first;
  for (int i = 0;; ++i) {
    const auto it = all_bf16.find(i);
    if (it == all_bf16.end() || !it->second) break;
    ++r.at_start;
  }
  for (int i = r.last_index; i >= 0; --i) {
    const auto it = all_bf16.find(i);
    if (it == all_bf16.end() || !it->second) break;
    ++r.at_end;
  }
  // Every captured layer BF16 and contiguous from 0: the end run repeats the start run.
  if (r.at_start == r.last_index + 1) r.at_end = 0;
  return r;
}

namespace {

// Why te_precision_config.yaml is not written, unset when it is: no chosen candidate, or delayed
// scaling (the file cannot name it) with no module kept in BF16.
std::optional<std::string> precision_config_omission(const Recommendation& rec) {
  const RunCandidate* c = chosen_candidate(rec);
  if (c == nullptr) return "te_precision_config.yaml not written: no FP8 candidate was chosen";
  const RecipeKindTraits& kind = recipe_kind_traits(c->recipe.kind);
  if (kind.te_per_module) return std::nullopt;
  for (const LayerDecision& l : rec.layers)
    if (has_bf16_gemm(l)) return std::nullopt;
  return std::string("te_precision_config.yaml not written: Megatron's precision config cannot express ") +
         kind.short_name + " (set by megatron_args.txt) and the plan keeps no module in BF16";
}

// The nvdlfw_inspect.yaml sections of the groups: those that keep a GEMM in BF16 or hold a watched
// FP8 GEMM.
std::vector<NvdlfwSection> nvdlfw_sections_of(const Recommendation& rec, const std::vector<ModuleGroup>& groups) {
  std::vector<NvdlfwSection> sections;
  for (const ModuleGroup& group : groups) {
    NvdlfwSection s{group, merged_decision(rec.layers, group), {}, {}};
    for (const GemmDecision& g : s.merged.gemms)
      if (is_fallback(g)) s.bf16.push_back(gemm_name(g.gemm));
    for (const WatchItem& w : rec.watch)
      for (std::size_t li : group.layers)
        if (rec.layers[li].layer == w.layer &&
            std::find(s.bf16.begin(), s.bf16.end(), gemm_name(w.gemm)) == s.bf16.end())
          s.watch.push_back(&w);
    if (!s.bf16.empty() || !s.watch.empty()) sections.push_back(std::move(s));
  }
  return sections;
}

// Why nvdlfw_inspect.yaml is not written, unset when it is: no chosen candidate, NVFP4 on a TE
// release whose debug tools do not take it (before 2.13, PR #2296: DisableQuantizationGEMM/Layer
// and LogNvfp4TensorStats), or an FP8 plan with nothing to fall back or watch.
std::optional<std::string> nvdlfw_omission(const ConsumerPlan& plan) {
  if (plan.candidate == nullptr) return "nvdlfw_inspect.yaml not written: no FP8 candidate was chosen";
  const TeVersion te = plan.rec->te_version;
  const RecipeKindTraits& kind = recipe_kind_traits(plan.candidate->recipe.kind);
  if (te < kind.te_debug_since)
    return std::string("nvdlfw_inspect.yaml not written: TE's debug tools take ") + kind.short_name + " from TE " +
           te_version_text(kind.te_debug_since) + " (DisableQuantizationGEMM, " + kind.nvdlfw_stats +
           "), and this is for TE " + te_version_text(te) + " (--te-version)";
  if (plan.fp8 && plan.nvdlfw_sections.empty())
    return "nvdlfw_inspect.yaml not written: no BF16 fallback and no FP8 GEMM to watch";
  return std::nullopt;
}

// Megatron's settings from the plan's chosen candidate, fallbacks, first/last layers and
// te_precision_config.yaml (the constructor sets them last).
MegatronFp8 megatron_fp8(const ConsumerPlan& plan) {
  const Recommendation& rec = *plan.rec;
  MegatronFp8 m;
  m.candidate = plan.candidate;
  if (m.candidate == nullptr) return m;
  const Recipe& r = m.candidate->recipe;
  m.fp8 = plan.fp8;
  m.fp4 = recipe_kind_traits(r.kind).megatron_fp4;
  m.format = m.fp4 ? "e2m1" : carry_format(r.kind, m.candidate->format, Consumer::kMegatronArgs).value;
  m.recipe = recipe_kind_traits(r.kind).megatron_recipe;
  m.delayed = replays_history(r.kind);
  if (m.delayed) m.amax_compute_algo = r.algo == DelayedAlgo::kMax ? "max" : "most_recent";
  m.first_last = plan.first_last;
  m.first_last_applied = !m.delayed && (m.first_last.at_start > 0 || m.first_last.at_end > 0);
  for (const LayerDecision& l : rec.layers) {
    if (megatron_module_path(l.layer).name != "output_layer") continue;
    m.head_layer = l.layer;
    if (l.precision == Precision::kBf16) m.head = MegatronHead::kBf16;
    else m.head = recipe_kind_traits(r.kind).megatron_output_proj ? MegatronHead::kFp8 : MegatronHead::kFp8Lost;
    break;
  }
  m.te_precision_config = !plan.precision_config_omitted.has_value();
  const FirstLastBf16& fl = m.first_last;
  for (const LayerFallback& f : plan.fallbacks) {
    const std::string& layer = rec.layers[f.layer].layer;
    const auto i = transformer_layer_index(layer);
    const bool covered = m.first_last_applied && i &&
                         (*i < fl.at_start || (fl.at_end > 0 && *i > fl.last_index - fl.at_end));
    if (!covered) m.uncovered.push_back(layer + " (" + f.gemms + ")");
  }
  return m;
}

// The members of each group (captured layers one consumer name selects: module_groups) get one
// plan, as the file gives them: a GEMM BF16 where any member's is, the whole module BF16 where
// the members' recipes differ. Says which groups changed a member's plan in `t.differs`.
void merge_groups(TrainedPlan& t, const std::vector<ModuleGroup>& groups, const std::vector<LayerDecision>& layers,
                  const char* file) {
  std::vector<std::string> changed;
  for (const ModuleGroup& group : groups) {
    if (group.layers.size() < 2) continue;
    std::vector<MemberPlan> members;
    for (std::size_t li : group.layers) members.push_back({t.precision[li], t.candidate[li]});
    const std::array<Precision, 3> p = merge_members(members).precision;
    bool any = false;
    for (std::size_t li : group.layers) {
      any = any || t.precision[li] != p;
      t.precision[li] = p;
    }
    if (!any) continue;
    std::string names;
    for (std::size_t li : group.layers) names += (names.empty() ? "" : " and ") + layers[li].layer;
    changed.push_back(names + " share one " + file + " entry ('" + group.name.name + "'), BF16 where any needs it");
  }
  for (const std::string& c : changed) t.differs += (t.differs.empty() ? "" : "; ") + c;
}

// The FP8 share of a trained plan: its low-precision GEMMs' FLOPs over every GEMM's.
double trained_share(const TrainedPlan& t, const CandidatePlan& chosen) {
  return chosen.total_flops > 0 ? plan_fp8_flops(chosen, t.precision) / chosen.total_flops : 0.0;
}

// The decisions' precision of every GEMM, the chosen candidate for each layer.
TrainedPlan decided(const Recommendation& r) {
  TrainedPlan t;
  for (const LayerDecision& l : r.layers) {
    std::array<Precision, 3> p{};
    for (const GemmDecision& g : l.gemms) p[static_cast<std::size_t>(g.gemm)] = g.precision;
    t.precision.push_back(p);
    t.candidate.push_back(r.chosen);
  }
  return t;
}

// Whether two trained plans train every GEMM alike (in the same recipe where low precision).
bool same_plan(const TrainedPlan& a, const TrainedPlan& b) {
  if (a.precision.size() != b.precision.size()) return false;
  for (std::size_t li = 0; li < a.precision.size(); ++li)
    for (std::size_t g = 0; g < 3; ++g)
      if (a.precision[li][g] != b.precision[li][g] ||
          (a.precision[li][g] == Precision::kFp8 && a.candidate[li] != b.candidate[li]))
        return false;
  return true;
}

// Per GEMM: te_snippet.py's recipe with nvdlfw_inspect.yaml's GEMMs in BF16 (when written), the
// layers its names select together as one.
TrainedPlan trained_per_gemm(const Recommendation& r, bool nvdlfw_written, const std::vector<ModuleGroup>& groups) {
  const CandidatePlan& chosen = r.candidates[*r.chosen];
  TrainedPlan t = decided(r);
  t.files = {"te_snippet.py"};
  if (nvdlfw_written) t.files.push_back("nvdlfw_inspect.yaml");
  t.files.push_back("recipe.json");
  t.fp8_flop_share = chosen.fp8_flop_share;
  t.speedup = chosen.speedup;
  if (nvdlfw_written) {
    merge_groups(t, groups, r.layers, "nvdlfw_inspect.yaml");
    if (!t.differs.empty()) {
      t.fp8_flop_share = trained_share(t, chosen);
      t.speedup.reset();  // not priced: the cost model priced the plan, not this merge
    }
  }
  return t;
}

// Per module, as Megatron's files train it: te_precision_config.yaml's per-module plan when it
// holds one (`mixes`), else the plan with each module that keeps a GEMM in BF16 wholly BF16; the
// layers one module path names as one.
TrainedPlan trained_per_module(const Recommendation& r, bool mixes, bool precision_config_written,
                               const std::vector<ModuleGroup>& groups) {
  const CandidatePlan& chosen = r.candidates[*r.chosen];
  TrainedPlan t;
  t.granularity = "module";
  t.files = {"megatron_args.txt", "megatron_bridge.yaml"};
  if (precision_config_written) t.files.push_back("te_precision_config.yaml");
  std::string differs;
  if (mixes) {
    const ModulePlan& mp = *r.module_plan;
    for (const ModuleChoice& m : mp.modules) {
      t.precision.push_back(m.candidate ? std::array{Precision::kFp8, Precision::kFp8, Precision::kFp8}
                                        : std::array{Precision::kBf16, Precision::kBf16, Precision::kBf16});
      t.candidate.push_back(m.candidate);
    }
    t.fp8_flop_share = mp.fp8_flop_share;
    t.speedup = mp.speedup;
    differs = format_text("te_precision_config.yaml's per-module plan (%d module%s on other recipes, %d in BF16)",
                          mp.switched, mp.switched == 1 ? "" : "s", mp.bf16);
  } else {
    // A recommendation made by hand (the tests') may not carry it: the same, without a cost.
    const WholeModulePlan w = r.whole_modules ? *r.whole_modules : plan_whole_modules(chosen, r.layers, nullptr, {});
    t.precision = w.plan;
    t.candidate.assign(w.plan.size(), r.chosen);
    t.fp8_flop_share = w.fp8_flop_share;
    t.speedup = w.speedup;
    for (std::size_t i = 0; i < w.widened.size() && i < 3; ++i) differs += (i == 0 ? "" : ", ") + r.layers[w.widened[i]].layer;
    if (w.widened.size() > 3) differs += format_text(" and %zu more", w.widened.size() - 3);
    if (!w.widened.empty()) differs += w.widened.size() == 1 ? " whole in BF16" : " whole in BF16 (each)";
  }
  merge_groups(t, groups, r.layers, "te_precision_config.yaml");
  if (!t.differs.empty()) {
    t.fp8_flop_share = trained_share(t, chosen);
    t.speedup.reset();
  }
  if (!differs.empty()) t.differs = differs + (t.differs.empty() ? "" : "; " + t.differs);
  return t;
}

// torchao.json: one recipe model-wide; a module with a BF16 GEMM kept whole in high precision
// (under rowwise_with_gw_hp every wgrad high precision, and the modules with fprop or dgrad BF16);
// its filter selects by dot-suffix, so the layers it names together train as one.
TrainedPlan trained_by_torchao(const Recommendation& r, bool gw_hp) {
  TrainedPlan t = decided(r);
  t.granularity = "module";
  t.files = {"torchao.json"};
  for (std::size_t li = 0; li < r.layers.size(); ++li) {
    const LayerDecision& l = r.layers[li];
    std::array<Precision, 3>& p = t.precision[li];
    if (gw_hp) {
      p[2] = Precision::kBf16;
      if (is_fallback(l.gemms[0]) || is_fallback(l.gemms[1])) p.fill(Precision::kBf16);
    } else if (has_bf16_gemm(l)) {
      p.fill(Precision::kBf16);
    }
  }
  merge_groups(t, module_groups(r.layers, captured_name, NameMatch::kDotSuffix), r.layers, "torchao.json");
  t.fp8_flop_share = trained_share(t, r.candidates[*r.chosen]);
  t.differs = "torchao.json: one recipe, modules with a BF16 GEMM whole in high precision" +
              std::string(gw_hp ? ", every wgrad in high precision (rowwise_with_gw_hp)" : "") +
              (t.differs.empty() ? "" : "; " + t.differs);
  return t;
}

}  // namespace

ConsumerPlan::ConsumerPlan(const Recommendation& r) : rec(&r) {
  candidate = chosen_candidate(r);
  fp8 = candidate != nullptr && !plan_all_bf16(r);
  if (candidate != nullptr) {
    te = te_recipe_for(*candidate, r.te_version);
    for (const Consumer c : kConsumers)
      option_notes[static_cast<int>(c)] = fp8a::option_notes(candidate->recipe, c, r.te_version);
  }
  for (std::size_t i = 0; i < r.layers.size(); ++i) {
    const LayerDecision& l = r.layers[i];
    if (has_bf16_gemm(l)) fallbacks.push_back({i, fallback_gemm_list(l), whole_layer_fallback(l), first_bf16_reason(l)});
  }
  first_last = first_last_bf16(r);
  precision_config_omitted = precision_config_omission(r);
  // The layers each file's names select together: Megatron's module paths, nvdlfw's names.
  const std::vector<ModuleGroup> megatron_groups = module_groups(r.layers, megatron_module_path, NameMatch::kExact);
  const std::vector<ModuleGroup> nvdlfw_groups = module_groups(r.layers, nvdlfw_layer_name, NameMatch::kDotSuffix);
  if (fp8) {
    const auto note = [&](const std::vector<ModuleGroup>& groups, const char* file) {
      for (const ModuleGroup& g : groups)
        if (group_plans_differ(r.layers, g)) merged_modules.push_back(group_note(r.layers, g, file));
    };
    note(megatron_groups, "te_precision_config.yaml");
    note(nvdlfw_groups, "nvdlfw_inspect.yaml");
  }
  if (fp8) nvdlfw_sections = nvdlfw_sections_of(r, nvdlfw_groups);
  nvdlfw_omitted = nvdlfw_omission(*this);
  megatron = megatron_fp8(*this);
  precision_config_mixes = fp8 && !precision_config_omitted && r.module_plan && r.chosen &&
                           r.module_plan->base == *r.chosen && recipe_kind_traits(candidate->recipe.kind).te_per_module;
  if (candidate == nullptr) return;
  for (const LayerDecision& l : r.layers)
    wgrad_only_fallback = wgrad_only_fallback ||
                          (is_fallback(l.gemms[2]) && !is_fallback(l.gemms[0]) && !is_fallback(l.gemms[1]));
  const bool torchao = fp8 && *recipe_kind_traits(candidate->recipe.kind).torchao_recipe != '\0';
  torchao_gw_hp = torchao && std::string(recipe_kind_traits(candidate->recipe.kind).torchao_recipe) == "rowwise" &&
                  wgrad_only_fallback;
  TrainedPlan per_gemm = trained_per_gemm(r, !nvdlfw_omitted, nvdlfw_groups);
  TrainedPlan per_module = trained_per_module(r, precision_config_mixes, !precision_config_omitted, megatron_groups);
  if (same_plan(per_module, per_gemm)) per_module.differs = per_gemm.differs;
  std::optional<TrainedPlan> by_torchao;
  if (torchao) {
    by_torchao = trained_by_torchao(r, torchao_gw_hp);
    if (same_plan(*by_torchao, per_module)) {
      per_module.files.push_back("torchao.json");
      by_torchao.reset();
    }
  }
  if (!fp8)  // nothing trains FP8: every file BF16
    for (TrainedPlan* t : {&per_gemm, &per_module})
      for (auto& p : t->precision) p.fill(Precision::kBf16);
  trained = {std::move(per_gemm), std::move(per_module)};
  if (by_torchao) trained.push_back(std::move(*by_torchao));
}

ConsumerPlan plan_consumers(const Recommendation& rec) { return ConsumerPlan(rec); }

}  // namespace fp8a

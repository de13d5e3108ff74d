// The selection on inputs with known answers, numerics alone (cost = nullptr): every synth
// preset against its ground truth, and the real captures of datasets/real/.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "datasets/synth.hpp"
#include "datasets/training_log.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/evaluation_index.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_pairing.hpp"
#include "pipeline/run_pipeline.hpp"
#include "engine/run.hpp"
#include "core/error.hpp"
#include "core/gpu_target.hpp"
#include "policies/advice.hpp"
#include "support/evaluated.hpp"
#include "support/policies.hpp"

namespace {

using namespace fp8a;
using fp8a::testing::Evaluated;
using fp8a::testing::evaluate;
using fp8a::testing::failing_policy;

// The delayed-scaling forecasts of every format of the table, as the run would pass them.
// The clipping measured on the captures, as pipeline/run_pipeline.cpp does.
std::vector<DelayedForecast> forecasts(const Evaluated& e, const EvaluationIndex& index) {
  std::vector<DelayedForecast> f = forecast_delayed_scaling(&e.log, e.rows, index.recipes(), index.formats());
  measure_clipping(e.captures, e.rows, f);
  return f;
}

// The advice's inputs from the evaluation tables: every candidate of the index, no forecasts.
RecommendationInputs inputs_of(const Evaluated& e, const EvaluationIndex& index) {
  RecommendationInputs in;
  in.index = &index;
  in.gemms = e.gemms;
  in.layers = e.layers;
  in.candidates = index_candidates(index);
  return in;
}

// A GPU that runs every recipe kind (sm_100), so without a cost model the numbers alone decide.
const GpuTarget& every_recipe_gpu() {
  const GpuTarget* b200 = find_gpu_target("b200");
  FP8A_CHECK(b200 != nullptr, "b200 is a GPU target");
  return *b200;
}

// The selection without a cost model; the forecasts only when asked (the ground-truth checks run
// on the evaluation tables alone).
Recommendation advise(const Evaluated& e, const Policy& policy = default_policy(),
                      bool with_forecasts = false) {
  const EvaluationIndex index(e.rows);
  const std::vector<DelayedForecast> fc =
      with_forecasts ? forecasts(e, index) : std::vector<DelayedForecast>{};
  RecommendationInputs in = inputs_of(e, index);
  in.forecasts = fc;
  return recommend(in, policy, every_recipe_gpu(), nullptr);
}

// A synth preset as `fp8-advisor run` evaluates it with its amax trace: the CPU backend, both
// formats, the four recipe kinds.
void evaluate_synth(Evaluated& e, const SynthPreset& preset) {
  MemoryFileSystem mfs;
  std::vector<std::string> paths;
  for (const SynthFile& f : synthesize(preset, 1, preset.default_steps)) {
    std::vector<std::byte> b(f.contents.size());
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(f.contents[i]);
    mfs.add_file("s/" + f.name, std::move(b));
    if (f.name.ends_with(".safetensors")) paths.push_back("s/" + f.name);
  }
  e.captures = load_captures(paths, mfs);
  e.log = load_training_log({"s/amax_trace.csv"}, mfs);
  evaluate(e, "current,delayed,block,mxfp8", kAllTrainingFormats);
}

// evaluate_synth of the preset of that name.
void evaluate_preset(Evaluated& e, const std::string& name) {
  const SynthPreset* preset = find_synth_preset(name);
  REQUIRE(preset != nullptr);
  evaluate_synth(e, *preset);
}

void evaluate_real(Evaluated& e, const std::string& name) {
  DiskFileSystem fs;
  const std::string dir = std::string(FP8A_SOURCE_DIR) + "/datasets/real/" + name;
  e.captures = load_captures({dir}, fs);
  e.log = load_training_log({dir + "/amax_trace_rank0.csv"}, fs);
  evaluate(e, "current,delayed", {TrainingFormat::kHybrid});
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

const LayerJudgement* judgement(const CandidatePlan& c, const std::string& layer) {
  for (const auto& l : c.layers)
    if (l.layer == layer) return &l;
  return nullptr;
}

// Why a layer is (not) safe under a candidate: each GEMM's worst verdict in numbers.
std::string explain(const LayerJudgement& l) {
  std::string s;
  for (const auto& g : l.gemms) {
    s += std::string(" ") + gemm_name(g.gemm) + (g.fp8_safe ? " safe" : " FAIL");
    if (g.worst.limiting)
      s += " (step " + std::to_string(g.worst_step) + " " + criterion_name(*g.worst.limiting) +
           " " + std::to_string(g.worst.measured) + " vs " + std::to_string(g.worst.threshold) +
           ", margin " + std::to_string(g.worst.margin) + ")";
    if (g.forecast && !g.forecast->passed) s += " [forecast: " + g.forecast->reason + "]";
  }
  return s;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The Pareto list of the chosen candidate, from all-FP8 to all-BF16: one GEMM more in BF16 per
// point, the FP8 share and the risk falling, the chosen plan one of the points, failing GEMMs sent
// to BF16 before it, nothing failing in FP8 from it on.
void check_pareto(const Recommendation& rec) {
  REQUIRE(rec.chosen.has_value());
  const CandidatePlan& c = rec.candidates[*rec.chosen];
  REQUIRE_FALSE(rec.pareto.empty());
  int judged = 0;
  for (const LayerJudgement& l : c.layers)
    for (const GemmJudgement& g : l.gemms) judged += g.judged ? 1 : 0;
  CHECK(rec.pareto.front().gemms_to_bf16 <= c.gemms_to_bf16 + c.gemms_not_paying);
  CHECK(rec.pareto.back().gemms_to_bf16 == judged);
  CHECK(rec.pareto.back().fp8_flop_share == 0.0);
  CHECK(rec.pareto.back().risk == 0.0);
  int chosen = 0;
  for (std::size_t i = 0; i < rec.pareto.size(); ++i) {
    const ParetoPoint& p = rec.pareto[i];
    if (p.chosen) {
      ++chosen;
      CHECK(p.gemms_to_bf16 == c.gemms_to_bf16 + c.gemms_not_paying);
      CHECK(p.fp8_flop_share == doctest::Approx(c.fp8_flop_share).epsilon(1e-12));
      CHECK(p.risk == doctest::Approx(c.total_risk).epsilon(1e-9));
      CHECK(p.failing_in_fp8 == 0);
    }
    if (i == 0) continue;
    const ParetoPoint& q = rec.pareto[i - 1];
    CHECK(p.gemms_to_bf16 > q.gemms_to_bf16);
    CHECK(p.fp8_flop_share <= q.fp8_flop_share);
    CHECK(p.risk <= q.risk + 1e-12);
    CHECK(p.failing_in_fp8 <= q.failing_in_fp8);
  }
  CHECK(chosen == 1);
}

// The per-module plan against the judgements it came from: every layer once, in order; a module on
// the base has every GEMM safe there; a switched module is safe under its candidate, which Megatron
// can express; a BF16 module is safe under none of the mixable candidates (no cost model here).
void check_module_plan(const Recommendation& rec) {
  REQUIRE(rec.module_plan.has_value());
  const ModulePlan& mp = *rec.module_plan;
  REQUIRE(mp.modules.size() == rec.layers.size());
  CHECK(per_module_recipe(rec.candidates[mp.base].candidate.recipe));
  int switched = 0, bf16 = 0;
  for (std::size_t li = 0; li < mp.modules.size(); ++li) {
    const ModuleChoice& m = mp.modules[li];
    INFO(m.layer << ": " << m.reason);
    CHECK(m.layer == rec.layers[li].layer);
    if (m.candidate) {
      CHECK(per_module_recipe(rec.candidates[*m.candidate].candidate.recipe));
      CHECK(rec.candidates[*m.candidate].layers[li].fp8_safe);
      CHECK(m.reason.empty() == (*m.candidate == mp.base));
      switched += *m.candidate != mp.base ? 1 : 0;
    } else {
      ++bf16;
      CHECK(has(m.reason, "no per-module recipe passes all its GEMMs"));
      for (const CandidatePlan& c : rec.candidates)
        if (per_module_recipe(c.candidate.recipe)) CHECK_FALSE(c.layers[li].fp8_safe);
    }
  }
  CHECK(mp.switched == switched);
  CHECK(mp.bf16 == bf16);
  // Never fewer FP8 FLOPs than the chosen single-recipe plan keeps in whole modules.
  double whole = 0;
  const CandidatePlan& c = rec.candidates[*rec.chosen];
  if (mp.base == *rec.chosen)
    for (std::size_t li = 0; li < c.layers.size(); ++li)
      if (c.layers[li].fp8_safe)
        for (const GemmJudgement& g : c.layers[li].gemms) whole += g.flops;
  CHECK(mp.fp8_flops >= whole);
}

}  // namespace

// The criteria's mechanics against the presets' ground truth, every criterion failing (the default
// only watches some: calibration/RESULTS.md).
TEST_CASE("synth presets: fp8_safe and the layer decisions match the ground truth") {
  for (const SynthPreset& preset : synth_presets()) {
    // model (311 MB) is judged by the real pipeline instead, under the default policy in hybrid as
    // the README runs it (tests/cli/test_readme.cpp). In e4m3 its lognormal gradients, 2M elements
    // wide, reach an amax that flushes 55 % of the LM head's gradient, over the failing policy's
    // 50 % whatever their energy: the lognormal truth is hybrid's.
    if (std::string(preset.name) == "model") continue;
    Evaluated e;
    evaluate_synth(e, preset);
    const Recommendation rec = advise(e, failing_policy());
    REQUIRE(rec.candidates.size() == 8);  // 4 recipes x 2 formats
    REQUIRE(rec.chosen.has_value());
    const CandidatePlan& chosen = rec.candidates[*rec.chosen];
    const std::string preset_name = preset.name;
    MESSAGE(preset_name << ": " << rec.why);
    std::vector<std::string> disagreements;
    for (const SynthLayer& layer : preset.layers) {
      const SynthLayerTruth& truth = synth_truth(layer.kind);
      for (const auto& [kinds, want] :
           {std::pair{split(truth.fine_with), true}, std::pair{split(truth.not_fine_with), false}})
        for (const std::string& kind : kinds)
          for (const CandidatePlan& c : rec.candidates) {
            if (recipe_kind_traits(c.candidate.recipe.kind).name != kind) continue;
            const LayerJudgement* l = judgement(c, layer.name);
            REQUIRE(l != nullptr);
            CHECK_FALSE(l->incomplete);
            if (l->fp8_safe != want)
              disagreements.push_back(std::string(preset.name) + " " + layer.name + " under " +
                                      candidate_name(c.candidate) + ": fp8_safe " +
                                      (l->fp8_safe ? "true" : "false") + ", truth " +
                                      (want ? "fine_with" : "not_fine_with") + ":" + explain(*l));
          }
      const LayerDecision* d = nullptr;
      for (const auto& ld : rec.layers)
        if (ld.layer == layer.name) d = &ld;
      REQUIRE(d != nullptr);
      // "fp8": every GEMM FP8; "bf16": the layer is not all-FP8 (the default policy's per-GEMM
      // scope sends its failing GEMMs; the others may stay FP8: "mixed").
      const bool want_fp8 = std::string(truth.decision) == "fp8";
      if ((d->precision == Precision::kFp8) != want_fp8)
        disagreements.push_back(std::string(preset.name) + " " + layer.name + ": decision " +
                                precision_name(d->precision) + " under " +
                                candidate_name(chosen.candidate) + ", truth " + truth.decision +
                                ":" + explain(*judgement(chosen, layer.name)));
      if (!want_fp8 && d->precision != Precision::kBf16)
        MESSAGE(preset_name << " " << std::string(layer.name) << ": truth bf16, plan "
                            << std::string(precision_name(d->precision)) << " under "
                            << candidate_name(chosen.candidate) << ":"
                            << explain(*judgement(chosen, layer.name)));
      // Where modules cannot split their GEMMs (Megatron's precision config), the per-module plan
      // is the ground truth's decision exactly: bf16 layers whole in BF16, fp8 layers on a recipe.
      REQUIRE(rec.module_plan.has_value());
      for (const ModuleChoice& m : rec.module_plan->modules)
        if (m.layer == layer.name && m.candidate.has_value() != want_fp8)
          disagreements.push_back(std::string(preset.name) + " " + layer.name +
                                  ": per-module plan " + (m.candidate ? "fp8" : "bf16") +
                                  ", truth " + truth.decision + ": " + m.reason);
    }
    for (const auto& s : disagreements) MESSAGE(s);
    CHECK(disagreements.empty());
    check_pareto(rec);
    for (const ParetoPoint& p : rec.pareto) CHECK_FALSE(p.speedup.has_value());
    check_module_plan(rec);
  }
}

TEST_CASE("real lm-sane: every GEMM stays FP8") {
  Evaluated e;
  evaluate_real(e, "lm-sane");
  const Recommendation rec = advise(e);
  REQUIRE(rec.chosen.has_value());
  const CandidatePlan& c = rec.candidates[*rec.chosen];
  // Both current and delayed pass everything with total risks 3.6 and 3.5, within 10 % of each
  // other: the preference order decides, current before delayed.
  MESSAGE(rec.why);
  CHECK(c.fp8_flop_share == 1.0);
  CHECK(c.gemms_to_bf16 == 0);
  CHECK(c.candidate.recipe.kind == RecipeKind::kPerTensorCurrent);
  CHECK(has(rec.why, "tied, preference order"));
  REQUIRE(rec.layers.size() == 2);
  for (const LayerDecision& l : rec.layers) {
    CHECK_FALSE(l.incomplete);
    CHECK(l.fp8_safe);
    CHECK(l.precision == Precision::kFp8);
    for (const GemmDecision& g : l.gemms) {
      INFO(l.layer << " " << gemm_name(g.gemm) << ": " << g.reason);
      CHECK(g.precision == Precision::kFp8);
      CHECK(g.fp8_safe);
    }
  }
}

TEST_CASE("real lm-spike, every criterion failing: not delayed scaling; delayed's failures name the spike") {
  Evaluated e;
  evaluate_real(e, "lm-spike");
  const Recommendation rec = advise(e, failing_policy());
  REQUIRE(rec.chosen.has_value());
  const CandidatePlan& c = rec.candidates[*rec.chosen];
  MESSAGE(rec.why);
  CHECK(c.candidate.recipe.kind != RecipeKind::kPerTensorDelayed);
  const CandidatePlan* delayed = nullptr;
  for (const auto& cand : rec.candidates)
    if (cand.candidate.recipe.kind == RecipeKind::kPerTensorDelayed) delayed = &cand;
  REQUIRE(delayed != nullptr);
  CHECK(delayed->fp8_flops < c.fp8_flops);
  // Every GEMM fails under delayed scaling somewhere; the spike (step 2) among the failures,
  // with its numbers (datasets/real/README.md): the FC2 input 49.089 % saturated (3.96 dB), the
  // first layer's gradient 0.464 % saturated (2.00 dB).
  auto failure_at = [&](const std::string& layer, Gemm gemm, std::int64_t step) -> std::string {
    const LayerJudgement* l = judgement(*delayed, layer);
    REQUIRE(l != nullptr);
    const GemmJudgement& g = l->gemms[static_cast<int>(gemm)];
    CHECK_FALSE(g.fp8_safe);
    for (const StepVerdict& f : g.failures)
      if (f.step == step) return f.verdict.reason;
    return "";
  };
  const std::string fc2 = failure_at("layers.3.mlp.linear_fc2", Gemm::kFprop, 2);
  CHECK(has(fc2, "step 2 activation saturated 49.089 % of elements"));
  CHECK(has(fc2, "SQNR 3.96 dB"));
  const std::string qkv = failure_at("layers.0.self_attention.linear_qkv", Gemm::kDgrad, 2);
  CHECK(has(qkv, "step 2 gradient saturated 0.464 % of elements"));
  CHECK(has(qkv, "SQNR 2.00 dB"));
  int spike_failures = 0;
  for (const LayerJudgement& l : delayed->layers)
    for (const GemmJudgement& g : l.gemms) {
      CHECK_FALSE(g.fp8_safe);
      CHECK(g.failed_steps == static_cast<int>(g.failures.size()));
      for (const StepVerdict& f : g.failures)
        if (f.step == 2) {
          ++spike_failures;
          CHECK(has(f.verdict.reason, "step 2 "));
        }
    }
  CHECK(spike_failures == 6);  // every GEMM of both layers fails at the spike
  // Under the chosen candidate the failing GEMMs carry their verdict's reason.
  for (const LayerDecision& l : rec.layers)
    for (const GemmDecision& g : l.gemms)
      if (g.precision == Precision::kBf16) CHECK_FALSE(g.reason.empty());
}

// The default watches clipping (calibration/RESULTS.md: saturation and rel_mse_floor have a false
// alarm each and no detection; no delayed run trained worse than BF16 beyond the harm bar): the
// clipping keeps delayed's GEMMs FP8 and is reported with its numbers.
TEST_CASE("real lm-spike, default policy: delayed scaling's spike clipping is watched, with its numbers") {
  Evaluated e;
  evaluate_real(e, "lm-spike");
  const Recommendation rec = advise(e);
  const CandidatePlan* delayed = nullptr;
  for (const auto& cand : rec.candidates)
    if (cand.candidate.recipe.kind == RecipeKind::kPerTensorDelayed) delayed = &cand;
  REQUIRE(delayed != nullptr);
  const LayerJudgement* l = judgement(*delayed, "layers.3.mlp.linear_fc2");
  REQUIRE(l != nullptr);
  const GemmJudgement& g = l->gemms[static_cast<int>(Gemm::kFprop)];
  CHECK(g.fp8_safe);
  // Its worst step is step 1, where the weight's history has not caught up: 99.997 % clipped.
  CHECK(g.worst_step == 1);
  CHECK(g.worst.passed);
  CHECK(g.worst.reason.empty());
  REQUIRE(g.worst.watched.size() == 4);  // the furthest over its threshold first
  CHECK(g.worst.watched[0] == "step 1 weight saturated 99.997 % of elements (> 0.050 %) under "
                              "delayed:history=1024:algo=max:margin=0/hybrid");
  CHECK(g.worst.margin < 0);
}

// calibration/RESULTS.md outlier20-last@d256/block: the x2^20 token in the last of four blocks.
// Block scaling's FC2 wgrad loses its direction at step 44 (cos 0.210) and recovers by step 999
// (0.573); it trained no worse than BF16. wgrad_direction judges the latest step.
TEST_CASE("calibration outlier20-last@d256/block: wgrad_direction judges the latest captured step") {
  Evaluated e;
  DiskFileSystem fs;
  e.captures = load_captures({std::string(FP8A_SOURCE_DIR) + "/calibration/captures/outlier20-last@d256--block"}, fs);
  evaluate(e, "block", {TrainingFormat::kHybrid});
  const auto fc2_wgrad = [](const Recommendation& rec) -> const GemmJudgement& {
    const LayerJudgement* l = judgement(rec.candidates.at(0), "layers.3.mlp.linear_fc2");
    REQUIRE(l != nullptr);
    return l->gemms[static_cast<int>(Gemm::kWgrad)];
  };
  double cos44 = 0, cos999 = 0;
  for (const GemmRow& g : e.gemms)
    if (g.layer == "layers.3.mlp.linear_fc2" && g.gemm == Gemm::kWgrad) (g.step == 44 ? cos44 : cos999) = g.cos;
  // The premise (the engine's own cosines, so only their sides of 0.3 are asserted here).
  REQUIRE(cos44 < 0.3);
  REQUIRE(cos999 > 0.3);
  const Recommendation with_999 = advise(e);
  const GemmJudgement& both = fc2_wgrad(with_999);
  CHECK(both.steps == 2);
  CHECK(both.fp8_safe);
  CHECK(both.failures.empty());
  // Step 44 alone (step 999's rows dropped): it is the latest, and it fails.
  std::erase_if(e.rows, [](const EvaluationRow& r) { return r.key.step == 999; });
  std::erase_if(e.gemms, [](const GemmRow& g) { return g.step == 999; });
  const Recommendation only_44 = advise(e);
  const GemmJudgement& early = fc2_wgrad(only_44);
  CHECK(early.steps == 1);
  CHECK_FALSE(early.fp8_safe);
  REQUIRE(early.failures.size() == 1);
  CHECK(early.failures[0].verdict.failing == Criterion::kWgradDirection);
  CHECK(has(early.failures[0].verdict.reason, "step 44 wgrad: dW's cosine to the high-precision dW 0.210 (< 0.300"));
}

TEST_CASE("real lm-sane: block:2d and mxfp8:floor are judged but evaluation only") {
  Evaluated e;
  DiskFileSystem fs;
  const std::string dir = std::string(FP8A_SOURCE_DIR) + "/datasets/real/lm-sane";
  e.captures = load_captures({dir}, fs);
  evaluate(e, "block:2d,mxfp8:floor,current", {TrainingFormat::kHybrid});
  const Recommendation rec = advise(e);
  REQUIRE(rec.candidates.size() == 3);
  REQUIRE(rec.chosen.has_value());
  CHECK(rec.candidates[*rec.chosen].candidate.recipe.spec() == "current");
  for (const CandidatePlan& c : rec.candidates) {
    const bool trains = te_cannot_train(c.candidate.recipe).empty();
    INFO(candidate_name(c.candidate) << ": " << c.excluded);
    CHECK(c.evaluation_only == !trains);
    CHECK(c.runnable == trains);
    CHECK(c.excluded.starts_with("evaluation only: ") == !trains);
    CHECK(c.fp8_gemms + c.gemms_to_bf16 == 6);  // judged all the same: 2 layers x 3 GEMMs
  }
}

TEST_CASE("a layer without all three operands: each GEMM judged where both of its operands are") {
  // The wide-gradient preset with the FC1 gradient dropped at step 100: that step's fprop is still
  // judged (X and W, its FLOPs from their shapes), its dgrad and wgrad (which need dY) only at step
  // 50, and the layer is marked incomplete.
  const SynthPreset* preset = find_synth_preset("wide-gradient");
  REQUIRE(preset != nullptr);
  Evaluated e;
  evaluate_synth(e, *preset);
  const std::string fc1 = "layers.0.mlp.linear_fc1";
  std::erase_if(e.rows, [&](const EvaluationRow& r) {
    return r.key.step == 100 && r.key.layer == fc1 && r.key.role == Role::kGradient;
  });
  std::erase_if(e.gemms, [&](const GemmRow& g) { return g.step == 100 && g.layer == fc1; });
  std::erase_if(e.layers, [&](const GemmLayer& l) { return l.step == 100 && l.layer == fc1; });
  const Recommendation rec = advise(e);
  REQUIRE(rec.chosen.has_value());
  for (const CandidatePlan& c : rec.candidates) {
    const LayerJudgement* l = judgement(c, fc1);
    REQUIRE(l != nullptr);
    CHECK(l->incomplete);
    CHECK(l->steps == std::vector<std::int64_t>{50, 100});
    for (const GemmJudgement& g : l->gemms) {
      CHECK(g.judged);
      CHECK(g.steps == (g.gemm == Gemm::kFprop ? 2 : 1));
    }
    // Every GEMM of a layer is 2 m n k: fprop's two steps count twice one step of dgrad's.
    CHECK(l->gemms[0].flops == 2 * l->gemms[1].flops);
    CHECK(l->gemms[1].flops == l->gemms[2].flops);
    CHECK(l->gemms[1].flops > 0);
    CHECK_FALSE(judgement(c, "layers.0.self_attention.linear_qkv")->incomplete);
  }
  for (const LayerDecision& l : rec.layers) CHECK(l.incomplete == (l.layer == fc1));
}

TEST_CASE("te-autoswitch's global scope sends every GEMM to BF16 on one failure") {
  Evaluated e;
  evaluate_real(e, "lm-spike");
  const Recommendation rec = advise(e, te_autoswitch_policy());
  REQUIRE(rec.chosen.has_value());
  for (const CandidatePlan& c : rec.candidates) {
    CHECK(c.fp8_flops == 0.0);
    CHECK(c.gemms_to_bf16 == 6);
  }
  for (const LayerDecision& l : rec.layers) {
    CHECK(l.precision == Precision::kBf16);
    for (const GemmDecision& g : l.gemms) {
      CHECK(g.precision == Precision::kBf16);
      if (g.fp8_safe) CHECK(has(g.reason, "every GEMM to BF16 (policy scope global): "));
    }
  }
}

TEST_CASE("with a cost model: recipes the GPU cannot run are excluded, the fastest plan wins") {
  Evaluated e;
  evaluate_preset(e, "healthy");
  const EvaluationIndex index(e.rows);
  RecommendationInputs in = inputs_of(e, index);
  const GpuTarget* h100 = find_gpu_target("h100");
  REQUIRE(h100 != nullptr);
  const CostModel model = build_cost_model(e.layers, index.recipes(), *h100);
  const Recommendation rec = recommend(in, default_policy(), *h100, &model);
  REQUIRE(rec.chosen.has_value());
  const CandidatePlan& chosen = rec.candidates[*rec.chosen];
  CHECK(chosen.runnable);
  REQUIRE(chosen.speedup.has_value());
  for (const CandidatePlan& c : rec.candidates) {
    if (c.candidate.recipe.kind == RecipeKind::kMx) {
      CHECK_FALSE(c.runnable);
      CHECK(has(c.excluded, "mxfp8 needs sm_100"));
      CHECK_FALSE(c.speedup.has_value());
    } else {
      REQUIRE(c.speedup.has_value());
      CHECK(*c.speedup <= *chosen.speedup);
    }
  }
  check_pareto(rec);
  for (const ParetoPoint& p : rec.pareto) CHECK(p.speedup.has_value());
  // With the cost: the chosen point is the chosen plan's speedup, all-BF16 is 1.
  for (const ParetoPoint& p : rec.pareto)
    if (p.chosen) CHECK(*p.speedup == doctest::Approx(*chosen.speedup).epsilon(1e-12));
  CHECK(*rec.pareto.back().speedup == doctest::Approx(1.0));
}

TEST_CASE("without a cost model the GPU still excludes: left out before judging, with the reason") {
  Evaluated e;
  evaluate_preset(e, "healthy");
  const EvaluationIndex index(e.rows);
  const RecommendationInputs in = inputs_of(e, index);
  const GpuTarget* h100 = find_gpu_target("h100");
  REQUIRE(h100 != nullptr);
  const Recommendation rec = recommend(in, default_policy(), *h100, nullptr);
  CHECK(rec.gpu == h100);
  // The index holds mxfp8 in both formats; sm_90 runs every other kind (TE needs sm_100 for it).
  std::size_t mx = 0;
  for (const RunCandidate& c : in.candidates) mx += c.recipe.kind == RecipeKind::kMx ? 1 : 0;
  REQUIRE(mx == 2);
  REQUIRE(rec.gpu_excluded.size() == mx);
  for (const GpuExclusion& x : rec.gpu_excluded) {
    CHECK(x.candidate.starts_with("mxfp8"));
    CHECK(has(x.reason, "mxfp8 needs sm_100"));
  }
  CHECK(rec.candidates.size() == in.candidates.size() - mx);
  for (const CandidatePlan& c : rec.candidates) CHECK(c.candidate.recipe.kind != RecipeKind::kMx);
  // An A100 (sm_80) runs none: nothing is evaluated, every candidate is listed.
  const Recommendation none = recommend(in, default_policy(), *find_gpu_target("a100"), nullptr);
  CHECK(none.candidates.empty());
  CHECK(none.gpu_excluded.size() == in.candidates.size());
  CHECK(none.why == "no FP8 candidate was evaluated");
}

TEST_CASE("the delayed-scaling forecast enters the delayed candidates' verdicts") {
  // lm-sane passes every GEMM under delayed scaling on the captured steps, and its amax trends
  // grow: with margin 0 the stale scale clips a little from the step after the trace (g binades a
  // step), but only the largest elements, far inside the saturation and rel_mse criteria: the
  // forecast keeps every GEMM the captured steps keep.
  Evaluated e;
  evaluate_real(e, "lm-sane");
  const Recommendation plain = advise(e);
  const Recommendation rec = advise(e, default_policy(), true);
  REQUIRE(rec.candidates.size() == plain.candidates.size());
  int clipping = 0;
  for (std::size_t i = 0; i < rec.candidates.size(); ++i) {
    const CandidatePlan& c = rec.candidates[i];
    const bool delayed = c.candidate.recipe.kind == RecipeKind::kPerTensorDelayed;
    for (std::size_t li = 0; li < c.layers.size(); ++li)
      for (const GemmJudgement& g : c.layers[li].gemms) {
        const GemmJudgement& p = plain.candidates[i].layers[li].gemms[static_cast<int>(g.gemm)];
        CHECK(g.failed_steps == p.failed_steps);  // the captured steps judge alike
        CHECK(g.forecast.has_value() == delayed);
        CHECK(g.fp8_safe == p.fp8_safe);
        if (!delayed) continue;
        CHECK(p.fp8_safe);
        REQUIRE(g.forecast.has_value());
        CHECK(g.forecast->passed);
        if (!g.forecast->checks.empty()) {
          ++clipping;
          CHECK((g.forecast->limiting == Criterion::kSaturation ||
                 g.forecast->limiting == Criterion::kRelMseFloor));
        }
      }
  }
  CHECK(clipping > 0);  // the forecast did predict clipping, and judged it harmless
  for (const DelayedForecast& f : forecasts(e, EvaluationIndex(e.rows)))
    if (f.horizon_excess_binades > 0) {
      CAPTURE(f.reason);
      REQUIRE(f.clipping.predicted);
      CHECK(f.clipping.saturated_pct < default_policy().saturation.max_pct);
    }
}

TEST_CASE("the watch list, the GPU and the cost source; no runnable candidate is every layer BF16") {
  Evaluated e;
  evaluate_preset(e, "healthy");
  const EvaluationIndex index(e.rows);
  RecommendationInputs in = inputs_of(e, index);

  const Recommendation plain = recommend(in, default_policy(), every_recipe_gpu(), nullptr);
  REQUIRE(plain.chosen.has_value());
  CHECK(plain.gpu == &every_recipe_gpu());  // named without a cost model too
  CHECK(std::string(plain.cost_source) == "none");
  CHECK(plain.gpu_excluded.empty());
  REQUIRE_FALSE(plain.watch.empty());
  CHECK(plain.watch.size() <= kWatchCount);
  for (std::size_t i = 1; i < plain.watch.size(); ++i)
    CHECK(plain.watch[i - 1].margin <= plain.watch[i].margin);
  // The watch list is the plan's FP8 GEMMs with the smallest worst margins (none failed here):
  // each item is that GEMM's worst verdict, and no FP8 GEMM left out has a smaller margin.
  const CandidatePlan& chosen = plain.candidates[*plain.chosen];
  for (const WatchItem& w : plain.watch) {
    const LayerJudgement* l = judgement(chosen, w.layer);
    REQUIRE(l != nullptr);
    const GemmJudgement& g = l->gemms[static_cast<std::size_t>(w.gemm)];
    CHECK(w.margin == g.worst.margin);
    CHECK(w.step == g.worst_step);
    CHECK(w.criterion == *g.worst.limiting);
    CHECK(w.status == WatchStatus::kPassed);
    CHECK(w.threshold > 0);
  }
  std::size_t fp8_gemms = 0;
  for (std::size_t li = 0; li < chosen.layers.size(); ++li)
    for (const GemmJudgement& g : chosen.layers[li].gemms) {
      if (!g.judged || !g.worst.limiting || chosen.plan[li][static_cast<int>(g.gemm)] != Precision::kFp8) continue;
      ++fp8_gemms;
      const bool listed = std::any_of(plain.watch.begin(), plain.watch.end(), [&](const WatchItem& w) {
        return w.layer == chosen.layers[li].layer && w.gemm == g.gemm;
      });
      if (!listed) CHECK(g.worst.margin >= plain.watch.back().margin);
    }
  CHECK(plain.watch.size() == std::min(fp8_gemms, kWatchCount));

  const GpuTarget* h100 = find_gpu_target("h100");
  REQUIRE(h100 != nullptr);
  const CostModel model = build_cost_model(e.layers, index.recipes(), *h100);
  const Recommendation costed = recommend(in, default_policy(), *h100, &model);
  CHECK(costed.gpu == h100);
  CHECK(std::string(costed.cost_source) == "roofline");

  // An A100 runs no FP8 recipe: nothing is chosen, and every layer is BF16 with the exclusions.
  const GpuTarget* a100 = find_gpu_target("a100");
  REQUIRE(a100 != nullptr);
  const CostModel none_runs = build_cost_model(e.layers, index.recipes(), *a100);
  const Recommendation none = recommend(in, default_policy(), *a100, &none_runs);
  CHECK_FALSE(none.chosen.has_value());
  CHECK(has(none.why, "no FP8 candidate can be chosen: current/e4m3: "));
  CHECK(none.watch.empty());
  REQUIRE(none.layers.size() == index.layers().size());
  for (const LayerDecision& l : none.layers) {
    CHECK(l.precision == Precision::kBf16);
    CHECK_FALSE(l.fp8_safe);
    for (const GemmDecision& g : l.gemms) {
      CHECK(g.precision == Precision::kBf16);
      CHECK(g.reason == none.why);
    }
  }
}

TEST_CASE("real lm-spike, every recipe kind: the per-module plan and the Pareto list") {
  Evaluated e;
  DiskFileSystem fs;
  const std::string dir = std::string(FP8A_SOURCE_DIR) + "/datasets/real/lm-spike";
  e.captures = load_captures({dir}, fs);
  e.log = load_training_log({dir + "/amax_trace_rank0.csv"}, fs);
  evaluate(e, "current,delayed,block,mxfp8", kAllTrainingFormats);
  const Recommendation rec = advise(e);
  REQUIRE(rec.chosen.has_value());
  MESSAGE(rec.why);
  check_pareto(rec);
  check_module_plan(rec);
  MESSAGE(rec.module_plan->why);
  for (const ModuleChoice& m : rec.module_plan->modules) MESSAGE(m.layer << ": " << m.reason);
  // All-FP8 first: every GEMM of both layers in FP8 under the chosen recipe, failing ones too.
  CHECK(rec.pareto.front().gemms_to_bf16 == 0);
  CHECK(rec.pareto.front().fp8_flop_share == 1.0);
  CHECK(rec.pareto.front().failing_in_fp8 == rec.candidates[*rec.chosen].gemms_to_bf16);
}

// The step a failing GEMM's reason cites is the one whose blocking failure went furthest, not
// one whose watch-only breach went further: lm-spike's first QKV dgrad under NVFP4 flushes
// 50.4 % of its gradient at step 2 and 69.6 % at step 3 (where a watch-only breach is smaller).
TEST_CASE("real lm-spike under NVFP4: a failing GEMM's worst step is its furthest blocking failure") {
  Evaluated e;
  DiskFileSystem fs;
  const std::string dir = std::string(FP8A_SOURCE_DIR) + "/datasets/real/lm-spike";
  e.captures = load_captures({dir}, fs);
  evaluate(e, "nvfp4", {TrainingFormat::kE4M3});
  const EvaluationIndex index(e.rows);
  const Recommendation rec = recommend(inputs_of(e, index), default_policy(), every_recipe_gpu(), nullptr);
  REQUIRE(rec.candidates.size() == 1);
  // The blocking failure's margin, from the checks: the lowest of the failed, not watch-only ones.
  const auto blocking = [](const Verdict& v) {
    double m = std::numeric_limits<double>::infinity();
    for (const Check& c : v.checks)
      if (!c.passed && !c.watch) m = std::min(m, c.margin);
    return m;
  };
  int compared = 0;
  bool watch_further_elsewhere = false;
  for (const LayerJudgement& l : rec.candidates[0].layers)
    for (const GemmJudgement& j : l.gemms) {
      if (j.failures.empty()) continue;
      INFO(l.layer << " " << gemm_name(j.gemm) << " worst step " << j.worst_step);
      for (const StepVerdict& f : j.failures) {
        CHECK(blocking(j.worst) <= blocking(f.verdict));
        watch_further_elsewhere |= f.verdict.margin < j.worst.margin;
        ++compared;
      }
      if (l.layer == "layers.0.self_attention.linear_qkv" && j.gemm == Gemm::kDgrad) {
        CHECK(j.failed_steps == 2);
        CHECK(j.worst_step == 3);
        CHECK(j.worst.failing == Criterion::kUnderflow);
        CHECK(has(j.worst.reason, "step 3 gradient underflow 69.582 % of elements"));
      }
    }
  CHECK(compared >= 2);
  CHECK(watch_further_elsewhere);  // the case the order is about occurs here
  // The last layer passes the policy: the advisory's margin is the blocking criteria's (its
  // watch-only wgrad damage breach, at margin -5.45, is not a failure).
  REQUIRE(rec.advisories.size() == 1);
  CHECK(has(rec.advisories[0].text, "layers.3 (the last captured) stays NVFP4: every GEMM passes the policy (smallest margin 0.103)"));
}

// A module the base fails, priced: its reason says why not the base before why not the pick.
TEST_CASE("real lm-spike, NVFP4 base, priced: a module NVFP4 fails names that failure first") {
  Evaluated e;
  DiskFileSystem fs;
  e.captures = load_captures({std::string(FP8A_SOURCE_DIR) + "/datasets/real/lm-spike"}, fs);
  evaluate(e, "nvfp4,current,block,mxfp8", kAllTrainingFormats);
  const EvaluationIndex index(e.rows);
  GpuTarget b200 = every_recipe_gpu();
  b200.memory_gbs *= 1000;  // compute-bound at these widths, where every low precision pays
  const CostModel model = build_cost_model(e.layers, index.recipes(), b200, CostOptions{4194304.0, "test"});
  const Recommendation rec = recommend(inputs_of(e, index), default_policy(), b200, &model);
  REQUIRE(rec.module_plan.has_value());
  const ModulePlan& mp = *rec.module_plan;
  REQUIRE(candidate_name(rec.candidates[mp.base].candidate) == "nvfp4/e4m3");
  REQUIRE(mp.modules.size() == 2);
  // The QKV: NVFP4 flushes its dgrad's gradient; of the recipes that pass it, block scaling is
  // the fastest on the roofline, not the numerics' pick (current scaling, the preference order).
  // block/e4m3 passes: the rows its wgrad's E4M3 gradient copy loses only watch there, where
  // wgrad_direction judges dW itself.
  const ModuleChoice& qkv = mp.modules[0];
  CHECK(qkv.layer == "layers.0.self_attention.linear_qkv");
  REQUIRE(qkv.candidate.has_value());
  CHECK(candidate_name(rec.candidates[*qkv.candidate].candidate) == "block/e4m3");
  CHECK(qkv.reason.starts_with("dgrad: step 3 gradient underflow 69.582 % of elements"));
  CHECK(has(qkv.reason, " under nvfp4/e4m3; block/e4m3 is faster on b200: 5193 us against 5209 us"));
  CHECK(has(qkv.reason, " under current/hybrid (roofline); all its GEMMs pass there"));
  CHECK(mp.modules[1].candidate == mp.base);
  CHECK(has(mp.why, "1 of 2 on nvfp4/e4m3, 1 on block/e4m3, 0 in BF16; 100.0 % of the GEMM FLOPs in NVFP4 or FP8"));
}

TEST_CASE("advisories: the field facts, each where it applies, with its source") {
  // lm-sane keeps both captured layers FP8: layer 0 and the last captured one, against the rule
  // of thumb.
  Evaluated sane;
  evaluate_real(sane, "lm-sane");
  const Recommendation rec = advise(sane);
  REQUIRE(rec.advisories.size() == 1);
  CHECK(rec.advisories[0].source == "Megatron-LM --first-last-layers-bf16; Megatron-Bridge PR #651");
  CHECK(has(rec.advisories[0].text, "layers.0 (the first) and layers.3 (the last captured) stay FP8"));
  // Under NVFP4 the field fact is NVIDIA's NVFP4 pretraining, which kept the last blocks in BF16.
  {
    Evaluated nv;
    DiskFileSystem fs;
    nv.captures = load_captures({std::string(FP8A_SOURCE_DIR) + "/datasets/real/lm-sane"}, fs);
    evaluate(nv, "nvfp4", {TrainingFormat::kE4M3});
    const EvaluationIndex index(nv.rows);
    const Recommendation r4 = recommend(inputs_of(nv, index), default_policy(), every_recipe_gpu(), nullptr);
    REQUIRE(r4.advisories.size() == 1);
    CHECK(r4.advisories[0].source == "arXiv:2509.25149 (NVIDIA, Pretraining Large Language Models with NVFP4)");
    CHECK(has(r4.advisories[0].text, "layers.0 (the first) and layers.3 (the last captured) stay NVFP4: every GEMM passes"));
    CHECK(has(r4.advisories[0].text, "kept about 16 % of the linear layers, mostly in the last blocks, in BF16"));
  }
  // MXFP8 with hybrid gradients chosen (the only candidate): Megatron-Bridge PR #638.
  Evaluated e;
  evaluate_preset(e, "healthy");
  const EvaluationIndex index(e.rows);
  RecommendationInputs in = inputs_of(e, index);
  in.candidates = {{parse_recipe("mxfp8"), TrainingFormat::kHybrid}};
  const Recommendation mx = recommend(in, default_policy(), every_recipe_gpu(), nullptr);
  REQUIRE(mx.chosen.has_value());
  bool pr638 = false;
  for (const Advisory& a : mx.advisories)
    if (a.source == "NVIDIA-NeMo/Megatron-Bridge PR #638") {
      pr638 = true;
      CHECK(has(a.text, "consider mxfp8/e4m3 (not evaluated here)"));
    }
  CHECK(pr638);
  // Both MXFP8 formats evaluated and equally good: e4m3 wins the tie (the preference order).
  in.candidates = {{parse_recipe("mxfp8"), TrainingFormat::kHybrid}, {parse_recipe("mxfp8"), TrainingFormat::kE4M3}};
  const Recommendation both = recommend(in, default_policy(), every_recipe_gpu(), nullptr);
  REQUIRE(both.chosen.has_value());
  MESSAGE(both.why);
  REQUIRE(both.candidates[0].fp8_flops == both.candidates[1].fp8_flops);
  CHECK(has(both.why, "tied, preference order"));
  CHECK(both.candidates[*both.chosen].candidate.format == TrainingFormat::kE4M3);
}

// Issue 38: on every TE release --te-version accepts, the default list's answer is a recipe that
// release trains with on B200; a candidate it cannot train with (current:pow2 before TE 2.8, block
// scaling on Blackwell before 2.9) is judged,
// excluded with "excluded on TE X.Y: ", and ranked after every runnable one.
TEST_CASE("real lm-sane, the default list, every TE release: the answer is one the release can train") {
  Evaluated e;
  DiskFileSystem fs;
  e.captures = load_captures({std::string(FP8A_SOURCE_DIR) + "/datasets/real/lm-sane"}, fs);
  evaluate(e, default_recipe_list(), {TrainingFormat::kHybrid});
  const EvaluationIndex index(e.rows);
  const RecommendationInputs in = inputs_of(e, index);
  int excluded = 0;
  for (int minor = kTeOldest.minor; minor <= kTeNewest.minor; ++minor) {
    const TeVersion te{2, minor};
    INFO("TE " << te_version_text(te));
    const Recommendation rec = recommend(in, default_policy(), every_recipe_gpu(), nullptr, te);
    REQUIRE(rec.chosen.has_value());
    const Recipe& chosen = rec.candidates[*rec.chosen].candidate.recipe;
    INFO("chosen " << chosen.spec());
    CHECK(te_release_cannot_train(chosen, te, every_recipe_gpu().sm).empty());
    CHECK(te_cannot_train(chosen).empty());
    for (const CandidatePlan& c : rec.candidates) {
      // b200: block scaling from TE 2.9 (block:fp32 on no release: excluded on the GPU).
      const bool lacks = (c.candidate.recipe == parse_recipe("current:pow2") && te < TeVersion{2, 8}) ||
                         (c.candidate.recipe == parse_recipe("block") && te < TeVersion{2, 9});
      CHECK(c.release_excluded == lacks);
      CHECK(c.candidate.recipe != parse_recipe("block:fp32"));
      if (lacks) {
        CHECK_FALSE(c.runnable);
        CHECK(c.excluded == "excluded on TE " + te_version_text(te) + ": " + c.release_reason);
        ++excluded;
      }
    }
    REQUIRE(rec.gpu_excluded.size() == 1);
    CHECK(rec.gpu_excluded[0].candidate.starts_with("block:fp32"));
  }
  CHECK(excluded == 4 + 5);  // current:pow2 on TE 2.4 to 2.7, block on 2.4 to 2.8
}

// calibration nvfp4-outlier20 (a 2^20 token in layers.1's FC2 input): the three-tier plan and its
// tiers, priced on B200 at 4M tokens a step, each tier's time against an estimate_cost of the
// module plan written out here.
TEST_CASE("calibration nvfp4-outlier20: the per-module plan's tiers, and their time on the roofline") {
  Evaluated e;
  DiskFileSystem fs;
  e.captures = load_captures({std::string(FP8A_SOURCE_DIR) + "/calibration/captures/nvfp4-outlier20--nvfp4"}, fs);
  evaluate(e, "nvfp4,mxfp8", {TrainingFormat::kE4M3});
  const EvaluationIndex index(e.rows);
  RecommendationInputs in = inputs_of(e, index);
  // Numbers alone: NVFP4 is the base (22 of 24 GEMMs at 4x against MXFP8's 23 at 2x); the FC2
  // fails under both (NVFP4 flushes its input, MXFP8's wgrad amplifies 18.9x), so BF16, with
  // amplification failing on wgrads (the default only watches it there: below).
  Policy amplification_fails = default_policy();
  amplification_fails.gemm_amplification.wgrad_action = CriterionAction::kFail;
  const Recommendation plain = recommend(in, amplification_fails, every_recipe_gpu(), nullptr);
  REQUIRE(plain.module_plan.has_value());
  const ModulePlan& mp = *plain.module_plan;
  CHECK(candidate_name(plain.candidates[mp.base].candidate) == "nvfp4/e4m3");
  // A block's GEMM FLOPs: QKV 3d^2, proj d^2, FC1 4d^2, FC2 4d^2 per token; one FC2 of two blocks
  // is 4/24 of them, so 83.3 % stay in NVFP4.
  CHECK(has(mp.why, "7 of 8 on nvfp4/e4m3, 1 in BF16; 83.3 % of the GEMM FLOPs in NVFP4"));
  REQUIRE(mp.tiers.size() == 2);
  CHECK(mp.tiers[0].candidate == mp.base);
  CHECK(mp.tiers[0].modules == 7);
  CHECK(mp.tiers[0].gemms == 21);
  CHECK_FALSE(mp.tiers[1].candidate.has_value());
  CHECK(mp.tiers[1].modules == 1);
  CHECK(mp.tiers[1].risk == 0.0);
  CHECK(mp.tiers[0].flops + mp.tiers[1].flops == doctest::Approx(plain.candidates[mp.base].total_flops));
  CHECK(mp.tiers[0].flops == doctest::Approx(mp.fp8_flops));
  CHECK_FALSE(mp.tiers[0].seconds.has_value());
  for (const ModuleChoice& m : mp.modules)
    CHECK(m.candidate.has_value() == (m.layer != "layers.1.mlp.linear_fc2"));
  // The default: MXFP8's FC2 wgrad keeps its direction (cos 0.928 to the BF16 dW, over 0.3), so
  // the FC2 goes to MXFP8 with the amplification watched (calibration/RESULTS.md: the one harm
  // the default misses, nvfp4-outlier20/mxfp8).
  const Recommendation by_default = recommend(in, default_policy(), every_recipe_gpu(), nullptr);
  REQUIRE(by_default.module_plan.has_value());
  CHECK(has(by_default.module_plan->why, "7 of 8 on nvfp4/e4m3, 1 on mxfp8/e4m3, 0 in BF16"));

  // Priced: each tier's BF16 and in-tier time sum to the all-BF16 and the plan's estimate. At
  // d_model 256 every GEMM is memory-bound on a B200 and FP8 never pays, so B200 with 1000x its
  // memory bandwidth: compute-bound, where NVFP4 and MXFP8 pay.
  GpuTarget b200 = every_recipe_gpu();
  b200.memory_gbs *= 1000;
  const CostModel model = build_cost_model(e.layers, index.recipes(), b200, CostOptions{4194304.0, "test"});
  const Recommendation costed = recommend(in, amplification_fails, b200, &model);
  REQUIRE(costed.module_plan.has_value());
  const ModulePlan& cp = *costed.module_plan;
  REQUIRE(cp.speedup.has_value());
  CostPlan plan = uniform_plan(model, kCostBf16);
  for (std::size_t li = 0; li < cp.modules.size(); ++li)
    if (cp.modules[li].candidate)
      for (std::size_t row = 0; row < model.layers.size(); ++row)
        if (model.layers[row].layer == cp.modules[li].layer)
          for (int& g : plan.choice[row])
            g = cost_recipe_index(model, costed.candidates[*cp.modules[li].candidate].candidate.recipe);
  const CostEstimate est = estimate_cost(model, plan);
  double bf16 = 0, in_tiers = 0;
  int modules = 0;
  for (const ModuleTier& t : cp.tiers) {
    REQUIRE(t.seconds.has_value());
    bf16 += *t.bf16_seconds;
    in_tiers += *t.seconds;
    modules += t.modules;
    if (!t.candidate) CHECK(*t.seconds == *t.bf16_seconds);
    else CHECK(*t.seconds < *t.bf16_seconds);  // a module on a recipe pays there
  }
  CHECK(modules == static_cast<int>(cp.modules.size()));
  REQUIRE(cp.tiers.size() == 2);  // NVFP4 and BF16, as without the cost model
  CHECK(cp.tiers[0].modules == 7);
  CHECK(*cp.speedup > 1.5);
  CHECK(bf16 == doctest::Approx(est.bf16_seconds).epsilon(1e-9));
  CHECK(in_tiers == doctest::Approx(est.plan_seconds).epsilon(1e-9));
  CHECK(est.bf16_seconds / est.plan_seconds == doctest::Approx(*cp.speedup).epsilon(1e-9));
  MESSAGE(cp.why);
}

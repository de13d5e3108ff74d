#include "policies/judging.hpp"

#include <algorithm>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "core/layer_name.hpp"
#include "core/tensor_view.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

// Whether verdict a (at step sa) is worse than b (at sb): failing first; between failing ones
// the further blocking failure (the reason shown is the step's that failed most, not one whose
// watch-only breach went further); then the lower margin, the higher risk, the earlier step.
bool worse(const Verdict& a, std::int64_t sa, const Verdict& b, std::int64_t sb) {
  if (a.passed != b.passed) return !a.passed;
  if (!a.passed && a.failing_margin != b.failing_margin) return a.failing_margin < b.failing_margin;
  if (a.margin != b.margin) return a.margin < b.margin;
  if (a.risk != b.risk) return a.risk > b.risk;
  return sa < sb;
}

// Why a GEMM is not judged when its operand `role` is missing: "no gradient (dY) captured: dgrad
// needs dY and W".
std::string operand_missing(const GemmOperandUse& use, Role role) {
  const auto symbol = [](Role r) { return r == Role::kActivation ? "X" : r == Role::kWeight ? "W" : "dY"; };
  return format_text("no %s (%s) captured: %s needs %s and %s", role_name(role), symbol(role), gemm_name(use.gemm),
                     symbol(use.a), symbol(use.b));
}

// 2 m n k of the GEMM from its two operands' 2-D views (rows: every dim but the last), where
// both are one rank's whole tensor and their shared dim agrees; unset otherwise. fprop X [m,k]
// W [n,k]; dgrad dY [m,n] W [n,k]; wgrad dY [m,n] X [m,k]: m n k = a's rows x a's cols x b's
// rows (fprop) or cols (dgrad, wgrad).
std::optional<double> operand_flops(const GemmOperandUse& use, const EvaluationRow& a, const EvaluationRow& b) {
  if (a.ranks != 1 || b.ranks != 1 || a.shape.empty() || b.shape.empty()) return std::nullopt;
  const Shape2d av = shape_2d(a.shape), bv = shape_2d(b.shape);
  const double ar = static_cast<double>(av.rows), ac = static_cast<double>(av.cols);
  const double br = static_cast<double>(bv.rows), bc = static_cast<double>(bv.cols);
  // The dim the two share: fprop K (both cols), dgrad N (dY's cols, W's rows), wgrad M (both rows).
  const bool fit = use.gemm == Gemm::kFprop ? ac == bc : use.gemm == Gemm::kDgrad ? ac == br : ar == br;
  if (!fit) return std::nullopt;
  return 2.0 * ar * ac * (use.gemm == Gemm::kFprop ? br : bc);
}

// One GEMM of the layer over its captured steps, and the forecast of its operands.
GemmJudgement judge_gemm_steps(const RecommendationEvidence& ev, const CapturedLayer& layer,
                               const GemmOperandUse& use, const RunCandidate& cand,
                               const Policy& policy) {
  const std::string spec = cand.recipe.spec();
  GemmJudgement j;
  j.gemm = use.gemm;
  std::string missing, skip;  // why a step was not judged: the first operand missing, the first skip
  // The steps to judge, with their evidence and FLOPs; then the latest of them with an output
  // (wgrad_direction's) is known before any is judged.
  struct Judgeable {
    std::int64_t step;
    GemmEvidence g;
    double flops;
  };
  std::vector<Judgeable> judgeable;
  for (std::int64_t step : layer.steps) {
    GemmEvidence g;
    g.gemm = use.gemm;
    g.a.row = ev.index->find_for_use({step, layer.name, use.a}, cand.recipe, cand.format, use.a_orientation);
    g.b.row = ev.index->find_for_use({step, layer.name, use.b}, cand.recipe, cand.format, use.b_orientation);
    if (g.a.row == nullptr || g.b.row == nullptr) {
      if (missing.empty()) missing = operand_missing(use, g.a.row == nullptr ? use.a : use.b);
      continue;
    }
    if (const auto it = ev.skipped.find({step, layer.name}); it != ev.skipped.end()) {
      if (skip.empty()) skip = it->second->line;
      continue;
    }
    double flops = 0;
    const std::optional<double> priced = ev.pricing != nullptr ? ev.pricing->gemm_flops(layer.name) : std::nullopt;
    const auto gemm_flops = [&](const GemmLayer& l) {
      const GemmDims d = l.dims(use.gemm);
      return 2.0 * static_cast<double>(d.m) * static_cast<double>(d.n) * static_cast<double>(d.k);
    };
    if (const auto it = ev.complete.find({step, layer.name}); it != ev.complete.end()) {
      flops = gemm_flops(*it->second);
    } else if (const std::optional<double> f = operand_flops(use, *g.a.row, *g.b.row); f) {
      flops = *f;
    } else if (g.a.row->logged && g.b.row->logged) {
      // A training log holds no shapes: the layer's captured dims, else --price-as's, else every
      // GEMM counts alike.
      const auto captured = ev.complete_of_layer.find(layer.name);
      flops = captured != ev.complete_of_layer.end() ? gemm_flops(*captured->second) : 1;
    } else {
      if (skip.empty())
        skip = "step " + std::to_string(step) + " layer '" + layer.name + "': " + gemm_name(use.gemm) +
               (g.a.row->ranks != 1 || g.b.row->ranks != 1
                    ? "'s operands are sharded over ranks and the layer's third operand was not captured: how "
                      "the layer is split, and so the GEMM's dims, cannot be told"
                    : "'s two operands do not fit X [M,K], W [N,K], dY [M,N]");
      continue;
    }
    if (priced) flops = *priced;
    const auto out = ev.outputs.find({step, layer.name, use.gemm, spec, cand.format});
    g.output = out == ev.outputs.end() ? nullptr : out->second;
    judgeable.push_back({step, g, flops});
  }
  std::optional<std::int64_t> latest;
  for (const Judgeable& s : judgeable)
    if (s.g.output != nullptr && (!latest || s.step > *latest)) latest = s.step;
  for (auto& [step, g, flops] : judgeable) {
    g.latest = latest == step;
    Verdict v = judge_gemm(g, policy);
    ++j.steps;
    if (!v.passed) {
      ++j.failed_steps;
      j.failures.push_back({step, v});
    }
    if (!j.judged || worse(v, step, j.worst, j.worst_step)) {
      j.worst = std::move(v);
      j.worst_step = step;
      j.has_output = g.output != nullptr;
    }
    j.judged = true;
    j.flops += flops;
  }
  if (!j.judged) j.unjudged = !skip.empty() ? skip : !missing.empty() ? missing : "no operand captured";
  if (j.judged && replays_history(cand.recipe.kind))
    for (Role role : {use.a, use.b}) {
      const auto f = ev.forecasts.find({layer.name, role, spec, fp8_format_for(cand.format, role)});
      if (f == ev.forecasts.end()) continue;
      Verdict fv = judge_delayed_forecast(
          *f->second, layer.name + " " + role_name(role) + " under " + candidate_name(cand), policy);
      // A forecast with no check (nothing forecast to clip) is never the worse one.
      const bool judged = fv.limiting.has_value();
      if (!j.forecast || (judged && !j.forecast->limiting) ||
          (judged == j.forecast->limiting.has_value() && worse(fv, 0, *j.forecast, 0)))
        j.forecast = std::move(fv);
    }
  j.fp8_safe = j.judged && j.failed_steps == 0 && (!j.forecast || j.forecast->passed);
  j.risk = std::max(j.worst.risk, j.forecast ? j.forecast->risk : 0.0);
  return j;
}

}  // namespace

const Verdict& failing_verdict(const GemmJudgement& j) { return !j.worst.passed ? j.worst : *j.forecast; }

bool not_evaluated(const GemmJudgement& j) {
  return !j.failures.empty() && (!j.forecast || j.forecast->passed) &&
         std::all_of(j.failures.begin(), j.failures.end(), [](const StepVerdict& f) { return f.verdict.not_evaluated; });
}

double layer_risk(const LayerJudgement& l) {
  double r = 0;
  for (const GemmJudgement& j : l.gemms)
    if (j.judged) r += j.risk;
  return r;
}

double layer_flops(const LayerJudgement& l) {
  double f = 0;
  for (const GemmJudgement& j : l.gemms) f += j.flops;
  return f;
}

RecommendationEvidence gather_evidence(const RecommendationInputs& inputs) {
  FP8A_CHECK(inputs.index != nullptr, "recommend: no evaluation index");
  RecommendationEvidence ev;
  ev.index = inputs.index;
  ev.pricing = inputs.pricing;
  for (const GemmLayer& l : inputs.layers) {
    ev.complete[{l.step, l.layer}] = &l;
    ev.complete_of_layer.try_emplace(l.layer, &l);
  }
  for (const PairingSkip& s : inputs.skipped) ev.skipped[{s.step, s.layer}] = &s;
  for (const GemmRow& g : inputs.gemms) {
    if (g.engine != "emulated") continue;
    ev.outputs.emplace(std::tuple{g.step, g.layer, g.gemm, g.recipe.spec(), g.format}, &g);
  }
  for (const DelayedForecast& f : inputs.forecasts)
    ev.forecasts.emplace(std::tuple{f.layer, f.role, f.recipe, f.fp8}, &f);
  for (const std::string& name : inputs.index->layers()) {
    // Steps of rows from a training log have no captured layer to pair: each GEMM is judged at the
    // steps its operands were logged, said GEMM by GEMM when it has none.
    std::set<std::int64_t> steps, logged;
    for (const EvaluationRow* r : inputs.index->rows_of(name)) {
      steps.insert(r->key.step);
      if (r->logged) logged.insert(r->key.step);
    }
    CapturedLayer l{name, {steps.begin(), steps.end()}, false};
    for (std::int64_t step : l.steps)
      if (!logged.contains(step) && !ev.complete.contains({step, name})) l.incomplete = true;
    ev.layers.push_back(std::move(l));
  }
  return ev;
}

std::string forced_bf16(const RecommendationEvidence& ev, const CapturedLayer& layer, const RunCandidate& cand) {
  const RecipeKindTraits& kind = recipe_kind_traits(cand.recipe.kind);
  if (is_moe_router(layer.name))
    return "Megatron's MoE router is not a TE module: router_gating_linear runs its GEMMs unquantised, in the "
           "router's dtype, under any recipe (megatron/core/transformer/moe/router.py, moe_utils.py)";
  if (is_lm_head(layer.name) && !recipe_kind_traits(cand.recipe.kind).megatron_output_proj)
    return std::string("Megatron's LM head (output_layer) is a ColumnParallelLinear, not a TE module: it trains "
                       "in BF16 under ") + kind.short_name +
           " (FP8 only through --fp8-output-proj under mxfp8, Megatron-Core 0.18+)";
  const bool grouped = !grouped_module_of(layer.name).empty();
  for (std::int64_t step : layer.steps) {
    for (Role role : {Role::kActivation, Role::kWeight, Role::kGradient}) {
      const EvaluationRow* r = ev.index->find_for_use({step, layer.name, role}, cand.recipe, cand.format,
                                                      Orientation::kRowwise);
      if (r == nullptr || r->shape.empty()) continue;
      const auto [rows, cols] = shape_2d(r->shape);
      const std::string what = format_text("step %lld %s %s (2-D view %lld x %lld)", static_cast<long long>(step),
                                           role_name(role), shape_text(r->shape).c_str(),
                                           static_cast<long long>(rows), static_cast<long long>(cols));
      if (!grouped && role != Role::kGradient && (rows % 8 != 0 || cols % 16 != 0))
        return "TE cannot run it in " + std::string(low_precision_name(cand.recipe.kind)) + ": " + what +
               ": TE's linear modules need the leading dims' product divisible by 8 and the last dim by 16 "
               "(transformer_engine/pytorch/utils.py assert_dim_for_fp8_exec raises)";
      if (const int d = kind.shape_divisor; d > 0 && (r->shape.size() < 2 || rows % d != 0 || cols % d != 0))
        return format_text("TE cannot run it in %s: %s: %s needs both dims divisible by %d (TE %s raises, "
                           "csrc/quantizer.cpp create_tensor)",
                           kind.short_name, what.c_str(), kind.short_name, d, kind.te_quantizer);
    }
  }
  return "";
}

std::vector<LayerJudgement> judge_candidate(const RecommendationEvidence& evidence, const RunCandidate& candidate,
                                            const Policy& policy) {
  std::vector<LayerJudgement> out;
  for (const CapturedLayer& layer : evidence.layers) {
    LayerJudgement lj;
    lj.layer = layer.name;
    lj.steps = layer.steps;
    lj.incomplete = layer.incomplete;
    bool any_judged = false, all_safe = true;
    const std::string forced = forced_bf16(evidence, layer, candidate);
    for (const GemmOperandUse& use : kGemmOperandUses) {
      GemmJudgement& j = lj.gemms[static_cast<std::size_t>(use.gemm)];
      j = judge_gemm_steps(evidence, layer, use, candidate, policy);
      if (!forced.empty()) {  // decided without the numbers: BF16, not a failure of them
        j.judged = true;
        j.unjudged.clear();
        j.forced_bf16 = forced;
        j.fp8_safe = false;
        j.worst.passed = false;
        j.worst.reason = forced;
      }
      if (j.judged) {
        any_judged = true;
        all_safe = all_safe && j.fp8_safe;
      }
    }
    lj.fp8_safe = any_judged && all_safe;
    out.push_back(std::move(lj));
  }
  return out;
}

}  // namespace fp8a

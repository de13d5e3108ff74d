#include "policies/fallback_plan.hpp"

#include <map>

#include "core/layer_name.hpp"
#include "core/text.hpp"

namespace fp8a {

namespace {

// The watch-only breaches of a GEMM kept in low precision: the worst step's, then the forecast's.
std::vector<std::string> watched_reasons(const GemmJudgement& j) {
  std::vector<std::string> w = j.worst.watched;
  if (j.forecast) w.insert(w.end(), j.forecast->watched.begin(), j.forecast->watched.end());
  return w;
}

// `w`: watched_reasons(j).
std::string kept_reason(const GemmJudgement& j, const RunCandidate& c, const std::vector<std::string>& w) {
  const Verdict& v = j.worst;
  if (!w.empty())
    return std::string("watch (kept ") + low_precision_name(c.recipe.kind) + ": the criterion only watches): " + w.front() +
           (w.size() > 1 ? format_text(" (and %zu more)", w.size() - 1) : std::string());
  if (!v.limiting || v.margin >= kSmallMargin) return "";
  return format_text("kept %s: step %lld %s %s %.4g against %.4g (margin %.3f < %.2f) under %s",
             low_precision_name(c.recipe.kind), static_cast<long long>(j.worst_step), gemm_name(j.gemm), criterion_name(*v.limiting),
             v.measured, v.threshold, v.margin, kSmallMargin, candidate_name(c).c_str());
}

// The failing GEMM with the lowest margin, and per step the failing GEMMs and the lowest margin.
void summarize_failures(CandidatePlan* ca) {
  double worst_margin = 0;
  for (const LayerJudgement& lj : ca->layers)
    for (const GemmJudgement& j : lj.gemms) {
      if (!j.judged || j.fp8_safe || !j.forced_bf16.empty()) continue;
      const Verdict& v = failing_verdict(j);
      if (!ca->worst_failure.empty() && v.margin >= worst_margin) continue;
      worst_margin = v.margin;
      ca->worst_failure = lj.layer + " " + gemm_name(j.gemm) + ": " + v.reason;
    }
  struct StepWorst {
    int gemms = 0;
    int not_evaluated = 0;
    const Verdict* verdict = nullptr;  // the lowest margin of the step
    std::string where;                 // its layer and GEMM
  };
  std::map<std::int64_t, StepWorst> by_step;
  for (const LayerJudgement& lj : ca->layers)
    for (const GemmJudgement& j : lj.gemms) {
      if (!j.forced_bf16.empty()) continue;  // not a failure of the numbers
      for (const StepVerdict& f : j.failures) {
        StepWorst& w = by_step[f.step];
        ++w.gemms;
        if (f.verdict.not_evaluated) ++w.not_evaluated;
        if (w.verdict != nullptr && f.verdict.margin >= w.verdict->margin) continue;
        w.verdict = &f.verdict;
        w.where = lj.layer + " " + gemm_name(j.gemm);
      }
    }
  for (const auto& [step, w] : by_step)
    ca->failures_by_step.push_back({step, w.gemms, w.not_evaluated, w.where + ": " + w.verdict->reason});
}

}  // namespace

const char* precision_name(Precision p) {
  return p == Precision::kFp8 ? "fp8" : p == Precision::kBf16 ? "bf16" : "mixed";
}

double plan_fp8_flops(const CandidatePlan& ca, std::span<const std::array<Precision, 3>> plan) {
  double fp8 = 0;
  for (std::size_t li = 0; li < plan.size() && li < ca.layers.size(); ++li)
    for (const GemmJudgement& j : ca.layers[li].gemms)
      if (plan[li][static_cast<std::size_t>(j.gemm)] == Precision::kFp8) fp8 += j.flops;
  return fp8;
}

void tally_fp8(CandidatePlan* ca) {
  ca->fp8_flops = 0;
  ca->total_risk = 0;
  ca->fp8_gemms = 0;
  for (std::size_t li = 0; li < ca->layers.size(); ++li)
    for (const GemmJudgement& j : ca->layers[li].gemms)
      if (ca->plan[li][static_cast<int>(j.gemm)] == Precision::kFp8) {
        ca->fp8_flops += j.flops;
        ca->total_risk += j.risk;
        ++ca->fp8_gemms;
      }
  ca->fp8_flop_share = ca->total_flops > 0 ? ca->fp8_flops / ca->total_flops : 0.0;
}

void plan_grouped_modules(CandidatePlan* ca) {
  const auto members = grouped_module_members(ca->layers, [](const LayerJudgement& l) { return l.layer; });
  if (members.empty()) return;
  if (ca->grouped.size() != ca->layers.size()) ca->grouped.assign(ca->layers.size(), {});
  for (const auto& [module, layers] : members)
    for (std::size_t g = 0; g < 3; ++g) {
      // The first expert whose judged GEMM the plan keeps in BF16 on its own account (its numbers
      // fail, or FP8 would not pay there), and why.
      std::string why;
      for (std::size_t li : layers) {
        const GemmJudgement& j = ca->layers[li].gemms[g];
        const std::string& not_paying = ca->not_paying.empty() ? std::string() : ca->not_paying[li][g];
        if (!j.judged || ca->plan[li][g] != Precision::kBf16 || (j.fp8_safe && not_paying.empty())) continue;
        why = ca->layers[li].layer + " " + gemm_name(j.gemm) + ": " + (!j.fp8_safe ? failing_verdict(j).reason : not_paying);
        break;
      }
      if (why.empty()) continue;
      for (std::size_t li : layers)
        if (ca->plan[li][g] == Precision::kFp8) {
          ca->plan[li][g] = Precision::kBf16;
          ++ca->gemms_to_bf16;
          ca->grouped[li][g] = "BF16 with its grouped module (TE's GroupedLinear runs all its experts in one "
                               "recipe), for " + why;
        }
    }
}

std::string threshold_load_text(double risk_sum, int gemms, const char* what) {
  if (gemms <= 0) return std::string("no ") + what;
  return format_text("mean threshold load %.2f over %d %s%s", risk_sum / gemms, gemms, what, gemms == 1 ? "" : "s");
}

CandidatePlan plan_fallback(const RunCandidate& candidate, std::vector<LayerJudgement> layers,
                            FallbackScope scope) {
  CandidatePlan ca;
  ca.candidate = candidate;
  ca.layers = std::move(layers);
  bool any_failed = false;
  for (const LayerJudgement& lj : ca.layers)
    for (const GemmJudgement& j : lj.gemms) {
      ca.total_flops += j.flops;
      any_failed = any_failed || (j.judged && !j.fp8_safe && j.forced_bf16.empty());
    }
  const bool global_off = scope == FallbackScope::kGlobal && any_failed;
  for (const LayerJudgement& lj : ca.layers) {
    std::array<Precision, 3> p{Precision::kBf16, Precision::kBf16, Precision::kBf16};
    for (const GemmJudgement& j : lj.gemms) {
      if (j.fp8_safe && !global_off) {
        p[static_cast<int>(j.gemm)] = Precision::kFp8;
      } else if (j.judged && j.forced_bf16.empty()) {
        ++ca.gemms_to_bf16;
        if (!j.fp8_safe && not_evaluated(j)) ++ca.gemms_not_evaluated;
      }
    }
    ca.plan.push_back(p);
  }
  plan_grouped_modules(&ca);
  tally_fp8(&ca);
  summarize_failures(&ca);
  return ca;
}

std::vector<LayerDecision> decide_layers(const CandidatePlan& c, FallbackScope scope) {
  std::string global_cause;
  if (scope == FallbackScope::kGlobal)
    for (const LayerJudgement& lj : c.layers)
      for (const GemmJudgement& j : lj.gemms)
        if (global_cause.empty() && j.judged && !j.fp8_safe && j.forced_bf16.empty())
          global_cause = "every GEMM to BF16 (policy scope global): " + lj.layer + " " +
                         gemm_name(j.gemm) + ": " + j.worst.reason;
  // The files train a GEMM the plan could not judge under the run's recipe when the plan turns it
  // on (some judged GEMM FP8), like every module they do not name; else BF16 with the rest.
  bool trains_low = false;
  for (const auto& p : c.plan)
    for (Precision g : p) trains_low = trains_low || g == Precision::kFp8;
  const std::string unjudged_trains =
      trains_low ? "; the files train it under " + candidate_name(c.candidate) + ", as every module they do not name"
                 : "; BF16 with the rest of the plan";
  std::vector<LayerDecision> out;
  for (std::size_t li = 0; li < c.layers.size(); ++li) {
    const LayerJudgement& lj = c.layers[li];
    LayerDecision ld;
    ld.layer = lj.layer;
    ld.incomplete = lj.incomplete;
    ld.fp8_safe = lj.fp8_safe;
    bool any_fp8 = false, any_bf16 = false;
    for (const GemmJudgement& j : lj.gemms) {
      GemmDecision& gd = ld.gemms[static_cast<int>(j.gemm)];
      gd.gemm = j.gemm;
      gd.judged = j.judged;
      gd.fp8_safe = j.fp8_safe;
      gd.precision = c.plan[li][static_cast<int>(j.gemm)];
      gd.forced = !j.forced_bf16.empty();
      if (!j.judged) {
        gd.precision = trains_low ? Precision::kFp8 : Precision::kBf16;
        gd.reason = std::string(kNotJudged) + j.unjudged + unjudged_trains;
        (trains_low ? any_fp8 : any_bf16) = true;
        continue;
      }
      if (gd.precision == Precision::kFp8) {
        any_fp8 = true;
        const std::vector<std::string> watched = watched_reasons(j);
        gd.reason = kept_reason(j, c.candidate, watched);
        gd.watched = !watched.empty();
      } else {
        any_bf16 = true;
        const std::string& not_paying =
            c.not_paying.empty() ? std::string() : c.not_paying[li][static_cast<int>(j.gemm)];
        const std::string& grouped = c.grouped.empty() ? std::string() : c.grouped[li][static_cast<int>(j.gemm)];
        gd.reason = j.fp8_safe && !grouped.empty()    ? grouped
                    : j.fp8_safe && !not_paying.empty() ? not_paying
                    : j.fp8_safe                      ? global_cause
                                                      : failing_verdict(j).reason;
      }
    }
    ld.precision = any_fp8 && any_bf16 ? Precision::kMixed
                   : any_fp8           ? Precision::kFp8
                                       : Precision::kBf16;
    out.push_back(std::move(ld));
  }
  return out;
}

std::vector<LayerDecision> all_bf16_layers(std::span<const CapturedLayer> layers, const std::string& why) {
  std::vector<LayerDecision> out;
  for (const CapturedLayer& l : layers) {
    LayerDecision ld;
    ld.layer = l.name;
    ld.incomplete = l.incomplete;
    for (int g = 0; g < 3; ++g) {
      ld.gemms[static_cast<std::size_t>(g)].gemm = static_cast<Gemm>(g);
      ld.gemms[static_cast<std::size_t>(g)].reason = why;
    }
    out.push_back(std::move(ld));
  }
  return out;
}

}  // namespace fp8a

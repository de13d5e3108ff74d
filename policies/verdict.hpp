// The policy's criteria applied to evidence, as pure functions: one tensor copy under one recipe
// (an EvaluationRow), one GEMM (its two operand copies and its output error), a delayed-scaling
// forecast. Each returns a Verdict: passed or not, the limiting criterion with its measured value,
// threshold and margin, and for every failed check a reason in words and numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/gemm_row.hpp"
#include "engine/evaluation_row.hpp"
#include "policies/amax_trend.hpp"
#include "policies/policy.hpp"

namespace fp8a {

enum class Criterion : std::uint8_t {
  kUnderflow,          // UnderflowCriterion
  kMse,                // MseCriterion
  kRelMseFloor,        // RelMseFloorCriterion
  kSaturation,         // SaturationCriterion
  kGemmAmplification,  // GemmAmplificationCriterion
  kWgradZeroed,        // WgradDamageCriterion.max_zeroed_pct
  kWgradSignFlip,      // WgradDamageCriterion.sign_flip_factor
  kWgradDirection,     // WgradDirectionCriterion
};
// The policy file's key of the criterion ("underflow", ..., "wgrad_zeroed", "wgrad_sign_flip").
const char* criterion_name(Criterion c);

// One criterion applied to one piece of evidence.
struct Check {
  Criterion criterion = Criterion::kUnderflow;
  bool passed = true;
  // What was compared, in the criterion's units (percent, rel_mse ratio, factor, steps):
  //   kUnderflow        underflow_pct vs max_pct; above it with the energy rule on, the flushed
  //                     energy share (percent, measured or bounded) vs max_energy_pct
  //   kMse              mse vs max
  //   kRelMseFloor      rel_mse / floor vs k
  //   kSaturation       saturated_pct vs max_pct
  //   kGemmAmplification rel_fro_err / predicted vs factor
  //   kWgradZeroed      zeroed_pct vs max_zeroed_pct
  //   kWgradSignFlip    sign_flip_pct / expected vs sign_flip_factor
  //   kWgradDirection   cos(dW_q, dW) vs min_cos (a lower bound: passed when measured >=
  //                     threshold; margin (measured - threshold) / |threshold|)
  // A delayed-scaling forecast's checks are kSaturation and kRelMseFloor on the predicted values.
  double measured = 0.0;
  double threshold = 0.0;
  // How far inside the threshold, relative to it: (threshold - measured) / threshold. Negative
  // fails; NaN measures fail with margin -inf.
  double margin = 0.0;
  double weight = 1.0;  // the criterion's weight in the policy
  // The criterion only watches (CriterionAction::kWatch): a breach (passed false) leaves the
  // verdict passed and goes to Verdict::watched instead of its reason.
  bool watch = false;
  // weight * (1 - margin): the criterion's weighted load; 1 at the threshold for weight 1.
  double weighted_load() const;
  // Failed checks: what failed, in words and numbers. Passed checks: empty, or a note when the
  // pass needed an explanation (many negligible values flushed).
  std::string reason;
};

struct Verdict {
  bool passed = true;
  // The check with the smallest margin (failed or not); unset when no criterion applied.
  std::optional<Criterion> limiting;
  double measured = 0.0, threshold = 0.0, margin = 0.0;  // the limiting check's
  // The reasons of the failed checks joined by "; " (empty when passed); a not applicable
  // evaluation fails with the backend's reason.
  std::string reason;
  // It failed only because an operand's evaluation was not applicable (no amax history before
  // the step, a shape the recipe cannot quantise): not evaluated, rather than failing a criterion.
  bool not_evaluated = false;
  std::vector<std::string> notes;  // the passed checks' notes
  // The breached checks of criteria that only watch: their reasons, the furthest over its
  // threshold first (the lowest margin; ties in check order). The verdict still passes.
  std::vector<std::string> watched;
  // The failed check that sends the GEMM (not one that only watches) with the smallest margin:
  // what to name as its reason in one word; unset when none failed.
  std::optional<Criterion> failing;
  // That check's margin: how far the blocking failure went (watch-only breaches, which can go
  // further, left out); 0 when none failed.
  double failing_margin = 0.0;
  std::vector<Check> checks;       // every check made, in Criterion order per piece of evidence
  // The largest weighted load of the checks: how close to failing (the search's risk order).
  double risk = 0.0;
};

// The evidence of one tensor copy under one recipe.
struct TensorEvidence {
  const EvaluationRow* row = nullptr;  // never null; its metrics carry underflow_energy_pct
};

// The evidence of one GEMM of a layer at a step under one recipe.
struct GemmEvidence {
  Gemm gemm = Gemm::kFprop;
  // The operand copies the GEMM consumes (kGemmOperandUses: EvaluationIndex::find_for_use); a null
  // row is an operand that was not captured: judged from the other alone (the verdict says so).
  TensorEvidence a, b;
  // The emulated output error, with its per-entry damage (zeroed_pct, sign_flip_pct: the wgrad
  // criteria); null when not computed.
  const GemmRow* output = nullptr;
  // The GEMM's latest captured step with an output (wgrad_direction fails only there).
  bool latest = true;
};

// The tensor criteria (underflow, mse, rel_mse_floor, saturation) on one tensor copy. Reasons
// read like "step 2 gradient underflow 44.200 % of elements (0.300 % of its energy) under
// current/hybrid".
Verdict judge_tensor(const TensorEvidence& tensor, const Policy& policy);

// One GEMM: the tensor criteria on each operand copy (OR: any failed operand fails the GEMM, as
// TE's AutoswitchGemm ORs over a GEMM's tensors), then gemm_amplification when the output error
// and both operands are known, then wgrad_damage on a wgrad output with those columns.
Verdict judge_gemm(const GemmEvidence& gemm, const Policy& policy);

// Delayed scaling's forecast for one tensor: the clipping predicted over the horizon
// (forecast.clipping) judged by the criteria that judge a captured step's clipping, saturation
// (its saturated_pct against max_pct) and rel_mse_floor (its rel_mse against k x the floor of
// the forecast's FP8 type), each with delayed_forecast's weight, watching only when either
// delayed_forecast or its criterion watches. No check without a predicted
// clipping (nothing forecast to clip; no captured tensor: a note says so). `what` names the
// tensor and recipe in the reason ("layers.3.mlp.linear_fc2 activation under
// delayed:history=1024/hybrid").
Verdict judge_delayed_forecast(const DelayedForecast& forecast, const std::string& what,
                               const Policy& policy);

}  // namespace fp8a

#include "policies/verdict.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "engine/gemm_pairing.hpp"

namespace fp8a {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string printf_text(const char* format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

// Percentages as metrics.csv readers know them: 3 decimals, 3 significant digits below 0.01.
std::string pct(double x) {
  if (x == 0.0 || !std::isfinite(x) || std::fabs(x) >= 0.01) return printf_text("%.3f", x);
  return printf_text("%.3g", x);
}
std::string num(double x) { return printf_text("%.3g", x); }
std::string times(double x) { return printf_text(std::fabs(x) >= 100 ? "%.0fx" : "%.1fx", x); }

// A check of measured against threshold where larger measures are worse.
Check upper_check(Criterion c, double measured, double threshold, double weight, CriterionAction action) {
  Check k;
  k.criterion = c;
  k.measured = measured;
  k.threshold = threshold;
  k.weight = weight;
  k.watch = action == CriterionAction::kWatch;
  k.passed = measured <= threshold;  // NaN fails
  k.margin = std::isnan(measured) ? -kInf : (threshold - measured) / threshold;
  return k;
}

// A check of measured against threshold where smaller measures are worse; the margin is relative
// to |threshold| (the measure itself when the threshold is 0).
Check lower_check(Criterion c, double measured, double threshold, double weight, CriterionAction action) {
  Check k = upper_check(c, -measured, -threshold, weight, action);
  k.measured = measured;
  k.threshold = threshold;
  k.margin = std::isnan(measured) ? -kInf : threshold != 0 ? (measured - threshold) / std::fabs(threshold) : measured;
  return k;
}

// Watch when either action watches (the forecast's checks: delayed_forecast's and the criterion's).
CriterionAction either(CriterionAction a, CriterionAction b) {
  return a == CriterionAction::kWatch ? a : b;
}

// "step 2 gradient" / "step 2 gradient (columnwise copy)"
std::string tensor_what(const EvaluationRow& row) {
  std::string s = "step " + std::to_string(row.key.step) + " " + role_name(row.key.role);
  if (row.orientation == Orientation::kColumnwise) s += " (columnwise copy)";
  return s;
}

std::string under(const Recipe& recipe, TrainingFormat format) {
  return " under " + recipe.spec() + "/" + training_format_name(format);
}

// A logged row's provenance after its "under ...": " (logged fp8_current_scaling_underflows%)",
// and for a what-if that bounds the recipe from above, what it cast.
std::string logged_how(const EvaluationRow& row) {
  if (!row.logged) return "";
  std::string s = " (logged " + (row.logged->source.empty() ? std::string("statistics") : row.logged->source);
  if (row.logged->upper_bound) s += ": TE's 128x128 what-if tiles, at least the recipe's 1x128 blocks' values";
  return s + ")";
}

void finish(Verdict* v) {
  std::string reason;
  std::vector<const Check*> watched;
  for (const Check& c : v->checks) {
    if (!c.passed && !c.watch) {
      if (!v->failing || c.margin < v->failing_margin) v->failing = c.criterion, v->failing_margin = c.margin;
      v->passed = false;
      reason += (reason.empty() ? "" : "; ") + c.reason;
    } else if (!c.passed) {
      watched.push_back(&c);
    } else if (!c.reason.empty()) {
      v->notes.push_back(c.reason);
    }
    v->risk = std::max(v->risk, c.weighted_load());
    if (!v->limiting || c.margin < v->margin) {
      v->limiting = c.criterion;
      v->measured = c.measured;
      v->threshold = c.threshold;
      v->margin = c.margin;
    }
  }
  if (!reason.empty()) v->reason = v->reason.empty() ? reason : v->reason + "; " + reason;
  std::stable_sort(watched.begin(), watched.end(),
                   [](const Check* a, const Check* b) { return a->margin < b->margin; });
  for (const Check* c : watched) v->watched.push_back(c->reason);
}

// "tokens", or a weight's "output channels": the rows of the captured 2-D view.
const char* rows_name(const EvaluationRow& row) { return row.key.role == Role::kWeight ? "output channels" : "tokens"; }

// "3 of 128 tokens lose over half their energy" (the rows measured).
std::string lost_rows_count(const EvaluationRow& row) {
  return std::to_string(row.row_flush->lost_rows) + " of " + std::to_string(row.row_flush->rows) + " " +
         rows_name(row) + " lose over half their energy";
}

// ", " and lost_rows_count when the rows were measured, else "".
std::string lost_rows_text(const EvaluationRow& row) { return row.row_flush ? ", " + lost_rows_count(row) : ""; }

// The underflow criterion's row rule (max_lost_rows_pct) when it fails the tensor: most of its
// rows lose most of their energy, whatever share of the whole flushes. Without measured rows the
// element share stands in for the row share: a logged row over it is not judged (its reason says
// so: the caller leaves the GEMM not evaluated), a captured row a path did not measure fails.
// `action`: the rule's on this GEMM (UnderflowCriterion::lost_rows_wgrad_action on a wgrad's copies).
std::optional<Check> lost_rows_breach(const EvaluationRow& row, const UnderflowCriterion& c, CriterionAction action,
                                      const std::string& what, const std::string& how) {
  if (!c.max_lost_rows_pct) return std::nullopt;
  const QuantMetrics& m = row.metrics;
  const double share = row.row_flush ? row.row_flush->pct() : m.underflow_pct;
  Check k = upper_check(Criterion::kUnderflow, share, *c.max_lost_rows_pct, c.weight, action);
  if (k.passed) return std::nullopt;
  const std::string energy = (row.logged ? "at most " : "") + pct(m.underflow_energy_pct) + " % of its energy";
  if (row.row_flush)
    k.reason = what + " underflow " + pct(m.underflow_pct) + " % of elements: " + lost_rows_count(row) + " (" +
               pct(share) + " % > " + pct(*c.max_lost_rows_pct) + " %, whatever the whole loses: " + energy + ")" + how;
  else if (row.logged)
    k.reason = what + " underflow " + pct(m.underflow_pct) + " % of elements (" + energy + "): the log cannot tell "
               "whether over " + pct(*c.max_lost_rows_pct) + " % of its " + rows_name(row) +
               " lose over half their energy" + how + "; a capture of the tensor judges it";
  else
    k.reason = what + " underflow " + pct(m.underflow_pct) + " % of elements (> " + pct(*c.max_lost_rows_pct) +
               " % whatever energy they carry; " + energy + "; unmeasured rows: the element share stands in for the " +
               rows_name(row) + " losing over half their energy)" + how;
  return k;
}

// The underflow criterion's energy rule, above max_pct: the flushed share of the energy judges,
// appended to `out`; a logged row whose statistics cannot settle it leaves why in *undetermined.
// `at_floor`: the pass note's rel_mse against the format's floor (", rel_mse 1.0x the E4M3
// floor"), or empty.
void energy_rule(const EvaluationRow& row, const UnderflowCriterion& c, const LoggedMeasures& known,
                 const std::string& what, const std::string& how, const std::string& at_floor,
                 std::vector<Check>* out, std::string* undetermined) {
  const QuantMetrics& m = row.metrics;
  const double u = m.underflow_pct;
  if (row.logged && (!known.energy_bound || !(m.underflow_energy_pct <= *c.max_energy_pct))) {
    *undetermined = what + " underflow " + pct(u) + " % of elements" +
                    (known.energy_bound ? ": the log bounds the flushed share of its energy at " +
                                              pct(m.underflow_energy_pct) + " % (> " + pct(*c.max_energy_pct) +
                                              " %) but cannot measure it"
                                        : ": the log cannot bound the flushed share of its energy (log scale_inv "
                                          "or cur_amax, and mean and std)") +
                    how + "; a capture of the tensor judges it";
    return;
  }
  const double energy = m.underflow_energy_pct;
  Check k = upper_check(Criterion::kUnderflow, energy, *c.max_energy_pct, c.weight, c.action);
  const std::string share = (row.logged ? "at most " : "") + pct(energy) + " % of its energy";
  if (!k.passed)
    k.reason = what + " underflow " + pct(u) + " % of elements (" + share + " > " + pct(*c.max_energy_pct) +
               " %): signal lost" + how;
  else
    k.reason = what + " underflow " + pct(u) + " % of elements (" + share + at_floor + lost_rows_text(row) +
               "): many negligible values flushed, not signal lost" + how;
  out->push_back(std::move(k));
}

// The tensor criteria's checks of one tensor copy, appended to `out`; false when the evaluation
// was not applicable, or a logged row leaves open a criterion that could send the GEMM (the reason
// then goes to *not_applicable). `wgrad`: the copy a wgrad consumes whose output wgrad_direction
// judges (the rows rule's wgrad action applies).
bool tensor_checks(const TensorEvidence& ev, const Policy& policy, bool wgrad, std::vector<Check>* out,
                   std::string* not_applicable) {
  const EvaluationRow& row = *ev.row;
  const std::string what = tensor_what(row);
  const std::string how = under(row.recipe, row.format) + logged_how(row);
  // A logged row judges what its statistics determine (engine/logged_rows.hpp); a criterion they
  // leave open is not judged, and one that could send the GEMM makes it not evaluated.
  const LoggedMeasures all{true, true, true, true, false, ""};
  const LoggedMeasures& known = row.logged ? *row.logged : all;
  std::string undetermined;
  if (!row.applicability.ok) {
    *not_applicable = what + how + " not applicable: " + row.applicability.reason;
    return false;
  }
  const QuantMetrics& m = row.metrics;
  // The cast's element type: BF16 (the round trip), E2M1 (NVFP4), else the FP8 format.
  const int bits = operand_bits(row.recipe.kind);
  const bool e4m3 = row.fp8 == Fp8Format::kE4M3;
  const char* format_name = bits == 16 ? "BF16" : bits == 4 ? "E2M1" : e4m3 ? "E4M3" : "E5M2";
  const RelMseFloorCriterion& fl = policy.rel_mse_floor;
  const double floor = bits == 16 ? fl.floor_bf16 : bits == 4 ? fl.floor_e2m1 : e4m3 ? fl.floor_e4m3 : fl.floor_e5m2;

  if (const UnderflowCriterion& c = policy.underflow; c.enabled && known.underflow) {
    const double u = m.underflow_pct;
    const CriterionAction rows_action = wgrad && c.lost_rows_wgrad_action ? *c.lost_rows_wgrad_action : c.action;
    if (!c.max_energy_pct || !(u > c.max_pct)) {
      Check k = upper_check(Criterion::kUnderflow, u, c.max_pct, c.weight, c.action);
      if (!k.passed)
        k.reason = what + " underflow " + pct(u) + " % of elements (> " + pct(c.max_pct) + " %)" + how;
      out->push_back(std::move(k));
    } else if (c.max_pct_any_energy && u > *c.max_pct_any_energy) {
      Check k = upper_check(Criterion::kUnderflow, u, *c.max_pct_any_energy, c.weight, c.action);
      k.reason = what + " underflow " + pct(u) + " % of elements (> " + pct(*c.max_pct_any_energy) +
                 " % whatever energy they carry; " + (row.logged ? "at most " : "") + pct(m.underflow_energy_pct) +
                 " % of it)" + how;
      out->push_back(std::move(k));
    } else if (std::optional<Check> rows = lost_rows_breach(row, c, rows_action, what, how); rows && !rows->watch) {
      if (row.logged) undetermined = std::move(rows->reason);
      else out->push_back(std::move(*rows));
    } else {
      // A rows rule that only watches here is reported, and the energy rule judges.
      if (rows) out->push_back(std::move(*rows));
      const std::string at_floor = fl.enabled && known.rel_mse
                                       ? ", rel_mse " + times(m.rel_mse / floor) + " the " + format_name + " floor"
                                       : std::string();
      energy_rule(row, c, known, what, how, at_floor, out, &undetermined);
    }
  }
  // A what-if that bounds the recipe from above determines a pass, not a failure.
  if (known.upper_bound && !out->empty() && out->back().criterion == Criterion::kUnderflow && !out->back().passed &&
      !out->back().watch) {
    undetermined = out->back().reason + "; the recipe's own blocks flush at most that: a capture of the tensor judges it";
    out->pop_back();
  }
  if (const MseCriterion& c = policy.mse; c.enabled && !std::isnan(m.mse)) {
    Check k = upper_check(Criterion::kMse, m.mse, c.max, c.weight, c.action);
    if (!k.passed) k.reason = what + " MSE " + num(m.mse) + " (> " + num(c.max) + ", absolute)" + how;
    out->push_back(std::move(k));
  }
  if (fl.enabled && known.rel_mse) {
    const double ratio = m.rel_mse / floor;
    Check k = upper_check(Criterion::kRelMseFloor, ratio, fl.k, fl.weight, fl.action);
    if (!k.passed)
      k.reason = what + " rel_mse " + num(m.rel_mse) + " = " + times(ratio) + " the " + format_name +
                 " rounding floor " + num(floor) + " (> " + times(fl.k) + "; SQNR " +
                 printf_text("%.2f", m.sqnr_db) + " dB)" + how;
    out->push_back(std::move(k));
  }
  if (const SaturationCriterion& c = policy.saturation; c.enabled && known.saturation) {
    Check k = upper_check(Criterion::kSaturation, m.saturated_pct, c.max_pct, c.weight, c.action);
    if (!k.passed)
      k.reason = what + " saturated " + pct(m.saturated_pct) + " % of elements (> " + pct(c.max_pct) +
                 " %)" + how;
    out->push_back(std::move(k));
  }
  if (!undetermined.empty()) {
    *not_applicable = std::move(undetermined);
    return false;
  }
  return true;
}

}  // namespace

const char* criterion_name(Criterion c) {
  switch (c) {
    case Criterion::kUnderflow: return "underflow";
    case Criterion::kMse: return "mse";
    case Criterion::kRelMseFloor: return "rel_mse_floor";
    case Criterion::kSaturation: return "saturation";
    case Criterion::kGemmAmplification: return "gemm_amplification";
    case Criterion::kWgradZeroed: return "wgrad_zeroed";
    case Criterion::kWgradDirection: return "wgrad_direction";
    case Criterion::kWgradSignFlip: break;
  }
  return "wgrad_sign_flip";
}

double Check::weighted_load() const { return weight * (1.0 - margin); }

Verdict judge_tensor(const TensorEvidence& tensor, const Policy& policy) {
  Verdict v;
  if (!tensor_checks(tensor, policy, false, &v.checks, &v.reason)) v.passed = false;
  finish(&v);
  return v;
}

Verdict judge_gemm(const GemmEvidence& ev, const Policy& policy) {
  Verdict v;
  const GemmOperandUse& use = kGemmOperandUses[static_cast<int>(ev.gemm)];
  const char* gemm = gemm_name(ev.gemm);
  bool both = true;
  // A wgrad whose output wgrad_direction judges: there the proxies for dW's direction (the rows
  // rule on its operand copies, gemm_amplification) take their wgrad actions.
  const bool direction_judged = policy.wgrad_direction.enabled && ev.gemm == Gemm::kWgrad && ev.output != nullptr;
  for (const auto& [operand, role] : {std::pair{&ev.a, use.a}, std::pair{&ev.b, use.b}}) {
    if (operand->row == nullptr) {
      both = false;
      v.notes.push_back(std::string(gemm) + ": " + role_name(role) +
                        " not captured; judged on the other operand alone");
      continue;
    }
    std::string na;
    if (!tensor_checks(*operand, policy, direction_judged, &v.checks, &na)) {
      both = false;
      v.passed = false;
      v.not_evaluated = true;
      v.reason += (v.reason.empty() ? "" : "; ") + na;
    }
  }
  const GemmRow* out = ev.output;
  const std::string how = out ? under(out->recipe, out->format) : std::string();
  if (const GemmAmplificationCriterion& c = policy.gemm_amplification;
      c.enabled && both && out != nullptr && !(out->rel_fro_err <= c.min_rel_fro_err)) {
    const double predicted = std::sqrt(ev.a.row->metrics.rel_mse + ev.b.row->metrics.rel_mse);
    const double ratio = predicted > 0 ? out->rel_fro_err / predicted : kInf;
    const CriterionAction action = direction_judged && c.wgrad_action ? *c.wgrad_action : c.action;
    Check k = upper_check(Criterion::kGemmAmplification, ratio, c.factor, c.weight, action);
    if (!k.passed)
      k.reason = "step " + std::to_string(out->step) + " " + gemm + " output rel_fro_err " +
                 num(out->rel_fro_err) + " = " + times(ratio) + " the " + num(predicted) +
                 " its operands' rel_mse predict (> " + times(c.factor) + ": cancellation)" + how;
    v.checks.push_back(std::move(k));
  }
  if (const WgradDamageCriterion& c = policy.wgrad_damage; c.enabled && ev.gemm == Gemm::kWgrad) {
    const std::string step = out ? "step " + std::to_string(out->step) + " " : std::string();
    if (out != nullptr) {
      Check k = upper_check(Criterion::kWgradZeroed, out->zeroed_pct, c.max_zeroed_pct, c.weight, c.action);
      if (!k.passed)
        k.reason = step + "wgrad: " + pct(out->zeroed_pct) + " % of dW entries zeroed (> " +
                   pct(c.max_zeroed_pct) + " %)" + how;
      v.checks.push_back(std::move(k));
    }
    if (out != nullptr) {
      const double expected = out->noise_sign_flip_pct;
      const double ratio = expected > 0 ? out->sign_flip_pct / expected
                                        : (out->sign_flip_pct > 0 ? kInf : 0.0);
      Check k = upper_check(Criterion::kWgradSignFlip, ratio, c.sign_flip_factor, c.weight, c.action);
      if (!k.passed)
        k.reason = step + "wgrad: " + pct(out->sign_flip_pct) + " % of dW entries flip sign, " +
                   times(ratio) + " the " + pct(expected) +
                   " % that independent rounding noise of its size flips (> " +
                   times(c.sign_flip_factor) + ")" + how;
      v.checks.push_back(std::move(k));
    }
  }
  if (const WgradDirectionCriterion& c = policy.wgrad_direction; c.enabled && ev.gemm == Gemm::kWgrad && out) {
    // A lower bound: cos below min_cos fails, at the latest step only (earlier ones watch).
    Check k = lower_check(Criterion::kWgradDirection, out->cos, c.min_cos, c.weight,
                          ev.latest ? c.action : CriterionAction::kWatch);
    if (!k.passed)
      k.reason = "step " + std::to_string(out->step) + " wgrad: dW's cosine to the high-precision dW " +
                 printf_text("%.3f", out->cos) + " (< " + printf_text("%.3f", c.min_cos) +
                 ": the update's direction lost" +
                 (ev.latest ? std::string() : "; not the latest captured step, which judges it") + ")" + how;
    // The proxies it demoted to watch say why they only watch: the direction measured on dW.
    const std::string cosine = "cosine " + printf_text("%.3f", out->cos) + " to the high-precision dW";
    const std::string why = k.passed     ? "; dW keeps its direction (" + cosine + ", >= " +
                                               printf_text("%.3f", c.min_cos) + ": wgrad_direction)"
                            : !ev.latest ? "; wgrad_direction judges dW's direction at the latest captured step"
                                         : "; dW's direction lost too (" + cosine + "; wgrad_direction only watches)";
    if (k.passed || k.watch)
      for (Check& proxy : v.checks)
        if (!proxy.passed && proxy.watch &&
            ((proxy.criterion == Criterion::kUnderflow && policy.underflow.action == CriterionAction::kFail) ||
             (proxy.criterion == Criterion::kGemmAmplification &&
              policy.gemm_amplification.action == CriterionAction::kFail)))
          proxy.reason += why;
    v.checks.push_back(std::move(k));
  }
  finish(&v);
  // Not evaluated only while no check that sends the GEMM failed too.
  v.not_evaluated = v.not_evaluated && !v.failing;
  return v;
}

Verdict judge_delayed_forecast(const DelayedForecast& f, const std::string& what, const Policy& policy) {
  Verdict v;
  const DelayedForecastCriterion& c = policy.delayed_forecast;
  if (!c.enabled || !(f.horizon_excess_binades > 0)) {
    finish(&v);
    return v;
  }
  const ForecastClipping& p = f.clipping;
  if (!p.predicted) {
    v.notes.push_back(what + ": forecast to clip by " + num(f.horizon_excess_binades) +
                      " binades, not judged: " + p.none);
    finish(&v);
    return v;
  }
  const std::string forecast = what + ": forecast over " + std::to_string(c.horizon_steps) +
                               " steps, the stale scale clips by " + num(f.horizon_excess_binades) +
                               " binades from step " + std::to_string(f.horizon_excess_step) + " (step " +
                               std::to_string(p.from_step) + "'s tensor scaled to the trend): ";
  if (const SaturationCriterion& s = policy.saturation; s.enabled) {
    Check k = upper_check(Criterion::kSaturation, p.saturated_pct, s.max_pct, c.weight, either(c.action, s.action));
    if (!k.passed)
      k.reason = "saturated " + pct(p.saturated_pct) + " % of elements (> " + pct(s.max_pct) + " %)";
    v.checks.push_back(std::move(k));
  }
  if (const RelMseFloorCriterion& fl = policy.rel_mse_floor; fl.enabled) {
    const bool e4m3 = f.fp8 == Fp8Format::kE4M3;
    const double floor = e4m3 ? fl.floor_e4m3 : fl.floor_e5m2;
    const double ratio = p.rel_mse / floor;
    Check k = upper_check(Criterion::kRelMseFloor, ratio, fl.k, c.weight, either(c.action, fl.action));
    if (!k.passed)
      k.reason = "rel_mse " + num(p.rel_mse) + " (" + num(p.clipped_rel_mse) +
                 " from clipping) = " + times(ratio) + " the " + (e4m3 ? "E4M3" : "E5M2") +
                 " rounding floor " + num(floor) + " (> " + times(fl.k) + ")";
    v.checks.push_back(std::move(k));
  }
  finish(&v);
  if (!v.passed) v.reason = forecast + v.reason;
  for (std::string& w : v.watched) w = forecast + w;
  return v;
}

}  // namespace fp8a

// The policy as data: the criteria a tensor, a GEMM or a delayed-scaling forecast must pass, with
// their thresholds, weights and sources; the JSON file format; the shipped presets ("default",
// "te-autoswitch"). docs/POLICY.md lists the criteria for users; METRICS.md
// ("Policy criteria") defines each measured quantity and derives the rounding floors.
//
// A policy file is a JSON object. Every key is optional: a file gives what it changes, the rest
// comes from its "base" preset ("default" unless it says "te-autoswitch"). policies/
// default_policy.json and policies/te_autoswitch_policy.json are policy_to_json() of the presets
// (tests/policies/test_policy.cpp checks them byte for byte).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/file_system.hpp"

namespace fp8a {

// Which GEMMs one failed check sends to BF16.
//   kGemm    the GEMM whose evidence failed (per layer and GEMM);
//   kGlobal  every GEMM of the run: TE PR #2883 AutoswitchGemm's default hold_window_scope
//            "global" (any breach forces all GEMMs to high precision for the hold window).
enum class FallbackScope : std::uint8_t { kGemm, kGlobal };
const char* fallback_scope_name(FallbackScope scope);  // "gemm", "global"

// What a criterion's breach does (every criterion's "action" key).
//   kFail   the GEMM fails: the plan sends it to BF16 (scope permitting);
//   kWatch  the GEMM stays FP8 and the breach is reported with its numbers: the answer's watch
//           lines, recipe.json's GEMM reason, nvdlfw_inspect.yaml's logged layers. For criteria
//           whose breaches training has not shown to harm (calibration/RESULTS.md: false alarms,
//           no detection), as issue 23's rule demotes them.
enum class CriterionAction : std::uint8_t { kFail, kWatch };
const char* criterion_action_name(CriterionAction action);  // "fail", "watch"

// Underflow: elements that are nonzero in x and zero after the cast (METRICS.md underflow_pct).
// Fails when underflow_pct > max_pct and, when max_energy_pct is set, the flushed elements also
// carry more than max_energy_pct of the tensor's energy (sum x^2). Without the energy measure
// (the metric missing from the evaluation), 100 * rel_mse bounds it from above: every flushed
// element adds its whole x^2 to the error sum. max_energy_pct unset is TE's count rule alone.
// max_pct_any_energy: above this share of flushed elements the tensor fails whatever energy they
// carry (a per-token outlier holds nearly all of a tensor's energy, so every other token can flush
// while the energy share stays tiny: calibration/RESULTS.md outlier20x2).
// max_lost_rows_pct: the same case told by rows: above this share of the tensor's rows (tokens; a
// weight's output channels) losing more than half their energy to the flush, the tensor fails
// whatever share of the whole it flushes (METRICS.md "Flushed rows"; measured on captures, after
// the evaluation: engine/row_flush.hpp). A log cannot tell its rows apart: a logged row flushing
// over this share of its elements is not judged (its GEMM not evaluated).
struct UnderflowCriterion {
  bool enabled = true;
  double max_pct = 5.0;                  // percent of the tensor's elements, in (0, 100]
  std::optional<double> max_energy_pct;  // percent of sum x^2, in (0, 100]; unset: count only
  double weight = 1.0;                   // >= 0; see Check::weighted_load
  std::string source;
  std::optional<double> max_pct_any_energy;  // percent of elements, in (0, 100]; unset: none
  std::optional<double> max_lost_rows_pct;   // percent of rows, in (0, 100]; unset: none
  CriterionAction action = CriterionAction::kFail;
  // The rows rule's action on the operand copies of a wgrad whose output wgrad_direction judges
  // (enabled, the output computed); unset: `action`. The wgrad sums over tokens, so lost rows
  // there matter only through dW's direction, which that criterion measures on dW itself
  // (calibration/RESULTS.md: "watch" at width). A logged wgrad, with no output, keeps `action`.
  std::optional<CriterionAction> lost_rows_wgrad_action;
  bool operator==(const UnderflowCriterion&) const = default;
};

// Absolute MSE, sum (x - deq)^2 / F. It scales with the square of the tensor's magnitude, so only
// the te-autoswitch preset enables it (TE's own threshold is absolute); the default judges the
// relative rel_mse against the format's floor instead.
struct MseCriterion {
  bool enabled = false;
  double max = 1e-4;  // > 0, in the tensor's units squared
  double weight = 1.0;
  std::string source;
  CriterionAction action = CriterionAction::kFail;
  bool operator==(const MseCriterion&) const = default;
};

// rel_mse against the ideal rounding noise of the format on well-scaled data (METRICS.md derives
// floor = 2^(-2m) / (32 ln 2) for m mantissa bits): fails when rel_mse > k * floor.
struct RelMseFloorCriterion {
  bool enabled = true;
  double k = 4.0;           // >= 1
  double floor_e4m3 = 0.0;  // > 0; the defaults are rel_mse_floor(3), (2), (7), (1)
  double floor_e5m2 = 0.0;
  double floor_bf16 = 0.0;  // the BF16 round trip (the fallback's own rows)
  double floor_e2m1 = 0.0;  // NVFP4's elements (their E4M3 block scales aside)
  double weight = 1.0;
  std::string source;
  CriterionAction action = CriterionAction::kFail;
  bool operator==(const RelMseFloorCriterion&) const = default;
};

// Saturation: elements the saturating cast clipped (METRICS.md saturated_pct).
// Fails when saturated_pct > max_pct.
struct SaturationCriterion {
  bool enabled = true;
  double max_pct = 0.05;  // percent of the tensor's elements, in (0, 100]
  double weight = 1.0;
  std::string source;
  CriterionAction action = CriterionAction::kFail;
  bool operator==(const SaturationCriterion&) const = default;
};

// GEMM amplification: the GEMM output's rel_fro_err (gemms.csv) against what its operands'
// errors predict if independent: predicted = sqrt(rel_mse_a + rel_mse_b) (METRICS.md). Fails when
// rel_fro_err > factor * predicted and rel_fro_err > min_rel_fro_err (an output error below the
// BF16 rounding of the output itself, 2^-9, never fails).
struct GemmAmplificationCriterion {
  bool enabled = true;
  double factor = 2.0;               // >= 1
  double min_rel_fro_err = 0.001953125;  // > 0
  double weight = 1.0;
  std::string source;
  CriterionAction action = CriterionAction::kFail;
  // The action on a wgrad output that wgrad_direction judges too; unset: `action`.
  std::optional<CriterionAction> wgrad_action;
  bool operator==(const GemmAmplificationCriterion&) const = default;
};

// Per-element damage of the wgrad output dW, where Adam sees it (gemms.csv zeroed_pct,
// sign_flip_pct). Fails when zeroed_pct > max_zeroed_pct, or when sign_flip_pct exceeds
// sign_flip_factor times the share independent rounding noise of the measured size flips, each
// entry's noise as its operands predict (GemmRow::noise_sign_flip_pct, METRICS.md).
struct WgradDamageCriterion {
  bool enabled = true;
  double max_zeroed_pct = 1.0;    // percent of dW entries, in (0, 100]
  double sign_flip_factor = 2.0;  // >= 1
  double weight = 1.0;
  std::string source;
  CriterionAction action = CriterionAction::kFail;
  bool operator==(const WgradDamageCriterion&) const = default;
};

// The direction of the wgrad output: cos(dW_fp8, dW) against the high-precision dW (gemms.csv
// cos). Fails when the cosine is below min_cos at the GEMM's latest captured step with an output;
// at earlier steps a breach only watches (training moves the tensors: a block-scaled wgrad whose
// outlier token flushes most of its block recovers its direction as the other tokens grow,
// calibration/RESULTS.md wgrad_direction). cos^2 is the share of the FP8 update's energy along
// the true one.
struct WgradDirectionCriterion {
  bool enabled = true;
  double min_cos = 0.3;  // in [-1, 1]
  double weight = 1.0;
  std::string source;
  CriterionAction action = CriterionAction::kFail;
  bool operator==(const WgradDirectionCriterion&) const = default;
};

// Delayed scaling's forecast: the clipping the amax trend predicts over horizon_steps steps after
// the series' last step, judged by the saturation and rel_mse_floor criteria (weight: this one's;
// verdict.hpp judge_delayed_forecast).
struct DelayedForecastCriterion {
  bool enabled = true;
  std::int64_t horizon_steps = 10000;  // >= 0
  double weight = 1.0;
  std::string source;
  CriterionAction action = CriterionAction::kFail;
  bool operator==(const DelayedForecastCriterion&) const = default;
};

// How the policy's verdicts fared against training (calibration/README.md, the table in
// calibration/RESULTS.md): the whole policy on the captures of FP8 training runs whose gap to BF16
// on the same batches is known. A policy file that changes a criterion or the scope without
// giving its own record has none (the base's numbers are not its).
struct PolicyCalibration {
  std::string table;     // where the table is ("calibration/RESULTS.md")
  int cases = 0;         // training cases (mechanisms) in the table
  int runs = 0;          // FP8 runs the policy judged
  int harmful = 0;       // of them, harmful in training (calibration/README.md's harm rule)
  int detected = 0;      // harmful runs the policy fails
  int false_alarms = 0;  // harmless runs the policy fails
  std::vector<int> widths;  // the models' d_model the runs trained at, ascending; empty: not said
  bool operator==(const PolicyCalibration&) const = default;
};

struct Policy {
  std::string name;         // "default", "te-autoswitch", or the file's "name"
  std::string description;  // one paragraph
  FallbackScope scope = FallbackScope::kGemm;
  std::string scope_source;
  UnderflowCriterion underflow;
  MseCriterion mse;
  RelMseFloorCriterion rel_mse_floor;
  SaturationCriterion saturation;
  GemmAmplificationCriterion gemm_amplification;
  WgradDamageCriterion wgrad_damage;
  WgradDirectionCriterion wgrad_direction;
  DelayedForecastCriterion delayed_forecast;
  std::optional<PolicyCalibration> calibration;
  bool operator==(const Policy&) const = default;
};

// Every criterion's action, in the structs' order (to set them together).
std::array<CriterionAction*, 8> criterion_actions(Policy& policy);

// The calibration in one line, as the answer prints it: "validated on 7 training cases (24 FP8
// runs, calibration/RESULTS.md): 2 of 2 harmful runs fail, 0 false alarms in 22 harmless ones";
// without a record, that the policy's criteria are not validated against training.
std::string calibration_text(const Policy& policy);

// The uniform-rounding floor of rel_mse for a float format with m explicit mantissa bits:
// 2^(-2m) / (32 ln 2) (E4M3: m = 3, 7.04e-4, 31.52 dB; E5M2: m = 2, 2.82e-3, 25.50 dB; BF16: m = 7;
// E2M1: m = 1, 1.13e-2, 19.48 dB).
double rel_mse_floor(int mantissa_bits);

// The presets, by name, in this order.
inline constexpr const char* kPolicyPresets[] = {"default", "te-autoswitch"};
Policy default_policy();
Policy te_autoswitch_policy();

// The policy as its JSON file (2-space indent, keys in the order of the structs but a criterion's
// "action" after its "enabled", a final newline).
std::string policy_to_json(const Policy& policy);

// Parses a policy file's text over its base preset. `origin` names the file in messages.
// Throws input errors: fp8a.policy.901 (not JSON, not an object), .902 (unknown key, with "did you
// mean"), .903 (wrong type), .904 (out of range or an unknown name); each names the key.
Policy parse_policy(std::string_view json_text, std::string_view origin);

// `name_or_path`: a preset name, else the path of a policy file read through `fs`.
// Throws usage error fp8a.usage.213 when it is neither (with "did you mean" over the presets),
// fp8a.io.102 when the file cannot be read, and parse_policy's errors.
Policy load_policy(std::string_view name_or_path, const FileSystem& fs);

}  // namespace fp8a

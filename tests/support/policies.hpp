// Policies for the tests of the criteria's mechanics.
#pragma once

#include "policies/policy.hpp"

namespace fp8a::testing {

// The default policy with every criterion failing, at the thresholds the synth presets were built
// around (gemm_amplification 2x): what each criterion detects, as the presets and the hand-built
// verdicts check it. The default itself only watches the criteria whose breaches trained no worse
// than BF16, and fails amplification from 8x (calibration/RESULTS.md); the tests of the default's
// advice use default_policy().
inline Policy failing_policy() {
  Policy p = default_policy();
  p.name = "failing";
  for (CriterionAction* a : criterion_actions(p)) *a = CriterionAction::kFail;
  p.underflow.lost_rows_wgrad_action.reset();
  p.gemm_amplification.wgrad_action.reset();
  p.gemm_amplification.factor = 2.0;
  p.calibration.reset();
  return p;
}

}  // namespace fp8a::testing

// The preset policies' files, built into the binary (policies/policy_files.cpp.in): the thresholds
// and the training evidence behind each live in the JSON, never in C++ string literals.
// default_policy.json is the whole default policy; te_autoswitch_policy.json names "base":
// "default" and what TE's AutoswitchGemm changes.
#pragma once

namespace fp8a {

extern const char* const kDefaultPolicyJson;
extern const char* const kTeAutoswitchPolicyJson;

}  // namespace fp8a

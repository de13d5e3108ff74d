// te_precision_config.yaml: Megatron-Core's --te-precision-config-file. With a per-module plan
// whose base is the chosen recipe: a config per recipe the plan uses and `bf16` (training_recipe
// {}), a matcher per module not on the base, then the base's config matched by "*". Otherwise the
// BF16 fallbacks: a `bf16` config matched by every module the plan keeps (wholly or partly) in
// BF16, then, unless the chosen recipe is delayed scaling, the chosen recipe's config for "*".
// The file cannot express delayed scaling, margin, history, recipe options or single GEMMs:
// under delayed scaling it holds only the BF16 fallbacks (the run's recipe comes from
// megatron_args.txt), and a module with only some GEMMs in BF16 goes to BF16 whole (numerics
// first; nvdlfw_inspect.yaml keeps just those GEMMs). Module paths are Megatron's
// (decoder.layers.<i>...), with the captured layer index: Megatron counts layers from 0 in each
// pipeline stage, so with pipeline parallelism the indices need renumbering per stage. Every
// matcher has `enabled: true` (Megatron skips one without it); guessed mappings are commented.
#pragma once

#include <optional>
#include <string>

#include "policies/advice.hpp"
#include "reports/artifact.hpp"
#include "reports/consumers/consumer_plan.hpp"

namespace fp8a {

// Megatron's config key for the candidate ("tensorwise_hybrid"); also the file's config name.
std::string megatron_config_name(const RunCandidate& c);

// Unset when the file would say nothing Megatron can use (no chosen candidate, or delayed
// scaling with no BF16 fallback); `why_omitted` then says why. Note: "N module matchers" with a
// per-module plan, else "N BF16 matchers".
std::optional<Artifact> render_te_precision_config(const ConsumerPlan& plan, std::string* why_omitted = nullptr);

}  // namespace fp8a

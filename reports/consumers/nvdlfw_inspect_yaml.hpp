// nvdlfw_inspect.yaml: a TE debug config (nvdlfw_inspect + transformer_engine.debug) for the plan,
// one section per layer it names, as nvdlfw_inspect requires (two sections selecting one layer
// fail at the first lookup): DisableQuantizationLayer for a layer all in BF16,
// DisableQuantizationGEMM for single GEMMs in BF16 (the only per-GEMM fallback of any consumer),
// by those names for Recommendation::te_version 2.13+, else DisableFP8Layer / DisableFP8GEMM;
// and, for the GEMMs of the recommendation's watch list (Recommendation::watch, the answer's),
// LogFp8TensorStats and LogTensorStats on the tensors those GEMMs consume, to watch next run
// (before TE 2.7 LogFp8TensorStats logs underflows% alone). The first lines name the TE release.
// Each section's layer_name_regex_pattern matches the end of nvdlfw_inspect's name at a dot
// (nvdlfw_layer_name), so the wrappers around the model do not matter. A plan that keeps no GEMM in
// FP8 is one section for every layer. Layers the plan never saw run the recipe; the file says so.
#pragma once

#include <optional>
#include <string>

#include "policies/advice.hpp"
#include "reports/artifact.hpp"
#include "reports/consumers/consumer_plan.hpp"

namespace fp8a {

inline constexpr int kWatchFrequency = 10;  // steps between logged statistics

// Unset when there is nothing to configure (no chosen candidate, or no BF16 fallback and no FP8
// GEMM to watch); `why_omitted` then says why. Note: "N fallbacks, M layers watched".
std::optional<Artifact> render_nvdlfw_inspect_yaml(const ConsumerPlan& plan, std::string* why_omitted = nullptr);

}  // namespace fp8a

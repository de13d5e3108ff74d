// nvdlfw_inspect.yaml: a TE debug config (nvdlfw_inspect + transformer_engine.debug) for the plan,
// one section per layer it names, as nvdlfw_inspect requires (two sections selecting one layer
// fail at the first lookup): DisableQuantizationLayer for a layer all in BF16,
// DisableQuantizationGEMM for single GEMMs in BF16 (the only per-GEMM fallback of any consumer),
// and, for the kWatchedGemms FP8 GEMMs with the smallest worst margins under the chosen candidate,
// LogFp8TensorStats and LogTensorStats on the tensors those GEMMs consume, to watch next run.
// Layers are named as nvdlfw_inspect names Megatron's (model.decoder.layers.<global 1-based
// layer_number>...), mapped from the captured 0-based index: a guess, said in the file.
#pragma once

#include <optional>
#include <string>

#include "policies/advice.hpp"
#include "reports/artifact.hpp"

namespace fp8a {

inline constexpr int kWatchedGemms = 3;
inline constexpr int kWatchFrequency = 10;  // steps between logged statistics

// Unset when there is nothing to configure (no chosen candidate, or no BF16 fallback and no FP8
// GEMM to watch); `why_omitted` then says why. Note: "N fallbacks, M layers watched".
std::optional<Artifact> render_nvdlfw_inspect_yaml(const Recommendation& rec, std::string* why_omitted = nullptr);

}  // namespace fp8a

// Judging: every (layer, GEMM) of the evaluation under one FP8 candidate, step by step with
// judge_gemm on the copies kGemmOperandUses names, and, for delayed candidates, the forecast with
// judge_delayed_forecast. The first step of recommend() (advice.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/evaluation_index.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_pairing.hpp"
#include "policies/amax_trend.hpp"
#include "policies/candidate.hpp"
#include "policies/judgement.hpp"
#include "policies/policy.hpp"
#include "policies/target_model.hpp"

namespace fp8a {

struct RecommendationInputs {
  const EvaluationIndex* index = nullptr;  // the evaluation rows; never null
  std::span<const GemmRow> gemms;          // evaluate_gemm_errors (emulated rows are used)
  std::span<const GemmLayer> layers;       // pair_gemm_operands: the complete (step, layer)s
  std::span<const PairingSkip> skipped;    // and those it could not pair: their GEMMs are not judged
  std::vector<RunCandidate> candidates;       // the evaluated candidates; bf16 ones are ignored
  // Delayed candidates only: forecast_delayed_scaling of each format (matched by layer, role,
  // recipe spec and the role's FP8 type in the candidate's format). Empty: no forecast judged.
  std::span<const DelayedForecast> forecasts;
  // --price-as: the FLOPs of the GEMMs of a layer it prices are its target module's
  // (TargetPricing::gemm_flops); null: the captured layers' own.
  const TargetPricing* pricing = nullptr;
};

// A layer of the index with its captured steps.
struct CapturedLayer {
  std::string name;
  std::vector<std::int64_t> steps;  // ascending
  bool incomplete = false;          // a step without a complete GemmLayer (LayerJudgement)
};

// The inputs looked up by what judging matches them on. Points into the RecommendationInputs.
struct RecommendationEvidence {
  const EvaluationIndex* index = nullptr;
  std::vector<CapturedLayer> layers;  // in EvaluationIndex::layers() order
  std::map<std::pair<std::int64_t, std::string>, const GemmLayer*> complete;  // (step, layer)
  // layer -> its first complete step's pairing: the dims of its GEMMs at the steps only a
  // training log covers.
  std::map<std::string, const GemmLayer*> complete_of_layer;
  std::map<std::pair<std::int64_t, std::string>, const PairingSkip*> skipped;  // (step, layer)
  // (step, layer, gemm, recipe spec, format) -> the emulated GemmRow.
  std::map<std::tuple<std::int64_t, std::string, Gemm, std::string, TrainingFormat>, const GemmRow*> outputs;
  // (layer, role, recipe spec, FP8 type) -> the forecast.
  std::map<std::tuple<std::string, Role, std::string, Fp8Format>, const DelayedForecast*> forecasts;
  const TargetPricing* pricing = nullptr;
};
RecommendationEvidence gather_evidence(const RecommendationInputs& inputs);

// Why the layer cannot train in low precision under the candidate whatever its numbers, at the
// first captured step that shows it; "" when it can. Cited rules:
//  - Megatron does not run it through TE: the MoE router (core is_moe_router) under any recipe,
//    the LM head (is_lm_head) under any but MXFP8 (fp8_output_proj);
//  - TE's Linear, LayerNormLinear and LayerNormMLP raise (ValueError from TE 2.14, AssertionError
//    before) unless X's leading dims multiply to a multiple of 8 and its last dim is one of 16,
//    and W's [N, K] has N % 8 == 0 and K % 16 == 0 (transformer_engine/pytorch/utils.py
//    assert_dim_for_fp8_exec, under every recipe; GroupedLinear does not call it);
//  - the kind's shape_divisor (MXFP8 32, NVFP4 16) on both dims of X, W and dY's 2-D views: TE's
//    quantizer raises (csrc/quantizer.cpp create_tensor NVTE_CHECK).
// TE never runs such a GEMM in BF16 by itself: the module raises, so the plan keeps it BF16.
std::string forced_bf16(const RecommendationEvidence& evidence, const CapturedLayer& layer,
                        const RunCandidate& candidate);

// Every layer of the evidence judged under the candidate, in its order.
std::vector<LayerJudgement> judge_candidate(const RecommendationEvidence& evidence, const RunCandidate& candidate,
                                            const Policy& policy);

}  // namespace fp8a

#include "reports/layer_names.hpp"

#include <algorithm>
#include <map>
#include <string_view>

namespace fp8a {
namespace {

// Megatron-Core's linear modules inside a TransformerLayer.
constexpr std::string_view kMegatronSuffixes[] = {"self_attention.linear_qkv", "self_attention.linear_proj",
                                                  "mlp.linear_fc1", "mlp.linear_fc2"};

bool megatron_suffix(const std::string& suffix) {
  return std::find(std::begin(kMegatronSuffixes), std::end(kMegatronSuffixes), suffix) !=
         std::end(kMegatronSuffixes);
}

}  // namespace

MappedName megatron_module_path(const std::string& layer) {
  if (layer == "output_layer" || layer.ends_with(".output_layer")) return {"output_layer", false, ""};
  const auto s = split_transformer_layer(layer);
  if (!s) return {layer, true, "not a Megatron transformer-layer name; used as captured"};
  MappedName m{"decoder.layers." + std::to_string(s->index) + "." + s->suffix, false, ""};
  const bool decoder = s->start >= 8 && layer.compare(s->start - 8, 8, "decoder.") == 0;
  if (!megatron_suffix(s->suffix)) {
    m.guess = true;
    m.note = "'" + s->suffix + "' is not one of Megatron's linear modules; mapped by its layer index";
  } else if (!decoder) {
    m.guess = true;
    m.note = "captured without 'decoder.'; taken as Megatron's decoder.layers." + std::to_string(s->index);
  }
  return m;
}

MappedName nvdlfw_layer_name(const std::string& layer) {
  if (layer == "output_layer" || layer.ends_with(".output_layer"))
    return {"output_layer", true, "Megatron's LM head is not a TE module: TE's debug features never see it"};
  const auto s = split_transformer_layer(layer);
  if (!s) return {layer, true, "not a transformer-layer name; used as captured"};
  MappedName m{"decoder.layers." + std::to_string(s->index + 1) + "." + s->suffix, false,
               "layer_number " + std::to_string(s->index + 1) +
                   ": the captured index + 1, plus the stage's first layer under pipeline parallelism"};
  if (!megatron_suffix(s->suffix)) {
    m.guess = true;
    m.note += "; '" + s->suffix + "' is not one of Megatron's linear modules";
  }
  return m;
}

const RunCandidate* chosen_candidate(const Recommendation& rec) {
  if (!rec.chosen || *rec.chosen >= rec.candidates.size()) return nullptr;
  return &rec.candidates[*rec.chosen].candidate;
}

bool plan_all_bf16(const Recommendation& rec) {
  return chosen_candidate(rec) != nullptr &&
         std::none_of(rec.layers.begin(), rec.layers.end(), [](const LayerDecision& l) {
           return std::any_of(l.gemms.begin(), l.gemms.end(),
                              [](const GemmDecision& g) { return g.precision == Precision::kFp8; });
         });
}

bool is_fallback(const GemmDecision& gemm) { return gemm.judged && gemm.precision == Precision::kBf16; }

bool has_bf16_gemm(const LayerDecision& layer) {
  return std::any_of(layer.gemms.begin(), layer.gemms.end(), is_fallback);
}

std::string fallback_gemm_list(const LayerDecision& layer) {
  std::string s;
  for (const GemmDecision& g : layer.gemms)
    if (is_fallback(g)) s += std::string(s.empty() ? "" : ",") + gemm_name(g.gemm);
  return s;
}

bool whole_layer_fallback(const LayerDecision& layer) {
  return has_bf16_gemm(layer) &&
         std::none_of(layer.gemms.begin(), layer.gemms.end(),
                      [](const GemmDecision& g) { return g.judged && g.precision != Precision::kBf16; });
}

std::string first_bf16_reason(const LayerDecision& layer) {
  for (const GemmDecision& g : layer.gemms)
    if (is_fallback(g) && !g.reason.empty()) return g.reason;
  return "";
}

FirstLastBf16 first_last_bf16(const Recommendation& rec) {
  std::map<int, bool> all_bf16;  // index -> every captured module of it is all-BF16
  for (const LayerDecision& l : rec.layers) {
    const auto i = transformer_layer_index(l.layer);
    if (!i) continue;
    const auto [it, fresh] = all_bf16.emplace(*i, true);
    it->second = it->second && whole_layer_fallback(l);
  }
  FirstLastBf16 r;
  if (all_bf16.empty()) return r;
  r.last_index = all_bf16.rbegin()->first;
  for (int i = 0;; ++i) {
    const auto it = all_bf16.find(i);
    if (it == all_bf16.end() || !it->second) break;
    ++r.at_start;
  }
  for (int i = r.last_index; i >= 0; --i) {
    const auto it = all_bf16.find(i);
    if (it == all_bf16.end() || !it->second) break;
    ++r.at_end;
  }
  // Every captured layer BF16 and contiguous from 0: the end run repeats the start run.
  if (r.at_start == r.last_index + 1) r.at_end = 0;
  return r;
}

}  // namespace fp8a

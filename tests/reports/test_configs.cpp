// The consumer configs (megatron_args.txt, te_precision_config.yaml, nvdlfw_inspect.yaml) from
// hand-built Recommendations: golden files in tests/golden/reports/, which the consumers' own
// parsers load in the `consumers` ctests (tests/consumers/run_checks.py golden_*).
// Refresh on purpose with FP8A_UPDATE_GOLDEN=1 and review the diff.
#include <doctest/doctest.h>
#include <fnmatch.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include "support/golden.hpp"
#include "support/recommendations.hpp"
#include "core/gpu_target.hpp"
#include "core/recipe_options.hpp"
#include "core/text.hpp"
#include "reports/advice_json.hpp"
#include "reports/answer_text.hpp"
#include "reports/consumers/consumer_plan.hpp"
#include "reports/consumers/layer_names.hpp"
#include "reports/name_text.hpp"
#include "reports/consumers/megatron_args.hpp"
#include "reports/consumers/megatron_bridge.hpp"
#include "reports/consumers/nvdlfw_inspect_yaml.hpp"
#include "reports/consumers/recipe_json.hpp"
#include "reports/consumers/te_precision_config.hpp"
#include "reports/consumers/te_snippet.hpp"
#include "reports/consumers/torchao_json.hpp"

namespace fs = std::filesystem;
using namespace fp8a;

namespace {

using fp8a::testing::check_golden;
using fp8a::testing::slurp;

// One layer: the precision of fprop, dgrad, wgrad ('f' FP8, 'b' BF16) and the worst margin of
// each (the judgement under the chosen candidate).
struct LayerSpec {
  std::string name;
  const char* plan;  // e.g. "ffb"
  double margins[3];
};

Recommendation make_rec(const std::string& recipe, TrainingFormat format, const std::vector<LayerSpec>& specs) {
  Recommendation rec;
  CandidatePlan cand;
  cand.candidate = {parse_recipe(recipe), format};
  const std::string cname = candidate_name(cand.candidate);
  for (const LayerSpec& s : specs) {
    LayerDecision d;
    d.layer = s.name;
    LayerJudgement j;
    j.layer = s.name;
    int bf16 = 0;
    for (int g = 0; g < 3; ++g) {
      const auto gemm = static_cast<Gemm>(g);
      const bool fp8 = s.plan[g] == 'f';
      bf16 += fp8 ? 0 : 1;
      GemmDecision& gd = d.gemms[static_cast<std::size_t>(g)];
      gd.gemm = gemm;
      gd.judged = true;
      gd.fp8_safe = fp8;
      gd.precision = fp8 ? Precision::kFp8 : Precision::kBf16;
      if (!fp8)
        gd.reason = std::string(gemm_name(gemm)) + " of " + s.name + ": gradient underflow 12.5 % under " + cname;
      else if (s.margins[g] < kSmallMargin)
        gd.reason = "kept FP8: margin " + std::to_string(s.margins[g]).substr(0, 4);
      GemmJudgement& gj = j.gemms[static_cast<std::size_t>(g)];
      gj.gemm = gemm;
      gj.judged = true;
      gj.fp8_safe = fp8;
      gj.steps = 2;
      gj.worst.passed = fp8;
      gj.worst.margin = s.margins[g];
      gj.worst.limiting = Criterion::kUnderflow;
    }
    d.fp8_safe = j.fp8_safe = bf16 == 0;
    d.precision = bf16 == 0 ? Precision::kFp8 : bf16 == 3 ? Precision::kBf16 : Precision::kMixed;
    rec.layers.push_back(d);
    cand.layers.push_back(j);
    cand.plan.push_back({d.gemms[0].precision, d.gemms[1].precision, d.gemms[2].precision});
  }
  rec.candidates.push_back(cand);
  rec.chosen = 0;
  rec.why = "the most GEMM FLOPs in FP8";
  rec.watch = watch_list(rec.candidates[0]);  // as recommend() makes it
  return rec;
}

// Layers 0 and 3 all BF16, the wgrad of layer 1's FC1 BF16, the rest FP8.
const std::vector<LayerSpec> kMixedLayers = {
    {"layers.0.self_attention.linear_qkv", "bbb", {-0.5, -0.2, -0.8}},
    {"layers.0.mlp.linear_fc2", "bbb", {-0.1, -0.1, -0.3}},
    {"layers.1.mlp.linear_fc1", "ffb", {0.6, 0.12, -0.4}},
    {"layers.2.self_attention.linear_proj", "fff", {0.9, 0.8, 0.7}},
    {"layers.3.mlp.linear_fc2", "bbb", {-0.2, -0.6, -0.9}},
};

Recommendation mixed_rec() { return make_rec("current", TrainingFormat::kHybrid, kMixedLayers); }
Recommendation delayed_rec() {
  return make_rec("delayed:history=1024:algo=max:margin=1", TrainingFormat::kHybrid, kMixedLayers);
}
Recommendation block_rec() {
  return make_rec("block:fp32", TrainingFormat::kE4M3,
                  {{"layers.0.self_attention.linear_qkv", "fff", {0.5, 0.4, 0.3}},
                   {"layers.1.mlp.linear_fc2", "fbf", {0.2, -0.3, 0.05}},
                   {"layers.3.mlp.linear_fc2", "fff", {0.9, 0.8, 0.1}}});
}

// Whole modules in BF16, the others FP8: DisableQuantizationLayer sections only.
Recommendation modules_rec() {
  return make_rec("current", TrainingFormat::kHybrid,
                  {{"decoder.layers.0.self_attention.linear_qkv", "bbb", {-0.5, -0.2, -0.8}},
                   {"decoder.layers.1.mlp.linear_fc2", "bbb", {-0.1, -0.1, -0.3}},
                   {"decoder.layers.2.mlp.linear_fc1", "fff", {0.3, 0.2, 0.4}},
                   {"decoder.layers.3.self_attention.linear_proj", "fff", {0.9, 0.15, 0.7}}});
}
// The chosen candidate keeps no GEMM in FP8: the answer "every GEMM in BF16".
Recommendation all_bf16_rec() {
  return make_rec("current", TrainingFormat::kHybrid,
                  {{"decoder.layers.0.self_attention.linear_qkv", "bbb", {-0.5, -0.2, -0.8}},
                   {"decoder.layers.1.mlp.linear_fc2", "bbb", {-0.1, -0.1, -0.3}}});
}

}  // namespace

TEST_CASE("captured layer names map to Megatron's and nvdlfw_inspect's, guesses marked") {
  CHECK(transformer_layer_index("layers.3.mlp.linear_fc2") == 3);
  CHECK(transformer_layer_index("module.decoder.layers.12.mlp.linear_fc1") == 12);
  CHECK_FALSE(transformer_layer_index("output_layer").has_value());
  CHECK_FALSE(transformer_layer_index("xlayers.3.fc").has_value());
  // A TE DumpTensors name: its Megatron module's index (layer_number 2 is index 1).
  CHECK(transformer_layer_index("model_module_module_decoder_layers_2_self_attention_linear_qkv") == 1);
  CHECK(megatron_name_of_te_dump("model_module_module_decoder_layers_2_self_attention_linear_qkv") ==
        "decoder.layers.1.self_attention.linear_qkv");
  CHECK_FALSE(transformer_layer_index("layers_2_fc1").has_value());
  // Issue 56 item 3: a dump of a module Megatron does not name (my_mlp): its '_'s may be '.'s. The
  // debug API's name is model.module.decoder.layers.2.my_mlp.linear_fc1, Megatron's path
  // decoder.layers.1.my_mlp.linear_fc1; the patterns match it whichever '_' was a '.'.
  const MappedName dump_path = megatron_module_path("model_module_decoder_layers_2_my_mlp_linear_fc1");
  CHECK(dump_path.name == "decoder.layers.1.my_mlp_linear_fc1");
  CHECK(dump_path.any_dot);
  CHECK(fnmatch_exact_glob(dump_path.name, dump_path.any_dot) == "decoder.layers.1.my?mlp?linear?fc1");
  const MappedName dump_nv = nvdlfw_layer_name("model_module_decoder_layers_2_my_mlp_linear_fc1");
  CHECK(dump_nv.name == "model_module_decoder_layers_2_my_mlp_linear_fc1");
  CHECK(dump_nv.any_dot);
  CHECK(python_suffix_regex(dump_nv.name, dump_nv.any_dot) ==
        "(^|\\.)model[._]module[._]decoder[._]layers[._]2[._]my[._]mlp[._]linear[._]fc1$");
  CHECK_FALSE(megatron_module_path("model.decoder.layers.2.my_mlp.linear_fc1").any_dot);  // a hook's name
  // A stack's layer: Megatron names it within its own model, the index counted from 0 there too.
  CHECK(megatron_module_path("model_module_language_model_decoder_layers_2_my_mlp_linear_fc1").name ==
        "decoder.layers.1.my_mlp_linear_fc1");
  const MappedName exact = megatron_module_path("module.decoder.layers.2.self_attention.linear_qkv");
  CHECK(exact.name == "decoder.layers.2.self_attention.linear_qkv");
  CHECK_FALSE(exact.guess);
  const MappedName bare = megatron_module_path("layers.2.mlp.linear_fc2");
  CHECK(bare.name == "decoder.layers.2.mlp.linear_fc2");
  CHECK(bare.guess);
  CHECK(megatron_module_path("model.layers.0.self_attn.q_proj").guess);
  CHECK(megatron_module_path("output_layer").name == "output_layer");
  const MappedName nv = nvdlfw_layer_name("layers.2.mlp.linear_fc2");
  CHECK(nv.name == "decoder.layers.3.mlp.linear_fc2");  // Megatron's layer_number: index + 1
  CHECK_FALSE(nv.guess);
  CHECK(nvdlfw_layer_name("layers.2.self_attn.q_proj").guess);
  // MoE: SequentialMLP's experts, TEGroupedMLP's grouped modules and the shared experts are
  // Megatron's linear modules; the router is not a TE module.
  for (const char* moe : {"decoder.layers.1.mlp.experts.local_experts.7.linear_fc1",
                          "decoder.layers.1.mlp.experts.linear_fc2", "decoder.layers.1.mlp.shared_experts.linear_fc1"}) {
    CHECK(megatron_module_path(moe).name == moe);
    CHECK_FALSE(megatron_module_path(moe).guess);
    CHECK_FALSE(nvdlfw_layer_name(moe).guess);
  }
  CHECK(megatron_module_path("decoder.layers.1.mlp.experts.local_experts.x.linear_fc1").guess);
  // An expert of TEGroupedMLP's grouped module, as fp8a_capture names it, is the module itself in
  // every scheme; "expert" children of other modules stay modules of their own.
  const MappedName grouped = megatron_module_path("module.decoder.layers.1.mlp.experts.linear_fc2.expert12");
  CHECK(grouped.name == "decoder.layers.1.mlp.experts.linear_fc2");
  CHECK_FALSE(grouped.guess);
  CHECK(nvdlfw_layer_name("decoder.layers.1.mlp.experts.linear_fc1.expert0").name ==
        "decoder.layers.2.mlp.experts.linear_fc1");
  CHECK(captured_name("decoder.layers.1.mlp.experts.linear_fc1.expert3").name == "decoder.layers.1.mlp.experts.linear_fc1");
  for (const char* own : {"decoder.layers.1.mlp.linear_fc1.expert3", "decoder.layers.1.mlp.experts.linear_fc1.expertx",
                          "decoder.layers.1.mlp.experts.linear_fc1.expert", "moe.expert3"})
    CHECK(captured_name(own).name == own);
  // Any expert index fp8a_capture can write (%d): a 7-digit one is an expert of the module too
  // (issue 56 item 7: it was a module of its own, planned under a name no module has).
  CHECK(captured_name("decoder.layers.1.mlp.experts.linear_fc1.expert1234567").name ==
        "decoder.layers.1.mlp.experts.linear_fc1");
  // TE DumpTensors' names (the debug API's, 1-based layer_number, '.' made '_') are Megatron's modules.
  CHECK(megatron_module_path("model_module_module_decoder_layers_1_self_attention_linear_qkv").name ==
        "decoder.layers.0.self_attention.linear_qkv");
  CHECK_FALSE(megatron_module_path("model_module_module_decoder_layers_1_self_attention_linear_qkv").guess);
  CHECK(nvdlfw_layer_name("model_decoder_layers_12_mlp_linear_fc1").name == "decoder.layers.12.mlp.linear_fc1");
  CHECK(megatron_module_path("model_language_model_decoder_layers_3_mlp_experts_local_experts_7_linear_fc2").name ==
        "decoder.layers.2.mlp.experts.local_experts.7.linear_fc2");
  CHECK(captured_name("model_module_encoder_layers_2_mlp_shared_experts_linear_fc1").name ==
        "encoder.layers.1.mlp.shared_experts.linear_fc1");
  for (const char* own : {"decoder_layers_1_mlp_linear_fc1", "model_decoder_layers_0_mlp_linear_fc1",
                          "model_decoder_layers_01_mlp_linear_fc1", "model_decoder_layers_1_mlp_linear_fc3",
                          "model_decoder_layers_1_mlp_experts_local_experts_x_linear_fc1", "model_layers_1_fc1",
                          "model_decoder_layers_1234567_mlp_linear_fc1"})
    CHECK(captured_name(own).name == own);
  const MappedName router = megatron_module_path("decoder.layers.1.mlp.router");
  CHECK(router.guess);
  CHECK(router.note == "Megatron's MoE router is not a TE module: its gating GEMM never runs in FP8, and no config "
                       "reaches it");
}

TEST_CASE("a GEMM with no operand captured is BF16 in the plan but no fallback") {
  Recommendation rec = make_rec("current", TrainingFormat::kHybrid,
                                {{"layers.0.mlp.linear_fc1", "bbb", {-1, -1, -1}},
                                 {"layers.1.mlp.linear_fc1", "fbb", {1, -1, -1}},
                                 {"layers.2.mlp.linear_fc1", "bbb", {-1, -1, -1}}});
  // layers.0: only fprop judged (BF16); layers.1: wgrad not judged; layers.2: nothing judged.
  rec.layers[0].gemms[1].judged = rec.layers[0].gemms[2].judged = false;
  rec.layers[1].gemms[2].judged = false;
  for (GemmDecision& g : rec.layers[2].gemms) g.judged = false;
  CHECK(whole_layer_fallback(rec.layers[0]));
  CHECK(fallback_gemm_list(rec.layers[0]) == "fprop");
  CHECK(fallback_gemm_list(rec.layers[1]) == "dgrad");
  CHECK_FALSE(has_bf16_gemm(rec.layers[2]));
  CHECK_FALSE(whole_layer_fallback(rec.layers[2]));
  CHECK(first_last_bf16(rec).at_start == 1);
  const auto nv = render_nvdlfw_inspect_yaml(plan_consumers(rec));
  REQUIRE(nv.has_value());
  CHECK(nv->contents.find("DisableQuantizationLayer") == std::string::npos);  // not every GEMM judged
  CHECK(nv->contents.find("gemms: [fprop]") != std::string::npos);
  CHECK(nv->contents.find("gemms: [dgrad]") != std::string::npos);
  CHECK(nv->contents.find("layers.3.mlp") == std::string::npos);  // layers.2, nothing judged
  CHECK(render_torchao_json(plan_consumers(rec)).note == "tensorwise, 2 modules kept high precision");
}

// The number of times `what` occurs in `text`.
std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST_CASE("two captured names of one module give one matcher and one nvdlfw section, BF16 where either is") {
  // The wrapper's copy is FP8, the plain one BF16: before, the first name's plan won alone.
  const Recommendation rec = make_rec("current", TrainingFormat::kHybrid,
                                      {{"module.decoder.layers.0.mlp.linear_fc1", "fff", {0.9, 0.9, 0.9}},
                                       {"decoder.layers.0.mlp.linear_fc1", "fbb", {0.9, -1, -1}},
                                       {"decoder.layers.1.mlp.linear_fc1", "fff", {0.9, 0.9, 0.9}}});
  const auto te = render_te_precision_config(plan_consumers(rec));
  REQUIRE(te.has_value());
  CHECK(count_of(te->contents, "bf16_decoder_layers_0_mlp_linear_fc1:") == 1);
  CHECK(count_of(te->contents, "pattern: \"decoder.layers.0.mlp.linear_fc1\"") == 1);
  CHECK(te->contents.find("2 captured layers are one module 'decoder.layers.0.mlp.linear_fc1' in "
                          "te_precision_config.yaml (module.decoder.layers.0.mlp.linear_fc1, "
                          "decoder.layers.0.mlp.linear_fc1): their plans differ") != std::string::npos);
  const auto nv = render_nvdlfw_inspect_yaml(plan_consumers(rec));
  REQUIRE(nv.has_value());
  CHECK(count_of(nv->contents, "layer_name_regex_pattern: '(^|\\.)decoder\\.layers\\.1\\.mlp\\.linear_fc1$'") == 1);
  CHECK(nv->contents.find("gemms: [dgrad, wgrad]") != std::string::npos);
  // Watched: the recommendation's five smallest margins (all 0.9, in layer order): the merged
  // section's four FP8 GEMMs and layers.1's fprop.
  CHECK(nv->note == "1 fallbacks, 2 layers watched");
}

TEST_CASE("two stacks of a multimodal model: one Megatron path, two nvdlfw sections, each its own plan") {
  // Megatron names each GPTModel's modules within it: the language and vision stacks' layer 0
  // are both decoder.layers.0.*, and the precision config cannot tell them apart; the debug API
  // names them from the root, so nvdlfw_inspect.yaml can.
  const Recommendation rec = make_rec("current", TrainingFormat::kE4M3,
                                      {{"language_model.decoder.layers.0.self_attention.linear_qkv", "fff", {0.9, 0.9, 0.9}},
                                       {"vision_model.decoder.layers.0.self_attention.linear_qkv", "fbb", {0.9, -1, -1}}});
  CHECK(megatron_module_path(rec.layers[0].layer).name == "decoder.layers.0.self_attention.linear_qkv");
  CHECK(megatron_module_path(rec.layers[1].layer).note.find("in the model 'vision_model'") != std::string::npos);
  CHECK(nvdlfw_layer_name(rec.layers[1].layer).name == "vision_model.decoder.layers.1.self_attention.linear_qkv");
  CHECK(nvdlfw_layer_name("module.module.language_model.decoder.layers.0.mlp.linear_fc1").name ==
        "language_model.decoder.layers.1.mlp.linear_fc1");  // DDP and Float16Module left out
  CHECK(megatron_module_path("encoder.layers.2.mlp.linear_fc1").name == "encoder.layers.2.mlp.linear_fc1");
  const auto te = render_te_precision_config(plan_consumers(rec));
  REQUIRE(te.has_value());
  CHECK(count_of(te->contents, "config: bf16\n") == 1);
  CHECK(te->contents.find("2 captured layers are one module 'decoder.layers.0.self_attention.linear_qkv'") !=
        std::string::npos);
  const auto nv = render_nvdlfw_inspect_yaml(plan_consumers(rec));
  REQUIRE(nv.has_value());
  CHECK(nv->contents.find("'(^|\\.)vision_model\\.decoder\\.layers\\.1\\.self_attention\\.linear_qkv$'") !=
        std::string::npos);
  CHECK(nv->contents.find("gemms: [dgrad, wgrad]") != std::string::npos);
  CHECK(nv->note.starts_with("1 fallbacks"));  // before: merged into the language stack's section, 0
}

// TEGroupedMLP's experts, captured one by one, are one module for Megatron: the matcher says which
// expert sends it to BF16, and why.
TEST_CASE("a grouped module's experts: one matcher, BF16 for the expert that needs it, named") {
  Recommendation rec = make_rec("current", TrainingFormat::kHybrid,
                                {{"decoder.layers.0.mlp.experts.linear_fc1.expert0", "fff", {0.9, 0.9, 0.9}},
                                 {"decoder.layers.0.mlp.experts.linear_fc1.expert1", "bbf", {-1, -1, 0.9}},
                                 {"decoder.layers.0.mlp.experts.linear_fc2.expert0", "fff", {0.9, 0.9, 0.9}}});
  ModulePlan mp;
  mp.modules = {{rec.layers[0].layer, 0, ""}, {rec.layers[1].layer, std::nullopt, "fprop: weight underflow 99 %"},
                {rec.layers[2].layer, 0, ""}};
  rec.module_plan = mp;
  const auto te = render_te_precision_config(plan_consumers(rec));
  REQUIRE(te.has_value());
  CHECK(count_of(te->contents, "config: bf16\n") == 1);
  CHECK(te->contents.find("pattern: \"decoder.layers.0.mlp.experts.linear_fc1\"\n") != std::string::npos);
  CHECK(te->contents.find("# decoder.layers.0.mlp.experts.linear_fc1: BF16, its captured layers are planned "
                          "differently; decoder.layers.0.mlp.experts.linear_fc1.expert1: fprop: weight underflow 99 %") !=
        std::string::npos);
  CHECK(te->contents.find("linear_fc2") == std::string::npos);  // all FP8: the rest matcher
}

// The answer folds a grouped module's sibling fallbacks into one line per module and GEMM.
TEST_CASE("the answer's BF16 list: a grouped module's sibling fallbacks, one line per GEMM") {
  const std::string m = "decoder.layers.0.mlp.experts.linear_fc1";
  Recommendation rec = make_rec("current", TrainingFormat::kHybrid,
                                {{m + ".expert0", "bff", {-1, 0.9, 0.9}},
                                 {m + ".expert1", "bff", {-1, 0.9, 0.9}},
                                 {m + ".expert2", "bff", {-1, 0.9, 0.9}},
                                 {"decoder.layers.0.mlp.linear_fc2", "fbf", {0.9, -1, 0.9}}});
  const std::string sibling = "BF16 with its grouped module, for " + m + ".expert1 fprop: underflow";
  CandidatePlan& c = rec.candidates[0];
  c.grouped.assign(4, {});
  for (std::size_t li : {0, 2}) {
    c.grouped[li][0] = sibling;
    rec.layers[li].gemms[0].reason = sibling;
  }
  const PlanFallbacks f = plan_fallbacks(rec);
  CHECK(f.bf16_gemms == 4);
  CHECK(f.bf16 == std::vector<std::string>{m + ".expert{0,2} fprop: " + sibling,
                                           rec.layers[1].layer + " fprop: " + rec.layers[1].gemms[0].reason,
                                           "decoder.layers.0.mlp.linear_fc2 dgrad: " + rec.layers[3].gemms[1].reason});
}

TEST_CASE("a name selects only its own module: proj is not out_proj, layers.0 is layers.00's module") {
  const Recommendation rec = make_rec("current", TrainingFormat::kHybrid,
                                      {{"proj", "bbb", {-1, -1, -1}},
                                       {"out_proj", "fff", {0.9, 0.9, 0.9}},
                                       {"\xEF\xBB\xBFx", "bbb", {-1, -1, -1}},
                                       {"\xE2\x80\xA8x", "fff", {0.9, 0.9, 0.9}},
                                       {"layers.00.mlp.linear_fc1", "bff", {-1, 0.9, 0.9}},
                                       {"layers.0.mlp.linear_fc1", "ffb", {0.9, 0.9, -1}}});
  const auto te = render_te_precision_config(plan_consumers(rec));
  REQUIRE(te.has_value());
  const YAML::Node doc = YAML::Load(te->contents);
  std::vector<std::string> patterns;
  for (const auto& m : doc["matchers"]) patterns.push_back(m.second["pattern"].as<std::string>());
  // Read back: the exact names (the BOM itself, not a ? that also matches the U+2028 twin), and
  // layers.0/layers.00 as one module, BF16 in every GEMM either plan keeps BF16.
  CHECK(patterns == std::vector<std::string>{"proj", "\xEF\xBB\xBFx", "decoder.layers.0.mlp.linear_fc1", "*"});
  CHECK(te->contents.find("pattern: \"\\ufeffx\"") != std::string::npos);  // escaped in the file
  CHECK(te->contents.find("their plans differ, so each GEMM that any of them keeps in BF16 is BF16 here") !=
        std::string::npos);
  const auto nv = render_nvdlfw_inspect_yaml(plan_consumers(rec));
  REQUIRE(nv.has_value());
  CHECK(nv->contents.find("'(^|\\.)proj$'") != std::string::npos);
  CHECK(nv->contents.find("gemms: [fprop, wgrad]") != std::string::npos);  // the union of both plans
  const std::string torchao = render_torchao_json(plan_consumers(rec)).contents;
  CHECK(torchao.find("fqn == f or fqn.endswith('.' + f)") != std::string::npos);
}

TEST_CASE("first/last BF16 runs count whole captured layers from both ends") {
  const FirstLastBf16 m = first_last_bf16(mixed_rec());
  CHECK(m.at_start == 1);
  CHECK(m.at_end == 1);
  CHECK(m.last_index == 3);
  const FirstLastBf16 b = first_last_bf16(block_rec());
  CHECK(b.at_start == 0);
  CHECK(b.at_end == 0);
}

TEST_CASE("megatron_args.txt: the mixed, delayed and block plans match their golden files") {
  const Artifact mixed = render_megatron_args(plan_consumers(mixed_rec()));
  CHECK(mixed.name == "megatron_args.txt");
  CHECK(mixed.note == "--fp8-recipe tensorwise --fp8-format hybrid --first-last-layers-bf16 --te-precision-config-file");
  check_golden("megatron_args_mixed.txt", mixed.contents);
  const Artifact delayed = render_megatron_args(plan_consumers(delayed_rec()));
  CHECK(delayed.contents.find("\n--first-last-layers-bf16") == std::string::npos);
  check_golden("megatron_args_delayed.txt", delayed.contents);
  check_golden("megatron_args_block.txt", render_megatron_args(plan_consumers(block_rec())).contents);
  Recommendation none;
  none.why = "no candidate";
  const Artifact empty = render_megatron_args(plan_consumers(none));
  CHECK(empty.note == "no FP8 candidate");
  CHECK(empty.contents.find("\n--") == std::string::npos);
}

TEST_CASE("te_precision_config.yaml: BF16 matchers, the recipe's config unless delayed") {
  const auto mixed = render_te_precision_config(plan_consumers(mixed_rec()));
  REQUIRE(mixed.has_value());
  CHECK(mixed->name == "te_precision_config.yaml");
  CHECK(mixed->note == "4 BF16 matchers");
  check_golden("te_precision_config_mixed.yaml", mixed->contents);
  const auto delayed = render_te_precision_config(plan_consumers(delayed_rec()));
  REQUIRE(delayed.has_value());
  CHECK(delayed->contents.find("delayed") != std::string::npos);  // only in the comments
  CHECK(delayed->contents.find("fp8_quantization_recipe") == std::string::npos);
  check_golden("te_precision_config_delayed.yaml", delayed->contents);
  const auto block = render_te_precision_config(plan_consumers(block_rec()));
  REQUIRE(block.has_value());
  check_golden("te_precision_config_block.yaml", block->contents);
  // Delayed with nothing in BF16: nothing to say, and why.
  std::string why;
  const Recommendation all_fp8_delayed =
      make_rec("delayed", TrainingFormat::kHybrid, {{"layers.0.mlp.linear_fc1", "fff", {1, 1, 1}}});
  CHECK_FALSE(render_te_precision_config(plan_consumers(all_fp8_delayed), &why).has_value());
  CHECK(why.find("cannot express delayed scaling") != std::string::npos);
  CHECK_FALSE(render_te_precision_config(plan_consumers(Recommendation{}), &why).has_value());
  CHECK(why.find("no FP8 candidate") != std::string::npos);
}

TEST_CASE("te_precision_config.yaml: the per-module plan, each module on its recipe or BF16") {
  Recommendation rec = mixed_rec();
  CandidatePlan mx, block;
  mx.candidate = {parse_recipe("mxfp8"), TrainingFormat::kE4M3};
  block.candidate = {parse_recipe("block"), TrainingFormat::kHybrid};
  rec.candidates.push_back(mx);
  rec.candidates.push_back(block);
  ModulePlan mp;
  mp.base = 0;
  mp.modules = {{"layers.0.self_attention.linear_qkv", 1, "dgrad: underflow 12.5 % under current/hybrid; mxfp8/e4m3 passes all its GEMMs (risk 1.100)"},
                {"layers.0.mlp.linear_fc2", std::nullopt, "no per-module recipe passes all its GEMMs (3 tried); dgrad: underflow"},
                {"layers.1.mlp.linear_fc1", 2, "wgrad: underflow 12.5 % under current/hybrid; block/hybrid passes all its GEMMs (risk 0.900)"},
                {"layers.2.self_attention.linear_proj", 0, ""},
                {"layers.3.mlp.linear_fc2", 1, "fprop: underflow; mxfp8/e4m3 passes all its GEMMs (risk 2.000)"}};
  mp.switched = 3;
  mp.bf16 = 1;
  rec.module_plan = mp;
  const auto te = render_te_precision_config(plan_consumers(rec));
  REQUIRE(te.has_value());
  CHECK(te->note == "4 module matchers");
  check_golden("te_precision_config_modules.yaml", te->contents);
  // A base other than the chosen recipe (delayed chosen): the BF16 fallbacks alone, as before.
  Recommendation delayed = delayed_rec();
  delayed.candidates.push_back(mx);
  mp.base = 1;
  delayed.module_plan = mp;
  const auto d = render_te_precision_config(plan_consumers(delayed));
  REQUIRE(d.has_value());
  CHECK(d->contents == render_te_precision_config(plan_consumers(delayed_rec()))->contents);
}

TEST_CASE("module_plan's layer names are written lossless, as every other name field") {
  // A real backslash: raw, "layers.0.\\x41" reads back (utf8_lossless_decode) as the other layer layers.0.A.
  Recommendation rec = make_rec("current", TrainingFormat::kHybrid,
                                {{"layers.0.\\x41", "bbb", {-1, -1, -1}}, {"layers.0.A", "fff", {1, 1, 1}}});
  ModulePlan mp;
  mp.modules = {{"layers.0.\\x41", std::nullopt, "dgrad: underflow"}, {"layers.0.A", 0, ""}};
  rec.module_plan = mp;
  const auto doc = module_plan_json(rec);
  CHECK(doc["modules"][0]["layer"] == "layers.0.\\\\x41");
  CHECK(utf8_lossless_decode(doc["modules"][0]["layer"].get<std::string>()) == "layers.0.\\x41");
  CHECK(utf8_lossless_decode(doc["modules"][1]["layer"].get<std::string>()) == "layers.0.A");
}

TEST_CASE("nvdlfw_inspect.yaml: one section per layer, fallbacks and the riskiest FP8 GEMMs watched") {
  const auto mixed = render_nvdlfw_inspect_yaml(plan_consumers(mixed_rec()));
  REQUIRE(mixed.has_value());
  CHECK(mixed->name == "nvdlfw_inspect.yaml");
  // layers.1 fc1: wgrad BF16 and its dgrad (margin 0.12) watched in the same section.
  CHECK(mixed->note == "4 fallbacks, 2 layers watched");
  check_golden("nvdlfw_inspect_mixed.yaml", mixed->contents);
  const auto delayed = render_nvdlfw_inspect_yaml(plan_consumers(delayed_rec()));
  REQUIRE(delayed.has_value());
  CHECK(delayed->contents.find("overflows%") != std::string::npos);
  check_golden("nvdlfw_inspect_delayed.yaml", delayed->contents);
  const auto block = render_nvdlfw_inspect_yaml(plan_consumers(block_rec()));
  REQUIRE(block.has_value());
  CHECK(block->note == "1 fallbacks, 3 layers watched");  // the watch list's five GEMMs of three layers
  check_golden("nvdlfw_inspect_block.yaml", block->contents);
  const auto modules = render_nvdlfw_inspect_yaml(plan_consumers(modules_rec()));
  REQUIRE(modules.has_value());
  CHECK(modules->note == "2 fallbacks, 2 layers watched");
  check_golden("nvdlfw_inspect_modules.yaml", modules->contents);
  // For TE 2.4 (the oldest --te-version): DisableFP8GEMM/Layer, underflows% alone (TE's
  // debug features of 2.4 check it: tests/consumers run_checks.py te_oldest).
  Recommendation old = mixed_rec();
  old.te_version = kTeOldest;
  const auto mixed_old = render_nvdlfw_inspect_yaml(plan_consumers(old));
  REQUIRE(mixed_old.has_value());
  CHECK(mixed_old->contents.find("DisableFP8GEMM") != std::string::npos);
  CHECK(mixed_old->contents.find("DisableQuantizationGEMM:") == std::string::npos);
  CHECK(mixed_old->contents.find("DisableQuantizationLayer:") == std::string::npos);
  check_golden("nvdlfw_inspect_mixed_te2.4.yaml", mixed_old->contents);
  const auto all_bf16 = render_nvdlfw_inspect_yaml(plan_consumers(all_bf16_rec()));
  REQUIRE(all_bf16.has_value());
  CHECK(all_bf16->note == "every layer BF16");
  check_golden("nvdlfw_inspect_all_bf16.yaml", all_bf16->contents);
  std::string why;
  CHECK_FALSE(render_nvdlfw_inspect_yaml(plan_consumers(Recommendation{}), &why).has_value());
  CHECK(why.find("no FP8 candidate") != std::string::npos);
}

// megatron_bridge.yaml: Bridge's own override code runs the goldens (tests/consumers run_checks.py
// bridge, with Megatron-Bridge 0.3.1 and 0.3.0 on Megatron-Core 0.16.1).
TEST_CASE("megatron_bridge.yaml: mixed_precision, quant_recipe and tensor_inspect for Bridge 0.3") {
  Recommendation mixed = mixed_rec();
  mixed.te_version = TeVersion{2, 12};
  const Artifact m = render_megatron_bridge(plan_consumers(mixed));
  CHECK(m.name == "megatron_bridge.yaml");
  CHECK(m.note == "fp8 hybrid, fp8_recipe tensorwise, first/last BF16, quant_recipe, tensor_inspect");
  check_golden("megatron_bridge_mixed_te2.12.yaml", m.contents);
  // For TE 2.13+ nvdlfw_inspect.yaml names features Bridge 0.3's TE (2.10-2.12) lacks: no
  // tensor_inspect, and the single-GEMM fallback is listed as not applied.
  const Artifact newest = render_megatron_bridge(plan_consumers(mixed_rec()));
  CHECK(newest.note == "fp8 hybrid, fp8_recipe tensorwise, first/last BF16, quant_recipe");
  CHECK(newest.contents.find("\ntensor_inspect:") == std::string::npos);
  CHECK(newest.contents.find("# BF16 fallbacks mixed_precision cannot express (quant_recipe keeps whole modules, "
                             "not applied without tensor_inspect):\n#   layers.1.mlp.linear_fc1 (wgrad)\n") !=
        std::string::npos);
  check_golden("megatron_bridge_mixed.yaml", newest.contents);
  Recommendation delayed = delayed_rec();
  delayed.te_version = TeVersion{2, 12};
  const Artifact d = render_megatron_bridge(plan_consumers(delayed));
  CHECK(d.contents.find("  first_last_layers_bf16: false\n") != std::string::npos);  // TransformerConfig raises
  CHECK(d.contents.find("  fp8_amax_history_len: 1024\n  fp8_amax_compute_algo: max\n") != std::string::npos);
  check_golden("megatron_bridge_delayed_te2.12.yaml", d.contents);
  check_golden("megatron_bridge_block.yaml", render_megatron_bridge(plan_consumers(block_rec())).contents);
  const Artifact bf16 = render_megatron_bridge(plan_consumers(all_bf16_rec()));
  CHECK(bf16.note == "BF16, fp8 null");
  CHECK(bf16.contents.find("  fp8: null\n") != std::string::npos);
  CHECK(bf16.contents.find("quant_recipe: null\n") != std::string::npos);
  CHECK(bf16.contents.find("tensor_inspect") == std::string::npos);
  check_golden("megatron_bridge_all_bf16.yaml", bf16.contents);
  Recommendation none;
  CHECK(render_megatron_bridge(plan_consumers(none))
            .contents.find("# No FP8 candidate was chosen: train in BF16 (fp8: null).\n") != std::string::npos);
}

// A captured name is hostile (docs/SECURITY.md): in megatron_args.txt and megatron_bridge.yaml it
// only ever lands in a comment, on one line, whatever bytes it brings.
TEST_CASE("megatron_args.txt and megatron_bridge.yaml: a name's line breaks add no flag or key") {
  for (const std::string& name : {std::string("layers.1.mlp.linear_fc1\n--fp8-format e4m3"),
                                 std::string("layers.1.mlp.linear_fc1\rtensor_inspect: null"),
                                 std::string("output_layer\nmodel:\n  quant_recipe: null")}) {
    INFO(name);
    Recommendation rec = make_rec("current", TrainingFormat::kHybrid,
                                  {{"layers.0.mlp.linear_fc2", "fff", {0.5, 0.4, 0.3}},
                                   {name, "ffb", {0.6, 0.12, -0.4}},
                                   {"layers.2.mlp.linear_fc2", "fff", {0.5, 0.4, 0.3}}});
    rec.te_version = TeVersion{2, 12};
    const std::string args = render_megatron_args(plan_consumers(rec)).contents;
    CHECK(args.find('\r') == std::string::npos);
    std::istringstream lines(args);
    std::vector<std::string> flags;
    for (std::string line; std::getline(lines, line);) {
      CHECK((line.starts_with("# ") || line.starts_with("--")));
      if (line.starts_with("--")) flags.push_back(line);
    }
    CHECK(flags == std::vector<std::string>{"--fp8-format hybrid", "--fp8-recipe tensorwise",
                                            "--te-precision-config-file te_precision_config.yaml"});
    const std::string bridge = render_megatron_bridge(plan_consumers(rec)).contents;
    CHECK(bridge.find('\r') == std::string::npos);
    const YAML::Node y = YAML::Load(bridge);
    std::vector<std::string> keys;
    for (const auto& kv : y) keys.push_back(kv.first.as<std::string>());
    CHECK(keys == std::vector<std::string>{"mixed_precision", "model", "tensor_inspect"});
    CHECK(y["model"].size() == 1);
    CHECK(y["model"]["quant_recipe"]["recipe_path"].as<std::string>() == "te_precision_config.yaml");
    CHECK(y["tensor_inspect"]["features"].as<std::string>() == "nvdlfw_inspect.yaml");
  }
}

TEST_CASE("current:pow2 is TE's environment variable in megatron_args.txt and te_precision_config.yaml") {
  // TE's Linear modules take the power-of-two choice from NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES
  // at import (module/linear.py _customize_quantizers_float8_current_scaling), not from the field.
  const Recommendation rec = make_rec("current:pow2", TrainingFormat::kHybrid, kMixedLayers);
  const std::string env = "NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES=1";
  CHECK(render_megatron_args(plan_consumers(rec)).contents.find(env) != std::string::npos);
  const auto te = render_te_precision_config(plan_consumers(rec));
  REQUIRE(te.has_value());
  CHECK(te->contents.find(env) != std::string::npos);
  CHECK(render_megatron_args(plan_consumers(mixed_rec())).contents.find(env) == std::string::npos);
}

// Megatron's LM head is a ColumnParallelLinear (gpt_model.py), FP8 only through --fp8-output-proj
// under mxfp8 (fp8_utils.is_mxfp8_output_proj_active); Megatron's own parser takes the flag
// (tests/consumers samples/megatron_args/good_output_proj.txt).
TEST_CASE("the LM head: --fp8-output-proj under mxfp8, else said to train BF16") {
  const std::vector<LayerSpec> head = {{"layers.0.mlp.linear_fc1", "fff", {0.5, 0.4, 0.3}},
                                       {"output_layer", "fff", {0.5, 0.4, 0.3}}};
  const Artifact mx = render_megatron_args(plan_consumers(make_rec("mxfp8", TrainingFormat::kE4M3, head)));
  CHECK(mx.contents.find("\n--fp8-output-proj\n") != std::string::npos);
  CHECK(mx.note.find("--fp8-output-proj") != std::string::npos);
  const Artifact cur = render_megatron_args(plan_consumers(make_rec("current", TrainingFormat::kHybrid, head)));
  CHECK(cur.contents.find("--fp8-output-proj\n") == std::string::npos);
  CHECK(cur.contents.find("# The plan keeps the LM head (output_layer) in FP8, but Megatron's output_layer is not a\n"
                          "# TE module: it trains in BF16 under tensorwise") != std::string::npos);
  const auto te = render_te_precision_config(plan_consumers(make_rec("current", TrainingFormat::kHybrid, head)));
  REQUIRE(te.has_value());
  CHECK(te->contents.find("# output_layer (Megatron's LM head) is not a TE module") != std::string::npos);
  // Without an LM head among the captures: neither says a word about it.
  CHECK(render_megatron_args(plan_consumers(mixed_rec())).contents.find("LM head") == std::string::npos);
}

// te_snippet.py by --te-version; TE's own code runs the goldens (tests/consumers run_checks.py
// te_snippet on TE 2.20, te_oldest on TE 2.4).
TEST_CASE("te_snippet.py: te.autocast from TE 2.9, te.fp8_autocast before; BF16 plans no autocast") {
  const Artifact block = render_te_snippet(plan_consumers(block_rec()));
  CHECK(block.note == "te.autocast, Float8BlockScaling");
  CHECK(block.contents.find("with te.autocast(enabled=True, recipe=fp8_recipe):") != std::string::npos);
  check_golden("te_snippet_block.py", block.contents);
  Recommendation old = block_rec();
  old.te_version = kTeOldest;
  const Artifact block_old = render_te_snippet(plan_consumers(old));
  CHECK(block_old.note == "te.fp8_autocast, Float8BlockScaling");
  check_golden("te_snippet_block_te2.4.py", block_old.contents);
  check_golden("te_snippet_delayed.py", render_te_snippet(plan_consumers(delayed_rec())).contents);
  const Artifact bf16 = render_te_snippet(plan_consumers(all_bf16_rec()));
  CHECK(bf16.note == "BF16, no autocast");
  CHECK(bf16.contents.find("with te.") == std::string::npos);
  check_golden("te_snippet_all_bf16.py", bf16.contents);
}

TEST_CASE("a plan that keeps no GEMM in FP8: every config trains BF16, uncaptured modules too") {
  const Recommendation rec = all_bf16_rec();
  CHECK(plan_all_bf16(rec));
  CHECK_FALSE(plan_all_bf16(mixed_rec()));
  CHECK_FALSE(plan_all_bf16(Recommendation{}));  // no candidate: the files say so their own way
  const Artifact args = render_megatron_args(plan_consumers(rec));
  CHECK(args.contents.find("\n--") == std::string::npos);  // comments only, no flag
  CHECK(args.note == "no FP8 flags: every GEMM BF16");
  check_golden("megatron_args_all_bf16.txt", args.contents);
  const auto te = render_te_precision_config(plan_consumers(rec));
  REQUIRE(te.has_value());
  CHECK(te->contents.find("fp8_quantization_recipe") == std::string::npos);
  CHECK(te->note == "every module BF16");
  check_golden("te_precision_config_all_bf16.yaml", te->contents);
  const Artifact ao = render_torchao_json(plan_consumers(rec));
  CHECK(ao.contents.find("\"recipe_name\": null") != std::string::npos);
  check_golden("torchao_all_bf16.json", ao.contents);
}

TEST_CASE("torchao.json: the closest torchao recipe and the modules kept in high precision") {
  const Artifact mixed = render_torchao_json(plan_consumers(mixed_rec()));
  CHECK(mixed.name == "torchao.json");
  CHECK(mixed.note == "tensorwise, 4 modules kept high precision");
  check_golden("torchao_mixed.json", mixed.contents);
  const Artifact delayed = render_torchao_json(plan_consumers(delayed_rec()));
  CHECK(delayed.note == "none, 0 modules kept high precision");
  check_golden("torchao_delayed.json", delayed.contents);
  const Artifact block = render_torchao_json(plan_consumers(block_rec()));
  CHECK(block.note == "rowwise, 1 modules kept high precision");
  check_golden("torchao_block.json", block.contents);
  // Only a wgrad in BF16 under block scaling: torchao's grad-weight GEMM in high precision instead.
  const Artifact gw = render_torchao_json(plan_consumers(make_rec("block", TrainingFormat::kHybrid,
                                                   {{"layers.0.mlp.linear_fc1", "ffb", {0.5, 0.5, -0.1}},
                                                    {"layers.1.mlp.linear_fc2", "bbb", {-1, -1, -1}},
                                                    {"layers.2.mlp.linear_fc2", "fff", {1, 1, 1}}})));
  CHECK(gw.note == "rowwise_with_gw_hp, 1 modules kept high precision");
  check_golden("torchao_block_gw_hp.json", gw.contents);
  CHECK(render_torchao_json(plan_consumers(Recommendation{})).contents.find("no FP8 candidate") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Issue 36 item 6: every captured layer's plan reaches exactly its own module in every config,
// over generated name families. Each consumer's matching is modelled here as the consumer does it
// (Megatron: fnmatch of a matcher's pattern on the model-relative path, the first match wins;
// nvdlfw_inspect: re.search of each section's layer_name_regex_pattern on the debug API's name,
// "model." + the attribute path with layer_number = index + 1; torchao: the module_filter_fn
// torchao.json spells), against the module names each consumer would see for the captured layers.
// ---------------------------------------------------------------------------------------------
namespace {

// A name family: the captured layer names (one model's or two stacks').
struct NameFamily {
  std::string what;
  std::vector<std::string> layers;
};

std::vector<NameFamily> name_families() {
  const std::vector<std::string> mods = {"self_attention.linear_qkv", "self_attention.linear_proj", "mlp.linear_fc1",
                                         "mlp.linear_fc2"};
  const auto stack = [&](const std::string& prefix, std::vector<int> indices) {
    std::vector<std::string> v;
    for (int i : indices)
      for (const std::string& m : mods) v.push_back(prefix + "layers." + std::to_string(i) + "." + m);
    return v;
  };
  std::vector<NameFamily> f;
  f.push_back({"plain Megatron", stack("decoder.", {0, 1, 2, 3})});
  f.push_back({"DDP and Float16Module", stack("module.module.decoder.", {0, 1, 2})});
  auto two = stack("language_model.decoder.", {0, 1});
  for (auto& n : stack("vision_model.decoder.", {0, 1})) two.push_back(n);
  f.push_back({"two stacks", two});
  auto t5 = stack("encoder.", {0, 1});
  for (auto& n : stack("decoder.", {0, 1})) t5.push_back(n);
  f.push_back({"encoder-decoder", t5});
  f.push_back({"indices 1 and 10-12", stack("decoder.", {1, 10, 11, 12})});
  f.push_back({"suffix-alike", {"proj", "out_proj", "attn.proj", "attn.out_proj", "fc", "fc1"}});
  std::vector<std::string> experts;
  for (int e = 0; e < 4; ++e)
    experts.push_back("decoder.layers.0.mlp.experts.local_experts." + std::to_string(e) + ".linear_fc1");
  experts.push_back("decoder.layers.0.mlp.shared_experts.linear_fc1");
  experts.push_back("decoder.layers.0.mlp.router");
  f.push_back({"MoE sequential experts", experts});
  // TEGroupedMLP's grouped modules, captured per expert (python/fp8a_capture.py): one module each.
  std::vector<std::string> grouped;
  for (const char* fc : {"linear_fc1", "linear_fc2"})
    for (int e = 0; e < 3; ++e)
      grouped.push_back("decoder.layers.1.mlp.experts." + std::string(fc) + ".expert" + std::to_string(e));
  grouped.push_back("decoder.layers.1.mlp.shared_experts.linear_fc1");
  f.push_back({"MoE grouped experts", grouped});
  // TE DumpTensors' file names of a wrapped Megatron model (layer_number 1-based, '.' made '_').
  std::vector<std::string> dumps;
  for (int n = 1; n <= 3; ++n)
    for (const char* m : {"self_attention_linear_qkv", "mlp_linear_fc1", "mlp_linear_fc2"})
      dumps.push_back("model_module_module_decoder_layers_" + std::to_string(n) + "_" + m);
  f.push_back({"TE dump names", dumps});
  return f;
}

// A plan per layer from a seed: "fff", "bbb", "ffb", "bff" ... (each GEMM FP8 or BF16).
std::vector<LayerSpec> random_plans(const std::vector<std::string>& names, unsigned seed) {
  std::vector<LayerSpec> specs;
  unsigned x = seed * 2654435761u + 1;
  for (const std::string& n : names) {
    static const char* kPlans[] = {"fff", "fff", "bbb", "ffb", "bff", "fbb"};
    x = x * 1103515245u + 12345u;
    specs.push_back({n, kPlans[(x >> 16) % 6], {0.5, 0.5, 0.5}});
  }
  return specs;
}

bool fallback(const LayerSpec& s, int g) { return s.plan[g] == 'b'; }

// The module a captured name is in the model: an expert "<...>.mlp.experts.linear_fcN.expert<i>" of
// a grouped module (TE GroupedLinear) is that module, which has no child per expert.
// TE DumpTensors' name of a Megatron module (the debug API's "model." + path, layer_number
// 1-based, '.' made '_') is that module, 0-based.
std::string model_module(const std::string& captured) {
  static const std::regex kExpert(R"((.*\.mlp\.experts\.linear_fc[12])\.expert[0-9]+)");
  static const std::regex kDump(
      R"(model_(?:module_)*decoder_layers_([1-9][0-9]*)_(self_attention|mlp)_(linear_qkv|linear_proj|linear_fc1|linear_fc2))");
  std::smatch m;
  if (std::regex_match(captured, m, kExpert)) return m[1].str();
  if (std::regex_match(captured, m, kDump))
    return "decoder.layers." + std::to_string(std::stoi(m[1].str()) - 1) + "." + m[2].str() + "." + m[3].str();
  return captured;
}

// Python's re.search of a pattern as nvdlfw_inspect.yaml writes it, by std::regex (ECMAScript):
// the patterns use only (^|\.), \-escapes of . and the other metacharacters, and $.
bool python_search(const std::string& pattern, const std::string& name) {
  return std::regex_search(name, std::regex(pattern));
}

}  // namespace

TEST_CASE("every captured layer's plan reaches exactly its own module, in every config, over name families") {
  for (const NameFamily& family : name_families())
    for (unsigned seed = 1; seed <= 6; ++seed) {
      INFO(family.what << ", seed " << seed);
      const std::vector<LayerSpec> specs = random_plans(family.layers, seed);
      const Recommendation rec = make_rec("current", TrainingFormat::kHybrid, specs);
      if (plan_all_bf16(rec)) continue;

      // Megatron: each GPTModel matches its own relative paths; a path several captured layers
      // share (two stacks) is one module, BF16 when any of them keeps a GEMM BF16.
      if (const auto te = render_te_precision_config(plan_consumers(rec))) {
        const YAML::Node doc = YAML::Load(te->contents);
        std::map<std::string, bool> want;  // module path -> BF16
        for (const LayerSpec& s : specs) {
          bool& b = want[megatron_module_path(s.name).name];
          b = b || fallback(s, 0) || fallback(s, 1) || fallback(s, 2);
        }
        want.emplace("decoder.layers.99.mlp.linear_fc1", false);  // a module never captured
        for (const auto& [path, bf16] : want) {
          INFO("te_precision_config, module " << path);
          std::string config;
          for (const auto& m : doc["matchers"])
            if (::fnmatch(m.second["pattern"].as<std::string>().c_str(), path.c_str(), 0) == 0) {
              config = m.second["config"].as<std::string>();
              break;
            }
          CHECK(config == (bf16 ? "bf16" : "tensorwise_hybrid"));
        }
      }

      // nvdlfw_inspect: the debug API's name of each captured module; at most one section matches
      // it, and it disables exactly the GEMMs the captured layers that are this module keep BF16.
      if (const auto nv = render_nvdlfw_inspect_yaml(plan_consumers(rec))) {
        const YAML::Node doc = YAML::Load(nv->contents);
        std::map<std::string, std::set<std::string>> want;  // debug-API name -> BF16 GEMMs
        for (const LayerSpec& s : specs) {
          const std::string module = model_module(s.name);
          const auto split = split_transformer_layer(module);
          std::string name = "model." + module;
          if (split)
            name = "model." + module.substr(0, split->start) + "layers." + std::to_string(split->index + 1) + "." +
                   split->suffix;
          auto& gemms = want[name];
          for (int g = 0; g < 3; ++g)
            if (fallback(s, g)) gemms.insert(gemm_name(static_cast<Gemm>(g)));
        }
        for (const auto& [name, gemms] : want) {
          INFO("nvdlfw_inspect, module " << name);
          std::set<std::string> disabled;
          int sections = 0;
          for (const auto& sec : doc) {
            if (!python_search(sec.second["layers"]["layer_name_regex_pattern"].as<std::string>(), name)) continue;
            ++sections;
            const YAML::Node te_node = sec.second["transformer_engine"];
            if (te_node["DisableQuantizationLayer"]) disabled = {"fprop", "dgrad", "wgrad"};
            if (te_node["DisableQuantizationGEMM"])
              for (const auto& g : te_node["DisableQuantizationGEMM"]["gemms"]) disabled.insert(g.as<std::string>());
          }
          CHECK(sections <= 1);
          // A module's own section may hold more BF16 GEMMs only when another captured name is the
          // same module for the debug API (merged, and said in the file).
          bool merged = false;
          for (const ModuleGroup& g : module_groups(rec.layers, nvdlfw_layer_name, NameMatch::kDotSuffix))
            merged = merged || g.layers.size() > 1;
          if (merged) CHECK(std::includes(disabled.begin(), disabled.end(), gemms.begin(), gemms.end()));
          else CHECK(disabled == gemms);
        }
      }

      // torchao: the FQNs are the captured names; a module stays high precision exactly when a
      // filter entry selects it, and an entry is a module that keeps a GEMM BF16.
      const nlohmann::json ao = nlohmann::json::parse(render_torchao_json(plan_consumers(rec)).contents);
      std::vector<std::string> filter = ao["filter_fqns"].get<std::vector<std::string>>();
      for (const LayerSpec& s : specs) {
        INFO("torchao, module " << s.name);
        const std::string fqn = model_module(s.name);
        const bool kept = std::any_of(filter.begin(), filter.end(), [&](const std::string& f) {
          return fqn == f || (fqn.size() > f.size() && fqn.ends_with("." + f));
        });
        const bool own = fallback(s, 0) || fallback(s, 1) || fallback(s, 2);
        if (own) CHECK(kept);
        // Kept without a fallback of its own only when an entry is a dot-suffix of its name.
        if (kept && !own)
          CHECK(std::any_of(filter.begin(), filter.end(), [&](const std::string& f) { return f != s.name; }));
        // Every filter entry is a module of the model, not an expert of one.
        for (const std::string& f : filter) CHECK(model_module(f) == f);
      }
    }
}

// Issue 38: every TE release --te-version accepts x every recipe option x every consumer file.
// The expectations are written here from TE's, Megatron's and torchao's sources, not read from
// core/recipe_options.hpp: which variable TE reads for an option and from which release, which
// field each file names, and that every file says the same sentence about what it cannot carry.
TEST_CASE("recipe options x TE releases x consumer files: one story, the same note, the same environment") {
  struct OptionCase {
    const char* spec;  // a recipe that sets the option
    const char* env;   // the variable TE reads for it ("" none)
    TeVersion since;   // the first release that reads it
    bool evaluation_only;
    // Per file, what a field-carried option looks like there ("" none).
    const char* megatron_args;
    const char* bridge;
    const char* recipe_json;
    const char* snippet;
  };
  const OptionCase cases[] = {
      {"current:pow2", "NVTE_FP8_CURRENT_SCALING_POWER_2_SCALES", {2, 8}, false, "", "", "", ""},
      {"current:eps=0.001", "", kTeOldest, false, "", "", "", ""},
      {"delayed:margin=2", "", kTeOldest, false, "\n--fp8-margin 2\n", "\n  fp8_margin: 2\n", "\"margin\": 2", "margin=2"},
      {"delayed:history=16", "", kTeOldest, false, "\n--fp8-amax-history-len 16\n", "\n  fp8_amax_history_len: 16\n",
       "\"amax_history_len\": 16", "amax_history_len=16"},
      {"delayed:algo=most_recent", "", kTeOldest, false, "\n--fp8-amax-compute-algo most_recent\n",
       "\n  fp8_amax_compute_algo: most_recent\n", "\"amax_compute_algo\": \"most_recent\"",
       "amax_compute_algo=\"most_recent\""},
      {"block:fp32", "NVTE_FP8_BLOCK_SCALING_FP32_SCALES", kTeOldest, false, "", "", "", ""},
      {"block:2d", "", kTeOldest, true, "", "", "", ""},
      {"mxfp8:floor", "", kTeOldest, true, "", "", "", ""},
      // NVFP4BlockScaling (TE 2.8+) reads its three switches from the environment only.
      {"nvfp4:no_rht", "NVTE_NVFP4_DISABLE_RHT", {2, 8}, false, "", "", "", ""},
      {"nvfp4:no_sr", "NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING", {2, 8}, false, "", "", "", ""},
      {"nvfp4:no_2d", "NVTE_NVFP4_DISABLE_2D_QUANTIZATION", {2, 8}, false, "", "", "", ""},
  };
  // Every option row is walked here: a row added without a case fails.
  CHECK(recipe_option_rows().size() == std::size(cases));
  int walked = 0;
  for (int minor = kTeOldest.minor; minor <= kTeNewest.minor; ++minor) {
    const TeVersion te{2, minor};
    for (const OptionCase& oc : cases) {
      const Recipe recipe = parse_recipe(oc.spec);
      const RecipeKind kind = recipe.kind;
      const std::string spec = recipe.spec();
      INFO("TE " << te_version_text(te) << ", " << spec);
      CHECK(te_cannot_train(recipe).empty() == !oc.evaluation_only);
      const bool release_lacks = te < oc.since;
      CHECK(te_release_cannot_train(recipe, te).empty() == !release_lacks);
      Recommendation rec = make_rec(oc.spec, TrainingFormat::kHybrid, kMixedLayers);
      rec.te_version = te;
      rec.gpu = find_gpu_target("b200");  // runs every kind: the walk is about the release alone
      RunInfo ri;
      ri.version = "0.1.0";
      std::map<std::string, std::string> files = {
          {"recipe.json", render_recipe_json(plan_consumers(rec), ri).contents},
          {"te_snippet.py", render_te_snippet(plan_consumers(rec)).contents},
          {"megatron_args.txt", render_megatron_args(plan_consumers(rec)).contents},
          {"megatron_bridge.yaml", render_megatron_bridge(plan_consumers(rec)).contents},
      };
      const auto pc = render_te_precision_config(plan_consumers(rec));
      REQUIRE(pc.has_value());  // the mixed plan keeps modules in BF16: always written
      files["te_precision_config.yaml"] = pc->contents;
      // torchao's float8 training has tensorwise (current) and rowwise (block) only.
      const bool torchao_has = kind == RecipeKind::kPerTensorCurrent || kind == RecipeKind::kBlock;
      if (torchao_has) files["torchao.json"] = render_torchao_json(plan_consumers(rec)).contents;
      const bool delayed = kind == RecipeKind::kPerTensorDelayed;
      for (const auto& [file, text] : files) {
        INFO(file);
        const bool te_file = file != "torchao.json";
        if (*oc.env != '\0') {
          // The variable, set to 1, in every TE file the release reads it in; nowhere else.
          const bool carries = te_file && !release_lacks;
          CHECK((text.find(std::string(oc.env) + "=1") != std::string::npos ||
                 text.find("\"" + std::string(oc.env) + "\": \"1\"") != std::string::npos ||
                 text.find("os.environ[\"" + std::string(oc.env) + "\"] = \"1\"") != std::string::npos) == carries);
          if (!te_file && !release_lacks)
            CHECK(text.find(spec + ": not expressible in torchao.json: ") != std::string::npos);
        }
        if (release_lacks)
          CHECK(text.find(spec + ": not expressible on TE " + te_version_text(te) + ": ") != std::string::npos);
        if (oc.evaluation_only || std::string(oc.spec).starts_with("current:eps"))
          CHECK(text.find(spec + ": " + (oc.evaluation_only ? te_cannot_train(recipe)
                                                            : std::string(te_file ? "Float8CurrentScaling takes no amax epsilon"
                                                                                  : "not expressible in torchao.json"))) !=
                std::string::npos);
      }
      if (delayed) {
        CHECK(files["megatron_args.txt"].find(oc.megatron_args) != std::string::npos);
        CHECK(files["megatron_bridge.yaml"].find(oc.bridge) != std::string::npos);
        CHECK(files["recipe.json"].find(oc.recipe_json) != std::string::npos);
        CHECK(files["te_snippet.py"].find(oc.snippet) != std::string::npos);
        CHECK(files["te_precision_config.yaml"].find("Delayed scaling, its margin and history cannot be expressed here") !=
              std::string::npos);
      }
      // The same sentences in every Megatron file: each comment line megatron_args.txt writes on
      // the recipe's options is in megatron_bridge.yaml and, but for delayed's fields,
      // te_precision_config.yaml too, and among recipe.json's notes or environment.
      const std::string& args = files["megatron_args.txt"];
      for (std::size_t at = args.find("# " + spec); at != std::string::npos; at = args.find("# " + spec, at + 1)) {
        const std::string line = args.substr(at, args.find('\n', at) - at);
        INFO(line);
        CHECK(files["megatron_bridge.yaml"].find(line) != std::string::npos);
        CHECK(files["te_precision_config.yaml"].find(line) != std::string::npos);
        if (*oc.env == '\0' || release_lacks) CHECK(files["recipe.json"].find(line.substr(2)) != std::string::npos);
        ++walked;
      }
    }
  }
  // The lines compared: pow2 (every release), eps, fp32, 2d, floor and NVFP4's three switches
  // (before 2.8 the release's lack, from 2.8 the environment) in each of 17 releases.
  CHECK(walked == 17 * 8);
}

// The consumer files format the one plan and decide nothing themselves: what the plan says (a
// note, TE's recipe, a fallback's reason) is what each file writes.
TEST_CASE("consumer files format the ConsumerPlan: change the plan, the files follow") {
  const Recommendation rec = make_rec("block:fp32", TrainingFormat::kHybrid, kMixedLayers);
  ConsumerPlan plan(rec);
  REQUIRE(plan.candidate != nullptr);
  CHECK(plan.fp8);
  CHECK(plan.fallbacks.size() == 4);  // layers 0 (two modules), 1 (wgrad), 3
  CHECK(plan.fallbacks[2].gemms == "wgrad");
  CHECK(plan.te.env == std::vector<std::pair<std::string, std::string>>{{"NVTE_FP8_BLOCK_SCALING_FP32_SCALES", "1"}});
  for (const Consumer c : {Consumer::kMegatronArgs, Consumer::kMegatronBridge, Consumer::kPrecisionConfig,
                           Consumer::kTorchao})
    plan.option_notes[static_cast<int>(c)] = {std::string("sentinel for ") + consumer_name(c)};
  plan.te.env = {{"SENTINEL_ENV", "7"}};
  CHECK(render_megatron_args(plan).contents.find("# sentinel for megatron_args.txt\n") != std::string::npos);
  CHECK(render_megatron_bridge(plan).contents.find("# sentinel for megatron_bridge.yaml\n") != std::string::npos);
  const auto pc = render_te_precision_config(plan);
  REQUIRE(pc.has_value());
  CHECK(pc->contents.find("# sentinel for te_precision_config.yaml\n") != std::string::npos);
  CHECK(render_torchao_json(plan).contents.find("; sentinel for torchao.json;") != std::string::npos);
  CHECK(render_te_snippet(plan).contents.find("os.environ[\"SENTINEL_ENV\"] = \"7\"") != std::string::npos);
  plan.megatron.uncovered = {"sentinel layer (fprop)"};
  CHECK(render_megatron_args(plan).contents.find("sentinel layer (fprop)") != std::string::npos);
}

// The formats, the rest of the option rows: TE's fp8_format, Megatron's --fp8-format, Bridge's
// fp8 and the per-module config's fp8_format carry both; torchao's tensorwise trains E5M2
// gradients (hybrid) and rowwise E4M3 (torchao/float8/config.py), and torchao.json says so of the
// other format.
TEST_CASE("formats x recipe kinds x consumer files: each file names the format or says it cannot") {
  for (const char* spec : {"current", "delayed", "block", "mxfp8"})
    for (const TrainingFormat f : {TrainingFormat::kE4M3, TrainingFormat::kHybrid}) {
      const std::string name = training_format_name(f);
      INFO(spec << "/" << name);
      const Recommendation rec = make_rec(spec, f, kMixedLayers);
      const ConsumerPlan plan(rec);
      CHECK(plan.te.fp8_format == (f == TrainingFormat::kE4M3 ? "E4M3" : "HYBRID"));
      CHECK(render_te_snippet(plan).contents.find("(fp8_format=Format." + plan.te.fp8_format) != std::string::npos);
      CHECK(render_megatron_args(plan).contents.find("\n--fp8-format " + name + "\n") != std::string::npos);
      CHECK(render_megatron_bridge(plan).contents.find("\n  fp8: " + name + "\n") != std::string::npos);
      const auto pc = render_te_precision_config(plan);
      REQUIRE(pc.has_value());
      const bool per_module = std::string(spec) != "delayed";
      CHECK((pc->contents.find("fp8_format: " + name + "\n") != std::string::npos) == per_module);
      const std::string torchao = render_torchao_json(plan).contents;
      const bool torchao_kind = std::string(spec) == "current" || std::string(spec) == "block";
      const bool torchao_trains = (std::string(spec) == "current") == (f == TrainingFormat::kHybrid);
      CHECK((torchao.find(name + ": not expressible in torchao.json: ") != std::string::npos) ==
            (torchao_kind && !torchao_trains));
    }
}

// Issue 39: a three-tier plan (NVFP4, a module in MXFP8, modules in BF16) as each consumer names it:
// Megatron's FP4 flags and fields (--fp4-format e2m1 --fp4-recipe nvfp4; Bridge's fp4/fp4_recipe),
// the precision config's fp4_quantization_recipe beside an mxfp8 config, TE's NVFP4BlockScaling,
// TE's debug features for NVFP4 from 2.13 only, and torchao's lack of a 4-bit recipe. Megatron's,
// Bridge's, TE's and nvdlfw_inspect's own code read the golden files (tests/consumers/run_checks.py).
Recommendation nvfp4_rec() {
  Recommendation rec = make_rec("nvfp4", TrainingFormat::kE4M3, kMixedLayers);
  rec.te_version = TeVersion{2, 20};
  rec.gpu = find_gpu_target("b200");
  CandidatePlan mx;
  mx.candidate = {parse_recipe("mxfp8"), TrainingFormat::kE4M3};
  rec.candidates.push_back(mx);
  ModulePlan mp;
  mp.base = 0;
  mp.modules = {{"layers.0.self_attention.linear_qkv", std::nullopt, "no per-module recipe passes all its GEMMs (2 tried); wgrad: underflow"},
                {"layers.0.mlp.linear_fc2", 1, "wgrad: underflow 89.2 % under nvfp4/e4m3; mxfp8/e4m3 passes all its GEMMs (risk 0.400)"},
                {"layers.1.mlp.linear_fc1", 1, "wgrad: underflow 12.5 % under nvfp4/e4m3; mxfp8/e4m3 passes all its GEMMs (risk 0.300)"},
                {"layers.2.self_attention.linear_proj", 0, ""},
                {"layers.3.mlp.linear_fc2", std::nullopt, "no per-module recipe passes all its GEMMs (2 tried); fprop: underflow"}};
  mp.switched = 2;
  mp.bf16 = 2;
  mp.why = "per module: 1 of 5 on nvfp4/e4m3, 2 on mxfp8/e4m3, 2 in BF16";
  rec.module_plan = mp;
  return rec;
}

TEST_CASE("NVFP4: every consumer file names it as that consumer does") {
  const Recommendation rec = nvfp4_rec();
  const ConsumerPlan plan(rec);
  REQUIRE(plan.candidate != nullptr);
  CHECK(plan.megatron.fp4);
  CHECK(plan.megatron.format == "e2m1");
  CHECK(plan.megatron.recipe == "nvfp4");
  CHECK(plan.te.class_name == "NVFP4BlockScaling");
  CHECK(plan.te.fp8_format == "E4M3");  // asserted by NVFP4BlockScaling.__post_init__
  CHECK(plan.te.env.empty());

  const Artifact args = render_megatron_args(plan);
  CHECK(args.note == "--fp4-recipe nvfp4 --fp4-format e2m1 --first-last-layers-bf16 --te-precision-config-file");
  CHECK(args.contents.find("\n--fp4-format e2m1\n--fp4-recipe nvfp4\n") != std::string::npos);
  CHECK(args.contents.find("\n--fp8-") == std::string::npos);  // fp4 and fp8 are exclusive in Megatron
  CHECK(args.contents.find("FP4 flags need Megatron-Core 0.15+") != std::string::npos);
  check_golden("megatron_args_nvfp4.txt", args.contents);

  const Artifact bridge = render_megatron_bridge(plan);
  CHECK(bridge.note.starts_with("fp4 e2m1, fp4_recipe nvfp4"));
  CHECK(bridge.contents.find("\n  fp8: null\n  fp4: e2m1\n  fp4_recipe: nvfp4\n") != std::string::npos);
  CHECK(bridge.contents.find("fp4: null") == std::string::npos);  // no second fp4 key
  CHECK(bridge.contents.find("\n  fp4_param") == std::string::npos);  // not a field in Bridge 0.3
  check_golden("megatron_bridge_nvfp4.yaml", bridge.contents);

  const auto pc = render_te_precision_config(plan);
  REQUIRE(pc.has_value());
  CHECK(pc->contents.find("fp4_quantization_recipe: nvfp4") != std::string::npos);
  CHECK(pc->contents.find("fp8_quantization_recipe: mxfp8") != std::string::npos);
  CHECK(pc->contents.find("fp8_format: e4m3") != std::string::npos);  // the mxfp8 config's only
  check_golden("te_precision_config_nvfp4.yaml", pc->contents);

  const std::string snippet = render_te_snippet(plan).contents;
  CHECK(snippet.find("NVFP4BlockScaling(fp8_format=Format.E4M3") != std::string::npos);
  check_golden("te_snippet_nvfp4.py", snippet);

  const auto nv = render_nvdlfw_inspect_yaml(plan);
  REQUIRE(nv.has_value());
  CHECK(nv->contents.find("LogNvfp4TensorStats") != std::string::npos);
  CHECK(nv->contents.find("LogFp8TensorStats") == std::string::npos);
  CHECK(nv->contents.find("stats: [underflows%, mse]") != std::string::npos);
  CHECK(nv->contents.find("DisableQuantizationGEMM") != std::string::npos);
  check_golden("nvdlfw_inspect_nvfp4.yaml", nv->contents);
  // Before TE 2.13 TE's debug features quantise FP8 only: no file, and why.
  Recommendation old = nvfp4_rec();
  old.te_version = TeVersion{2, 12};
  std::string why;
  CHECK_FALSE(render_nvdlfw_inspect_yaml(ConsumerPlan(old), &why).has_value());
  CHECK(why.find("TE's debug tools take NVFP4 from TE 2.13") != std::string::npos);
  CHECK(ConsumerPlan(old).nvdlfw_omitted.has_value());

  const auto ao = nlohmann::json::parse(render_torchao_json(plan).contents);
  CHECK(ao["recipe_name"].is_null());
  CHECK(ao["reason"].get<std::string>().find("no 4-bit recipe") != std::string::npos);

  // --format hybrid names the FP8 recipes' gradients; NVFP4BlockScaling's scales stay E4M3.
  CHECK(ConsumerPlan(make_rec("nvfp4", TrainingFormat::kHybrid, kMixedLayers)).te.fp8_format == "E4M3");
  const std::string rj = render_recipe_json(plan_consumers(rec), fp8a::testing::info()).contents;
  CHECK(nlohmann::json::parse(rj)["recipe"]["class"] == "NVFP4BlockScaling");
  check_golden("recipe_nvfp4.json", rj);
}

TEST_CASE("merge_members: the one rule for captured layers one consumer name selects") {
  using fp8a::MemberPlan;
  using fp8a::Precision;
  constexpr Precision F = Precision::kFp8, B = Precision::kBf16;
  // Same recipe: each GEMM BF16 where any member's is.
  const std::vector<MemberPlan> same = {{{F, F, B}, 2}, {{B, F, F}, 2}};
  const fp8a::MergedMembers a = fp8a::merge_members(same);
  CHECK(a.recipes_agree);
  CHECK(a.candidate == std::optional<std::size_t>(2));
  CHECK(a.precision == std::array<Precision, 3>{B, F, B});
  // Recipes that differ (or one member BF16 throughout, no recipe): the whole module BF16.
  const std::vector<MemberPlan> differ = {{{F, F, F}, 2}, {{F, F, F}, 3}};
  const fp8a::MergedMembers b = fp8a::merge_members(differ);
  CHECK_FALSE(b.recipes_agree);
  CHECK_FALSE(b.candidate);
  CHECK(b.precision == std::array<Precision, 3>{B, B, B});
  const std::vector<MemberPlan> one_bf16 = {{{F, F, F}, 1}, {{B, B, B}, std::nullopt}};
  CHECK(fp8a::merge_members(one_bf16).precision == std::array<Precision, 3>{B, B, B});
  // One member: its own plan.
  const std::vector<MemberPlan> alone = {{{F, B, F}, 0}};
  CHECK(fp8a::merge_members(alone).precision == std::array<Precision, 3>{F, B, F});
}

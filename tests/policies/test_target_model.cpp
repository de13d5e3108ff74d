// --price-as (policies/target_model.hpp): the presets against Llama 2's published configs, the
// roles of module names as Megatron-Core, Hugging Face and GPT-2 spell them, the shapes file's
// hostile-input reading, and the cost model pricing captured (proxy) layers at the target's shapes.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/gpu_target.hpp"
#include "core/recipe.hpp"
#include "policies/cost_model.hpp"
#include "policies/target_model.hpp"

namespace {

using fp8a::ModuleRole;

std::string role_of(const std::string& layer, const fp8a::TargetModel& t = *fp8a::find_target_model("llama-7b")) {
  const auto r = fp8a::module_role(layer, t);
  return r ? fp8a::module_role_name(*r) : "-";
}

std::string error_of(const std::string& json) {
  try {
    (void)fp8a::parse_target_model(json, "shapes.json");
  } catch (const fp8a::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("price-as presets: Llama 2's shapes in Megatron-Core's fused modules") {
  // meta-llama/Llama-2-7b-hf config.json: hidden_size 4096, intermediate_size 11008,
  // num_hidden_layers 32, num_attention_heads 32, num_key_value_heads 32, vocab_size 32000.
  const fp8a::TargetModel& s = *fp8a::find_target_model("llama-7b");
  CHECK(s.role(ModuleRole::kQkv).n == 3 * 4096);
  CHECK(s.role(ModuleRole::kQkv).k == 4096);
  CHECK(s.role(ModuleRole::kProj).n == 4096);
  CHECK(s.role(ModuleRole::kFc1).n == 2 * 11008);  // SwiGLU: gate and up in linear_fc1
  CHECK(s.role(ModuleRole::kFc2).k == 11008);
  CHECK(s.role(ModuleRole::kHead).n == 32000);
  CHECK(s.role(ModuleRole::kFc2).count == 32);
  CHECK(s.role(ModuleRole::kHead).count == 1);
  CHECK(s.tokens_per_step == 4194304);
  // meta-llama/Llama-2-70b-hf: hidden 8192, intermediate 28672, 80 layers, 64 heads, 8 KV heads.
  const fp8a::TargetModel& l = *fp8a::find_target_model("llama-70b");
  CHECK(l.role(ModuleRole::kQkv).n == 8192 + 2 * 8 * 128);
  CHECK(l.role(ModuleRole::kFc1).n == 2 * 28672);
  CHECK(l.role(ModuleRole::kFc2).k == 28672);
  CHECK(l.role(ModuleRole::kProj).count == 80);
  CHECK(fp8a::find_target_model("llama-13b") == nullptr);
}

TEST_CASE("price-as roles: module names as frameworks spell them") {
  CHECK(role_of("decoder.layers.3.self_attention.linear_qkv") == "qkv");
  CHECK(role_of("layers.0.self_attention.layernorm_qkv") == "qkv");
  CHECK(role_of("model.layers.0.self_attn.k_proj") == "qkv");
  CHECK(role_of("model.layers.0.self_attn.o_proj") == "proj");
  CHECK(role_of("model.layers.0.mlp.gate_proj") == "fc1");
  CHECK(role_of("model.layers.0.mlp.down_proj") == "fc2");
  CHECK(role_of("transformer.h.0.attn.c_attn") == "qkv");
  CHECK(role_of("transformer.h.0.attn.c_proj") == "proj");  // GPT-2: the parent decides
  CHECK(role_of("transformer.h.0.mlp.c_proj") == "fc2");
  CHECK(role_of("transformer.h.0.mlp.c_fc") == "fc1");
  CHECK(role_of("gpt_neox.layers.0.attention.query_key_value") == "qkv");
  CHECK(role_of("gpt_neox.layers.0.attention.dense") == "proj");
  CHECK(role_of("gpt_neox.layers.0.mlp.dense_4h_to_h") == "fc2");
  CHECK(role_of("lm_head") == "head");
  CHECK(role_of("output_layer") == "head");
  CHECK(role_of("decoder.layers.1.mlp.experts.linear_fc2.expert3") == "fc2");           // a grouped module's expert
  CHECK(role_of("model_module_decoder_layers_2_self_attention_linear_proj") == "proj");  // a TE dump name
  CHECK(role_of("decoder.layers.0.mlp.dense") == "-");  // dense outside attention: no role
  CHECK(role_of("my.block.mixer") == "-");
  fp8a::TargetModel t = *fp8a::find_target_model("llama-7b");
  t.roles[static_cast<std::size_t>(ModuleRole::kFc1)].names = {"block.mixer"};
  CHECK(role_of("my.block.mixer", t) == "fc1");
  CHECK(role_of("my.xblock.mixer", t) == "-");  // a dotted suffix, not any tail
}

TEST_CASE("price-as: each role's captured layers stand for all the target's") {
  const fp8a::TargetModel& t = *fp8a::find_target_model("llama-7b");
  const std::vector<std::string> layers = {"layers.0.self_attention.linear_qkv", "layers.1.self_attention.linear_qkv",
                                           "layers.0.mlp.linear_fc2", "layers.0.mlp.router", "x.unknown"};
  std::vector<std::string> unmapped;
  const fp8a::TargetPricing p = fp8a::price_at_target(t, layers, 1000, "test", &unmapped);
  CHECK(unmapped == std::vector<std::string>{"x.unknown"});  // the router is left at its captured shape
  REQUIRE(p.layers.size() == 3);
  CHECK(p.layers.at("layers.0.self_attention.linear_qkv").weight == 16.0);  // 32 modules / 2 captured
  CHECK(p.layers.at("layers.0.mlp.linear_fc2").weight == 32.0);
  CHECK(*p.gemm_flops("layers.0.mlp.linear_fc2") == 2.0 * 1000 * 4096 * 11008 * 32);
  CHECK(!p.gemm_flops("layers.0.mlp.router"));
  CHECK(fp8a::pricing_basis(p) ==
        "llama-7b's shapes, W [n x k] x modules: qkv 12288x4096 x32 (from 2 captured), fc2 4096x11008 x32 "
        "(from 1 captured); not captured, so not priced: proj, fc1, head");
}

TEST_CASE("price-as: the cost model prices a proxy layer at its target module") {
  const fp8a::TargetModel& t = *fp8a::find_target_model("llama-7b");
  const std::vector<std::string> names = {"layers.0.mlp.linear_fc2", "layers.1.mlp.linear_fc2"};
  auto pricing = std::make_shared<fp8a::TargetPricing>(fp8a::price_at_target(t, names, 4194304, "test", nullptr));
  std::vector<fp8a::GemmLayer> layers(2);
  for (int i = 0; i < 2; ++i) {
    layers[i].layer = names[i];
    layers[i].ranks.resize(2);  // a captured tensor-parallel split: the target is priced whole
    layers[i].split = fp8a::Split::kColumn;
    layers[i].m = 256;
    layers[i].n = 256;
    layers[i].k = 1024;
  }
  const auto recipes = fp8a::parse_recipe_list("current");
  const fp8a::GpuTarget& h100 = *fp8a::find_gpu_target("h100");
  const fp8a::CostModel m =
      fp8a::build_cost_model(layers, recipes, h100, fp8a::CostOptions{4194304, "test", pricing});
  // By hand: the fc2 GEMM 4194304 x 4096 x 11008 is compute-bound on the H100's 989 TFLOP/s BF16
  // at torchao's 78 %; each captured layer stands for 16 of the 32.
  const double flops = 2.0 * 4194304 * 4096 * 11008;
  const double seconds = flops / (989e12 * 0.78);
  for (const fp8a::LayerCost& c : m.layers) {
    CHECK(c.flops[0] == doctest::Approx(16 * flops).epsilon(1e-12));
    CHECK(c.bf16_seconds[0] == doctest::Approx(16 * seconds).epsilon(1e-12));
  }
  const fp8a::CostEstimate e = fp8a::estimate_cost(m, fp8a::uniform_plan(m, 0));
  CHECK(e.total_flops == doctest::Approx(3 * 32 * flops).epsilon(1e-12));
  CHECK(e.speedup > 1.5);  // FP8 pays at these shapes
  CHECK(fp8a::roofline_basis(m.options) ==
        "roofline at llama-7b's shapes, W [n x k] x modules: fc2 4096x11008 x32 (from 2 captured); not captured, "
        "so not priced: qkv, proj, fc1, head; 4194304 tokens a step (test)");
}

TEST_CASE("price-as shapes file: read as hostile input, every failure naming the key") {
  const fp8a::TargetModel t = fp8a::parse_target_model(
      R"({"name": "mine", "tokens_per_step": 1048576, "layers": 24,
          "roles": {"qkv": {"n": 6144, "k": 2048}, "head": {"n": 50304, "k": 2048},
                    "fc1": {"n": 8192, "k": 2048, "count": 12, "names": ["moe.w_in"]}}})",
      "shapes.json");
  CHECK(t.name == "mine");
  CHECK(t.tokens_per_step == 1048576);
  CHECK(t.role(ModuleRole::kQkv).count == 24);
  CHECK(t.role(ModuleRole::kHead).count == 1);
  CHECK(t.role(ModuleRole::kFc1).count == 12);
  CHECK(t.role(ModuleRole::kFc1).names == std::vector<std::string>{"moe.w_in"});
  CHECK(t.role(ModuleRole::kProj).count == 0);  // not in the file: a captured proj is unmapped
  CHECK(error_of(R"({"tokens_per_step": 1, "layers": 2, "roles": {"qkv": {"n": 1, "k": 1, "m": 3}}})") ==
        "[fp8a.shapes.952] shapes file 'shapes.json': unknown key 'roles.qkv.m' (did you mean 'n'?)");
  CHECK(error_of(R"({"layers": 2, "roles": {"qkv": {"n": 1, "k": 1}}})") ==
        "[fp8a.shapes.952] shapes file 'shapes.json': missing key \"tokens_per_step\" (tokens of one training step)");
  CHECK(error_of(R"({"tokens_per_step": 1, "roles": {"qkv": {"n": 1, "k": 1}}})") ==
        "[fp8a.shapes.952] shapes file 'shapes.json': missing key 'roles.qkv.count' (or a top-level \"layers\": how "
        "many such modules the model has)");
  CHECK(error_of(R"({"tokens_per_step": 1, "layers": 2, "roles": {"qkv": {"n": "1", "k": 1}}})") ==
        "[fp8a.shapes.953] shapes file 'shapes.json': roles.qkv.n must be an integer, not a string");
  CHECK(error_of(R"({"tokens_per_step": 0, "layers": 2, "roles": {}})") ==
        "[fp8a.shapes.954] shapes file 'shapes.json': tokens_per_step is 0, expected an integer in [1, 1000000000000]");
  CHECK(error_of(R"({"tokens_per_step": 1, "tokens_per_step": 2})") ==
        "[fp8a.shapes.955] shapes file 'shapes.json': key tokens_per_step is given twice in one object; keep one");
  CHECK(error_of("{\"name\": \"\xff\"}") ==
        "[fp8a.shapes.951] shapes file 'shapes.json' is not UTF-8 at byte offset 10 ('\\xff\"}' there); save it as UTF-8");
  CHECK(error_of("[1]") == "[fp8a.shapes.951] shapes file 'shapes.json' is not a JSON object");
  CHECK(error_of(R"({"tokens_per_step": 1, "layers": 2, "roles": {}})") ==
        "[fp8a.shapes.952] shapes file 'shapes.json': \"roles\" names no role (qkv, proj, fc1, fc2, head)");
}

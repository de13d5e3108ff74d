// The GEMM cost model (policies/cost_model.hpp) against numbers worked out by hand from the
// datasheet figures (core/gpu_target.hpp's rows) and METRICS.md's "Cost model" terms.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/gpu_target.hpp"
#include "core/recipe.hpp"
#include "policies/cost_model.hpp"

namespace {

// Every expected value below is a few double operations away from the model's; they agree to the
// last bits but not always exactly (another order of the same operations).
constexpr double kRelTol = 1e-12;

// Datasheet figures, written out rather than read from the table.
constexpr double kH100Bf16 = 989e12, kH100Fp8 = 1979e12, kH100Bw = 3350e9;  // FLOP/s, B/s
constexpr double kGemmEff = 0.78, kBwEff = 0.92, kLaunch = 2e-6;  // torchao's roofline

const fp8a::GpuTarget& gpu(const char* name) { return *fp8a::find_gpu_target(name); }

fp8a::GemmLayer layer(const std::string& name, std::int64_t m, std::int64_t n, std::int64_t k,
                      fp8a::Split split = fp8a::Split::kNone, int ranks = 1,
                      std::int64_t step = 0) {
  fp8a::GemmLayer l;
  l.step = step;
  l.layer = name;
  l.ranks.assign(static_cast<std::size_t>(ranks), fp8a::GemmOperands{});  // not read
  l.split = split;
  l.m = m;
  l.n = n;
  l.k = k;
  return l;
}

std::vector<fp8a::Recipe> recipes(const char* list) { return fp8a::parse_recipe_list(list); }

}  // namespace

TEST_CASE("a recipe the GPU cannot run is excluded with the rule and the GPU's SM") {
  using fp8a::RecipeKind;
  auto support = [](RecipeKind kind, const char* name) {
    fp8a::Recipe r;
    r.kind = kind;
    return fp8a::recipe_support(r, gpu(name));
  };
  auto why = [&](RecipeKind kind, const char* name) {
    const auto s = support(kind, name);
    CHECK_FALSE(s.runs);
    return s.reason;
  };
  CHECK(why(RecipeKind::kMx, "h100") == "mxfp8 needs sm_100+ (TE MXFP8BlockScaling); h100 is sm_90");
  CHECK(why(RecipeKind::kPerTensorCurrent, "a100") ==
        "current needs sm_89+ (TE Float8CurrentScaling); a100 is sm_80");
  CHECK(why(RecipeKind::kPerTensorDelayed, "a100") ==
        "delayed needs sm_89+ (TE DelayedScaling); a100 is sm_80");
  CHECK(why(RecipeKind::kBlock, "l40s") ==
        "block needs sm_90+ (TE Float8BlockScaling); l40s is sm_89");
  CHECK(why(RecipeKind::kMx, "rtx5090") ==
        "mxfp8 runs on sm_100 to sm_119 only (TE MXFP8BlockScaling); rtx5090 is sm_120");
  for (const char* name : {"h100", "b200", "rtx4090"}) {
    const auto s = support(RecipeKind::kPerTensorCurrent, name);
    CHECK(s.runs);
    CHECK(s.reason.empty());
  }
  CHECK(support(RecipeKind::kBf16, "a100").runs);
  CHECK(support(RecipeKind::kMx, "gb200").runs);
  // NVFP4: Blackwell's datacenter parts; Hopper refused as TE's autocast refuses it.
  CHECK(why(RecipeKind::kNvfp4, "h100") == "nvfp4 needs sm_100+ (TE NVFP4BlockScaling); h100 is sm_90");
  CHECK(why(RecipeKind::kNvfp4, "rtx5090") ==
        "nvfp4 runs on sm_100 to sm_119 only (TE NVFP4BlockScaling); rtx5090 is sm_120");
  CHECK(support(RecipeKind::kNvfp4, "b200").runs);
  // Block scaling on Blackwell: TE's casts there NVTE_CHECK power-of-two scales (TE 2.9+,
  // quantize_transpose_square_blockwise.cu), so block (TE's default) runs and block:fp32 does not.
  CHECK(fp8a::recipe_support(fp8a::parse_recipe("block"), gpu("b200")).runs);
  CHECK(fp8a::recipe_support(fp8a::parse_recipe("block:fp32"), gpu("h100")).runs);
  for (const char* name : {"b200", "gb300"}) {
    const auto s = fp8a::recipe_support(fp8a::parse_recipe("block:fp32"), gpu(name));
    CHECK_FALSE(s.runs);
    CHECK(s.reason == std::string("FP32 block scales do not run on sm_100+ (TE runs block scaling there as MXFP8 "
                                  "GEMMs: power-of-two scales only); ") + name + " is sm_10" +
                          (std::string(name) == "b200" ? "0" : "3"));
  }
  // Where block scaling does not run at all, that is the reason, not its scales'.
  CHECK(fp8a::recipe_support(fp8a::parse_recipe("block:fp32"), gpu("l40s")).reason ==
        "block needs sm_90+ (TE Float8BlockScaling); l40s is sm_89");

  // In a model the excluded recipe keeps its reason; a plan that chooses it is a caller's bug.
  const std::vector<fp8a::GemmLayer> layers = {layer("fc1", 1024, 1024, 1024)};
  const auto rs = recipes("current,mxfp8");
  const auto model = fp8a::build_cost_model(layers, rs, gpu("h100"));
  REQUIRE(model.support.size() == 2);
  CHECK(model.support[0].runs);
  CHECK_FALSE(model.support[1].runs);
  CHECK(model.support[1].reason == "mxfp8 needs sm_100+ (TE MXFP8BlockScaling); h100 is sm_90");
  CHECK(model.layers[0].fp8_seconds[1][0] == 0.0);
  CHECK_THROWS_AS(fp8a::estimate_cost(model, fp8a::uniform_plan(model, 1)), fp8a::Error);
}

TEST_CASE("GEMM FLOPs are 2 m n k per GEMM; the token dimension scales to tokens_per_step") {
  const auto l = layer("fc1", 64, 512, 256);
  const fp8a::GemmShape fprop = fp8a::rank_gemm_shape(l, fp8a::Gemm::kFprop, {});
  CHECK(fprop.m == 64);
  CHECK(fprop.n == 512);
  CHECK(fprop.k == 256);
  CHECK(fp8a::gemm_flops(fprop) == 2.0 * 64 * 512 * 256);

  const fp8a::CostOptions sampled{.tokens_per_step = 4096};
  const auto f = fp8a::rank_gemm_shape(l, fp8a::Gemm::kFprop, sampled);
  const auto d = fp8a::rank_gemm_shape(l, fp8a::Gemm::kDgrad, sampled);
  const auto w = fp8a::rank_gemm_shape(l, fp8a::Gemm::kWgrad, sampled);
  CHECK((f.m == 4096 && f.n == 512 && f.k == 256));  // Y [M, N], reduction K
  CHECK((d.m == 4096 && d.n == 256 && d.k == 512));  // dX [M, K], reduction N
  CHECK((w.m == 512 && w.n == 256 && w.k == 4096));  // dW [N, K], reduction M
  for (const auto& s : {f, d, w}) CHECK(fp8a::gemm_flops(s) == 2.0 * 4096 * 512 * 256);

  const std::vector<fp8a::GemmLayer> layers = {l};
  const auto model = fp8a::build_cost_model(layers, recipes("current"), gpu("h100"), sampled);
  CHECK(model.layers[0].flops[2] == 2.0 * 4096 * 512 * 256);
}

TEST_CASE("each rank runs its slice of a tensor-parallel layer; FLOPs count every rank") {
  // Whole layer X [1024, 512], W [2048, 512], dY [1024, 2048] over 2 ranks.
  const auto col = layer("qkv", 1024, 2048, 512, fp8a::Split::kColumn, 2);
  const auto row = layer("proj", 1024, 2048, 512, fp8a::Split::kRow, 2);
  const auto data = layer("fc", 1024, 2048, 512, fp8a::Split::kData, 2);
  const auto c = fp8a::rank_gemm_shape(col, fp8a::Gemm::kFprop, {});
  CHECK((c.m == 1024 && c.n == 1024 && c.k == 512));
  const auto r = fp8a::rank_gemm_shape(row, fp8a::Gemm::kFprop, {});
  CHECK((r.m == 1024 && r.n == 2048 && r.k == 256));
  const auto d = fp8a::rank_gemm_shape(data, fp8a::Gemm::kWgrad, {});
  CHECK((d.m == 2048 && d.n == 512 && d.k == 512));  // dW [N, K], reduction over 512 tokens
  const std::vector<fp8a::GemmLayer> layers = {col};
  const auto model = fp8a::build_cost_model(layers, recipes("current"), gpu("h100"));
  CHECK(model.layers[0].flops[0] == 2.0 * 1024 * 2048 * 512);
}

TEST_CASE("scale tensors: one fp32 per tensor, per 1x128 or 128x128 block, one E8M0 per 32") {
  const auto current = fp8a::parse_recipe("current");
  const auto block = fp8a::parse_recipe("block");
  const auto block2d = fp8a::parse_recipe("block:2d");
  const auto mx = fp8a::parse_recipe("mxfp8");
  using fp8a::Role;
  CHECK(fp8a::block_scale_count(current, Role::kActivation, 256, 512) == 1);
  CHECK(fp8a::block_scale_count(block, Role::kActivation, 256, 512) == 256 * 4);
  CHECK(fp8a::block_scale_count(block, Role::kActivation, 5, 160) == 5 * 2);  // a partial block
  CHECK(fp8a::block_scale_count(block, Role::kWeight, 384, 512) == 3 * 4);
  CHECK(fp8a::block_scale_count(block2d, Role::kGradient, 256, 512) == 2 * 4);
  CHECK(fp8a::block_scale_count(mx, Role::kWeight, 384, 512) == 384 * 16);
  CHECK(fp8a::scale_bytes(current) == 4);
  CHECK(fp8a::scale_bytes(block) == 4);
  CHECK(fp8a::scale_bytes(mx) == 1);

  // fprop of X [256, 512], W [384, 512] under block scaling: FP8 operands, their scales, BF16 Y.
  const fp8a::GemmShape s{256, 384, 512};
  const auto fp8 = fp8a::gemm_cost_fp8(s, block, Role::kActivation, Role::kWeight, gpu("h100"));
  CHECK(fp8.bytes == 1.0 * (256 * 512 + 384 * 512) + 4.0 * (256 * 4 + 3 * 4) + 2.0 * 256 * 384);
  const auto bf16 = fp8a::gemm_cost_bf16(s, gpu("h100"));
  CHECK(bf16.bytes == 2.0 * (256 * 512 + 384 * 512) + 2.0 * 256 * 384);
  // Cast of that X: read BF16, write FP8 and 256 * 4 fp32 scales.
  using fp8a::Copies;
  const auto cast = fp8a::cast_cost(block, Role::kActivation, 256, 512, Copies::kRowwise, gpu("h100"));
  CHECK(cast.bytes == 3.0 * 256 * 512 + 4.0 * 256 * 4);
  // Its columnwise copy alone: the transpose [512, 256] in 1x128 blocks, 512 * 2 scales.
  CHECK(fp8a::cast_cost(block, Role::kActivation, 256, 512, Copies::kColumnwise, gpu("h100")).bytes ==
        3.0 * 256 * 512 + 4.0 * 512 * 2);
  // Both in one kernel (TE's cast-transpose): X read once, two FP8 copies and both scale sets.
  CHECK(fp8a::cast_cost(block, Role::kActivation, 256, 512, Copies::kBoth, gpu("h100")).bytes ==
        4.0 * 256 * 512 + 4.0 * (256 * 4 + 512 * 2));
  // Current scaling's amax pass reads X once in BF16; no other kind has one.
  CHECK(fp8a::amax_cost(current, 256.0 * 512, gpu("h100")).bytes == 2.0 * 256 * 512);
  CHECK(fp8a::amax_cost(fp8a::parse_recipe("delayed"), 256.0 * 512, gpu("h100")).seconds == 0);
  CHECK(fp8a::amax_cost(block, 256.0 * 512, gpu("h100")).seconds == 0);
}

TEST_CASE("NVFP4 on B200: half-byte elements, an E4M3 scale per 16 (16x16 for W), the FP4 rate") {
  const auto nvfp4 = fp8a::parse_recipe("nvfp4");
  using fp8a::Role;
  CHECK(fp8a::block_scale_count(nvfp4, Role::kActivation, 256, 512) == 256 * 32);
  CHECK(fp8a::block_scale_count(nvfp4, Role::kWeight, 384, 512) == 24 * 32);
  CHECK(fp8a::scale_bytes(nvfp4) == 1);
  CHECK(fp8a::element_bytes(nvfp4) == 0.5);
  const fp8a::GemmShape s{256, 384, 512};
  const auto g = fp8a::gemm_cost_fp8(s, nvfp4, Role::kActivation, Role::kWeight, gpu("b200"));
  CHECK(g.bytes == 0.5 * (256 * 512 + 384 * 512) + 1.0 * (256 * 32 + 24 * 32) + 2.0 * 256 * 384);
  // An 8192^3 GEMM is compute-bound: at the FP4 peak, half the FP8 GEMM's time (HGX B200: FP4
  // 18 PFLOPS, FP8 9 PFLOPS with sparsity).
  const fp8a::GemmShape big{8192, 8192, 8192};
  const auto fp4 = fp8a::gemm_cost_fp8(big, nvfp4, Role::kActivation, Role::kWeight, gpu("b200"));
  const auto fp8 = fp8a::gemm_cost_fp8(big, fp8a::parse_recipe("mxfp8"), Role::kActivation, Role::kWeight, gpu("b200"));
  CHECK(fp8.seconds / fp4.seconds == doctest::Approx(2.0).epsilon(1e-3));
  // The cast writes half a byte per element and a byte per 16.
  CHECK(fp8a::cast_cost(nvfp4, Role::kActivation, 256, 512, fp8a::Copies::kRowwise, gpu("b200")).bytes ==
        2.5 * 256 * 512 + 256 * 32);
}

TEST_CASE("a small layer on H100: every kernel is a launch, so FP8 does not pay") {
  // 128 tokens, W [256, 256]. The largest kernel, W's cast, moves 3 * 256 * 256 B = 196,608 B:
  // 196608 / (3.35e12 * 0.92) = 64 ns, far under the 2 us launch floor; the largest GEMM does
  // 2 * 128 * 256 * 256 = 16.8 MFLOP, 22 ns at the BF16 rate. Every kernel takes 2 us.
  const std::vector<fp8a::GemmLayer> layers = {layer("fc1", 128, 256, 256)};
  const auto model =
      fp8a::build_cost_model(layers, recipes("current,delayed,block"), gpu("h100"));
  const auto bf16 = fp8a::estimate_cost(model, fp8a::uniform_plan(model, fp8a::kCostBf16));
  CHECK(bf16.bf16_seconds == doctest::Approx(3 * kLaunch).epsilon(kRelTol));
  CHECK(bf16.speedup == 1.0);
  CHECK(bf16.fp8_flop_share == 0.0);
  // current: 3 GEMMs + 3 casts (X, W, dY each into its rowwise and columnwise copies at once:
  // sm_90 GEMMs read TN only) + 3 amax passes = 9 kernels.
  const auto current = fp8a::estimate_cost(model, fp8a::uniform_plan(model, 0));
  CHECK(current.plan_seconds == doctest::Approx(9 * kLaunch).epsilon(kRelTol));
  CHECK(current.speedup == doctest::Approx(3.0 / 9).epsilon(kRelTol));
  CHECK(current.fp8_flop_share == 1.0);
  // delayed: no amax pass, 6 kernels; block: per-block amax inside the cast, 6 kernels.
  CHECK(fp8a::estimate_cost(model, fp8a::uniform_plan(model, 1)).speedup ==
        doctest::Approx(3.0 / 6).epsilon(kRelTol));
  CHECK(fp8a::estimate_cost(model, fp8a::uniform_plan(model, 2)).speedup ==
        doctest::Approx(3.0 / 6).epsilon(kRelTol));
}

TEST_CASE("an 8192^3 layer on H100: compute-bound GEMMs, near the FP8/BF16 peak ratio") {
  const double n = 8192;
  const double flops = 2 * n * n * n;                  // each GEMM
  const double bf16_gemm = flops / (kH100Bf16 * kGemmEff);  // 1.425 ms; its 6 n^2 B take 131 us
  const double fp8_gemm = flops / (kH100Fp8 * kGemmEff);    // 712 us; 4 n^2 B + 8 B of scales
  // One cast per tensor: BF16 in once, both FP8 copies and their scales out.
  const double cast = (4 * n * n + 8) / (kH100Bw * kBwEff);
  const double amax = 2 * n * n / (kH100Bw * kBwEff);
  const std::vector<fp8a::GemmLayer> layers = {layer("fc1", 8192, 8192, 8192)};
  const auto model = fp8a::build_cost_model(layers, recipes("current,delayed"), gpu("h100"));
  const auto& c = model.layers[0];
  for (int g = 0; g < 3; ++g) {
    CHECK(c.bf16_seconds[g] == doctest::Approx(bf16_gemm).epsilon(kRelTol));
    CHECK(c.fp8_seconds[0][g] == doctest::Approx(fp8_gemm).epsilon(kRelTol));
    // The GEMMs alone run at the datasheet ratio, 1979 / 989.
    CHECK(c.bf16_seconds[g] / c.fp8_seconds[0][g] == doctest::Approx(1979.0 / 989.0));
  }
  const auto current = fp8a::estimate_cost(model, fp8a::uniform_plan(model, 0));
  CHECK(current.bf16_seconds == doctest::Approx(3 * bf16_gemm).epsilon(kRelTol));
  CHECK(current.plan_seconds ==
        doctest::Approx(3 * fp8_gemm + 3 * cast + 3 * amax).epsilon(kRelTol));
  const auto delayed = fp8a::estimate_cost(model, fp8a::uniform_plan(model, 1));
  CHECK(delayed.plan_seconds == doctest::Approx(3 * fp8_gemm + 3 * cast).epsilon(kRelTol));
  // 4.276 / (2.137 + 0.261 + 0.131) = 1.691 and 4.276 / 2.398 = 1.783 (ms): the casts cost the rest.
  CHECK(current.speedup == doctest::Approx(1.6909).epsilon(1e-4));
  CHECK(delayed.speedup == doctest::Approx(1.7830).epsilon(1e-4));
  CHECK(current.speedup < delayed.speedup);
  CHECK(delayed.speedup < 1979.0 / 989.0);
}

TEST_CASE("a plan mixes FP8 and BF16 GEMMs; a copy is cast only when an FP8 GEMM reads it") {
  const double n = 8192;
  const double big_flops = 2 * n * n * n;
  const double small_flops = 2.0 * 128 * 256 * 256;
  const double bf16_gemm = big_flops / (kH100Bf16 * kGemmEff);
  const double fp8_gemm = big_flops / (kH100Fp8 * kGemmEff);
  const double row_cast = (3 * n * n + 4) / (kH100Bw * kBwEff);   // one copy
  const double both_cast = (4 * n * n + 8) / (kH100Bw * kBwEff);  // both, in one kernel
  const std::vector<fp8a::GemmLayer> layers = {layer("layers.0.fc1", 8192, 8192, 8192),
                                               layer("layers.1.fc2", 128, 256, 256)};
  const auto model = fp8a::build_cost_model(layers, recipes("delayed"), gpu("h100"));
  fp8a::CostPlan plan;
  // fc1: fprop and dgrad in FP8, wgrad in BF16: X and dY rowwise, W both ways are cast, not the
  // columnwise X and dY only wgrad reads. fc2 all BF16.
  plan.choice = {{0, 0, fp8a::kCostBf16}, {fp8a::kCostBf16, fp8a::kCostBf16, fp8a::kCostBf16}};
  const auto e = fp8a::estimate_cost(model, plan);
  CHECK(e.bf16_seconds == doctest::Approx(3 * bf16_gemm + 3 * kLaunch).epsilon(kRelTol));
  CHECK(e.plan_seconds ==
        doctest::Approx(2 * fp8_gemm + bf16_gemm + 2 * row_cast + both_cast + 3 * kLaunch).epsilon(kRelTol));
  CHECK(e.total_flops == 3 * big_flops + 3 * small_flops);
  CHECK(e.fp8_flops == 2 * big_flops);
  CHECK(e.fp8_flop_share == doctest::Approx(2 * big_flops / (3 * big_flops + 3 * small_flops)));
  CHECK(e.speedup == doctest::Approx(e.bf16_seconds / e.plan_seconds));
  CHECK_THROWS_AS(fp8a::estimate_cost(model, fp8a::CostPlan{}), fp8a::Error);  // wrong size
}

TEST_CASE("Blackwell GEMMs read per-tensor FP8 copies transposed: one cast per tensor") {
  // TE's is_non_tn_fp8_gemm_supported: sm_100 to sm_119 and sm_130+.
  CHECK_FALSE(fp8a::fp8_gemm_reads_transposed(89));
  CHECK_FALSE(fp8a::fp8_gemm_reads_transposed(90));
  CHECK(fp8a::fp8_gemm_reads_transposed(100));
  CHECK_FALSE(fp8a::fp8_gemm_reads_transposed(120));
  CHECK(fp8a::fp8_gemm_reads_transposed(130));
  // 128 tokens, W [256, 256] on B200: every kernel is a 2 us launch (as on H100).
  const std::vector<fp8a::GemmLayer> layers = {layer("fc1", 128, 256, 256)};
  const auto model =
      fp8a::build_cost_model(layers, recipes("current,delayed,block,mxfp8"), gpu("b200"));
  CHECK(model.single_copy == std::vector<bool>{true, true, false, false});
  auto kernels = [&](int r) {
    return fp8a::estimate_cost(model, fp8a::uniform_plan(model, r)).plan_seconds / kLaunch;
  };
  CHECK(kernels(0) == doctest::Approx(3 + 3 + 3));  // GEMMs, 3 rowwise casts, 3 amax passes
  CHECK(kernels(1) == doctest::Approx(3 + 3));
  CHECK(kernels(2) == doctest::Approx(3 + 3));  // block scales run along the reduction: both
  CHECK(kernels(3) == doctest::Approx(3 + 3));  // copies, each tensor's in one kernel
  // dgrad alone in FP8 reads W columnwise: the one (rowwise) copy of W is cast, and dY's.
  fp8a::CostPlan dgrad_only;
  dgrad_only.choice = {{fp8a::kCostBf16, 0, fp8a::kCostBf16}};
  CHECK(fp8a::estimate_cost(model, dgrad_only).plan_seconds / kLaunch ==
        doctest::Approx(2 + 1 + 2 + 2));  // 2 BF16 GEMMs, 1 FP8, casts of dY and W, 2 amax
}

TEST_CASE("X from a fused LayerNorm (TE LayerNormLinear): no cast under delayed, no amax pass under current") {
  CHECK(fp8a::input_from_fused_norm("decoder.layers.0.self_attention.linear_qkv"));
  CHECK(fp8a::input_from_fused_norm("mlp.linear_fc1"));
  CHECK(fp8a::input_from_fused_norm("model.layers.3.self_attention.layernorm_qkv"));
  CHECK_FALSE(fp8a::input_from_fused_norm("decoder.layers.0.mlp.experts.linear_fc1"));
  CHECK_FALSE(fp8a::input_from_fused_norm("decoder.layers.0.mlp.shared_experts.linear_fc1"));
  CHECK_FALSE(fp8a::input_from_fused_norm("decoder.layers.0.mlp.linear_fc2"));
  CHECK_FALSE(fp8a::input_from_fused_norm("decoder.layers.0.xmlp.linear_fc1"));
  const double n = 8192;
  const double bw = kH100Bw * kBwEff;
  // The same shape as a plain layer and as Megatron's QKV: only X's cast differs.
  const std::vector<fp8a::GemmLayer> layers = {layer("layers.0.self_attention.linear_proj", 8192, 8192, 8192),
                                               layer("layers.0.self_attention.linear_qkv", 8192, 8192, 8192)};
  const auto model = fp8a::build_cost_model(layers, recipes("current,delayed,block"), gpu("h100"));
  REQUIRE(model.layers.size() == 2);
  const auto& plain = model.layers[0];
  const auto& qkv = model.layers[1];
  constexpr auto kX = static_cast<std::size_t>(fp8a::Role::kActivation);
  constexpr auto kW = static_cast<std::size_t>(fp8a::Role::kWeight);
  // delayed: the norm writes the rowwise copy; the columnwise one is its FP8 transpose, 2 B/element.
  CHECK(plain.cast_seconds[1][kX][2] == doctest::Approx((4 * n * n + 8) / bw).epsilon(kRelTol));
  CHECK(qkv.cast_seconds[1][kX][0] == 0);
  CHECK(qkv.cast_seconds[1][kX][2] == doctest::Approx(2 * n * n / bw).epsilon(kRelTol));
  // current: the norm computes X's amax, the cast stays.
  CHECK(plain.amax_seconds[0][kX] == doctest::Approx(2 * n * n / bw).epsilon(kRelTol));
  CHECK(qkv.amax_seconds[0][kX] == 0);
  CHECK(qkv.cast_seconds[0][kX][2] == plain.cast_seconds[0][kX][2]);
  // block: quantized after the norm as anywhere else; W is cast the same in both.
  CHECK(qkv.cast_seconds[2][kX][2] == plain.cast_seconds[2][kX][2]);
  CHECK(qkv.amax_seconds[0][kW] == plain.amax_seconds[0][kW]);
}

TEST_CASE("a layer's captured steps are summed; the same input gives the same bits") {
  const std::vector<fp8a::GemmLayer> two_steps = {layer("b", 4096, 1024, 1024, {}, 1, 10),
                                                  layer("a", 2048, 1024, 1024, {}, 1, 10),
                                                  layer("b", 4096, 1024, 1024, {}, 1, 20)};
  const std::vector<fp8a::GemmLayer> one_step = {layer("b", 4096, 1024, 1024)};
  const auto rs = recipes("current,block");
  const auto model = fp8a::build_cost_model(two_steps, rs, gpu("h100"));
  REQUIRE(model.layers.size() == 2);
  CHECK(model.layers[0].layer == "a");  // plain string order
  CHECK(model.layers[1].layer == "b");
  CHECK(model.layers[1].steps == 2);
  const auto single = fp8a::build_cost_model(one_step, rs, gpu("h100"));
  CHECK(model.layers[1].bf16_seconds[0] == 2 * single.layers[0].bf16_seconds[0]);
  CHECK(model.layers[1].cast_seconds[1][1][1] == 2 * single.layers[0].cast_seconds[1][1][1]);

  const auto again = fp8a::build_cost_model(two_steps, rs, gpu("h100"));
  for (int r : {fp8a::kCostBf16, 0, 1}) {
    const auto x = fp8a::estimate_cost(model, fp8a::uniform_plan(model, r));
    const auto y = fp8a::estimate_cost(again, fp8a::uniform_plan(again, r));
    CHECK(x.plan_seconds == y.plan_seconds);
    CHECK(x.speedup == y.speedup);
    CHECK(x.fp8_flop_share == y.fp8_flop_share);
  }
}

TEST_CASE("the bf16 recipe in a candidate list costs BF16 and counts no FP8 FLOPs") {
  const std::vector<fp8a::GemmLayer> layers = {layer("fc1", 4096, 4096, 4096)};
  const auto model = fp8a::build_cost_model(layers, recipes("bf16,current"), gpu("a100"));
  CHECK(model.support[0].runs);
  CHECK_FALSE(model.support[1].runs);
  const auto e = fp8a::estimate_cost(model, fp8a::uniform_plan(model, 0));
  CHECK(e.speedup == 1.0);
  CHECK(e.fp8_flop_share == 0.0);
  // A100: 2 * 4096^3 FLOP at 312 TFLOP/s * 0.78 per GEMM.
  CHECK(e.bf16_seconds ==
        doctest::Approx(3 * 2.0 * 4096 * 4096 * 4096 / (312e12 * kGemmEff)).epsilon(kRelTol));
}

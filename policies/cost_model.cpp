#include "policies/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.hpp"
#include "core/text.hpp"

namespace fp8a {
namespace {

constexpr double kTera = 1e12;  // TFLOP/s to FLOP/s
constexpr double kGiga = 1e9;   // GB/s to B/s

double memory_seconds(double bytes, const GpuTarget& gpu) {
  return bytes / (gpu.memory_gbs * kGiga * kAchievableBandwidthFraction);
}

double compute_seconds(double flops, double tflops) {
  return flops / (tflops * kTera * kAchievableGemmFraction);
}

KernelCost kernel(double flops, double tflops, double bytes, const GpuTarget& gpu) {
  const double compute = flops > 0 ? compute_seconds(flops, tflops) : 0.0;
  return {flops, bytes, std::max({compute, memory_seconds(bytes, gpu), kKernelLaunchSeconds})};
}

std::string sm_text(int sm) { return "sm_" + std::to_string(sm); }

// One rank's X [m, k], W [n, k], dY [m, n], before they are arranged per GEMM.
struct RankDims {
  double m = 0, n = 0, k = 0;
};

// The layer's price at its --price-as target, when it has one.
const PricedLayer* priced(const GemmLayer& layer, const CostOptions& options) {
  if (!options.pricing) return nullptr;
  const auto it = options.pricing->layers.find(layer.layer);
  return it == options.pricing->layers.end() ? nullptr : &it->second;
}

RankDims rank_dims(const GemmLayer& layer, const CostOptions& options) {
  if (const PricedLayer* p = priced(layer, options)) return {options.tokens_per_step, p->n, p->k};
  RankDims d{static_cast<double>(layer.m), static_cast<double>(layer.n),
             static_cast<double>(layer.k)};
  if (options.tokens_per_step > 0) d.m = options.tokens_per_step;
  const double ranks = static_cast<double>(std::max<std::size_t>(layer.ranks.size(), 1));
  switch (layer.split) {
    case Split::kNone: break;
    case Split::kColumn: d.n /= ranks; break;
    case Split::kRow: d.k /= ranks; break;
    case Split::kData: d.m /= ranks; break;
  }
  return d;
}

// GemmLayer::dims's arrangement: fprop {m, n, k}, dgrad {m, k, n}, wgrad {n, k, m}.
GemmShape arrange(const RankDims& d, Gemm gemm) {
  switch (gemm) {
    case Gemm::kFprop: return {d.m, d.n, d.k};
    case Gemm::kDgrad: return {d.m, d.k, d.n};
    case Gemm::kWgrad: return {d.n, d.k, d.m};
  }
  return {d.m, d.n, d.k};
}

// A role's stored tensor [rows, cols]: X [m, k], W [n, k], dY [m, n]. The rowwise copy is read
// as [rows, cols] (reduction cols), the columnwise one as [cols, rows].
std::array<double, 2> stored_shape(const RankDims& d, Role role) {
  switch (role) {
    case Role::kActivation: return {d.m, d.k};
    case Role::kWeight: return {d.n, d.k};
    case Role::kGradient: return {d.m, d.n};
  }
  return {d.m, d.k};
}

}  // namespace

RecipeSupport recipe_support(const Recipe& recipe, const GpuTarget& gpu) {
  const RecipeKind kind = recipe.kind;
  // TE runs Float8BlockScaling's GEMMs on sm_100+ as MXFP8 (gemm.cpp swizzles the block scales to
  // E8M0), and its casts there NVTE_CHECK power-of-two scales ("On Blackwell and newer, the FP8
  // block scaling recipe is emulated with MXFP8", quantize_transpose_*_blockwise.cu, TE 2.9+).
  if (kind == RecipeKind::kBlock && !recipe.pow2_scales && gpu.sm >= 100 && te_runs_on(kind, gpu.sm))
    return {false, std::string("FP32 block scales do not run on sm_100+ (TE runs block scaling there as MXFP8 "
                               "GEMMs: power-of-two scales only); ") + gpu.name + " is " + sm_text(gpu.sm)};
  if (te_runs_on(kind, gpu.sm) && recipe_kind_traits(kind).element_bits == 4 && !(gpu.fp4_tflops > 0))
    return {false, std::string("nvfp4 needs an FP4 tensor-core rate; the table has none for ") + gpu.name};
  if (te_runs_on(kind, gpu.sm)) return {};
  const auto& row = recipe_kind_traits(kind);
  const std::string te = *row.te_recipe != '\0' ? std::string(" (TE ") + row.te_recipe + ")" : "";
  const std::string rule = gpu.sm < row.te_min_sm
                               ? " needs " + sm_text(row.te_min_sm) + "+"
                               : " runs on " + sm_text(row.te_min_sm) + " to " +
                                     sm_text(row.te_max_sm) + " only";
  return {false, row.name + rule + te + "; " + gpu.name + " is " + sm_text(gpu.sm)};
}

std::string roofline_basis(const CostOptions& o) {
  if (!o.pricing && !(o.tokens_per_step > 0)) return "roofline at the captured token count";
  const std::string shapes = o.pricing ? pricing_basis(*o.pricing) + "; " : std::string();
  return "roofline at " + shapes + format_text("%.0f tokens a step", o.tokens_per_step) +
         (o.tokens_source.empty() ? "" : " (" + o.tokens_source + ")");
}

GemmShape rank_gemm_shape(const GemmLayer& layer, Gemm gemm, const CostOptions& options) {
  return arrange(rank_dims(layer, options), gemm);
}

double gemm_flops(const GemmShape& s) { return 2.0 * s.m * s.n * s.k; }

KernelCost gemm_cost_bf16(const GemmShape& s, const GpuTarget& gpu) {
  const double bytes = kBf16Bytes * (s.m * s.k + s.n * s.k) + kBf16Bytes * s.m * s.n;
  return kernel(gemm_flops(s), gpu.bf16_tflops, bytes, gpu);
}

KernelCost gemm_cost_fp8(const GemmShape& s, const Recipe& recipe, Role a, Role b,
                         const GpuTarget& gpu) {
  FP8A_CHECK(is_fp8(recipe.kind), "gemm_cost_fp8 needs an FP8 recipe");
  const double scales = (block_scale_count(recipe, a, s.m, s.k) +
                         block_scale_count(recipe, b, s.n, s.k)) * scale_bytes(recipe);
  const double bytes = element_bytes(recipe) * (s.m * s.k + s.n * s.k) + scales + kBf16Bytes * s.m * s.n;
  return kernel(gemm_flops(s), recipe_kind_traits(recipe.kind).element_bits == 4 ? gpu.fp4_tflops : gpu.fp8_tflops, bytes,
                gpu);
}

double block_scale_count(const Recipe& recipe, Role role, double outer, double reduction) {
  if (!is_fp8(recipe.kind)) return 0.0;
  if (is_per_tensor(recipe.kind)) return 1.0;
  const BlockShape block = block_shape(recipe, role, Orientation::kRowwise);
  return std::ceil(outer / static_cast<double>(block.rows)) *
         std::ceil(reduction / static_cast<double>(block.cols));
}

double element_bytes(const Recipe& recipe) {
  return recipe_kind_traits(recipe.kind).element_bits == 4 ? kFp4Bytes : kFp8Bytes;
}

double scale_bytes(const Recipe& recipe) {
  if (!is_fp8(recipe.kind)) return 0.0;
  switch (recipe_kind_traits(recipe.kind).scale_type) {
    case ScaleType::kE8M0: return kE8M0ScaleBytes;
    case ScaleType::kE4M3: return kE4M3ScaleBytes;  // the per-tensor FP32 scale is negligible
    case ScaleType::kFp32:
    case ScaleType::kPow2:
    case ScaleType::kNone: break;
  }
  return kFp32ScaleBytes;
}

KernelCost cast_cost(const Recipe& recipe, Role role, double outer, double reduction, Copies copies,
                     const GpuTarget& gpu) {
  FP8A_CHECK(is_fp8(recipe.kind), "cast_cost needs an FP8 recipe");
  const double elements = outer * reduction;
  double bytes = kBf16Bytes * elements;
  if (copies != Copies::kColumnwise)
    bytes += element_bytes(recipe) * elements + block_scale_count(recipe, role, outer, reduction) * scale_bytes(recipe);
  if (copies != Copies::kRowwise)
    bytes += element_bytes(recipe) * elements + block_scale_count(recipe, role, reduction, outer) * scale_bytes(recipe);
  return kernel(0.0, 0.0, bytes, gpu);
}

bool input_from_fused_norm(std::string_view layer) {
  for (std::string_view module : {"self_attention.linear_qkv", "mlp.linear_fc1", "self_attention.layernorm_qkv"})
    if (layer == module || (layer.ends_with(module) && layer[layer.size() - module.size() - 1] == '.'))
      return true;
  return false;
}

KernelCost amax_cost(const Recipe& recipe, double elements, const GpuTarget& gpu) {
  if (!recipe_kind_traits(recipe.kind).amax_pass) return {};
  return kernel(0.0, 0.0, kBf16Bytes * elements, gpu);
}

bool fp8_gemm_reads_transposed(int sm) { return (sm >= 100 && sm < 120) || sm >= 130; }

CostModel build_cost_model(std::span<const GemmLayer> layers, std::span<const Recipe> recipes,
                           const GpuTarget& gpu, const CostOptions& options) {
  CostModel model;
  model.gpu = &gpu;
  model.options = options;
  model.recipes.assign(recipes.begin(), recipes.end());
  for (const auto& r : model.recipes) {
    model.support.push_back(recipe_support(r, gpu));
    model.single_copy.push_back(is_per_tensor(r.kind) && fp8_gemm_reads_transposed(gpu.sm));
  }
  const std::size_t n_recipes = model.recipes.size();

  std::map<std::string, LayerCost> by_name;
  for (const auto& layer : layers) {
    LayerCost& c = by_name[layer.layer];
    if (c.steps == 0) {
      c.layer = layer.layer;
      c.fp8_seconds.assign(n_recipes, {});
      c.cast_seconds.assign(n_recipes, {});
      c.amax_seconds.assign(n_recipes, {});
    }
    ++c.steps;
    const RankDims d = rank_dims(layer, options);
    const PricedLayer* price = priced(layer, options);
    // Every rank's GEMM, or the target's module counted `weight` times.
    const double ranks = price ? 1.0 : static_cast<double>(std::max<std::size_t>(layer.ranks.size(), 1));
    const double w = price ? price->weight : 1.0;
    for (const auto& use : kGemmOperandUses) {
      const auto g = static_cast<std::size_t>(use.gemm);
      const GemmShape s = arrange(d, use.gemm);
      c.flops[g] += gemm_flops(s) * ranks * w;
      const double bf16 = gemm_cost_bf16(s, gpu).seconds * w;
      c.bf16_seconds[g] += bf16;
      for (std::size_t r = 0; r < n_recipes; ++r) {
        if (!model.support[r].runs) continue;
        const Recipe& recipe = model.recipes[r];
        c.fp8_seconds[r][g] +=
            is_fp8(recipe.kind) ? gemm_cost_fp8(s, recipe, use.a, use.b, gpu).seconds * w : bf16;
      }
    }
    // A target's qkv and fc1 take their input from the norm, as Megatron-Core's TE layer spec builds them.
    const bool fused_norm = price ? price->role == ModuleRole::kQkv || price->role == ModuleRole::kFc1
                                  : input_from_fused_norm(layer.layer);
    for (std::size_t r = 0; r < n_recipes; ++r) {
      const Recipe& recipe = model.recipes[r];
      if (!model.support[r].runs || !is_fp8(recipe.kind)) continue;
      for (const Role role : {Role::kActivation, Role::kWeight, Role::kGradient}) {
        const auto ri = static_cast<std::size_t>(role);
        const auto [rows, cols] = stored_shape(d, role);
        const bool from_norm = fused_norm && role == Role::kActivation;
        for (const Copies copies : {Copies::kRowwise, Copies::kColumnwise, Copies::kBoth}) {
          const Copies cast = model.single_copy[r] ? Copies::kRowwise : copies;
          double seconds = 0;
          if (from_norm && replays_history(recipe.kind)) {
            // The scale is known before the norm runs, so the norm writes the rowwise copy; a
            // columnwise one is its FP8 transpose.
            if (cast != Copies::kRowwise) seconds = kernel(0.0, 0.0, 2 * kFp8Bytes * rows * cols, gpu).seconds;
          } else {
            seconds = cast_cost(recipe, role, rows, cols, cast, gpu).seconds;
          }
          c.cast_seconds[r][ri][static_cast<std::size_t>(copies) - 1] += seconds * w;
        }
        if (!from_norm) c.amax_seconds[r][ri] += amax_cost(recipe, rows * cols, gpu).seconds * w;
      }
    }
  }
  for (auto& [name, c] : by_name) model.layers.push_back(std::move(c));
  return model;
}

CostPlan uniform_plan(const CostModel& model, int recipe) {
  CostPlan plan;
  plan.choice.assign(model.layers.size(), {recipe, recipe, recipe});
  return plan;
}

CostEstimate estimate_cost(const CostModel& model, const CostPlan& plan) {
  FP8A_CHECK(plan.choice.size() == model.layers.size(), "a cost plan has one entry per layer");
  const int n_recipes = static_cast<int>(model.recipes.size());
  CostEstimate e;
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const LayerCost& c = model.layers[l];
    // The tensors (recipe, role) the FP8 GEMMs read, each with the copies (a Copies mask) they
    // read: one cast and one amax pass each.
    std::array<std::array<int, 3>, 6> casts{};
    std::size_t n_casts = 0;
    auto need = [&](int r, Role role, Orientation o) {
      const int ro = static_cast<int>(role);
      const int bit = o == Orientation::kRowwise ? static_cast<int>(Copies::kRowwise)
                                                 : static_cast<int>(Copies::kColumnwise);
      auto it = std::find_if(casts.begin(), casts.begin() + n_casts,
                             [&](const auto& k) { return k[0] == r && k[1] == ro; });
      if (it == casts.begin() + n_casts) casts[n_casts++] = {r, ro, bit};
      else (*it)[2] |= bit;
    };
    for (const auto& use : kGemmOperandUses) {
      const auto g = static_cast<std::size_t>(use.gemm);
      const int r = plan.choice[l][g];
      e.bf16_seconds += c.bf16_seconds[g];
      e.total_flops += c.flops[g];
      if (r == kCostBf16) {
        e.plan_seconds += c.bf16_seconds[g];
        continue;
      }
      FP8A_CHECK(r >= 0 && r < n_recipes, "a cost plan names a recipe of its model");
      const auto ru = static_cast<std::size_t>(r);
      FP8A_CHECK(model.support[ru].runs, "a cost plan chose a recipe the GPU does not run");
      if (!is_fp8(model.recipes[ru].kind)) {
        e.plan_seconds += c.bf16_seconds[g];
        continue;
      }
      e.plan_seconds += c.fp8_seconds[ru][g];
      e.fp8_flops += c.flops[g];
      need(r, use.a, use.a_orientation);
      need(r, use.b, use.b_orientation);
    }
    for (std::size_t i = 0; i < n_casts; ++i) {
      const auto r = static_cast<std::size_t>(casts[i][0]);
      const auto role = static_cast<std::size_t>(casts[i][1]);
      e.plan_seconds += c.cast_seconds[r][role][static_cast<std::size_t>(casts[i][2]) - 1] + c.amax_seconds[r][role];
    }
  }
  e.speedup = e.plan_seconds > 0 ? e.bf16_seconds / e.plan_seconds : 1.0;
  e.fp8_flop_share = e.total_flops > 0 ? e.fp8_flops / e.total_flops : 0.0;
  return e;
}

}  // namespace fp8a

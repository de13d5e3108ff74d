#include "cuda/cublaslt_gemm_plan.hpp"

#include <algorithm>

#include "core/block_scale.hpp"
#include "core/error.hpp"
#include "cuda/device_support.hpp"

namespace fp8a::cuda {

namespace {

std::string sm_name(int sm) { return "sm_" + std::to_string(sm); }

std::string version_name(std::size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

LtType fp8_type(Fp8Format f) { return f == Fp8Format::kE4M3 ? LtType::kE4M3 : LtType::kE5M2; }

// The operands' names in each GEMM (gemm_engine.hpp's layouts).
const char* a_name(Gemm g) { return g == Gemm::kFprop ? "X" : g == Gemm::kDgrad ? "dY" : "dY^T"; }
const char* b_name(Gemm g) { return g == Gemm::kFprop ? "W" : g == Gemm::kDgrad ? "W^T" : "X^T"; }

// The block mode for a K-major block shape and the kind's scale type, or kNone when cuBLASLt has
// none for it.
LtScaleMode block_mode(RecipeKind kind, BlockShape s) {
  if (recipe_kind_traits(kind).scale_type == ScaleType::kE8M0)
    return s == BlockShape{1, 32} ? LtScaleMode::kVec32Ue8m0 : LtScaleMode::kNone;
  if (s == BlockShape{1, 128}) return LtScaleMode::kVec128_32F;
  if (s == BlockShape{128, 128}) return LtScaleMode::kBlk128x128_32F;
  return LtScaleMode::kNone;
}

// The smallest compute capability with FP8 GEMMs: the lowest lt_min_sm of the FP8 kinds.
int lt_fp8_min_sm() {
  int sm = 1 << 30;
  for (const auto& t : kRecipeKinds)
    if (is_fp8(t.kind)) sm = std::min(sm, t.lt_min_sm);
  return sm;
}

std::string shape_name(BlockShape s) { return std::to_string(s.rows) + "x" + std::to_string(s.cols); }

LtGemmPlan not_supported(LtGemmPlan p, std::string why) {
  p.supported = false;
  p.reason = std::move(why);
  return p;
}

}  // namespace

const char* lt_type_name(LtType t) {
  switch (t) {
    case LtType::kE4M3: return "E4M3";
    case LtType::kE5M2: return "E5M2";
    case LtType::kBf16: break;
  }
  return "BF16";
}

const char* lt_scale_mode_name(LtScaleMode m) {
  switch (m) {
    case LtScaleMode::kScalar32F: return "SCALAR_32F";
    case LtScaleMode::kVec32Ue8m0: return "VEC32_UE8M0";
    case LtScaleMode::kVec128_32F: return "VEC128_32F";
    case LtScaleMode::kBlk128x128_32F: return "BLK128x128_32F";
    case LtScaleMode::kNone: break;
  }
  return "none";
}

const char* LtGemmPlan::accumulation() const {
  if (!fp8()) return "fp32";
  return fast_accum ? "fast" : "split";
}

std::string LtGemmPlan::describe() const {
  auto operand = [](const char* name, const LtOperandPlan& o) {
    std::string s = std::string(name) + " " + lt_type_name(o.type);
    if (o.mode != LtScaleMode::kNone) s += std::string(" ") + lt_scale_mode_name(o.mode);
    return s;
  };
  std::string s = operand(a_name(gemm), a) + " x " + operand(b_name(gemm), b);
  s += fp8() ? (fast_accum ? ", fast accumulation" : ", split accumulation") : ", FP32 accumulation";
  return s + ", FP32 output; reference BF16 x BF16, FP32 accumulation";
}

std::int64_t round_up(std::int64_t v, std::int64_t multiple) {
  return (v + multiple - 1) / multiple * multiple;
}

LtGemmPlan plan_lt_gemm(Gemm gemm, std::int64_t m, std::int64_t n, std::int64_t k,
                        const QuantSpec& a, const QuantSpec& b, const LtCaps& caps) {
  FP8A_CHECK(a.kind == b.kind, "plan_lt_gemm: operands quantised by different recipe kinds");
  LtGemmPlan p;
  p.gemm = gemm;
  p.m = m;
  p.n = n;
  p.k = k;
  p.m_padded = round_up(m, kLtAlign);
  p.n_padded = round_up(n, kLtAlign);
  p.k_padded = round_up(k, kLtAlign);
  p.a.rows = m;
  p.b.rows = n;
  p.a.rows_padded = p.m_padded;
  p.b.rows_padded = p.n_padded;
  const std::string gpu = "this GPU is " + sm_name(caps.sm);
  const RecipeKindTraits& kind = recipe_kind_traits(a.kind);
  if (!is_fp8(a.kind)) {
    if (!lt_runs_on(a.kind, caps.sm))
      return not_supported(p, "BF16 GEMMs need " + sm_name(kind.lt_min_sm) + "+; " + gpu);
    p.supported = true;
    return p;
  }
  if (!runs_on_device(a.kind))
    return not_supported(p, "NVFP4 GEMMs (E2M1 with VEC16_UE4M3 scales) are not run on cuBLASLt yet; "
                            "the CPU emulates them");
  p.a.type = fp8_type(a.format);
  p.b.type = fp8_type(b.format);
  if (caps.sm < lt_fp8_min_sm())
    return not_supported(p, "FP8 GEMMs need " + sm_name(lt_fp8_min_sm()) + "+; " + gpu);
  if (p.a.type == LtType::kE5M2 && p.b.type == LtType::kE5M2)
    return not_supported(p, "cuBLASLt has no E5M2 x E5M2 FP8 GEMM");
  if (kind.granularity == Granularity::kPerTensor) {
    p.a.mode = p.b.mode = LtScaleMode::kScalar32F;
    p.fast_accum = gemm == Gemm::kFprop;  // TE: split accumulator for dgrad and wgrad only
    p.supported = true;
    return p;
  }
  p.a.mode = block_mode(a.kind, a.block);
  p.b.mode = block_mode(b.kind, b.block);
  if (p.a.mode == LtScaleMode::kNone || p.b.mode == LtScaleMode::kNone)
    return not_supported(p, "cuBLASLt has no scaling mode for " + shape_name(a.block) + " x " +
                                shape_name(b.block) + " blocks along K");
  p.k_padded = round_up(k, kLtBlockK);
  if (kind.scale_type == ScaleType::kE8M0) {
    if (!lt_runs_on(a.kind, caps.sm))
      return not_supported(p, "MXFP8 block scaling (VEC32_UE8M0) needs " + sm_name(kind.lt_min_sm) +
                                  "+; " + gpu);
    if (caps.version < kLtVersionMx)
      return not_supported(p, "MXFP8 block scaling (VEC32_UE8M0) needs cuBLASLt 12.8+; this is " +
                                  version_name(caps.version));
  } else {
    if (p.a.mode == LtScaleMode::kBlk128x128_32F && p.b.mode == LtScaleMode::kBlk128x128_32F)
      return not_supported(p, "cuBLASLt takes at most one 128x128-scaled operand (2D x 2D block "
                              "scaling; TE rejects it too)");
    if (!lt_runs_on(a.kind, caps.sm))
      return not_supported(p, "1x128/128x128 block scaling (VEC128_32F, BLK128x128_32F) is a "
                              "Hopper (" + sm_name(kind.lt_min_sm) + ") mode; " + gpu);
    if (caps.version < kLtVersionBlock)
      return not_supported(p, "1x128/128x128 block scaling needs cuBLASLt 12.9+; this is " +
                                  version_name(caps.version));
  }
  p.fast_accum = false;  // TE and PyTorch require split accumulation with block scaling
  p.supported = true;
  return p;
}

std::size_t lt_scale_count(LtScaleMode mode, std::int64_t rows_padded, std::int64_t k_padded) {
  switch (mode) {
    case LtScaleMode::kScalar32F: return 1;
    case LtScaleMode::kVec128_32F:
      return static_cast<std::size_t>(k_padded / 128 * rows_padded);
    case LtScaleMode::kBlk128x128_32F:
      return static_cast<std::size_t>((rows_padded + 127) / 128 * round_up(k_padded / 128, 4));
    case LtScaleMode::kVec32Ue8m0:
      return static_cast<std::size_t>(round_up(rows_padded, 128) * round_up(k_padded / 32, 4));
    case LtScaleMode::kNone: break;
  }
  return 0;
}

std::size_t lt_scale_index(LtScaleMode mode, std::int64_t r, std::int64_t l,
                           std::int64_t rows_padded, std::int64_t k_padded) {
  switch (mode) {
    case LtScaleMode::kScalar32F: return 0;
    case LtScaleMode::kVec128_32F:
      return static_cast<std::size_t>(l / 128 * rows_padded + r);
    case LtScaleMode::kBlk128x128_32F:
      return static_cast<std::size_t>(r / 128 * round_up(k_padded / 128, 4) + l / 128);
    case LtScaleMode::kVec32Ue8m0: {
      const std::int64_t c = l / 32, tiles_per_row = round_up(k_padded / 32, 4) / 4;
      const std::int64_t tile = r / 128 * tiles_per_row + c / 4;
      return static_cast<std::size_t>(tile * 512 + (r % 32) * 16 + (r / 32 % 4) * 4 + c % 4);
    }
    case LtScaleMode::kNone: break;
  }
  FP8A_CHECK(false, "lt_scale_index: a BF16 operand has no scales");
  return 0;
}

const void* LtPackedOperand::data() const {
  return fp8.empty() ? static_cast<const void*>(bf16.data()) : static_cast<const void*>(fp8.data());
}
std::size_t LtPackedOperand::data_bytes() const { return fp8.size() + 2 * bf16.size(); }
const void* LtPackedOperand::scales() const {
  if (!scale_f32.empty()) return scale_f32.data();
  return scale_e8m0.empty() ? nullptr : scale_e8m0.data();
}
std::size_t LtPackedOperand::scale_bytes() const {
  return 4 * scale_f32.size() + scale_e8m0.size();
}

std::uint8_t e8m0_code_of(float scale_inv) {
  const std::uint32_t u = float_bits(scale_inv);
  if (!(scale_inv == scale_inv)) return 0xFF;
  if (u == 0x00400000u) return 0x00;  // 2^-127, a float subnormal
  return static_cast<std::uint8_t>(u >> 23);
}

LtPackedOperand pack_lt_operand(const LtOperandPlan& plan, std::int64_t k, std::int64_t k_padded,
                                std::span<const float> values, const QuantSpec& spec) {
  FP8A_CHECK(static_cast<std::int64_t>(values.size()) == plan.rows * k && k <= k_padded &&
                 plan.rows <= plan.rows_padded,
             "pack_lt_operand: values do not fit the plan");
  const std::int64_t rows = plan.rows;
  const auto padded = static_cast<std::size_t>(plan.rows_padded * k_padded);
  LtPackedOperand out;
  if (plan.type == LtType::kBf16) {
    out.bf16.assign(padded, 0);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t l = 0; l < k; ++l)
        out.bf16[static_cast<std::size_t>(r * k_padded + l)] =
            float_to_bf16(values[static_cast<std::size_t>(r * k + l)]);
    return out;
  }
  const Fp8Format format = plan.type == LtType::kE4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2;
  FP8A_CHECK(format == spec.format, "pack_lt_operand: the plan's FP8 type is not the spec's");
  out.fp8.assign(padded, 0);
  const std::size_t count = lt_scale_count(plan.mode, plan.rows_padded, k_padded);
  if (plan.mode == LtScaleMode::kVec32Ue8m0)
    out.scale_e8m0.assign(count, 127);  // 2^0 for the padding
  else
    out.scale_f32.assign(count, 1.0f);
  auto quantize = [&](std::int64_t r, std::int64_t l, float scale) {
    const auto i = static_cast<std::size_t>(r * k + l);
    out.fp8[static_cast<std::size_t>(r * k_padded + l)] = encode_fp8(format, values[i] * scale);
  };
  if (plan.mode == LtScaleMode::kScalar32F) {
    FP8A_CHECK(spec.block.rows == 0, "pack_lt_operand: per-tensor mode for a blocked spec");
    out.scale_f32[0] = scale_inverse(spec.scale);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t l = 0; l < k; ++l) quantize(r, l, spec.scale);
    return out;
  }
  // Blocked: one scale per block of the unpadded operand, as fake_quantize_rows computes it.
  const std::int64_t br = spec.block.rows, bc = spec.block.cols;
  FP8A_CHECK(br > 0 && bc > 0, "pack_lt_operand: block mode for a per-tensor spec");
  for (std::int64_t r0 = 0; r0 < rows; r0 += br) {
    const std::int64_t r1 = std::min(rows, r0 + br);
    for (std::int64_t l0 = 0; l0 < k; l0 += bc) {
      const std::int64_t l1 = std::min(k, l0 + bc);
      std::int32_t amax_bits = 0;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t l = l0; l < l1; ++l)
          amax_bits = std::max(amax_bits, abs_bits_not_nan(values[static_cast<std::size_t>(r * k + l)]));
      const ScalePair s = block_scale(spec.kind, spec.format, spec.pow2_scales, spec.mx_rule,
                                      spec.value_for_inf,
                                      bits_float(static_cast<std::uint32_t>(amax_bits)));
      for (std::int64_t r = r0; r < r1; ++r) {
        // One scale entry per (row, block) for 1-D modes, per tile for 128x128: written for every
        // row of the block, the same value.
        const std::size_t at = lt_scale_index(plan.mode, r, l0, plan.rows_padded, k_padded);
        if (plan.mode == LtScaleMode::kVec32Ue8m0)
          out.scale_e8m0[at] = e8m0_code_of(s.scale_inv);
        else
          out.scale_f32[at] = s.scale_inv;
        for (std::int64_t l = l0; l < l1; ++l) quantize(r, l, s.scale);
      }
    }
  }
  return out;
}

std::vector<float> lt_dequantize(const LtOperandPlan& plan, std::int64_t k_padded,
                                 const LtPackedOperand& packed) {
  const auto n = static_cast<std::size_t>(plan.rows_padded * k_padded);
  std::vector<float> out(n);
  if (plan.type == LtType::kBf16) {
    for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_float(packed.bf16[i]);
    return out;
  }
  const Fp8Format format = plan.type == LtType::kE4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2;
  for (std::int64_t r = 0; r < plan.rows_padded; ++r)
    for (std::int64_t l = 0; l < k_padded; ++l) {
      const std::size_t at = lt_scale_index(plan.mode, r, l, plan.rows_padded, k_padded);
      const float scale_inv = plan.mode == LtScaleMode::kVec32Ue8m0
                                  ? e8m0_value(packed.scale_e8m0[at])
                                  : packed.scale_f32[at];
      const auto i = static_cast<std::size_t>(r * k_padded + l);
      out[i] = decode_fp8(format, packed.fp8[i]) * scale_inv;
    }
  return out;
}

}  // namespace fp8a::cuda

// Block (1x128, 128x128), MXFP8 (TE round-up and OCP floor E8M0 rules) and BF16 against a scalar
// reference written here from the TE / OCP definitions (TE common/recipe/recipe_common.cuh
// compute_scale_from_amax, tests/pytorch/references/blockwise_quantizer_reference.py,
// common/util/ptx_arch_spec.cuh float_to_e8m0, tests/cpp/operator/test_cast_mxfp8.cu; OCP MX v1.0
// and microxcaling _quantize_mx), sharing no code with the engine: frexp/ldexp for scales, table
// search for FP8 rounding.
#include <doctest/doctest.h>

#include <cfloat>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/cpu_backend.hpp"
#include "engine/fake_quant.hpp"
#include "support/close.hpp"
#include "support/fills.hpp"
#include "support/fp8_ref.hpp"

namespace {

using fp8a::testing::check_close;


struct Ref {
  std::int64_t underflow = 0, overflow = 0, saturated = 0;
  double sum_sq_err = 0, sum_x_deq = 0, sum_deq_sq = 0;
  double sum_sq_underflow = 0;  // x^2 of the elements counted in `underflow`
  float scale_inv_min = INFINITY, scale_inv_max = 0;
};

// TE Float8BlockScaling scale of one block (compute_scale_from_amax, eps 0).
void block_scale_ref(float amax, float fp8_max, bool pow2, float value_for_inf, float* scale,
                     float* scale_inv) {
  if (amax == 0.0f || std::isinf(amax) || std::isnan(amax)) {
    *scale = 1.0f;
  } else {
    *scale = fp8_max / amax;
    if (std::isinf(*scale)) *scale = value_for_inf;
    if (pow2) *scale = std::ldexp(1.0f, std::ilogb(*scale));
  }
  *scale_inv = 1.0f / *scale;
}

// TE MXFP8: E8M0 = ceil(log2(amax * (1/fp8_max))) as a biased exponent, within [0, 254].
int mx_te_exponent(float amax, float fp8_max) {
  const float y = amax * (1.0f / fp8_max);
  if (y == 0.0f) return 0;
  if (std::isinf(y)) return 254;
  int k;
  const double m = std::frexp(static_cast<double>(y), &k);  // y = m * 2^k, m in [0.5, 1)
  const int ceil_log2 = (m == 0.5) ? k - 1 : k;
  return std::min(254, std::max(0, ceil_log2 + 127));
}

// OCP MX: floor(log2(amax)) - emax, at least -127; biased; 255 (NaN) above 254.
int mx_ocp_exponent(float amax, int emax) {
  if (amax == 0.0f) return 0;
  if (!std::isfinite(amax)) return 255;
  int k;
  std::frexp(static_cast<double>(amax), &k);
  const int e = (k - 1) - emax + 127;
  return e > 254 ? 255 : std::max(0, e);
}

// Reference evaluation of one blocked candidate: block (br x bc) over a rows x cols matrix; the
// dequantised values into *deq_out where given.
Ref blocked_ref(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, std::int64_t br,
                std::int64_t bc, const char* kind, bool e4m3, bool pow2, float value_for_inf,
                std::vector<float>* deq_out = nullptr) {
  if (deq_out != nullptr) deq_out->assign(x.size(), 0.0f);
  const auto& spec = e4m3 ? fp8a::ref::kE4M3 : fp8a::ref::kE5M2;
  const float fp8_max = e4m3 ? 448.0f : 57344.0f;
  const float sat = e4m3 ? 464.0f : std::nextafter(61440.0f, 0.0f);
  Ref r;
  for (std::int64_t r0 = 0; r0 < rows; r0 += br) {
    for (std::int64_t c0 = 0; c0 < cols; c0 += bc) {
      const std::int64_t r1 = std::min(rows, r0 + br), c1 = std::min(cols, c0 + bc);
      float amax = 0.0f;
      for (std::int64_t i = r0; i < r1; ++i)
        for (std::int64_t j = c0; j < c1; ++j)
          if (!std::isnan(x[i * cols + j])) amax = std::max(amax, std::fabs(x[i * cols + j]));
      float scale, scale_inv;
      if (std::strcmp(kind, "block") == 0) {
        block_scale_ref(amax, fp8_max, pow2, value_for_inf, &scale, &scale_inv);
      } else {
        const int e = std::strcmp(kind, "mx") == 0 ? mx_te_exponent(amax, fp8_max)
                                                   : mx_ocp_exponent(amax, e4m3 ? 8 : 15);
        scale = e == 255 ? NAN : static_cast<float>(std::ldexp(1.0, 127 - e));
        scale_inv = e == 255 ? NAN : static_cast<float>(std::ldexp(1.0, e - 127));
      }
      r.scale_inv_min = std::min(r.scale_inv_min, scale_inv);
      r.scale_inv_max = std::max(r.scale_inv_max, scale_inv);
      for (std::int64_t i = r0; i < r1; ++i)
        for (std::int64_t j = c0; j < c1; ++j) {
          const float v = x[i * cols + j];
          const float s = v * scale;
          const unsigned code = fp8a::ref::encode_ref(spec, s);
          const auto deq = static_cast<float>(fp8a::ref::decode_ref(spec, code)) * scale_inv;
          if (deq_out != nullptr) (*deq_out)[static_cast<std::size_t>(i * cols + j)] = deq;
          const bool flushed = v != 0.0f && (code & 0x7F) == 0;
          r.underflow += flushed;
          if (flushed) r.sum_sq_underflow += double(v) * v;
          r.overflow += std::fabs(v) > fp8_max * scale_inv;
          r.saturated += std::fabs(s) > sat;
          if (!std::isfinite(v)) continue;
          r.sum_sq_err += (double(v) - deq) * (double(v) - deq);
          r.sum_x_deq += double(v) * deq;
          r.sum_deq_sq += double(deq) * deq;
        }
    }
  }
  return r;
}



struct Case {
  const char* kind;  // block, mx, mx_floor
  fp8a::Recipe recipe;
};

}  // namespace

TEST_CASE("blocked recipes match the reference over odd shapes, fills, roles and orientations") {
  std::uint32_t seed = 17;
  std::vector<Case> cases = {
      {"block", fp8a::parse_recipe("block")},
      {"block", fp8a::parse_recipe("block:fp32")},
      {"block", fp8a::parse_recipe("block:2d")},
      {"mx", fp8a::parse_recipe("mxfp8")},
      {"mx_floor", fp8a::parse_recipe("mxfp8:floor")},
  };
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
      {1, 16}, {5, 160}, {217, 256}, {130, 300}, {300, 7}};
  for (auto [rows, cols] : shapes) {
    for (auto fill_kind : fp8a::testing::kFills) {
      auto x = fp8a::testing::make_fill(static_cast<std::size_t>(rows * cols), fill_kind, seed++);
      const auto view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(x.data()),
                                               fp8a::DType::kF32, {rows, cols});
      for (const auto& cs : cases) {
        for (auto role : {fp8a::Role::kActivation, fp8a::Role::kWeight}) {
          for (auto o : fp8a::orientations_for(cs.recipe, role)) {
            for (auto fmt : {fp8a::Fp8Format::kE4M3, fp8a::Fp8Format::kE5M2}) {
              const fp8a::Candidate c{cs.recipe, fmt, role, o};
              const auto eval = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{c}, view);
              const auto block = fp8a::block_shape(cs.recipe, role, o);
              const auto want = blocked_ref(x, rows, cols, block.rows, block.cols, cs.kind,
                                            fmt == fp8a::Fp8Format::kE4M3, cs.recipe.pow2_scales,
                                            FLT_MAX);
              const auto& m = eval.results[0].metrics;
              INFO(cs.recipe.spec() << " " << std::string(fp8a::role_name(role)) << " "
                   << std::string(fp8a::orientation_name(o)) << " "
                   << std::string(fmt == fp8a::Fp8Format::kE4M3 ? "e4m3" : "e5m2")
                   << " shape " << rows << "x" << cols << " fill "
                   << std::string(fp8a::testing::fill_name(fill_kind)));
              REQUIRE(eval.results[0].applicability.ok);
              CHECK(m.sums.underflow_count == want.underflow);
              CHECK(m.sums.overflow_count == want.overflow);
              CHECK(m.sums.saturated_count == want.saturated);
              CHECK(m.scale_inv_min == want.scale_inv_min);
              CHECK(m.scale_inv_max == want.scale_inv_max);
              check_close(m.sums.sum_sq_err, want.sum_sq_err, "sum_sq_err");
              check_close(m.sums.sum_x_deq, want.sum_x_deq, "sum_x_deq");
              check_close(m.sums.sum_deq_sq, want.sum_deq_sq, "sum_deq_sq");
              check_close(m.sums.sum_sq_underflow, want.sum_sq_underflow, "sum_sq_underflow");
              CHECK(std::isnan(m.scale));  // no single scale for a blocked recipe
            }
          }
        }
      }
    }
  }
}

TEST_CASE("block shapes and orientations follow TE") {
  const auto block = fp8a::parse_recipe("block");
  const auto mx = fp8a::parse_recipe("mxfp8");
  using fp8a::Orientation;
  using fp8a::Role;
  CHECK(fp8a::block_shape(block, Role::kActivation, Orientation::kRowwise) == fp8a::BlockShape{1, 128});
  CHECK(fp8a::block_shape(block, Role::kGradient, Orientation::kColumnwise) == fp8a::BlockShape{128, 1});
  CHECK(fp8a::block_shape(block, Role::kWeight, Orientation::kRowwise) == fp8a::BlockShape{128, 128});
  CHECK(fp8a::block_shape(mx, Role::kWeight, Orientation::kColumnwise) == fp8a::BlockShape{32, 1});
  const auto block_2d = fp8a::parse_recipe("block:2d");  // TE Float8BlockQuantizer's default
  CHECK(fp8a::block_shape(block_2d, Role::kActivation, Orientation::kRowwise) == fp8a::BlockShape{128, 128});
  CHECK(fp8a::block_shape(block_2d, Role::kGradient, Orientation::kColumnwise) == fp8a::BlockShape{128, 128});
  CHECK(fp8a::orientations_for(block_2d, Role::kGradient).size() == 1);
  CHECK(fp8a::orientations_for(block, Role::kWeight).size() == 1);  // 128x128 tiles: same both ways
  CHECK(fp8a::orientations_for(block, Role::kGradient).size() == 2);
  CHECK(fp8a::orientations_for(mx, Role::kWeight).size() == 2);
  CHECK(fp8a::orientations_for(fp8a::parse_recipe("current"), Role::kGradient).size() == 1);
}

TEST_CASE("MXFP8 scales on hand-worked blocks") {
  // One 32-element block with amax 1: TE rounds 1/448 up to 2^-8 (E8M0 119): elements scale by
  // 2^8, 1.0 -> 256 (exact). OCP: floor(log2 1) - 8 = -8, the same here.
  std::vector<float> x(32, 0.5f);
  x[0] = 1.0f;
  const auto view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(x.data()), fp8a::DType::kF32, {1, 32});
  for (const char* spec : {"mxfp8", "mxfp8:floor"}) {
    const fp8a::Candidate c{fp8a::parse_recipe(spec), fp8a::Fp8Format::kE4M3};
    const auto m = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{c}, view).results[0].metrics;
    CHECK(m.scale_inv_min == std::ldexp(1.0f, -8));
    CHECK(m.mse == 0.0);
  }
  // amax 500: TE: 500/448 -> 2^1 (E8M0 128), 500/2 = 250 -> 256 in E4M3 (spacing 16 there); OCP:
  // floor(log2 500) - 8 = 0 -> scale 1, 500 saturates to 448.
  x[0] = 500.0f;
  const fp8a::Candidate te{fp8a::parse_recipe("mxfp8"), fp8a::Fp8Format::kE4M3};
  const fp8a::Candidate ocp{fp8a::parse_recipe("mxfp8:floor"), fp8a::Fp8Format::kE4M3};
  const auto mt = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{te}, view).results[0].metrics;
  const auto mo = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{ocp}, view).results[0].metrics;
  CHECK(mt.scale_inv_min == 2.0f);
  CHECK(mt.sums.saturated_count == 0);
  CHECK(mt.sums.sum_sq_err == 12.0 * 12.0);  // 500 -> 512
  CHECK(mo.scale_inv_min == 1.0f);
  CHECK(mo.sums.saturated_count == 1);
  CHECK(mo.sums.overflow_count == 1);
  CHECK(mo.sums.sum_sq_err == 52.0 * 52.0);  // 500 -> 448
}

TEST_CASE("bf16 round trip: exact for BF16 input, RNE for F32") {
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even -> 1.0.
  std::vector<float> x = {1.0f + std::ldexp(1.0f, -8), 3.0f, -2.5f, 3.4e38f};
  const auto view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(x.data()), fp8a::DType::kF32, {4});
  const fp8a::Candidate c{fp8a::parse_recipe("bf16"), fp8a::Fp8Format::kE4M3};
  const auto m = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{c}, view).results[0].metrics;
  CHECK(m.sums.saturated_count == 1);  // 3.4e38 rounds above bf16's max, to inf
  CHECK(m.sums.overflow_count == 1);
  CHECK(std::isinf(m.sums.sum_sq_err));
  std::vector<std::uint16_t> b = {0x3F80, 0xC020, 0x0001};
  const auto bv = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(b.data()), fp8a::DType::kBF16, {3});
  const auto mb = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{c}, bv).results[0].metrics;
  CHECK(mb.mse == 0.0);
  CHECK(mb.sums.underflow_count == 0);
  CHECK(mb.cos == 1.0);
}

TEST_CASE("saturation and overflow at the 448/464 and 57344/61440 boundaries (scale 1)") {
  // With a delayed scale of 1, x * scale = x. E4M3: 448 is max, 464 the tie that still rounds to
  // 448, anything above it is clipped. E5M2: 57344 is max, 61440 the tie that would round to inf.
  std::vector<float> x = {448.0f, 464.0f, std::nextafter(464.0f, 1e9f), 480.0f,
                          57344.0f, std::nextafter(61440.0f, 0.0f), 61440.0f, INFINITY};
  const auto view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(x.data()),
                                           fp8a::DType::kF32, {1, 8});
  fp8a::Candidate e4{fp8a::parse_recipe("delayed"), fp8a::Fp8Format::kE4M3};
  e4.given_scale = 1.0f;
  fp8a::Candidate e5 = e4;
  e5.format = fp8a::Fp8Format::kE5M2;
  const auto eval = fp8a::CpuBackend().evaluate(std::vector<fp8a::Candidate>{e4, e5}, view);
  // E4M3: saturated = 464.00003, 480, 57344, 61439.996, 61440, inf; overflow (|x| > 448) the
  // same plus 464.
  CHECK(eval.results[0].metrics.sums.saturated_count == 6);
  CHECK(eval.results[0].metrics.sums.overflow_count == 7);
  // E5M2: saturated = 61440 and inf; overflow (|x| > 57344) = 61439.996, 61440, inf.
  CHECK(eval.results[1].metrics.sums.saturated_count == 2);
  CHECK(eval.results[1].metrics.sums.overflow_count == 3);
}

TEST_CASE("a power-of-two blocked cast straight to BF16 bits: the reference's values, normalised") {
  // What the GEMM multiplies (engine/gemm_error.cpp): each dequantised value times 2^-e, 2^e the
  // binade of the operand's largest magnitude, as BF16 bits; false when some value keeps bits
  // BF16 drops. Operands reach it finite (non-finite loaded as 0).
  std::uint32_t seed = 91;
  const std::vector<Case> cases = {
      {"block", fp8a::parse_recipe("block")},
      {"block", fp8a::parse_recipe("block:2d")},
      {"mx", fp8a::parse_recipe("mxfp8")},
      {"mx_floor", fp8a::parse_recipe("mxfp8:floor")},
  };
  std::size_t exact = 0, not_bf16 = 0;  // casts whose values are all BF16 values, or not
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{1, 16}, {130, 300}, {300, 7}, {256, 96}};
  for (auto [rows, cols] : shapes) {
    for (auto fill_kind : fp8a::testing::kFills) {
      auto x = fp8a::testing::make_fill(static_cast<std::size_t>(rows * cols), fill_kind, seed++);
      for (float& v : x) v = std::isfinite(v) ? v : 0.0f;
      float amax = 0.0f;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      const int e = amax > 0.0f ? std::ilogb(amax) : 0;
      if (e < -126 || e > 126) continue;  // the caller casts such operands the other way
      for (const auto& cs : cases)
        for (auto role : {fp8a::Role::kActivation, fp8a::Role::kWeight})
          for (auto o : fp8a::orientations_for(cs.recipe, role))
            for (auto fmt : {fp8a::Fp8Format::kE4M3, fp8a::Fp8Format::kE5M2}) {
              const auto block = fp8a::block_shape(cs.recipe, role, o);
              std::vector<float> deq;
              blocked_ref(x, rows, cols, block.rows, block.cols, cs.kind, fmt == fp8a::Fp8Format::kE4M3,
                          cs.recipe.pow2_scales, FLT_MAX, &deq);
              fp8a::QuantSpec spec;
              spec.kind = cs.recipe.kind;
              spec.format = fmt;
              spec.block = block;
              spec.pow2_scales = cs.recipe.pow2_scales;
              spec.mx_rule = cs.recipe.mx_rule;
              std::vector<std::uint16_t> got(x.size());
              const bool ok = fp8a::quantize_pow2_block_bf16(spec, x.data(), rows, cols, e, got.data());
              bool want_ok = true;
              std::size_t differ = 0;
              for (std::size_t i = 0; i < x.size(); ++i) {
                const float v = deq[i] * std::ldexp(1.0f, -e);
                std::uint32_t b;
                std::memcpy(&b, &v, 4);
                want_ok = want_ok && (b & 0xFFFFu) == 0;
                differ += got[i] != static_cast<std::uint16_t>(b >> 16);
              }
              INFO(cs.recipe.spec() << " " << std::string(fp8a::role_name(role)) << " "
                   << std::string(fp8a::orientation_name(o)) << " "
                   << std::string(fmt == fp8a::Fp8Format::kE4M3 ? "e4m3" : "e5m2") << " shape " << rows << "x"
                   << cols << " fill " << std::string(fp8a::testing::fill_name(fill_kind)));
              CHECK(ok == want_ok);
              CHECK(differ == 0);
              ++(want_ok ? exact : not_bf16);
            }
    }
  }
  MESSAGE(exact << " casts all BF16, " << not_bf16 << " with values BF16 does not hold");
  CHECK(exact > 100);
  // A block of float subnormals beside 1.0: E8M0's smallest scale, 2^-127, leaves 3e-41 as
  // 3 * 2^-9 (an E4M3 subnormal), whose value 3 * 2^-136 holds bits below BF16's.
  fp8a::QuantSpec mx;
  mx.kind = fp8a::RecipeKind::kMx;
  mx.block = {1, 32};
  std::vector<float> one(64, 1.0f);
  std::fill(one.begin() + 32, one.end(), 3e-41f);
  std::vector<std::uint16_t> out(64);
  CHECK_FALSE(fp8a::quantize_pow2_block_bf16(mx, one.data(), 1, 64, 0, out.data()));
  CHECK(fp8a::quantize_pow2_block_bf16(mx, one.data(), 1, 32, 0, out.data()));
  CHECK(out[0] == 0x3F80);  // 1.0
  CHECK_THROWS(fp8a::quantize_pow2_block_bf16(mx, one.data(), 1, 32, 127, out.data()));
  fp8a::QuantSpec fp32 = mx;
  fp32.kind = fp8a::RecipeKind::kBlock;
  fp32.pow2_scales = false;
  CHECK_THROWS(fp8a::quantize_pow2_block_bf16(fp32, one.data(), 1, 32, 0, out.data()));
}

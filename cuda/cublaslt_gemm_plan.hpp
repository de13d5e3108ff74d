// Host side of the cuBLASLt GEMM engine (cublaslt_gemm.hpp), plain C++ so it is unit-tested
// without a GPU: which data types and scaling modes a GEMM gets on a given GPU and cuBLASLt
// version (or why it cannot run there), the padded dims, and the operands packed as cuBLASLt
// reads them: FP8 codes (or BF16) zero-padded, with the scale factors in the layout of their mode.
//
// Layout (cuBLAS documentation of cublasLtMatmul; TE common/gemm/cublaslt_gemm.cu): FP8 GEMMs on
// Hopper run only as "TN", both operands K-major.
// The problem D [m, n] = a [m, k] * b [n, k]^T (engine/gemm_engine.hpp) is given to cuBLASLt, whose
// matrices are column-major, as
//     A = b   (transa = T, rows k_padded, cols n_padded, lda = k_padded)
//     B = a   (transb = N, rows k_padded, cols m_padded, ldb = k_padded)
//     D       (rows n_padded, cols m_padded, ldd = n_padded) = row-major [m_padded, n_padded]
// so cuBLASLt's (m, n, k) is (n_padded, m_padded, k_padded), and the caller's D is the top-left
// [m, n] corner. A_SCALE_* describe b, B_SCALE_* describe a.
//
// Quantisation happens here, on the host, with the codec and block-scale functions of core
// that the emulated path uses, so the FP8 operands cuBLASLt multiplies decode exactly to the
// emulated ones (lt_dequantize; tests/cuda/test_cuda_host.cpp checks it bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/gemm_engine.hpp"

namespace fp8a::cuda {

// Device 0's compute capability and the cuBLASLt library's version.
struct LtCaps {
  int sm = 0;                // 10 * major + minor: 90 for H100/H200, 100 for B200
  std::size_t version = 0;   // cublasLtGetVersion(): 10000 * major + 100 * minor + patch
};

// The cuBLASLt versions that introduced the block scaling modes (cuBLAS 12.8 and 12.9 release
// notes; the enums are in cublasLt.h's cublasLtMatmulMatrixScale_t).
inline constexpr std::size_t kLtVersionMx = 120800;     // VEC32_UE8M0, sm_100+
inline constexpr std::size_t kLtVersionBlock = 120900;  // VEC128_32F, BLK128x128_32F, sm_90

// Every dim is padded with zeros to a multiple of this (16-byte FP8 rows and leading dims, the
// FP8 tensor-core requirement); K to kLtBlockK when an operand is block-scaled (whole 128-element
// scale blocks, and whole groups of four E8M0 scales for MXFP8).
inline constexpr std::int64_t kLtAlign = 16;
inline constexpr std::int64_t kLtBlockK = 128;

enum class LtType : std::uint8_t { kE4M3, kE5M2, kBf16 };
const char* lt_type_name(LtType t);  // "E4M3", "E5M2", "BF16"

// How an operand's scale factors are given; the values are cublasLtMatmulMatrixScale_t's.
enum class LtScaleMode : std::uint8_t {
  kScalar32F = 0,       // one fp32 scale_inv for the tensor
  kVec32Ue8m0 = 2,      // one E8M0 per 32 elements along K, in 128x4 tiles (MXFP8)
  kVec128_32F = 4,      // one fp32 scale_inv per 128 elements along K
  kBlk128x128_32F = 5,  // one fp32 scale_inv per 128 x 128 tile
  kNone = 255,          // BF16 operand: no scale
};
const char* lt_scale_mode_name(LtScaleMode m);  // the enumerator's name without the prefix

struct LtOperandPlan {
  LtType type = LtType::kBf16;
  LtScaleMode mode = LtScaleMode::kNone;
  std::int64_t rows = 0, rows_padded = 0;  // K-major rows: m for a, n for b
};

struct LtGemmPlan {
  bool supported = false;
  std::string reason;  // why not, when !supported (lower case; the caller prefixes the engine)
  Gemm gemm = Gemm::kFprop;
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t m_padded = 0, n_padded = 0, k_padded = 0;
  LtOperandPlan a, b;
  bool fast_accum = false;  // CUBLASLT_MATMUL_DESC_FAST_ACCUM (FP8 only)

  bool fp8() const { return a.type != LtType::kBf16; }
  // "fast" (FP8, FAST_ACCUM = 1), "split" (FP8, FAST_ACCUM = 0: partial sums promoted to FP32),
  // "fp32" (BF16 GEMM, FP32 accumulation).
  const char* accumulation() const;
  // The note of a GEMM that ran, e.g. "X E4M3 SCALAR_32F x W E4M3 SCALAR_32F, fast accumulation,
  // FP32 output; reference BF16 x BF16, FP32 accumulation".
  std::string describe() const;
};

// The plan for one GEMM: per-tensor recipes E4M3/E5M2 with SCALAR_32F scales (sm_89+), fast
// accumulation for fprop and split for dgrad/wgrad (TE's defaults); block recipes with 1x128 ->
// VEC128_32F and 128x128 -> BLK128x128_32F (sm_90 only, cuBLASLt 12.9+, not both operands 128x128,
// split accumulation as TE and PyTorch require); MXFP8 1x32 -> VEC32_UE8M0 (sm_100+, cuBLASLt
// 12.8+); bf16 -> a BF16 GEMM. Anything else is not supported, with the reason. The compute
// capabilities come from the recipe rows (core/recipe.hpp lt_min_sm, lt_max_sm: lt_runs_on).
LtGemmPlan plan_lt_gemm(Gemm gemm, std::int64_t m, std::int64_t n, std::int64_t k,
                        const QuantSpec& a, const QuantSpec& b, const LtCaps& caps);

std::int64_t round_up(std::int64_t v, std::int64_t multiple);

// The scale tensor of a block mode for an operand of rows_padded x k_padded, and where the scale
// of element (r, l) lives in it (the layouts of TE's CuBLASScaleMunger and PyTorch's to_blocked):
//   VEC128_32F      [k_padded / 128][rows_padded]                     index (l / 128) * rows_padded + r
//   BLK128x128_32F  [ceil(rows_padded / 128)][round_up(k_padded / 128, 4)]
//                                                                     index (r / 128) * cols + l / 128
//   VEC32_UE8M0     128 x 4 tiles of [round_up(rows, 128)][round_up(k_padded / 32, 4)], tile after
//                   tile (row-major over tiles), inside a tile (r % 32) * 16 + (r / 32 % 4) * 4 + c % 4
//   SCALAR_32F      one value
std::size_t lt_scale_count(LtScaleMode mode, std::int64_t rows_padded, std::int64_t k_padded);
std::size_t lt_scale_index(LtScaleMode mode, std::int64_t r, std::int64_t l, std::int64_t rows_padded,
                           std::int64_t k_padded);

// One operand as it is uploaded: rows_padded x k_padded elements row-major (= cuBLASLt's K-major
// column-major), zeros in the padding, and its scale tensor (padding entries 1.0: they scale
// zeros only).
struct LtPackedOperand {
  std::vector<std::uint8_t> fp8;      // FP8 codes (E4M3 or E5M2), when the plan's type is FP8
  std::vector<std::uint16_t> bf16;    // BF16 bits, when it is BF16
  std::vector<float> scale_f32;       // SCALAR_32F, VEC128_32F, BLK128x128_32F: scale_inv values
  std::vector<std::uint8_t> scale_e8m0;  // VEC32_UE8M0: E8M0 codes

  const void* data() const;
  std::size_t data_bytes() const;
  const void* scales() const;  // nullptr for BF16
  std::size_t scale_bytes() const;
};

// Quantises values [plan.rows, k] (row-major, finite) with spec as the plan's type and mode say:
// per-tensor with spec.scale, blocked with block_scale() per block of spec.block (in this K-major
// layout), BF16 by rounding. A BF16 plan ignores spec (the reference operands).
LtPackedOperand pack_lt_operand(const LtOperandPlan& plan, std::int64_t k, std::int64_t k_padded,
                                std::span<const float> values, const QuantSpec& spec);

// The values cuBLASLt sees in a packed operand, [rows_padded, k_padded] row-major: decoded codes
// times their scale_inv. Equal, bit for bit, to fake_quantize_rows() of the same values.
std::vector<float> lt_dequantize(const LtOperandPlan& plan, std::int64_t k_padded,
                                 const LtPackedOperand& packed);

// The E8M0 code whose value (e8m0_value) is this scale_inv: the inverse of e8m0_value.
std::uint8_t e8m0_code_of(float scale_inv);

}  // namespace fp8a::cuda

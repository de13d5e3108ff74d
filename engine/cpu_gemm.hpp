// Matrix products on the CPU's matrix units, for the GEMM-output error (gemm_error.hpp):
//     c [m, n] = a [m, k] * b [n, k]^T,   c[i][j] = sum_l a[i][l] * b[j][l]
// float32 accumulation, c row-major. Each operand lies K-major (row-major [rows, k], k
// contiguous) or K-outer (row-major [k, rows]: its transpose), as it lies in a capture.
//
// oneDNN's matmul does the work, in the calling thread only: its OpenMP team is held to one
// thread on every call, so TBB alone shares the cores out (the caller makes the tasks). oneDNN
// picks the kernel for the CPU it runs on (AMX, AVX512_BF16, AVX-512, AVX2, ...).
//
// BF16 operands run on BF16 units where the CPU has them (cpu_gemm_native_bf16()); elsewhere they
// are widened to float32 (exactly) and multiplied by the float32 kernel. Either way every product
// of two BF16 values is exact in float32, so the sums differ from float64 ones by float32
// accumulation only, in an order that depends on the kernel and the shape, never on the thread
// count. BF16 units treat subnormal inputs and results as zero: callers scale operands by powers
// of two so that this touches only values below 2^-126 of the operand's largest.
#pragma once

#include <cstdint>
#include <string>

namespace fp8a {

// Whether BF16 products run on BF16 units here (AMX or AVX512_BF16): decided once, at first use.
bool cpu_gemm_native_bf16();
// The instruction set oneDNN runs on here, in oneDNN's words ("avx512_core_amx", "avx2", ...).
std::string cpu_gemm_isa();

// How an operand lies: kKMajor [rows, k] row-major, kKOuter [k, rows] row-major.
enum class GemmLayout : std::uint8_t { kKMajor, kKOuter };

// c = a * b^T with BF16 operands (raw bits, float = bits << 16).
void cpu_gemm_bf16(const std::uint16_t* a, GemmLayout a_layout, const std::uint16_t* b, GemmLayout b_layout,
                   std::int64_t m, std::int64_t n, std::int64_t k, float* c);
// c[e] = a[e] * b[e]^T for e < batch, dense: a [batch, m, k], b [batch, n, k], c [batch, m, n].
void cpu_gemm_bf16_batched(const std::uint16_t* a, const std::uint16_t* b, std::int64_t batch, std::int64_t m,
                           std::int64_t n, std::int64_t k, float* c);
// out [i] = the float32 value of BF16 bits x [i], exactly (where BF16 products are widened).
void cpu_widen_bf16(const std::uint16_t* x, std::int64_t n, float* out);
// c[e] = a[e] * b[e]^T with float32 operands, laid out as cpu_gemm_bf16_batched's: its products
// on a CPU without BF16 units, given operands widened once (cpu_widen_bf16).
void cpu_gemm_f32_batched(const float* a, const float* b, std::int64_t batch, std::int64_t m, std::int64_t n,
                          std::int64_t k, float* c);
// c = a * b^T with float32 operands.
void cpu_gemm_f32(const float* a, GemmLayout a_layout, const float* b, GemmLayout b_layout, std::int64_t m,
                  std::int64_t n, std::int64_t k, float* c);

}  // namespace fp8a

#include "engine/cpu_gemm.hpp"

#include <omp.h>

#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "core/error.hpp"
#include "engine/cpu_isa.hpp"

namespace fp8a {

namespace {

using dnnl::memory;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// c = a * b with the matmul primitive of these descriptors (oneDNN's primitive cache makes a
// repeated shape cheap), executed in this thread.
void execute(const memory::desc& ad, const memory::desc& bd, const memory::desc& cd, const void* a, const void* b,
             float* c) {
  omp_set_num_threads(1);  // this thread's team: TBB owns the cores
  try {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), cpu_engine());
    const dnnl::matmul prim(pd);
    dnnl::stream stream(cpu_engine());
    memory am(ad, cpu_engine(), const_cast<void*>(a)), bm(bd, cpu_engine(), const_cast<void*>(b)),
        cm(cd, cpu_engine(), c);
    prim.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
  } catch (const dnnl::error& e) {
    FP8A_CHECK(false, std::string("oneDNN matmul failed: ") + e.what());
  }
}

// c = a * b^T.
void matmul(memory::data_type type, const void* a, GemmLayout a_layout, const void* b, GemmLayout b_layout,
            std::int64_t m, std::int64_t n, std::int64_t k, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::memset(c, 0, static_cast<std::size_t>(m * n) * sizeof(float));
    return;
  }
  // oneDNN's a is [m, k] and its b [k, n]: ours is b^T, so a K-major b is its "ba".
  execute(memory::desc({m, k}, type, a_layout == GemmLayout::kKMajor ? memory::format_tag::ab : memory::format_tag::ba),
          memory::desc({k, n}, type, b_layout == GemmLayout::kKMajor ? memory::format_tag::ba : memory::format_tag::ab),
          memory::desc({m, n}, memory::data_type::f32, memory::format_tag::ab), a, b, c);
}

// The batched form: a [batch, m, k], b [batch, n, k] (oneDNN's weights [batch, k, n] with k
// contiguous), c [batch, m, n], all dense.
void matmul_batched(memory::data_type type, const void* a, const void* b, std::int64_t batch, std::int64_t m,
                    std::int64_t n, std::int64_t k, float* c) {
  if (batch == 0 || m == 0 || n == 0) return;
  execute(memory::desc({batch, m, k}, type, memory::format_tag::abc),
          memory::desc({batch, k, n}, type, memory::format_tag::acb),
          memory::desc({batch, m, n}, memory::data_type::f32, memory::format_tag::abc), a, b, c);
}

void widen_body(const std::uint16_t* x, std::int64_t n, float* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(x[i]) << 16;
    std::memcpy(out + i, &bits, 4);
  }
}
FP8A_CPU_PATHS(void, widen_on, (const std::uint16_t* x, std::int64_t n, float* out), (x, n, out), widen_body)

std::vector<float> widened(const std::uint16_t* x, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n));
  cpu_widen_bf16(x, n, out.data());
  return out;
}

}  // namespace

void cpu_widen_bf16(const std::uint16_t* x, std::int64_t n, float* out) {
  FP8A_CPU_PICK(default_cpu_isa(), widen_on)(x, n, out);
}

void cpu_gemm_f32_batched(const float* a, const float* b, std::int64_t batch, std::int64_t m, std::int64_t n,
                          std::int64_t k, float* c) {
  matmul_batched(memory::data_type::f32, a, b, batch, m, n, k, c);
}

bool cpu_gemm_native_bf16() {
  static const bool native = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return native;
}

std::string cpu_gemm_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

void cpu_gemm_bf16(const std::uint16_t* a, GemmLayout a_layout, const std::uint16_t* b, GemmLayout b_layout,
                   std::int64_t m, std::int64_t n, std::int64_t k, float* c) {
  if (cpu_gemm_native_bf16()) return matmul(memory::data_type::bf16, a, a_layout, b, b_layout, m, n, k, c);
  const std::vector<float> af = widened(a, m * k), bf = widened(b, n * k);
  matmul(memory::data_type::f32, af.data(), a_layout, bf.data(), b_layout, m, n, k, c);
}

void cpu_gemm_bf16_batched(const std::uint16_t* a, const std::uint16_t* b, std::int64_t batch, std::int64_t m,
                           std::int64_t n, std::int64_t k, float* c) {
  if (cpu_gemm_native_bf16()) return matmul_batched(memory::data_type::bf16, a, b, batch, m, n, k, c);
  const std::vector<float> af = widened(a, batch * m * k), bf = widened(b, batch * n * k);
  matmul_batched(memory::data_type::f32, af.data(), bf.data(), batch, m, n, k, c);
}

void cpu_gemm_f32(const float* a, GemmLayout a_layout, const float* b, GemmLayout b_layout, std::int64_t m,
                  std::int64_t n, std::int64_t k, float* c) {
  matmul(memory::data_type::f32, a, a_layout, b, b_layout, m, n, k, c);
}

}  // namespace fp8a

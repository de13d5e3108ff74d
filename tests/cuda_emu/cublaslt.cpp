// The emulated cuBLASLt (include/cublasLt.h): what it checks and computes is described there.
//
// Written from cuBLASLt's documentation (the cuBLAS documentation of cublasLtMatmul, cublasLt.h),
// not from the GEMM engine's packing code (cuda/cublaslt_gemm_plan.cpp), so that a test of the
// engine on this emulation checks the engine's layouts and scale tensors against an independent
// reading of the rules.
#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cuda_emu/runtime_internal.hpp"
#include "core/fp8_codec.hpp"

struct cublasLtContext {
  int live = 1;
};

struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_type = CUDA_R_32F;
  std::int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
  std::int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  std::int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  std::int8_t fast_accum = 0;
  std::int64_t alpha_vector_batch_stride = 0;
};

struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type = CUDA_R_32F;
  std::uint64_t rows = 0, cols = 0;
  std::int64_t ld = 0;
};

struct cublasLtMatmulPreferenceOpaque_t {
  std::uint64_t max_workspace_bytes = 0;
};

namespace fp8a_emu {

namespace {

// The algorithm the heuristic hands out; cublasLtMatmul takes no other.
constexpr std::uint64_t kAlgoTag = 0xF8A0'C0DE'0000'0001ull;

std::atomic<std::size_t>& version_setting() {
  static std::atomic<std::size_t> v = [] {
    const char* env = std::getenv("FP8A_CUDA_EMULATION_CUBLASLT_VERSION");
    return env != nullptr && *env != '\0' ? static_cast<std::size_t>(std::strtoull(env, nullptr, 10))
                                          : std::size_t{130100};
  }();
  return v;
}

bool is_fp8(cudaDataType_t t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }

std::size_t type_bytes(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16BF: return 2;
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2: return 1;
  }
  return 0;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

bool is_block_1d_2d(std::int32_t mode) {
  return mode == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F || mode == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
}

// A status with the reason, printed to stderr when a call fails (the test's log says why).
struct Outcome {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  std::string why;
  explicit operator bool() const { return status == CUBLAS_STATUS_SUCCESS; }
};

Outcome refuse(cublasStatus_t status, std::string why) { return {status, "cuBLASLt: " + std::move(why)}; }

// One input matrix as the GEMM reads it: op(X) is rows_op x k (A: m x k; B^T: n x k), element
// (o, l) of it stored at offset() in the column-major layout.
struct Operand {
  const cublasLtMatrixLayoutOpaque_t* layout;
  bool transposed;  // op = T
  bool is_b;        // B is k x n: its "outer" index is the column

  // Stored (row, col) of op(X)'s element (outer o, inner l).
  std::int64_t offset(std::int64_t o, std::int64_t l) const {
    // A: op(A)(o, l); stored A is o x l (N) or l x o (T). B: op(B)(l, o); stored B is l x o (N) or
    // o x l (T). K-major ("innermost dimension is K") when stored rows run along K.
    const bool k_major = is_b ? !transposed : transposed;
    return k_major ? o * layout->ld + l : l * layout->ld + o;
  }
};

// The problem the descriptors describe: D (m x n) = op(A) (m x k) * op(B) (k x n).
struct Problem {
  std::int64_t m = 0, n = 0, k = 0;
};

Outcome check_layouts(const cublasLtMatmulDescOpaque_t& d, const cublasLtMatrixLayoutOpaque_t& a,
                      const cublasLtMatrixLayoutOpaque_t& b, const cublasLtMatrixLayoutOpaque_t& c,
                      const cublasLtMatrixLayoutOpaque_t& dd, Problem* p) {
  const bool ta = d.transa == CUBLAS_OP_T, tb = d.transb == CUBLAS_OP_T;
  const auto m = static_cast<std::int64_t>(dd.rows), n = static_cast<std::int64_t>(dd.cols);
  const auto k = static_cast<std::int64_t>(ta ? a.rows : a.cols);
  const auto a_m = static_cast<std::int64_t>(ta ? a.cols : a.rows);
  const auto b_k = static_cast<std::int64_t>(tb ? b.cols : b.rows);
  const auto b_n = static_cast<std::int64_t>(tb ? b.rows : b.cols);
  if (a_m != m || b_n != n || b_k != k)
    return refuse(CUBLAS_STATUS_INVALID_VALUE,
                  "op(A) is " + std::to_string(a_m) + "x" + std::to_string(k) + ", op(B) " +
                      std::to_string(b_k) + "x" + std::to_string(b_n) + ", D " + std::to_string(m) + "x" +
                      std::to_string(n) + ": the dims do not match");
  if (c.rows != dd.rows || c.cols != dd.cols)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "C and D layouts differ in shape");
  for (const auto* l : {&a, &b, &c, &dd})
    if (l->ld < static_cast<std::int64_t>(std::max<std::uint64_t>(l->rows, 1)))
      return refuse(CUBLAS_STATUS_INVALID_VALUE, "a leading dimension is smaller than its matrix's rows");
  if (m == 0 || n == 0 || k == 0) return refuse(CUBLAS_STATUS_INVALID_VALUE, "an empty GEMM");
  *p = {m, n, k};
  return {};
}

// Which problems cuBLASLt takes (the rules of the header and of the cuBLAS documentation of
// cublasLtMatmul).
Outcome check_support(const cublasLtMatmulDescOpaque_t& d, const cublasLtMatrixLayoutOpaque_t& a,
                      const cublasLtMatrixLayoutOpaque_t& b, const cublasLtMatrixLayoutOpaque_t& c,
                      const cublasLtMatrixLayoutOpaque_t& dd, Problem* p) {
  if (d.compute != CUBLAS_COMPUTE_32F || d.scale_type != CUDA_R_32F)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "only CUBLAS_COMPUTE_32F with CUDA_R_32F scales is emulated");
  if (Outcome o = check_layouts(d, a, b, c, dd, p); !o) return o;
  if (c.type != dd.type) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "C's type differs from D's");
  if (dd.type != CUDA_R_32F && dd.type != CUDA_R_16BF)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "D must be CUDA_R_32F or CUDA_R_16BF here");
  const int sm = compute_capability();
  const std::size_t version = version_setting().load();
  if (!is_fp8(a.type) && !is_fp8(b.type)) {
    if (a.type != CUDA_R_16BF || b.type != CUDA_R_16BF)
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "non-FP8 inputs must both be CUDA_R_16BF here");
    if (sm < 80) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "BF16 GEMMs need sm_80+");
    if (d.a_scale != nullptr || d.b_scale != nullptr || d.a_mode != 0 || d.b_mode != 0)
      return refuse(CUBLAS_STATUS_INVALID_VALUE, "A/B scales set for a BF16 GEMM");
    return {};
  }
  if (!is_fp8(a.type) || !is_fp8(b.type))
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "an FP8 GEMM needs both inputs FP8");
  if (a.type == CUDA_R_8F_E5M2 && b.type == CUDA_R_8F_E5M2)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "E5M2 x E5M2 is not supported");
  if (sm < 89) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "FP8 GEMMs need sm_89+");
  if (sm < 100 && (d.transa != CUBLAS_OP_T || d.transb != CUBLAS_OP_N))
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "FP8 before sm_100 runs only as TN (transa = T, transb = N)");
  if (a.ld % 16 != 0 || b.ld % 16 != 0)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "FP8 leading dimensions must be multiples of 16 bytes");
  const std::int32_t ma = d.a_mode, mb = d.b_mode;
  if (ma == CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F && mb == CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F) return {};
  if (d.transa != CUBLAS_OP_T || d.transb != CUBLAS_OP_N)
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "block scaling is emulated for K-major (TN) operands only");
  if (d.a_scale == nullptr || d.b_scale == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "block scaling without both scale pointers");
  if (ma == CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 && mb == CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0) {
    if (sm < 100) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "VEC32_UE8M0 needs sm_100+");
    if (version < 120800) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "VEC32_UE8M0 needs cuBLASLt 12.8+");
    return {};
  }
  if (is_block_1d_2d(ma) && is_block_1d_2d(mb)) {
    if (ma == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F && mb == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F)
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "BLK128x128_32F on both A and B is not supported");
    if (sm / 10 != 9) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "VEC128_32F/BLK128x128_32F are Hopper (sm_90) modes");
    if (version < 120900)
      return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "VEC128_32F/BLK128x128_32F need cuBLASLt 12.9+");
    return {};
  }
  return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "scale modes " + std::to_string(ma) + " x " + std::to_string(mb) +
                                                 " are not a supported pair");
}

// The scale tensor of one operand: its size in bytes and the scale of element (outer o, K index l),
// outer being m for A and n for B. The layouts, from the cuBLASLt documentation:
//   SCALAR_32F      one float (null: 1)
//   VEC128_32F      floats, ceil(K / 128) groups of round_up(outer, 4): outer-major within a K block
//   BLK128x128_32F  floats, ceil(outer / 128) rows of round_up(ceil(K / 128), 4)
//   VEC32_UE8M0     E8M0 bytes, the [outer][ceil(K / 32)] matrix padded to [round_up(outer, 128)]
//                   [round_up(ceil(K / 32), 4)] and stored as 128 x 4 tiles (tiles K-fastest),
//                   each tile 32 lines of 16 bytes: line r % 32 holds rows r, r + 32, r + 64, r + 96,
//                   four scales each
struct ScaleTensor {
  std::int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  const void* pointer = nullptr;
  std::int64_t outer = 0, k = 0;

  std::size_t bytes() const {
    switch (mode) {
      case CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F: return pointer == nullptr ? 0 : 4;
      case CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F:
        return static_cast<std::size_t>(4 * ceil_div(k, 128) * round_up(outer, 4));
      case CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F:
        return static_cast<std::size_t>(4 * ceil_div(outer, 128) * round_up(ceil_div(k, 128), 4));
      case CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0:
        return static_cast<std::size_t>(round_up(outer, 128) * round_up(ceil_div(k, 32), 4));
    }
    return 0;
  }

  float at(std::int64_t o, std::int64_t l) const {
    const auto* f = static_cast<const float*>(pointer);
    switch (mode) {
      case CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F: return f == nullptr ? 1.0f : f[0];
      case CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F: return f[l / 128 * round_up(outer, 4) + o];
      case CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F:
        return f[o / 128 * round_up(ceil_div(k, 128), 4) + l / 128];
      case CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0: {
        const std::int64_t col = l / 32, col_tiles = round_up(ceil_div(k, 32), 4) / 4;
        const std::int64_t tile = o / 128 * col_tiles + col / 4;
        const std::int64_t line = o % 32, quarter = o % 128 / 32;
        const auto* codes = static_cast<const std::uint8_t*>(pointer);
        const std::uint8_t code = codes[tile * 512 + line * 16 + quarter * 4 + col % 4];
        return code == 0xFF ? std::nanf("") : std::ldexp(1.0f, static_cast<int>(code) - 127);
      }
    }
    return std::nanf("");
  }

  // The K extent one scale covers (the partial sums it multiplies), 0 for a per-tensor scale.
  std::int64_t block() const {
    switch (mode) {
      case CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0: return 32;
      case CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F:
      case CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F: return 128;
    }
    return 0;
  }
};

float element_value(cudaDataType_t type, const void* data, std::int64_t offset) {
  switch (type) {
    case CUDA_R_32F: return static_cast<const float*>(data)[offset];
    case CUDA_R_16BF: return fp8a::bf16_to_float(static_cast<const std::uint16_t*>(data)[offset]);
    case CUDA_R_8F_E4M3:
      return fp8a::decode_fp8(fp8a::Fp8Format::kE4M3, static_cast<const std::uint8_t*>(data)[offset]);
    case CUDA_R_8F_E5M2:
      return fp8a::decode_fp8(fp8a::Fp8Format::kE5M2, static_cast<const std::uint8_t*>(data)[offset]);
  }
  return std::nanf("");
}

// Bytes a column-major rows x cols matrix with leading dimension ld spans.
std::size_t span_bytes(const cublasLtMatrixLayoutOpaque_t& l) {
  const auto elements = (static_cast<std::int64_t>(l.cols) - 1) * l.ld + static_cast<std::int64_t>(l.rows);
  return static_cast<std::size_t>(elements) * type_bytes(l.type);
}

Outcome check_memory(const char* name, const void* p, const cublasLtMatrixLayoutOpaque_t& l, bool fp8) {
  if (!is_device_range(p, span_bytes(l)))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, std::string(name) + " is not device memory of " +
                                                   std::to_string(span_bytes(l)) + " bytes");
  if (fp8 && reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, std::string(name) + " is not 16-byte aligned");
  return {};
}

Outcome check_scales(const char* name, const ScaleTensor& s) {
  if (s.pointer != nullptr && !is_device_range(s.pointer, s.bytes()))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, std::string(name) + " scale tensor is not device memory of " +
                                                   std::to_string(s.bytes()) + " bytes (its layout's size)");
  return {};
}

cublasStatus_t failed(const Outcome& o) {
  report_failure(o.why);
  return o.status;
}

// One cublasLtMatmul call, with copies of what its descriptors said.
struct Matmul {
  Problem p;
  cublasLtMatrixLayoutOpaque_t la, lb, lc, ld;
  bool ta, tb, fp8;
  const void* a;
  const void* b;
  const void* c;
  void* d;
  float alpha, beta;
  ScaleTensor sa, sb;
};

void compute(const Matmul& mm) {
  const Problem& p = mm.p;
  // op(A) as m rows of k values and op(B)^T as n rows of k, unscaled.
  const Operand oa{&mm.la, mm.ta, false};
  const Operand ob{&mm.lb, mm.tb, true};
  const auto ku = static_cast<std::size_t>(p.k);
  std::vector<float> av(static_cast<std::size_t>(p.m) * ku), bv(static_cast<std::size_t>(p.n) * ku);
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t l = 0; l < p.k; ++l)
      av[static_cast<std::size_t>(i) * ku + static_cast<std::size_t>(l)] = element_value(mm.la.type, mm.a, oa.offset(i, l));
  for (std::int64_t j = 0; j < p.n; ++j)
    for (std::int64_t l = 0; l < p.k; ++l)
      bv[static_cast<std::size_t>(j) * ku + static_cast<std::size_t>(l)] = element_value(mm.lb.type, mm.b, ob.offset(j, l));

  // Float32 sums in K order: per-tensor scales on the finished sum, block scales on each block's
  // partial sum (both operands' blocks have the same K extent in every supported pair).
  const std::int64_t block = std::max(mm.sa.block(), mm.sb.block());
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      const float* ar = &av[static_cast<std::size_t>(i) * ku];
      const float* br = &bv[static_cast<std::size_t>(j) * ku];
      float acc = 0.0f;
      if (block == 0) {
        for (std::int64_t l = 0; l < p.k; ++l) acc += ar[l] * br[l];
        acc *= mm.sa.at(i, 0) * mm.sb.at(j, 0);
      } else {
        for (std::int64_t l0 = 0; l0 < p.k; l0 += block) {
          float partial = 0.0f;
          for (std::int64_t l = l0; l < std::min(p.k, l0 + block); ++l) partial += ar[l] * br[l];
          acc += partial * (mm.sa.at(i, l0) * mm.sb.at(j, l0));
        }
      }
      float out = mm.alpha * acc;
      const std::int64_t at_c = j * mm.lc.ld + i, at_d = j * mm.ld.ld + i;
      if (mm.beta != 0.0f) out += mm.beta * element_value(mm.lc.type, mm.c, at_c);
      if (mm.ld.type == CUDA_R_32F)
        static_cast<float*>(mm.d)[at_d] = out;
      else
        static_cast<std::uint16_t*>(mm.d)[at_d] = fp8a::float_to_bf16(out);
    }
}

// Every matrix and scale tensor of the call is device memory of its layout's size.
Outcome check_buffers(const Matmul& mm) {
  for (const auto& o : {check_memory("A", mm.a, mm.la, mm.fp8), check_memory("B", mm.b, mm.lb, mm.fp8),
                        check_memory("D", mm.d, mm.ld, false), check_scales("A", mm.sa), check_scales("B", mm.sb)})
    if (!o) return o;
  if (mm.beta != 0.0f) return check_memory("C", mm.c, mm.lc, false);
  return {};
}

template <class T>
cublasStatus_t read_value(const void* buf, std::size_t size, T* out) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(out, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

void set_cublaslt_version(std::size_t version) { version_setting().store(version); }

}  // namespace fp8a_emu

using fp8a_emu::read_value;

std::size_t cublasLtGetVersion() { return fp8a_emu::version_setting().load(); }

const char* cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  }
  return "unknown status";
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute_type,
                                        cudaDataType_t scale_type) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque_t;
  (*desc)->compute = compute_type;
  (*desc)->scale_type = scale_type;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, std::size_t size) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return read_value(buf, size, &desc->transa);
    case CUBLASLT_MATMUL_DESC_TRANSB: return read_value(buf, size, &desc->transb);
    case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE: return read_value(buf, size, &desc->alpha_vector_batch_stride);
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return read_value(buf, size, &desc->a_scale);
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return read_value(buf, size, &desc->b_scale);
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return read_value(buf, size, &desc->fast_accum);
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE: return read_value(buf, size, &desc->a_mode);
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: return read_value(buf, size, &desc->b_mode);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, std::uint64_t rows,
                                          std::uint64_t cols, std::int64_t ld) {
  if (layout == nullptr || fp8a_emu::type_bytes(type) == 0) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    std::size_t size) {
  if (pref == nullptr || attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return CUBLAS_STATUS_INVALID_VALUE;
  return read_value(buf, size, &pref->max_workspace_bytes);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                              cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (desc == nullptr || a_desc == nullptr || b_desc == nullptr || c_desc == nullptr || d_desc == nullptr ||
      pref == nullptr || requested < 1 || results == nullptr || returned == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returned = 0;
  fp8a_emu::Problem p;
  if (const auto o = fp8a_emu::check_support(*desc, *a_desc, *b_desc, *c_desc, *d_desc, &p); !o)
    return o.status;  // cuBLASLt's heuristic says so without a message
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo.data[0] = fp8a_emu::kAlgoTag;
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              std::size_t workspace_bytes, cudaStream_t stream) {
  namespace e = fp8a_emu;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (desc == nullptr || a_desc == nullptr || b_desc == nullptr || c_desc == nullptr || d_desc == nullptr ||
      alpha == nullptr || beta == nullptr)
    return e::failed(e::refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: a null descriptor or alpha/beta"));
  e::Problem p;
  if (const auto o = e::check_support(*desc, *a_desc, *b_desc, *c_desc, *d_desc, &p); !o) return e::failed(o);
  if (algo == nullptr || algo->data[0] != e::kAlgoTag)
    return e::failed(e::refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul: an algorithm not from the heuristic"));
  if (workspace_bytes > 0 && !e::is_device_range(workspace, workspace_bytes))
    return e::failed(e::refuse(CUBLAS_STATUS_INVALID_VALUE, "the workspace is not device memory of its size"));
  const bool fp8 = e::is_fp8(a_desc->type);
  const float alpha_v = *static_cast<const float*>(alpha), beta_v = *static_cast<const float*>(beta);
  const e::ScaleTensor sa{fp8 ? desc->a_mode : 0, fp8 ? desc->a_scale : nullptr, p.m, p.k};
  const e::ScaleTensor sb{fp8 ? desc->b_mode : 0, fp8 ? desc->b_scale : nullptr, p.n, p.k};
  const e::Matmul mm{p, *a_desc, *b_desc, *c_desc, *d_desc, desc->transa == CUBLAS_OP_T,
                     desc->transb == CUBLAS_OP_T, fp8, a, b, c, d, alpha_v, beta_v, sa, sb};
  if (const auto o = e::check_buffers(mm); !o) return e::failed(o);
  // The product runs when the stream gets there, as cuBLASLt's kernels would; its memory must
  // still be there then.
  const cudaError_t queued = e::enqueue(stream, [mm] {
    if (const auto o = e::check_buffers(mm); !o) {
      e::report_failure(o.why + " when the GEMM ran (freed before the stream got there)");
      return cudaErrorLaunchFailure;
    }
    e::compute(mm);
    return cudaSuccess;
  });
  return queued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

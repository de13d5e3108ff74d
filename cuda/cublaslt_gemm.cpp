// Host code only (cuBLASLt and runtime calls, no kernels): built as C++ with the host warnings.
#include "cuda/cublaslt_gemm.hpp"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

#include "cuda/check.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/device_memory.hpp"
#include "core/error.hpp"

namespace fp8a::cuda {

// LtScaleMode's values are cuBLASLt's (they go to the *_SCALE_MODE attributes as they are).
static_assert(int(LtScaleMode::kScalar32F) == CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F);
static_assert(int(LtScaleMode::kVec32Ue8m0) == CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0);
static_assert(int(LtScaleMode::kVec128_32F) == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F);
static_assert(int(LtScaleMode::kBlk128x128_32F) == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F);

namespace {

// cuBLASLt up to 12.8.3 keys its heuristic cache without the scale modes, so an MXFP8 GEMM after a
// per-tensor one of the same shape and types could get the per-tensor algorithm. TE's workaround
// (transformer_engine/common/gemm/cublaslt_gemm.cu): set ALPHA_VECTOR_BATCH_STRIDE, unused by block
// scaling, to give MXFP8 its own cache key.
inline constexpr std::size_t kLtVersionMxCacheFixed = 120804;

// Every cuBLASLt status goes through here: fp8a.cuda.802 naming the GEMM, the call and the status.
[[noreturn]] void lt_failed(cublasStatus_t status, const char* call, const std::string& what) {
  throw internal_error("fp8a.cuda.802", what + ": " + call + " failed: " + cublasLtGetStatusName(status) +
                                            " (" + cublasLtGetStatusString(status) + ")");
}

void lt_check(cublasStatus_t status, const char* call, const std::string& what) {
  if (status != CUBLAS_STATUS_SUCCESS) lt_failed(status, call, what);
}

// Descriptor owners; destroy errors at teardown are ignored, as for the CUDA RAII types.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  ~MatmulDesc() { if (desc != nullptr) static_cast<void>(cublasLtMatmulDescDestroy(desc)); }
};
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  ~Layout() { if (layout != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(layout)); }
};
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() { if (pref != nullptr) static_cast<void>(cublasLtMatmulPreferenceDestroy(pref)); }
};

template <class T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value,
                   const std::string& what) {
  lt_check(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value),
           "cublasLtMatmulDescSetAttribute", what);
}

cudaDataType_t cuda_type(LtType t) {
  switch (t) {
    case LtType::kE4M3: return CUDA_R_8F_E4M3;
    case LtType::kE5M2: return CUDA_R_8F_E5M2;
    case LtType::kBf16: break;
  }
  return CUDA_R_16BF;
}

// An operand on the device: data and, for FP8, its scale tensor.
struct DeviceOperand {
  const void* data = nullptr;
  LtType type = LtType::kBf16;
  LtScaleMode mode = LtScaleMode::kNone;
  const void* scales = nullptr;
};

// D = a * b^T as the plan lays it out (cublaslt_gemm_plan.hpp): cuBLASLt's A is b, its B is a.
// Returns false, with the reason, when cuBLASLt offers no algorithm for it.
bool matmul(cublasLtHandle_t handle, cudaStream_t stream, void* workspace, const LtGemmPlan& p,
            const DeviceOperand& a, const DeviceOperand& b, bool fast_accum, std::size_t lt_version,
            float* d, const std::string& what, std::string* why) {
  MatmulDesc op;
  lt_check(cublasLtMatmulDescCreate(&op.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
           "cublasLtMatmulDescCreate", what);
  set_attribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T, what);
  set_attribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N, what);
  if (a.type != LtType::kBf16) {
    const std::int8_t fast = fast_accum ? 1 : 0;
    set_attribute(op.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast, what);
    // The attribute's value is the device pointer itself; A/B scales are scale_inv (dequantise).
    set_attribute(op.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, b.scales, what);
    set_attribute(op.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, a.scales, what);
    // SCALAR_32F is the default; the mode attributes exist from cuBLASLt 12.8 on.
    if (b.mode != LtScaleMode::kScalar32F)
      set_attribute(op.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, static_cast<std::int32_t>(b.mode), what);
    if (a.mode != LtScaleMode::kScalar32F)
      set_attribute(op.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, static_cast<std::int32_t>(a.mode), what);
    if (a.mode == LtScaleMode::kVec32Ue8m0 && lt_version < kLtVersionMxCacheFixed)
      set_attribute(op.desc, CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, std::int64_t{1}, what);
  }
  Layout la, lb, ld;
  const auto mp = static_cast<std::uint64_t>(p.m_padded), np = static_cast<std::uint64_t>(p.n_padded),
             kp = static_cast<std::uint64_t>(p.k_padded);
  lt_check(cublasLtMatrixLayoutCreate(&la.layout, cuda_type(b.type), kp, np, p.k_padded),
           "cublasLtMatrixLayoutCreate", what);
  lt_check(cublasLtMatrixLayoutCreate(&lb.layout, cuda_type(a.type), kp, mp, p.k_padded),
           "cublasLtMatrixLayoutCreate", what);
  lt_check(cublasLtMatrixLayoutCreate(&ld.layout, CUDA_R_32F, np, mp, p.n_padded),
           "cublasLtMatrixLayoutCreate", what);
  Preference pref;
  lt_check(cublasLtMatmulPreferenceCreate(&pref.pref), "cublasLtMatmulPreferenceCreate", what);
  const std::uint64_t workspace_bytes = kLtWorkspaceBytes;
  lt_check(cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes, sizeof workspace_bytes),
           "cublasLtMatmulPreferenceSetAttribute", what);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, op.desc, la.layout, lb.layout, ld.layout, ld.layout, pref.pref, 1, &result, &found);
  // A combination this cuBLASLt or GPU does not take is an outcome, not a failure.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) {
    *why = std::string("cublasLtMatmulAlgoGetHeuristic: ") + cublasLtGetStatusName(status);
    return false;
  }
  lt_check(status, "cublasLtMatmulAlgoGetHeuristic", what);
  if (found == 0) {
    *why = "cublasLtMatmulAlgoGetHeuristic returned no algorithm";
    return false;
  }
  const float alpha = 1.0f, beta = 0.0f;
  lt_check(cublasLtMatmul(handle, op.desc, &alpha, b.data, la.layout, a.data, lb.layout, &beta, d,
                          ld.layout, d, ld.layout, &result.algo, workspace, kLtWorkspaceBytes, stream),
           "cublasLtMatmul", what);
  return true;
}

void upload(DeviceBuffer& dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  dst.reserve(bytes);
  if (bytes > 0) FP8A_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, bytes, cudaMemcpyHostToDevice, stream));
}

// The caller's [m, n] corner of a row-major [m_padded, n_padded] output.
std::vector<float> crop(const std::vector<float>& padded, const LtGemmPlan& p) {
  std::vector<float> out(static_cast<std::size_t>(p.m * p.n));
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j)
      out[static_cast<std::size_t>(i * p.n + j)] = padded[static_cast<std::size_t>(i * p.n_padded + j)];
  return out;
}

}  // namespace

LtCaps probe_lt_caps() {
  LtCaps caps;
  int major = 0, minor = 0;
  FP8A_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  FP8A_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  caps.sm = 10 * major + minor;
  caps.version = cublasLtGetVersion();
  return caps;
}

struct CublasltGemm::State {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  Stream stream;
  DeviceBuffer workspace, a, b, a_scales, b_scales, a_ref, b_ref, d, d_ref;
  ~State() {
    if (handle != nullptr) static_cast<void>(cublasLtDestroy(handle));
  }
};

CublasltGemm::CublasltGemm() {
  const std::string why = cuda_unusable_reason();
  if (!why.empty()) throw internal_error("fp8a.cuda.801", "cuBLASLt GEMM engine: " + why);
  FP8A_CUDA_CHECK(cudaSetDevice(0));
  caps_ = probe_lt_caps();
  state_ = std::make_unique<State>();
  lt_check(cublasLtCreate(&state_->handle), "cublasLtCreate", "cuBLASLt GEMM engine");
  state_->workspace.reserve(kLtWorkspaceBytes);
}

CublasltGemm::~CublasltGemm() = default;

GemmRun CublasltGemm::run(const GemmProblem& pr) const {
  GemmRun out;
  const LtGemmPlan plan = plan_lt_gemm(pr.gemm, pr.m, pr.n, pr.k, pr.a.spec, pr.b.spec, caps_);
  if (!plan.supported) {
    out.note = plan.reason;
    return out;
  }
  // Host work first, outside the lock: quantise and pack both operands, and their BF16 copies.
  const LtPackedOperand a = pack_lt_operand(plan.a, pr.k, plan.k_padded, pr.a.values, pr.a.spec);
  const LtPackedOperand b = pack_lt_operand(plan.b, pr.k, plan.k_padded, pr.b.values, pr.b.spec);
  const LtOperandPlan a_bf16{LtType::kBf16, LtScaleMode::kNone, plan.a.rows, plan.a.rows_padded};
  const LtOperandPlan b_bf16{LtType::kBf16, LtScaleMode::kNone, plan.b.rows, plan.b.rows_padded};
  const LtPackedOperand a_ref = pack_lt_operand(a_bf16, pr.k, plan.k_padded, pr.a.values, pr.a.spec);
  const LtPackedOperand b_ref = pack_lt_operand(b_bf16, pr.k, plan.k_padded, pr.b.values, pr.b.spec);
  const auto d_count = static_cast<std::size_t>(plan.m_padded * plan.n_padded);
  std::vector<float> d(d_count), d_ref(d_count);

  std::lock_guard<std::mutex> lock(state_->mutex);
  State& s = *state_;
  const cudaStream_t stream = s.stream.get();
  FP8A_CUDA_CHECK(cudaSetDevice(0));
  upload(s.a, a.data(), a.data_bytes(), stream);
  upload(s.b, b.data(), b.data_bytes(), stream);
  upload(s.a_scales, a.scales(), a.scale_bytes(), stream);
  upload(s.b_scales, b.scales(), b.scale_bytes(), stream);
  upload(s.a_ref, a_ref.data(), a_ref.data_bytes(), stream);
  upload(s.b_ref, b_ref.data(), b_ref.data_bytes(), stream);
  s.d.reserve(d_count * sizeof(float));
  s.d_ref.reserve(d_count * sizeof(float));
  const bool fp8 = plan.fp8();
  const DeviceOperand da{s.a.data(), plan.a.type, plan.a.mode, fp8 ? s.a_scales.data() : nullptr};
  const DeviceOperand db{s.b.data(), plan.b.type, plan.b.mode, fp8 ? s.b_scales.data() : nullptr};
  const DeviceOperand ra{s.a_ref.data(), LtType::kBf16, LtScaleMode::kNone, nullptr};
  const DeviceOperand rb{s.b_ref.data(), LtType::kBf16, LtScaleMode::kNone, nullptr};
  std::string why;
  auto* d_dev = reinterpret_cast<float*>(s.d.data());
  auto* d_ref_dev = reinterpret_cast<float*>(s.d_ref.data());
  if (!matmul(s.handle, stream, s.workspace.data(), plan, da, db, plan.fast_accum, caps_.version,
              d_dev, pr.what, &why)) {
    FP8A_CUDA_CHECK(cudaStreamSynchronize(stream));
    out.note = why + " for " + plan.describe();
    return out;
  }
  if (!matmul(s.handle, stream, s.workspace.data(), plan, ra, rb, false, caps_.version, d_ref_dev,
              pr.what, &why)) {
    FP8A_CUDA_CHECK(cudaStreamSynchronize(stream));
    out.note = why + " for the BF16 reference GEMM";
    return out;
  }
  const std::size_t d_bytes = d_count * sizeof(float);
  FP8A_CUDA_CHECK(cudaMemcpyAsync(d.data(), d_dev, d_bytes, cudaMemcpyDeviceToHost, stream));
  FP8A_CUDA_CHECK(cudaMemcpyAsync(d_ref.data(), d_ref_dev, d_bytes, cudaMemcpyDeviceToHost, stream));
  FP8A_CUDA_CHECK(cudaStreamSynchronize(stream));
  out.ran = true;
  out.note = plan.describe();
  out.accumulation = plan.accumulation();
  out.m_padded = plan.m_padded;
  out.n_padded = plan.n_padded;
  out.k_padded = plan.k_padded;
  out.out = crop(d, plan);
  out.reference = crop(d_ref, plan);
  return out;
}

}  // namespace fp8a::cuda

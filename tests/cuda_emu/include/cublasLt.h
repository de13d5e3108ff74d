// Host emulation of the part of cuBLASLt that cuda/cublaslt_gemm.cpp uses (tests/cuda_emu/README.md,
// implemented in tests/cuda_emu/cublaslt.cpp). Names, signatures and enum values are the toolkit's
// (cuBLAS 13.1's cublasLt.h, library_types.h, cublas_api.h), so the GEMM engine compiles against it
// unchanged. What a call checks and computes:
//   - descriptors keep what is set; a set with the wrong value size is CUBLAS_STATUS_INVALID_VALUE,
//     as in cuBLASLt;
//   - cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul take a problem only where cuBLASLt does
//     (cuBLAS's documentation of cublasLtMatmul and the header's): compute type 32F with scale type
//     32F; FP8 needs sm_89+, both inputs FP8, not E5M2 x E5M2, TN before sm_100, leading dims and
//     pointers 16-byte aligned; VEC32_UE8M0 on both inputs needs sm_100+ and cuBLASLt 12.8+;
//     VEC128_32F/BLK128x128_32F need sm_90 (Hopper) and 12.9+ and not both 128x128; otherwise
//     NOT_SUPPORTED (heuristic) / the same status (matmul); dims that do not fit the layouts are
//     INVALID_VALUE;
//   - every matrix and scale tensor must be device memory large enough for its layout (a short one
//     is INVALID_VALUE with a message on stderr, where the GPU would read past it);
//   - D = alpha * (dequantised A) x (dequantised B) + beta * C, computed on the call's stream (when
//     the host waits for it, as the emulated runtime runs kernels), accumulated in float32 in K order:
//     per-tensor scales multiply the finished sum; block scales multiply each block's partial sum
//     (32 or 128 elements of K) before it joins the total. The tensor cores' narrower
//     fast-accumulation accumulator is not modelled: FAST_ACCUM is checked and stored only.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

typedef enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_16BF = 14,
  CUDA_R_8F_E4M3 = 28,
  CUDA_R_8F_E5M2 = 29,
} cudaDataType_t;
typedef cudaDataType_t cudaDataType;

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;

typedef enum {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE = 14,
  CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17,
  CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18,
  CUBLASLT_MATMUL_DESC_FAST_ACCUM = 25,
  CUBLASLT_MATMUL_DESC_A_SCALE_MODE = 31,
  CUBLASLT_MATMUL_DESC_B_SCALE_MODE = 32,
} cublasLtMatmulDescAttributes_t;

typedef enum {
  CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F = 0,
  CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 = 1,
  CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 = 2,
  CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F = 3,
  CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F = 4,
  CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F = 5,
} cublasLtMatmulMatrixScale_t;

typedef enum { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 } cublasLtMatmulPreferenceAttributes_t;

struct cublasLtContext;
struct cublasLtMatmulDescOpaque_t;
struct cublasLtMatrixLayoutOpaque_t;
struct cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtContext* cublasLtHandle_t;
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;

typedef struct {
  std::uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
  cublasLtMatmulAlgo_t algo;
  std::size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

std::size_t cublasLtGetVersion();
const char* cublasLtGetStatusName(cublasStatus_t status);
const char* cublasLtGetStatusString(cublasStatus_t status);

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute_type,
                                        cudaDataType_t scale_type);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, std::size_t size);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, std::uint64_t rows,
                                          std::uint64_t cols, std::int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    std::size_t size);

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a_desc, cublasLtMatrixLayout_t b_desc,
                                              cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned);

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_desc, const void* b, cublasLtMatrixLayout_t b_desc,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                              cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              std::size_t workspace_bytes, cudaStream_t stream);

namespace fp8a_emu {

// The emulated cuBLASLt's version as cublasLtGetVersion() returns it (10000 * major + 100 * minor
// + patch): 130100, cuBLAS 13.1.0 of CUDA 13.0, unless set here or by the environment variable
// FP8A_CUDA_EMULATION_CUBLASLT_VERSION (tests of the older-version paths).
void set_cublaslt_version(std::size_t version);

}  // namespace fp8a_emu

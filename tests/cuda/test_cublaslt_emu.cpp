// The emulated cuBLASLt of tests/cuda_emu/cublaslt.cpp (label cuda-emu): its products against small GEMMs
// worked out by hand here (column-major storage, op(A) and op(B), per-tensor and block scales at
// hand-computed offsets of their layouts), and the cuBLASLt rules it enforces as statuses.
#include <doctest/doctest.h>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/fp8_codec.hpp"

namespace {

// A device copy of a host vector, freed at scope exit.
struct Device {
  void* p = nullptr;
  template <class T>
  explicit Device(const std::vector<T>& v) {
    REQUIRE(cudaMalloc(&p, v.size() * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~Device() { static_cast<void>(cudaFree(p)); }
  template <class T>
  std::vector<T> read(std::size_t n) const {
    std::vector<T> v(n);
    REQUIRE(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return v;
  }
};

// One matmul, set up as a caller would: the descriptor, three layouts (C = D), the heuristic,
// the call. Returns the heuristic's status if it failed, else the matmul's.
struct Gemm {
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cudaDataType_t at = CUDA_R_8F_E4M3, bt = CUDA_R_8F_E4M3;
  std::uint64_t a_rows = 0, a_cols = 0, b_rows = 0, b_cols = 0, m = 0, n = 0;
  std::int64_t lda = 0, ldb = 0;
  std::int32_t a_mode = 0, b_mode = 0;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;

  // FP8 TN, as the GEMM engine calls it: A stored k x m, B k x n, both K-major (ld = k).
  static Gemm tn(int m, int n, int k) {
    Gemm g;
    g.a_rows = g.b_rows = static_cast<std::uint64_t>(k);
    g.a_cols = g.m = static_cast<std::uint64_t>(m);
    g.b_cols = g.n = static_cast<std::uint64_t>(n);
    g.lda = g.ldb = k;
    return g;
  }

  cublasStatus_t run(const void* a, const void* b, void* d) const {
    cublasLtHandle_t h = nullptr;
    REQUIRE(cublasLtCreate(&h) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulDesc_t op = nullptr;
    REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) == 0);
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) == 0);
    if (a_scale != nullptr)
      REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale) == 0);
    if (b_scale != nullptr)
      REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale) == 0);
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof a_mode) == 0);
    REQUIRE(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof b_mode) == 0);
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    REQUIRE(cublasLtMatrixLayoutCreate(&la, at, a_rows, a_cols, lda) == 0);
    REQUIRE(cublasLtMatrixLayoutCreate(&lb, bt, b_rows, b_cols, ldb) == 0);
    REQUIRE(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, static_cast<std::int64_t>(m)) == 0);
    cublasLtMatmulPreference_t pref = nullptr;
    REQUIRE(cublasLtMatmulPreferenceCreate(&pref) == 0);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &result, &found);
    if (s == CUBLAS_STATUS_SUCCESS) {
      REQUIRE(found == 1);
      const float alpha = 1.0f, beta = 0.0f;
      s = cublasLtMatmul(h, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &result.algo, nullptr, 0, nullptr);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
    return s;
  }
};

constexpr std::uint8_t kE4M3One = 0x38, kE4M3Two = 0x40, kE4M3Three = 0x44;  // 1, 2, 3

}  // namespace

TEST_CASE("emulated cuBLASLt: a BF16 GEMM in column-major storage, NN and TN") {
  // A = [[1, 2], [3, 4]] (2 x 2), B = [[5, 6], [7, 8]]: A * B = [[19, 22], [43, 50]].
  // Column-major A: 1, 3, 2, 4; B: 5, 7, 6, 8. D column-major: 19, 43, 22, 50.
  const auto bf16 = [](std::initializer_list<float> v) {
    std::vector<std::uint16_t> bits;
    for (float x : v) bits.push_back(fp8a::float_to_bf16(x));
    return bits;
  };
  const Device a(bf16({1, 3, 2, 4}));
  const Device b(bf16({5, 7, 6, 8}));
  const Device d(std::vector<float>(4, -1.0f));
  Gemm g;
  g.at = g.bt = CUDA_R_16BF;
  g.ta = g.tb = CUBLAS_OP_N;
  g.a_rows = g.a_cols = g.b_rows = g.b_cols = g.m = g.n = 2;
  g.lda = g.ldb = 2;
  REQUIRE(g.run(a.p, b.p, d.p) == CUBLAS_STATUS_SUCCESS);
  CHECK(d.read<float>(4) == std::vector<float>{19, 43, 22, 50});
  // transa = T reads the stored A as its transpose: A^T * B = [[1,3],[2,4]] * B = [[26, 30], [38, 44]].
  g.ta = CUBLAS_OP_T;
  REQUIRE(g.run(a.p, b.p, d.p) == CUBLAS_STATUS_SUCCESS);
  CHECK(d.read<float>(4) == std::vector<float>{26, 38, 30, 44});
}

TEST_CASE("emulated cuBLASLt: FP8 TN with per-tensor scales and with VEC128_32F x BLK128x128_32F") {
  // m = n = 16, k = 256 (two 128-blocks). A stored K-major (k x m, lda = 256), every element 1;
  // B stored k x n, element 2 in K-block 0 and 3 in K-block 1.
  constexpr int kM = 16, kN = 16, kK = 256;
  std::vector<std::uint8_t> a(kK * kM, kE4M3One), b(kK * kN);
  for (int j = 0; j < kN; ++j)
    for (int l = 0; l < kK; ++l) b[static_cast<std::size_t>(j * kK + l)] = l < 128 ? kE4M3Two : kE4M3Three;
  const Device da(a), db(b), dd(std::vector<float>(kM * kN, 0.0f));
  Gemm g = Gemm::tn(kM, kN, kK);
  // Per-tensor: (128 * 2 + 128 * 3) * 0.5 * 0.25 = 80.
  const Device sa(std::vector<float>{0.5f}), sb(std::vector<float>{0.25f});
  g.a_scale = sa.p;
  g.b_scale = sb.p;
  REQUIRE(g.run(da.p, db.p, dd.p) == CUBLAS_STATUS_SUCCESS);
  CHECK(dd.read<float>(kM * kN) == std::vector<float>(kM * kN, 80.0f));

  // A VEC128_32F: [K block][round_up(m, 4) = 16]; row 5 gets 4 in K-block 1 (offset 1 * 16 + 5 = 21),
  // all else 1. B BLK128x128_32F: [ceil(n / 128) = 1][round_up(2, 4) = 4]; K-block 0 scaled 1, K-block
  // 1 scaled 0.5 (offset 1). D(i, j) = 128 * 2 + 128 * 3 * scale_a(i, 1) * 0.5: 1024 for i = 5,
  // else 448.
  std::vector<float> a_scales(2 * 16, 1.0f), b_scales(4, 1.0f);
  a_scales[21] = 4.0f;
  b_scales[1] = 0.5f;
  const Device vsa(a_scales), bsb(b_scales);
  g.a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  g.b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  g.a_scale = vsa.p;
  g.b_scale = bsb.p;
  REQUIRE(g.run(da.p, db.p, dd.p) == CUBLAS_STATUS_SUCCESS);
  const auto out = dd.read<float>(kM * kN);
  for (int j = 0; j < kN; ++j)
    for (int i = 0; i < kM; ++i) CHECK(out[static_cast<std::size_t>(j * kM + i)] == (i == 5 ? 1024.0f : 448.0f));

  // The rules: BLK x BLK, E5M2 x E5M2, NN on sm_90, a short scale tensor, MXFP8 on sm_90.
  Gemm bad = g;
  bad.a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  CHECK(bad.run(da.p, db.p, dd.p) == CUBLAS_STATUS_NOT_SUPPORTED);
  bad = g;
  bad.at = bad.bt = CUDA_R_8F_E5M2;
  CHECK(bad.run(da.p, db.p, dd.p) == CUBLAS_STATUS_NOT_SUPPORTED);
  bad = g;
  bad.ta = CUBLAS_OP_N;
  bad.a_rows = kM;
  bad.a_cols = kK;
  bad.lda = kM;
  CHECK(bad.run(da.p, db.p, dd.p) == CUBLAS_STATUS_NOT_SUPPORTED);
  bad = g;
  bad.a_scale = sa.p;  // one float where VEC128_32F needs 2 x 16
  CHECK(bad.run(da.p, db.p, dd.p) == CUBLAS_STATUS_INVALID_VALUE);
  bad = g;
  bad.a_mode = bad.b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  CHECK(bad.run(da.p, db.p, dd.p) == CUBLAS_STATUS_NOT_SUPPORTED);
  // Host memory where cuBLASLt reads device memory.
  CHECK(g.run(a.data(), db.p, dd.p) == CUBLAS_STATUS_INVALID_VALUE);
}

TEST_CASE("emulated cuBLASLt: MXFP8 (VEC32_UE8M0) scales in the 128x4 tiled layout, as a B200") {
  fp8a_emu::set_compute_capability(100);
  // m = 40, n = 16, k = 64: A's scales are [round_up(40, 128) = 128][round_up(2, 4) = 4], one tile;
  // row 33, K-block 1 sits at (33 % 32) * 16 + (33 / 32) * 4 + 1 = 21. Its code 129 = 2^2, all
  // other codes 127 = 1. A is all 1, B all 3 (codes), so D(i, j) = 64 * 3 = 192, and for i = 33
  // 32 * 3 + 32 * 3 * 4 = 480.
  constexpr int kM = 40, kN = 16, kK = 64;
  std::vector<std::uint8_t> a_scales(128 * 4, 127), b_scales(128 * 4, 127);
  a_scales[21] = 129;
  const Device da(std::vector<std::uint8_t>(kK * kM, kE4M3One)), db(std::vector<std::uint8_t>(kK * kN, kE4M3Three));
  const Device dd(std::vector<float>(kM * kN, 0.0f)), sa(a_scales), sb(b_scales);
  Gemm g = Gemm::tn(kM, kN, kK);
  g.a_mode = g.b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  g.a_scale = sa.p;
  g.b_scale = sb.p;
  const cublasStatus_t s = g.run(da.p, db.p, dd.p);
  fp8a_emu::set_compute_capability(90);
  REQUIRE(s == CUBLAS_STATUS_SUCCESS);
  const auto out = dd.read<float>(kM * kN);
  for (int j = 0; j < kN; ++j)
    for (int i = 0; i < kM; ++i) CHECK(out[static_cast<std::size_t>(j * kM + i)] == (i == 33 ? 480.0f : 192.0f));
}

TEST_CASE("emulated cuBLASLt: attributes of the wrong size, versions before the block modes") {
  cublasLtMatmulDesc_t op = nullptr;
  REQUIRE(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
  const std::int64_t wide = 4;
  CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &wide, sizeof wide) ==
        CUBLAS_STATUS_INVALID_VALUE);
  const std::int8_t fast = 1;
  CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast) ==
        CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDescDestroy(op);

  CHECK(cublasLtGetVersion() == 130100);
  fp8a_emu::set_cublaslt_version(120800);  // 12.8: MXFP8 yes, the Hopper block modes not yet
  constexpr int kK = 128;
  const Device da(std::vector<std::uint8_t>(kK * 16, kE4M3One)), dd(std::vector<float>(256, 0.0f));
  const Device s16(std::vector<float>(16, 1.0f)), s4(std::vector<float>(4, 1.0f));
  Gemm g = Gemm::tn(16, 16, kK);
  g.a_mode = g.b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  g.a_scale = g.b_scale = s16.p;
  const cublasStatus_t old = g.run(da.p, da.p, dd.p);
  fp8a_emu::set_cublaslt_version(130100);
  CHECK(old == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(g.run(da.p, da.p, dd.p) == CUBLAS_STATUS_SUCCESS);
  CHECK(dd.read<float>(256) == std::vector<float>(256, 128.0f));
}

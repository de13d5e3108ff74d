#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda/element_quant.hpp"
#include "core/fp8_codec.hpp"
#include "tests/cuda/codec_kernels.cuh"

namespace fp8a::cuda_test {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

__global__ void encode_kernel(const float* x, std::size_t n, std::uint8_t* o4, std::uint8_t* h4,
                              std::uint8_t* o5, std::uint8_t* h5) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  o4[i] = encode_e4m3(x[i]);
  o5[i] = encode_e5m2(x[i]);
  h4[i] = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
  h5[i] = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E5M2);
}

__global__ void round_trip_kernel(const float* x, std::size_t pairs, float* o) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= pairs) return;
  const std::size_t n = 2 * pairs, a = 2 * i, b = 2 * i + 1;
  o[a] = fp8a::cuda::fp8_round_trip<Fp8Format::kE4M3>(x[a]);
  o[b] = fp8a::cuda::fp8_round_trip<Fp8Format::kE4M3>(x[b]);
  o[n + a] = fp8a::cuda::fp8_round_trip<Fp8Format::kE5M2>(x[a]);
  o[n + b] = fp8a::cuda::fp8_round_trip<Fp8Format::kE5M2>(x[b]);
  fp8a::cuda::fp8_round_trip_x2<Fp8Format::kE4M3>(x[a], x[b], &o[2 * n + a], &o[2 * n + b]);
  fp8a::cuda::fp8_round_trip_x2<Fp8Format::kE5M2>(x[a], x[b], &o[3 * n + a], &o[3 * n + b]);
}

}  // namespace

DeviceRoundTrips round_trip_on_device(const std::vector<float>& x) {
  const std::size_t n = x.size();
  if (n % 2 != 0) throw std::runtime_error("round_trip_on_device: odd size");
  float* dx = nullptr;
  float* d = nullptr;
  check(cudaMalloc(&dx, n * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&d, 4 * n * sizeof(float)), "cudaMalloc");
  check(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy in");
  const unsigned blocks = static_cast<unsigned>((n / 2 + 255) / 256);
  round_trip_kernel<<<blocks, 256>>>(dx, n / 2, d);
  check(cudaGetLastError(), "launch");
  std::vector<float> all(4 * n);
  check(cudaMemcpy(all.data(), d, 4 * n * sizeof(float), cudaMemcpyDeviceToHost), "copy out");
  cudaFree(dx);
  cudaFree(d);
  DeviceRoundTrips r;
  r.e4m3.assign(all.begin(), all.begin() + n);
  r.e5m2.assign(all.begin() + n, all.begin() + 2 * n);
  r.e4m3_x2.assign(all.begin() + 2 * n, all.begin() + 3 * n);
  r.e5m2_x2.assign(all.begin() + 3 * n, all.end());
  return r;
}

DeviceCodes encode_on_device(const std::vector<float>& x) {
  const std::size_t n = x.size();
  float* dx = nullptr;
  std::uint8_t* d = nullptr;
  check(cudaMalloc(&dx, n * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&d, 4 * n), "cudaMalloc");
  check(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy in");
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  encode_kernel<<<blocks, 256>>>(dx, n, d, d + n, d + 2 * n, d + 3 * n);
  check(cudaGetLastError(), "launch");
  std::vector<std::uint8_t> all(4 * n);
  check(cudaMemcpy(all.data(), d, 4 * n, cudaMemcpyDeviceToHost), "copy out");
  cudaFree(dx);
  cudaFree(d);
  DeviceCodes c;
  c.ours_e4m3.assign(all.begin(), all.begin() + n);
  c.hw_e4m3.assign(all.begin() + n, all.begin() + 2 * n);
  c.ours_e5m2.assign(all.begin() + 2 * n, all.begin() + 3 * n);
  c.hw_e5m2.assign(all.begin() + 3 * n, all.end());
  return c;
}

}  // namespace fp8a::cuda_test

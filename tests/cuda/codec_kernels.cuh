// Test-only launchers: encode floats on the device with fp8-advisor's shared encoder and with the
// hardware conversion (cvt.rn.satfinite on sm_89+, via __nv_cvt_float_to_fp8 with __NV_SATFINITE).
#pragma once

#include <cstdint>
#include <vector>

namespace fp8a::cuda_test {

struct DeviceCodes {
  std::vector<std::uint8_t> ours_e4m3, hw_e4m3, ours_e5m2, hw_e5m2;
};

// Throws std::runtime_error on any CUDA failure.
DeviceCodes encode_on_device(const std::vector<float>& x);

// decode(encode_satfinite(x)) on the device as the metric kernels do it (cuda/element_quant.hpp):
// one value at a time, and in pairs (x[2i], x[2i+1]) through the x2 conversions.
struct DeviceRoundTrips {
  std::vector<float> e4m3, e5m2, e4m3_x2, e5m2_x2;
};
DeviceRoundTrips round_trip_on_device(const std::vector<float>& x);  // x.size() even

}  // namespace fp8a::cuda_test

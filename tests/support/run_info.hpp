// The provenance the report tests render: a RunInfo of a CPU run of one capture file at step 10,
// the fields every report test shares; each test adds what it checks.
#pragma once

#include "reports/run_info.hpp"

namespace fp8a::testing {

inline RunInfo base_run_info(int tensor_count) {
  RunInfo info;
  info.version = "0.1.0";
  info.git_revision = "0123456789ab";
  info.command_line = {"fp8-advisor", "run", "--capture", "caps", "--out", "out"};
  info.requested_device = "auto";
  info.backend = "cpu";
  info.device = "2 threads (oneTBB)";
  info.gemm_path = "emulated on the CPU, 2 threads";
  CaptureFile f;
  f.path = "caps/step_10.safetensors";
  f.step = 10;
  f.tensor_count = tensor_count;
  info.inputs = {f};
  return info;
}

}  // namespace fp8a::testing

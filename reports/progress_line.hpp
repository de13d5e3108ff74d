// The one line a long run's progress shows: a stage's units done of all, the share, the input
// read per second, the time left, the unit last done.
#pragma once

#include <cstdint>
#include <string>

namespace fp8a {

struct ProgressState {
  std::string stage;           // "tensors", "GEMM layers"
  std::uint64_t done = 0, total = 0;              // units
  std::uint64_t bytes_done = 0, bytes_total = 0;  // their input
  double elapsed_s = 0;        // since the stage began
  std::string current;         // the unit last done (a layer name); may be empty
};

// "tensors 123/864 (14 %), 812 MB/s, ETA 0:42, layers.3.mlp.linear_fc2". The share and the time
// left go by bytes when the stage has any, else by units; the rate and the ETA are left out until
// something is done and time has passed; a finished stage says "done in 12.3 s" instead of the ETA.
std::string progress_line(const ProgressState& s);

// Seconds as "0:42", "12:05" or "1:02:03" (rounded up: an ETA never says 0:00 before the end).
std::string clock_text(double seconds);

}  // namespace fp8a

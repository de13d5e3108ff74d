// fp8-advisor inspect: list and validate the tensors of captures.
#include <tbb/parallel_for.h>

#include <cstdio>
#include <iostream>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "datasets/capture.hpp"
#include "engine/cpu_backend.hpp"
#include "reports/text_table.hpp"

namespace fp8a::cli {

namespace {

std::string general(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

int command_inspect(const Invocation& inv) {
  std::vector<std::string> paths;
  std::string npy_dtype_text;
  po::options_description desc("Options");
  desc.add_options()("capture", po::value(&paths)->multitoken()->required(),
                     "capture files and/or directories (also accepted as plain arguments)")
                    ("npy-dtype", po::value(&npy_dtype_text),
                     "bf16: read 2-byte void / uint16 .npy arrays as BF16");
  po::positional_options_description positional;
  positional.add("capture", -1);
  po::variables_map vm;
  if (!parse_options(inv, desc, &positional, &vm, "fp8-advisor inspect PATH [PATH ...]", std::cout))
    return kExitOk;

  DiskFileSystem fs;
  const CaptureSet captures = load_captures(paths, fs, capture_options(npy_dtype_text));
  std::vector<TensorStats> stats(captures.tensors.size());
  tbb::parallel_for(std::size_t{0}, stats.size(),
                    [&](std::size_t i) { stats[i] = compute_tensor_stats(captures.tensors[i].view); });

  const std::vector<std::string> head = {"step", "layer", "role", "dtype", "shape", "amax",
                                         "amin", "range log2", "nan", "inf", "file"};
  std::vector<std::vector<std::string>> cells;
  for (std::size_t i = 0; i < stats.size(); ++i) {
    const auto& t = captures.tensors[i];
    const auto& s = stats[i];
    cells.push_back({std::to_string(t.key.step), t.key.layer, role_name(t.key.role),
                     dtype_name(t.view.dtype), shape_text(t.view.shape), general(s.amax),
                     general(s.amin_nonzero < INFINITY ? s.amin_nonzero : 0.0f),
                     general(s.dynamic_range_log2()), std::to_string(s.nan_count),
                     std::to_string(s.inf_count), t.file});
  }
  std::cout << render_text_table(head, cells, {false, true, true, true, true, false, false, false,
                                                false, false, true});
  std::size_t nonfinite = 0;
  for (const auto& s : stats) nonfinite += (s.nan_count + s.inf_count) > 0;
  std::cout << "\n" << captures.tensors.size() << " tensors in " << captures.files.size()
            << " file(s): valid";
  if (nonfinite > 0) std::cout << "; " << nonfinite << " tensor(s) hold NaN or Inf";
  std::cout << "\n";
  return kExitOk;
}

}  // namespace fp8a::cli

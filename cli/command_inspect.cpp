// fp8-advisor inspect: list and validate the tensors of captures.
#include <tbb/parallel_for.h>

#include <iostream>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "datasets/capture.hpp"
#include "engine/cpu_backend.hpp"
#include "reports/inspect_table.hpp"

namespace fp8a::cli {

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
  tbb::parallel_for(std::size_t{0}, stats.size(), [&](std::size_t i) {
    stats[i] = compute_tensor_stats(captures.tensors[i].view);
    captures.tensors[i].view.release();  // TensorStorage::release
  });

  std::cout << render_inspect_table(captures, stats);
  return kExitOk;
}

}  // namespace fp8a::cli

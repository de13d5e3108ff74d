// fp8-advisor: the command-line entry point. Errors are caught here, once, and mapped to exit codes.
#include <chrono>
#include <exception>
#include <iostream>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <thread>

#include "cli/mapped_fault.hpp"
#include "cli/mpi_cluster.hpp"
#include "cli/options.hpp"
#include "cli/stop_signals.hpp"
#include "cli/version.hpp"
#include "core/error.hpp"
#include "core/suggest.hpp"
#include "core/text.hpp"

namespace {

constexpr const char* kUsage =
    "usage: fp8-advisor <command> [options]\n"
    "\n"
    "commands:\n"
    "  run       evaluate FP8 recipes on captured tensors and advise one: writes recipe.json,\n"
    "            megatron_args.txt, megatron_bridge.yaml, te_precision_config.yaml, nvdlfw_inspect.yaml,\n"
    "            te_snippet.py, torchao.json, metrics.csv, gemms.csv, summary.json, report.md, report.html\n"
    "            (and nvdlfw_stats.csv when --training-log holds logged statistics)\n"
    "  whatif    one layer's metrics under every recipe, in the terminal (--layer REGEX)\n"
    "  inspect   list and validate the tensors of captures\n"
    "  compare   rank the tensors whose metrics diverge most between two captures or run folders\n"
    "  synth     write synthetic captures with known pathologies and their ground truth\n"
    "  log-config  write the nvdlfw_inspect YAML that has TE's debug API log, over a whole run, the\n"
    "            statistics fp8-advisor reads (every candidate recipe's what-ifs the TE release can log)\n"
    "\n"
    "  fp8-advisor <command> --help   options of a command\n"
    "  fp8-advisor --version          version, git revision, the GPUs the CUDA backend is built for\n";

int dispatch(int argc, char** argv, fp8a::Cluster* cluster, fp8a::cli::StopOnSignals& signals) {
  using namespace fp8a;
  cli::Invocation inv;
  inv.cluster = cluster;
  inv.stop = &signals.request();
  for (int i = 0; i < argc; ++i) inv.command_line.emplace_back(argv[i]);
  if (argc < 2) throw usage_error("fp8a.usage.204", "missing command; try 'fp8-advisor --help'");
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  if (first == "--version") {
    std::cout << "fp8-advisor " << FP8A_VERSION << " (git " << FP8A_GIT_REVISION << ")\n"
              << "CUDA backend: " << FP8A_CUDA_BUILD << "\n"
#if FP8A_WITH_MPI
              << "MPI: " << FP8A_MPI_BUILD << ", " << cli::mpi_library_version() << "\n";
#else
              << "MPI: " << FP8A_MPI_BUILD << "\n";
#endif
    return kExitOk;
  }
  if (cli::launched_ranks() > 1 && !FP8A_WITH_MPI)
    throw usage_error("fp8a.usage.229", "launched as " + std::to_string(cli::launched_ranks()) +
                                            " MPI ranks, but this fp8-advisor is built without MPI "
                                            "(FP8A_WITH_MPI=OFF): rebuild with libopenmpi-dev, or run one process");
  if (is_distributed(cluster) && first != "run")
    throw usage_error("fp8a.usage.231", quoted_input(first, 200) + " launched as " + std::to_string(cluster->size()) +
                                            " MPI ranks: only 'run' spreads over ranks; run " + quoted_input(first, 200) +
                                            " as one process");
  inv.subcommand = first;
  inv.args.assign(argv + 2, argv + argc);
  if (first == "run") return cli::command_run(inv);
  signals.restore_default();  // only run stops on a request; the others end as they always did
  if (first == "whatif") return cli::command_whatif(inv);
  if (first == "inspect") return cli::command_inspect(inv);
  if (first == "synth") return cli::command_synth(inv);
  if (first == "compare") return cli::command_compare(inv);
  if (first == "log-config") return cli::command_log_config(inv);
  throw usage_error("fp8a.usage.204", "unknown command " + quoted_input(first, 200) +
                                          did_you_mean(first, {"run", "whatif", "compare", "inspect", "synth", "log-config"}) +
                                          "; try 'fp8-advisor --help'");
}

// An error line on stderr, and the exit code. Over several ranks the first rank to fail ends them
// all (MPI_Abort keeps the code), so none waits in an exchange for it; a rank other than 0 waits
// a moment first, so that an error every rank meets (a bad option, a missing file) is printed
// once, by rank 0, and an error of its own is named with its rank. The line is printed readable
// whatever bytes reached it (printable_text), as one line.
constexpr std::size_t kWholeLine = std::numeric_limits<std::size_t>::max();
int fail(const std::string& line, int code, fp8a::Cluster* cluster) {
  // One write(2) for the whole line (std::cerr is unbuffered: each << is one), so mpirun's own
  // messages on the same stderr cannot land inside it.
  std::string text = fp8a::printable_text(line, kWholeLine);
  if (fp8a::is_distributed(cluster) && cluster->rank() != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    text += " (MPI rank " + std::to_string(cluster->rank()) + " of " + std::to_string(cluster->size()) + ")";
  }
  std::cerr << text + "\n";
#if FP8A_WITH_MPI
  if (fp8a::is_distributed(cluster)) static_cast<fp8a::cli::MpiCluster*>(cluster)->abort(code);
#endif
  return code;
}

int run_main(int argc, char** argv, fp8a::Cluster* cluster, fp8a::cli::StopOnSignals& signals) {
  try {
    return dispatch(argc, argv, cluster, signals);
  } catch (const fp8a::Error& e) {
    return fail(std::string("fp8-advisor: error: ") + e.what(), e.exit_code(), cluster);
  } catch (const std::bad_alloc&) {
    constexpr fp8a::InternalId kOutOfMemory = "fp8a.internal.002";
    return fail(std::string("fp8-advisor: error: [") + std::string(kOutOfMemory.text()) + "] out of memory",
                fp8a::kExitInternal, cluster);
  } catch (const std::exception& e) {
    constexpr fp8a::InternalId kUnexpected = "fp8a.internal.003";
    return fail(std::string("fp8-advisor: error: [") + std::string(kUnexpected.text()) + "] " + e.what(),
                fp8a::kExitInternal, cluster);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // First: a SIGINT/SIGTERM from here on is recorded, never the default action (stop_signals.hpp).
  fp8a::cli::StopOnSignals signals;
#if FP8A_WITH_MPI
  // MPI only when a launcher (mpirun, srun) started this process: a plain run is one process.
  std::optional<fp8a::cli::MpiCluster> mpi;
  if (fp8a::cli::launched_ranks() > 0) {
    try {
      mpi.emplace(&argc, &argv);
    } catch (const fp8a::Error& e) {
      std::cerr << "fp8-advisor: error: " + fp8a::printable_text(e.what(), kWholeLine) + "\n";
      return e.exit_code();
    }
  }
  // After MPI_Init, which may install a SIGBUS handler of its own (Open MPI's stack traces).
  fp8a::cli::install_mapped_fault_handler();  // a capture truncated under the run: fp8a.io.110
  const int code = run_main(argc, argv, mpi ? &*mpi : nullptr, signals);
  if (mpi && mpi->size() > 1) {
    try {
      mpi->finish();  // no rank left in MPI_Finalize waiting for a stopped one
    } catch (const fp8a::Error& e) {
      return fail(std::string("fp8-advisor: error: ") + e.what(), e.exit_code(), &*mpi);
    }
  }
  return code;
#else
  fp8a::cli::install_mapped_fault_handler();  // a capture truncated under the run: fp8a.io.110
  return run_main(argc, argv, nullptr, signals);
#endif
}

// fp8-advisor: the command-line entry point. Errors are caught here, once, and mapped to exit codes.
#include <exception>
#include <iostream>
#include <new>

#include "cli/options.hpp"
#include "cli/version.hpp"
#include "core/error.hpp"
#include "core/suggest.hpp"

namespace {

constexpr const char* kUsage =
    "usage: fp8-advisor <command> [options]\n"
    "\n"
    "commands:\n"
    "  run       evaluate FP8 recipes on captured tensors and write metrics.csv and summary.json\n"
    "  whatif    one layer's metrics under every recipe, in the terminal (--layer REGEX)\n"
    "  inspect   list and validate the tensors of captures\n"
    "  compare   rank the tensors whose metrics diverge most between two captures or run folders\n"
    "  synth     write synthetic captures with known pathologies and their ground truth\n"
    "\n"
    "  fp8-advisor <command> --help   options of a command\n"
    "  fp8-advisor --version          version, git revision, the GPUs the CUDA backend is built for\n";

int dispatch(int argc, char** argv) {
  using namespace fp8a;
  cli::Invocation inv;
  for (int i = 0; i < argc; ++i) inv.command_line.emplace_back(argv[i]);
  if (argc < 2) throw usage_error("fp8a.usage.204", "missing command; try 'fp8-advisor --help'");
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  if (first == "--version") {
    std::cout << "fp8-advisor " << FP8A_VERSION << " (git " << FP8A_GIT_REVISION << ")\n"
              << "CUDA backend: " << FP8A_CUDA_BUILD << "\n";
    return kExitOk;
  }
  inv.subcommand = first;
  inv.args.assign(argv + 2, argv + argc);
  if (first == "run") return cli::command_run(inv);
  if (first == "whatif") return cli::command_whatif(inv);
  if (first == "inspect") return cli::command_inspect(inv);
  if (first == "synth") return cli::command_synth(inv);
  if (first == "compare") return cli::command_compare(inv);
  throw usage_error("fp8a.usage.204", "unknown command '" + first + "'" +
                                          did_you_mean(first, {"run", "whatif", "compare", "inspect", "synth"}) +
                                          "; try 'fp8-advisor --help'");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const fp8a::Error& e) {
    std::cerr << "fp8-advisor: error: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    constexpr fp8a::InternalId kOutOfMemory = "fp8a.internal.002";
    std::cerr << "fp8-advisor: error: [" << kOutOfMemory.text() << "] out of memory\n";
    return fp8a::kExitInternal;
  } catch (const std::exception& e) {
    constexpr fp8a::InternalId kUnexpected = "fp8a.internal.003";
    std::cerr << "fp8-advisor: error: [" << kUnexpected.text() << "] " << e.what() << "\n";
    return fp8a::kExitInternal;
  }
}

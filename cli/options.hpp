// Shared command-line plumbing for the subcommands.
#pragma once

#include <tbb/global_control.h>

#include <boost/program_options.hpp>
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cli/backend_registry.hpp"
#include "core/error.hpp"
#include "core/stop.hpp"
#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "datasets/training_log.hpp"
#include "engine/gemm_error.hpp"
#include "engine/run.hpp"
#include "reports/artifact.hpp"

namespace fp8a::cli {

namespace po = boost::program_options;

struct Invocation {
  std::string subcommand;
  std::vector<std::string> args;          // after the subcommand
  std::vector<std::string> command_line;  // everything, for provenance
  // The MPI ranks this process is one of (cli/mpi_cluster.hpp); null: one process. Not owned.
  Cluster* cluster = nullptr;
  // SIGINT/SIGTERM received so far (cli/stop_signals.hpp, installed first in main); null: none.
  const StopRequest* stop = nullptr;
};

// Parses args against desc (positional names optional), adding --help to desc. --help prints
// usage and returns false.
// Boost errors become usage errors fp8a.usage.203 with "did you mean" for unknown options.
bool parse_options(const Invocation& inv, po::options_description& desc,
                   const po::positional_options_description* positional, po::variables_map* vm,
                   const std::string& usage_line, std::ostream& out);

// --npy-dtype: "" (none) or "bf16"; anything else is usage error fp8a.usage.207.
CaptureOptions capture_options(const std::string& npy_dtype);

// What `run` and `whatif` read and how they evaluate it: the option values as given.
struct EvaluationOptions {
  std::vector<std::string> capture_paths;
  std::vector<std::string> log_paths;  // --training-log and --amax-trace together (after parsing)
  std::vector<std::string> amax_trace_paths;
  std::string recipes_text, format_text, device_text, npy_dtype_text, reduction_text;
  // The recipes option's other spelling (--recipe for run and compare, --recipes for whatif), as
  // given; evaluation_config takes it for recipes_text. Empty: not given.
  std::vector<std::string> recipes_alias;
  bool recipes_given = false;  // either spelling given (evaluation_config sets it)
  int threads = 0;
  std::string gemm_rows_text = "auto";  // --gemm-rows as given: auto, 0 or a number of rows
  GemmSampling gemm_sampling;  // --gemm-rows parsed by evaluation_config (parse_gemm_rows)
};

// The recipes option under `recipes_option` (its singular or plural also accepted), --format,
// --amax-reduction, --npy-dtype (run, whatif and compare).
void add_recipe_options(po::options_description& desc, EvaluationOptions& o, const char* recipes_option);
// --threads, --device.
void add_backend_options(po::options_description& desc, EvaluationOptions& o);

// Adds --capture, the recipes option under `recipes_option` (run: "recipes", whatif: "recipe"),
// --format, --amax-reduction, --npy-dtype, --training-log, --amax-trace, --gemm-rows, --threads
// and --device to desc, storing into o (which must outlive the parse).
// capture_required false: the command checks itself (run takes a training log alone).
void add_evaluation_options(po::options_description& desc, EvaluationOptions& o,
                            const char* recipes_option, bool capture_required = true);

// After the parse: checks --threads (fp8a.usage.205) and --gemm-rows (parse_gemm_rows), parses the recipes, formats
// and --amax-reduction into a RunConfig (training_log unset), and merges --amax-trace into
// o.log_paths.
RunConfig evaluation_config(EvaluationOptions& o);

// --gemm-rows: "auto" -> GemmSampling::automatic(), "0" -> all(), "N" -> of_rows(N); anything
// else is usage error fp8a.usage.225.
GemmSampling parse_gemm_rows(const std::string& text);

// --out DIR before anything is written: usage error fp8a.usage.243 naming the option for an empty
// path or a symbolic link to nothing (which no folder can be created through).
void check_out_option(const std::string& dir);

// A floating-point option's value after the parse: finite (Boost reads "inf" and "nan" as
// numbers), >= lo and <= hi, else usage error `id` naming the option and the value:
// "--tokens-per-step inf: expected a finite number >= 0 and <= 1e+12".
void check_finite_option(UsageId id, const std::string& option, double value, double lo,
                         double hi = std::numeric_limits<double>::infinity());

// --threads N > 0 limits oneTBB for the returned object's lifetime; null for 0 (all cores).
std::unique_ptr<tbb::global_control> thread_limit(int threads);

// The training log of o.log_paths (empty when none) read through fs, for its amaxes (whatif's
// delayed replay): its other statistics are let go as they are read, so a log of any length fits.
TrainingLog load_evaluation_log(const EvaluationOptions& o, const FileSystem& fs);

// What evaluates: the --threads limit (kept alive with the backend), the backends this build has,
// the --device choice and its backend. Usage error fp8a.usage.206 for a bad or unusable --device.
struct EvaluationBackend {
  std::unique_ptr<tbb::global_control> thread_limit;
  BuildBackends backends;
  DeviceChoice device_choice = DeviceChoice::kAuto;
  std::unique_ptr<Backend> backend;
};
EvaluationBackend start_backend(const EvaluationOptions& o);

// write_output_set (rundir/output_set.hpp) with this build as the writer: creates out_dir,
// switches the artifacts into it as one output set `set` ("run", "compare") and returns the
// "wrote ..." line. Input error fp8a.io.104 when the directory or a file cannot be written.
std::string write_artifacts(const std::string& out_dir, const std::string& set, const std::vector<Artifact>& artifacts,
                            const std::vector<std::string>& command_line);

// The command line as one line, words joined by spaces (for the --out lock's owner).
std::string join_command_line(const std::vector<std::string>& words);

int command_run(const Invocation& inv);
int command_compare(const Invocation& inv);
int command_whatif(const Invocation& inv);
int command_inspect(const Invocation& inv);
int command_synth(const Invocation& inv);
int command_log_config(const Invocation& inv);

}  // namespace fp8a::cli

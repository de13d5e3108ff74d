// Shared command-line plumbing for the subcommands.
#pragma once

#include <boost/program_options.hpp>
#include <iosfwd>
#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "reports/artifact.hpp"

namespace fp8a::cli {

namespace po = boost::program_options;

struct Invocation {
  std::string subcommand;
  std::vector<std::string> args;          // after the subcommand
  std::vector<std::string> command_line;  // everything, for provenance
};

// Parses args against desc (positional names optional), adding --help to desc. --help prints
// usage and returns false.
// Boost errors become usage errors fp8a.usage.203 with "did you mean" for unknown options.
bool parse_options(const Invocation& inv, po::options_description& desc,
                   const po::positional_options_description* positional, po::variables_map* vm,
                   const std::string& usage_line, std::ostream& out);

// --npy-dtype: "" (none) or "bf16"; anything else is usage error fp8a.usage.207.
CaptureOptions capture_options(const std::string& npy_dtype);

// Creates out_dir and writes each artifact into it atomically (reports/atomic_file.hpp), in order;
// returns the line that lists them: "wrote DIR/a.csv (12 rows), DIR/b.json". Input error
// fp8a.io.104 when the directory or a file cannot be written.
std::string write_artifacts(const std::string& out_dir, const std::vector<Artifact>& artifacts);

int command_run(const Invocation& inv);
int command_inspect(const Invocation& inv);
int command_synth(const Invocation& inv);
int command_compare(const Invocation& inv);

}  // namespace fp8a::cli

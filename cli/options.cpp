#include "cli/options.hpp"

#include <ostream>

#include "core/error.hpp"
#include "core/suggest.hpp"
#include "reports/atomic_file.hpp"

namespace fp8a::cli {

bool parse_options(const Invocation& inv, po::options_description& desc,
                   const po::positional_options_description* positional, po::variables_map* vm,
                   const std::string& usage_line, std::ostream& out) {
  desc.add_options()("help,h", "show this help");
  const po::options_description& all = desc;
  try {
    po::command_line_parser parser(inv.args);
    parser.options(all).style(po::command_line_style::default_style &
                              ~po::command_line_style::allow_guessing);
    if (positional != nullptr) parser.positional(*positional);
    po::store(parser.run(), *vm);
    if (vm->count("help") != 0) {
      out << "usage: " << usage_line << "\n\n" << all;
      return false;
    }
    po::notify(*vm);
  } catch (const po::unknown_option& e) {
    std::vector<std::string> names;
    for (const auto& o : all.options()) names.push_back("--" + o->long_name());
    throw usage_error("fp8a.usage.203", "fp8-advisor " + inv.subcommand + ": unknown option '" +
                                            e.get_option_name() + "'" +
                                            did_you_mean(e.get_option_name(), names));
  } catch (const po::error& e) {
    throw usage_error("fp8a.usage.203", "fp8-advisor " + inv.subcommand + ": " + e.what());
  }
  return true;
}

CaptureOptions capture_options(const std::string& npy_dtype) {
  CaptureOptions o;
  if (npy_dtype == "bf16") o.npy_dtype = NpyRawDType::kBf16;
  else if (!npy_dtype.empty())
    throw usage_error("fp8a.usage.207", "--npy-dtype '" + npy_dtype + "': the only value is bf16" +
                                            did_you_mean(npy_dtype, {"bf16"}));
  return o;
}

std::string write_artifacts(const std::string& out_dir, const std::vector<Artifact>& artifacts) {
  ensure_output_directory(out_dir);
  std::string wrote;
  for (const auto& a : artifacts) {
    write_file_atomically(out_dir + "/" + a.name, a.contents);
    wrote += (wrote.empty() ? "wrote " : ", ") + out_dir + "/" + a.name +
             (a.note.empty() ? "" : " (" + a.note + ")");
  }
  return wrote;
}

}  // namespace fp8a::cli

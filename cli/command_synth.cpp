// fp8-advisor synth: deterministic synthetic captures with known pathologies and ground truth.
#include <charconv>
#include <iostream>

#include "cli/options.hpp"
#include "datasets/synth.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/suggest.hpp"
#include "rundir/atomic_file.hpp"

namespace fp8a::cli {

namespace {

std::vector<std::int64_t> parse_steps(const std::string& text) {
  std::vector<std::int64_t> steps;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 0 || v > 10'000'000)
      throw usage_error("fp8a.usage.210", "--steps: " + quoted_input(item, 200) +
                                              " is not a step number (comma-separated integers 0..10000000)");
    steps.push_back(v);
    pos = comma + 1;
  }
  return steps;
}

std::string preset_help() {
  std::string s = "preset (required):";
  for (const auto& p : synth_presets()) s += std::string("\n  ") + p.name + ": " + p.summary;
  return s;
}

}  // namespace

int command_synth(const Invocation& inv) {
  std::string preset_name, out_dir, steps_text;
  std::uint64_t seed = 1;
  const std::string preset_doc = preset_help();
  po::options_description desc("Options");
  desc.add_options()
      ("preset", po::value(&preset_name)->required(), preset_doc.c_str())
      ("out", po::value(&out_dir)->required(), "output directory (created if missing)")
      ("seed", po::value(&seed)->default_value(1), "random seed; the same seed gives the same bytes")
      ("steps", po::value(&steps_text), "captured steps, comma-separated (default: the preset's)");
  po::variables_map vm;
  if (!parse_options(inv, desc, nullptr, &vm, "fp8-advisor synth --preset NAME --out DIR [options]",
                     std::cout))
    return kExitOk;
  const SynthPreset* preset = find_synth_preset(preset_name);
  if (preset == nullptr) {
    std::vector<std::string> names;
    std::string list;
    for (const auto& p : synth_presets()) {
      names.emplace_back(p.name);
      list += (list.empty() ? "" : ", ") + std::string(p.name);
    }
    throw usage_error("fp8a.usage.209", "unknown preset " + quoted_input(preset_name, 200) +
                                            did_you_mean(preset_name, names) + "; presets: " + list);
  }
  const std::vector<std::int64_t> steps = steps_text.empty() ? std::vector<std::int64_t>{} : parse_steps(steps_text);
  check_out_option(out_dir);
  ensure_output_directory(out_dir);
  std::uint64_t bytes = 0, files = 0;
  synthesize_to(*preset, seed, steps, [&](const std::string& name, const SynthProducer& produce) {
    write_file_atomically(out_dir + "/" + name, [&](const ByteSink& put) {
      produce([&](std::string_view piece) {
        bytes += piece.size();
        put(piece);
      });
    });
    ++files;
  });
  std::cout << "fp8-advisor synth: preset " << preset->name << ", seed " << seed << ": wrote "
            << files << " files (" << bytes << " bytes) to " << terminal_text(out_dir) << "\n";
  return kExitOk;
}

}  // namespace fp8a::cli

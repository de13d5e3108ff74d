#include "cli/options.hpp"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <ostream>

#include "cli/version.hpp"
#include "core/error.hpp"
#include "core/recipe.hpp"
#include "core/suggest.hpp"
#include "core/text.hpp"
#include "engine/gemm_error.hpp"
#include "rundir/output_set.hpp"

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
    throw usage_error("fp8a.usage.203", "fp8-advisor " + inv.subcommand + ": unknown option " +
                                            quoted_input(e.get_option_name(), 200) +
                                            did_you_mean(e.get_option_name(), names));
  } catch (const po::error& e) {
    throw usage_error("fp8a.usage.203", "fp8-advisor " + inv.subcommand + ": " + printable_text(e.what()));
  }
  return true;
}

CaptureOptions capture_options(const std::string& npy_dtype) {
  CaptureOptions o;
  if (npy_dtype == "bf16") o.npy_dtype = NpyRawDType::kBf16;
  else if (!npy_dtype.empty())
    throw usage_error("fp8a.usage.207", "--npy-dtype " + quoted_input(npy_dtype, 200) + ": the only value is bf16" +
                                            did_you_mean(npy_dtype, {"bf16"}));
  return o;
}

namespace {

std::string recipe_help() {
  std::string s = "comma-separated recipe specs (default: all kinds); kinds:";
  for (const auto& k : kRecipeKinds) s += std::string("\n  ") + k.name + ": " + k.summary;
  return s;
}

}  // namespace

void add_recipe_options(po::options_description& desc, EvaluationOptions& o, const char* recipes_option) {
  static const std::string recipes_doc = recipe_help();
  static const std::string plural = "recipes", singular = "recipe";
  const std::string& other = recipes_option == plural ? singular : plural;
  desc.add_options()
      (recipes_option, po::value(&o.recipes_text)->default_value(default_recipe_list()), recipes_doc.c_str())
      (other.c_str(), po::value(&o.recipes_alias), ("the same as --" + std::string(recipes_option)).c_str())
      ("format", po::value(&o.format_text)->default_value("auto"),
       "TE recipe Formats to evaluate: auto = each recipe in the format NVIDIA's recipes train it "
       "with (hybrid; e4m3 for mxfp8), or a comma-separated list of e4m3 (every role E4M3) and/or "
       "hybrid (E5M2 for gradients), each for every recipe")
      ("amax-reduction", po::value(&o.reduction_text)->default_value("tp"),
       "tensors captured as several ranks: tp = one amax reduced over the ranks (TE's all-reduce), "
       "none = each rank's own amax for current scaling")
      ("npy-dtype", po::value(&o.npy_dtype_text),
       "bf16: read 2-byte void / uint16 .npy arrays as BF16 (how np.save stores bfloat16)");
}

void add_backend_options(po::options_description& desc, EvaluationOptions& o) {
  desc.add_options()
      ("threads", po::value(&o.threads)->default_value(0), "worker threads; 0 = all cores")
      ("device", po::value(&o.device_text)->default_value("auto"),
       "auto, cpu or cuda (cuda also runs every GEMM of gemms.csv in cuBLASLt); auto means the "
       "CPU until the CUDA backend has passed the GPU checks");
}

void add_evaluation_options(po::options_description& desc, EvaluationOptions& o,
                            const char* recipes_option, bool capture_required) {
  auto* capture = po::value(&o.capture_paths)->multitoken();
  if (capture_required) capture->required();
  desc.add_options()
      ("capture", capture,
       capture_required ? "capture files (.safetensors, .npy, .npz, .pt incl. TE DumpTensors) and/or directories "
                          "(searched recursively)"
                        : "capture files (.safetensors, .npy, .npz, .pt incl. TE DumpTensors) and/or directories "
                          "(searched recursively); without it, --training-log alone: advice from the logged "
                          "statistics (docs/OPTIONS.md)");
  add_recipe_options(desc, o, recipes_option);
  desc.add_options()
      ("training-log", po::value(&o.log_paths)->multitoken(),
       "what the training run logged at every step: CSV step,tensor,amax (amax of every step, for "
       "exact delayed-scaling replay) and/or nvdlfw_inspect statistics logs (cur_amax; their "
       "LogFp8TensorStats values go to nvdlfw_stats.csv beside ours)")
      ("amax-trace", po::value(&o.amax_trace_paths)->multitoken(), "the same as --training-log")
      ("gemm-rows", po::value(&o.gemm_rows_text)->default_value("auto"),
       "GEMM-output error on this many output rows (tokens of fprop and dgrad, dW rows of wgrad; "
       "the heaviest with certainty, the rest drawn by energy), every column; 0 = all rows; auto = "
       "the whole output unless a GEMM exceeds 2^32 multiply-adds, then about sqrt(2^32 / K) rows "
       "and as many columns (at least 256 of each), reported as sampled with standard errors; GEMMs "
       "the answer could hang on are then computed exactly");
  add_backend_options(desc, o);
}

EvaluationBackend start_backend(const EvaluationOptions& o) {
  EvaluationBackend e;
  e.thread_limit = thread_limit(o.threads);
  e.backends = probe_backends();
  e.device_choice = parse_device_choice(o.device_text);
  e.backend = make_backend(e.device_choice);
  return e;
}

std::string join_command_line(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

std::string write_artifacts(const std::string& out_dir, const std::string& set, const std::vector<Artifact>& artifacts,
                            const std::vector<std::string>& command_line) {
  return write_output_set(out_dir, set, artifacts, std::string(FP8A_VERSION) + " (git " + FP8A_GIT_REVISION + ")",
                          command_line);
}

GemmSampling parse_gemm_rows(const std::string& text) {
  if (text == "auto") return GemmSampling::automatic();
  std::int64_t rows = -1;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, rows);
  if (text.empty() || ec != std::errc() || ptr != end || rows < 0)
    throw usage_error("fp8a.usage.225", "--gemm-rows " + quoted_input(text, 200) +
                                            ": expected auto, 0 (all rows) or a number of rows (tokens; dW rows for wgrad)" +
                                            did_you_mean(text, {"auto"}));
  return rows == 0 ? GemmSampling::all() : GemmSampling::of_rows(rows);
}

RunConfig evaluation_config(EvaluationOptions& o) {
  if (o.threads < 0) throw usage_error("fp8a.usage.205", "--threads must be >= 0");
  o.gemm_sampling = parse_gemm_rows(o.gemm_rows_text);
  RunConfig config;
  const std::string defaults = default_recipe_list();
  if (!o.recipes_alias.empty()) {
    if (o.recipes_alias.size() > 1 || o.recipes_text != defaults)
      throw usage_error("fp8a.usage.201", "--recipes and --recipe are one option: give it once");
    o.recipes_text = o.recipes_alias.front();
  }
  o.recipes_given = !o.recipes_alias.empty() || o.recipes_text != defaults;
  config.recipes = parse_recipe_list(o.recipes_text);
  if (o.format_text == "auto") {
    config.formats = {TrainingFormat::kHybrid, TrainingFormat::kE4M3};
    config.formats_by_kind = true;
  } else {
    config.formats = parse_training_format_list(o.format_text);
  }
  if (o.reduction_text == "tp") config.amax_reduction = AmaxReduction::kTp;
  else if (o.reduction_text == "none") config.amax_reduction = AmaxReduction::kNone;
  else
    throw usage_error("fp8a.usage.208", "--amax-reduction " + quoted_input(o.reduction_text, 200) +
                                            ": expected tp or none" +
                                            did_you_mean(o.reduction_text, {"tp", "none"}));
  o.log_paths.insert(o.log_paths.end(), o.amax_trace_paths.begin(), o.amax_trace_paths.end());
  o.amax_trace_paths.clear();
  return config;
}

void check_out_option(const std::string& dir) {
  if (dir.empty()) throw usage_error("fp8a.usage.243", "--out '': an empty path; give the output folder");
  std::error_code ec;
  namespace fs = std::filesystem;
  if (fs::is_symlink(fs::symlink_status(dir, ec)) && !fs::exists(fs::status(dir, ec)))
    throw usage_error("fp8a.usage.243", "--out " + quoted_input(dir) +
                                            ": a symbolic link to nothing; give a folder, or a path that does not exist yet");
}

void check_finite_option(UsageId id, const std::string& option, double value, double lo, double hi) {
  if (std::isfinite(value) && value >= lo && value <= hi) return;
  throw usage_error(id, "--" + option + " " + format_text("%g", value) + ": expected a finite number >= " +
                            format_text("%g", lo) + (std::isinf(hi) ? "" : " and <= " + format_text("%g", hi)));
}

std::unique_ptr<tbb::global_control> thread_limit(int threads) {
  if (threads <= 0) return nullptr;
  return std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                               static_cast<std::size_t>(threads));
}

TrainingLog load_evaluation_log(const EvaluationOptions& o, const FileSystem& fs) {
  DropLoggedSteps drop;
  return o.log_paths.empty() ? TrainingLog{} : load_training_log(o.log_paths, fs, &drop);
}

}  // namespace fp8a::cli

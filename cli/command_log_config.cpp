// fp8-advisor log-config: the nvdlfw_inspect YAML that has Transformer Engine's debug API log, over
// a whole training run, the statistics fp8-advisor's criteria read (reports/consumers/log_config.hpp).
#include <filesystem>
#include <iostream>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/gpu_target.hpp"
#include "core/recipe_options.hpp"
#include "core/text.hpp"
#include "policies/cost_model.hpp"
#include "reports/consumers/log_config.hpp"
#include "rundir/atomic_file.hpp"

namespace fp8a::cli {

namespace {

constexpr UsageId kBadLogOption = "fp8a.usage.247";
constexpr std::size_t kMaxLayersPattern = 1000;

// --layers goes into the YAML as a quoted scalar: printable UTF-8 on one line, at most 1000 bytes.
void check_layers_pattern(const std::string& p) {
  bool control = false;
  for (const unsigned char ch : p) control = control || ch < 0x20 || ch == 0x7f;
  if (p.empty() || p.size() > kMaxLayersPattern || control || !is_valid_utf8(p))
    throw usage_error(kBadLogOption, "--layers " + quoted_input(p, 200) +
                                         ": expected a Python regular expression on one line, 1 to 1000 bytes "
                                         "of UTF-8 without control characters");
}

}  // namespace

int command_log_config(const Invocation& inv) {
  std::string out_path, recipe_text, gpu_text, te_text;
  LogRequest q;
  po::options_description desc("Options");
  desc.add_options()
      ("out", po::value(&out_path)->required(), "the YAML file to write (replaced if it exists)")
      ("training-recipe", po::value(&recipe_text)->required(),
       "the recipe the run trains with (current, delayed, block, mxfp8, nvfp4, bf16; --recipes' syntax): "
       "its own statistics cost no cast, the others are what-ifs")
      ("gpu", po::value(&gpu_text)->default_value("h100"),
       "the GPU the run trains on: TE computes block-scaling what-ifs on sm_90+, MXFP8 on sm_100+")
      ("te-version", po::value(&te_text)->default_value(te_version_text(kTeNewest)),
       "the Transformer Engine release the run uses (X.Y): what its debug features can log")
      ("freq", po::value(&q.freq)->default_value(10), "log every N steps (1 to 1000000)")
      ("start-step", po::value(&q.start_step)->default_value(0),
       "log from this step on (TE logs the steps that are multiples of --freq)")
      ("end-step", po::value(&q.end_step)->default_value(-1), "log up to this step; -1: to the end")
      ("layers", po::value(&q.layers)->default_value(".*"),
       "the layers logged: nvdlfw_inspect's layer_name_regex_pattern, searched in each TE layer's name");
  po::variables_map vm;
  if (!parse_options(inv, desc, nullptr, &vm, "fp8-advisor log-config --training-recipe SPEC --out FILE [options]",
                     std::cout))
    return kExitOk;
  q.training = parse_recipe(recipe_text);
  std::string why;
  q.gpu = find_gpu_target(gpu_text, &why);
  if (q.gpu == nullptr) throw usage_error("fp8a.usage.214", "--gpu: " + why);
  const std::optional<TeVersion> te = parse_te_version(te_text, &why);
  if (!te) throw usage_error("fp8a.usage.242", "--te-version " + quoted_input(te_text) + ": " + why);
  q.te = *te;
  // A plan for a run that cannot happen would log nothing: the recipe must train there.
  if (const RecipeSupport s = recipe_support(q.training, *q.gpu); !s.runs)
    throw usage_error(kBadLogOption, "--training-recipe " + q.training.spec() + ": " + s.reason);
  if (const std::string release = te_release_cannot_train(q.training, q.te, q.gpu->sm); !release.empty())
    throw usage_error(kBadLogOption, "--training-recipe " + q.training.spec() + ": " + release);
  if (q.freq < 1 || q.freq > 1'000'000)
    throw usage_error(kBadLogOption, "--freq " + std::to_string(q.freq) + ": expected 1 to 1000000 steps");
  if (q.start_step < 0 || (q.end_step != -1 && q.end_step < q.start_step))
    throw usage_error(kBadLogOption, "--start-step " + std::to_string(q.start_step) + " --end-step " +
                                         std::to_string(q.end_step) + ": expected 0 <= start <= end, or end -1");
  check_layers_pattern(q.layers);
  if (out_path.empty() || std::filesystem::is_directory(out_path))
    throw usage_error("fp8a.usage.243", "--out " + quoted_input(out_path) + ": expected a file path, not a directory");
  const LogPlan plan = plan_logging(q);
  const Artifact a = render_log_config(q, plan, std::filesystem::path(out_path).filename().string());
  write_file_atomically(out_path, a.contents);
  std::cout << "fp8-advisor log-config: wrote " << terminal_text(out_path) << " (" << a.note << ")\n";
  for (const LeftOut& l : plan.left_out) std::cout << "  not logged: " << l.what << ": " << l.why << "\n";
  return kExitOk;
}

}  // namespace fp8a::cli

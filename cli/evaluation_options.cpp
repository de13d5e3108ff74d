#include "cli/evaluation_options.hpp"

#include "core/error.hpp"
#include "core/suggest.hpp"

namespace fp8a::cli {

namespace {

std::string recipe_help() {
  std::string s = "comma-separated recipe specs (default: all kinds); kinds:";
  for (const auto& k : kRecipeKinds) s += std::string("\n  ") + k.name + ": " + k.summary;
  return s;
}

}  // namespace

void add_recipe_options(po::options_description& desc, EvaluationOptions* v) {
  const std::string recipes_doc = recipe_help();
  desc.add_options()
      ("recipes", po::value(&v->recipes_text)->default_value(default_recipe_list()), recipes_doc.c_str())
      ("format", po::value(&v->format_text)->default_value(training_format_list(kAllTrainingFormats)),
       "comma-separated TE recipe Formats to evaluate: e4m3 (every role E4M3) and/or hybrid "
       "(E5M2 for gradients)")
      ("amax-reduction", po::value(&v->reduction_text)->default_value("tp"),
       "tensors captured as several ranks: tp = one amax reduced over the ranks (TE's all-reduce), "
       "none = each rank's own amax for current scaling")
      ("npy-dtype", po::value(&v->npy_dtype_text),
       "bf16: read 2-byte void / uint16 .npy arrays as BF16 (how np.save stores bfloat16)");
}

void add_backend_options(po::options_description& desc, EvaluationOptions* v) {
  desc.add_options()
      ("threads", po::value(&v->threads)->default_value(0), "worker threads; 0 = all cores")
      ("device", po::value(&v->device_text)->default_value("auto"),
       "auto, cpu or cuda (cuda also runs every GEMM of gemms.csv in cuBLASLt); auto means the "
       "CPU until the CUDA backend has passed the GPU checks");
}

RunConfig evaluation_config(const EvaluationOptions& v) {
  RunConfig config;
  config.recipes = parse_recipe_list(v.recipes_text);
  config.formats = parse_training_format_list(v.format_text);
  if (v.reduction_text == "tp") config.amax_reduction = AmaxReduction::kTp;
  else if (v.reduction_text == "none") config.amax_reduction = AmaxReduction::kNone;
  else
    throw usage_error("fp8a.usage.208", "--amax-reduction '" + v.reduction_text +
                                            "': expected tp or none" +
                                            did_you_mean(v.reduction_text, {"tp", "none"}));
  return config;
}

EvaluationBackend start_backend(const EvaluationOptions& v) {
  EvaluationBackend e;
  if (v.threads > 0)
    e.thread_limit = std::make_unique<tbb::global_control>(
        tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(v.threads));
  e.backends = probe_backends();
  e.device_choice = parse_device_choice(v.device_text);
  e.backend = make_backend(e.device_choice);
  return e;
}

}  // namespace fp8a::cli

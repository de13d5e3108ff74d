#include "reports/consumers/log_config.hpp"

#include <yaml-cpp/yaml.h>

#include <optional>

#include "core/error.hpp"
#include "core/text.hpp"
#include "datasets/training_log.hpp"

namespace fp8a {
namespace {

// The name TE's debug tools give the training recipe's quantizer (log_fp8_tensor_stats.py
// _get_recipe_name); unset for BF16 and NVFP4 (LogNvfp4TensorStats' own).
std::optional<LoggedRecipe> logged_recipe_of(RecipeKind kind) {
  switch (kind) {
    case RecipeKind::kPerTensorCurrent: return LoggedRecipe::kCurrent;
    case RecipeKind::kPerTensorDelayed: return LoggedRecipe::kDelayed;
    case RecipeKind::kBlock: return LoggedRecipe::kBlock;
    case RecipeKind::kMx: return LoggedRecipe::kMxfp8;
    case RecipeKind::kNvfp4:
    case RecipeKind::kBf16: return std::nullopt;
  }
  return std::nullopt;
}

// Why TE cannot cast `r` as a what-if on this GPU, "" when it can (check_if_stat_is_supported:
// torch.cuda.get_device_capability()[0] >= 9 for block scaling, >= 10 for MXFP8).
std::string what_if_gpu_rule(LoggedRecipe r, const GpuTarget& gpu) {
  const int major = gpu.sm / 10;
  if (r == LoggedRecipe::kBlock && major < 9)
    return std::string("TE computes it on Hopper or later only; ") + gpu.name + " is sm_" + std::to_string(gpu.sm);
  if (r == LoggedRecipe::kMxfp8 && major < 10)
    return std::string("TE computes it on Blackwell or later only; ") + gpu.name + " is sm_" + std::to_string(gpu.sm);
  return "";
}

// The statistics of one recipe: its own (no extra cast) or a what-if (a cast per statistic).
// The training recipe's own scale_inv_min/max and overflows% (delayed) come at no cost; a what-if
// asks for what the criteria read: underflows% and mse, and the columnwise copies wgrad reads
// where they differ (block and MXFP8; TE refuses _columnwise for per-tensor recipes).
void add_recipe_stats(LoggedRecipe r, bool training, LogPlan* plan) {
  const std::string prefix = std::string(logged_recipe_name(r)) + "_";
  std::vector<std::string> stats = {"underflows%", "mse"};
  if (training) {
    stats.insert(stats.end(), {"scale_inv_min", "scale_inv_max"});
    if (r == LoggedRecipe::kDelayed) stats.push_back("overflows%");  // delayed scaling's only
  }
  const bool blocked = r == LoggedRecipe::kBlock || r == LoggedRecipe::kMxfp8;
  for (const std::string& s : stats) {
    plan->fp8_stats.push_back(prefix + s);
    if (blocked && (s == "underflows%" || s == "mse")) plan->fp8_stats.push_back(prefix + s + "_columnwise");
  }
  if (!training) plan->what_if_casts += blocked ? 4 : 2;
}

void plan_fp8_stats(const LogRequest& q, LogPlan* plan) {
  const std::optional<LoggedRecipe> own = logged_recipe_of(q.training.kind);
  if (!te_has_fp8_scale_stats(q.te)) {  // TE 2.4-2.6: underflows% of the training recipe alone
    plan->fp8_stats = {"underflows%"};
    plan->left_out.push_back({"mse, scale_inv_min/max, overflows% and every what-if statistic of another recipe",
                              "LogFp8TensorStats has them from TE 2.7 (PR #1897); TE " + te_version_text(q.te) +
                                  " logs underflows% of the training recipe alone"});
    return;
  }
  if (own) add_recipe_stats(*own, true, plan);
  for (const LoggedRecipe r : {LoggedRecipe::kCurrent, LoggedRecipe::kBlock, LoggedRecipe::kMxfp8, LoggedRecipe::kDelayed}) {
    if (own && r == *own) continue;
    const std::string name = logged_recipe_name(r);
    if (r == LoggedRecipe::kDelayed) {
      plan->left_out.push_back({name + "_*", "TE cannot cast delayed scaling as a what-if (_get_new_quantizer has no "
                                             "amax history); fp8-advisor replays it from LogTensorStats' cur_amax"});
      continue;
    }
    if (const std::string why = what_if_gpu_rule(r, *q.gpu); !why.empty()) {
      plan->left_out.push_back({name + "_*", why});
      continue;
    }
    add_recipe_stats(r, false, plan);
  }
}

// The header comments: what the file is, what it leaves out, what it costs.
std::vector<std::string> header_lines(const LogRequest& q, const LogPlan& plan) {
  std::vector<std::string> lines = {
      "fp8-advisor log-config: the statistics fp8-advisor run --training-log reads, for TE " + te_version_text(q.te) +
          " training " + q.training.spec() + " on " + q.gpu->name + ", every " + std::to_string(q.freq) +
          " steps.",
      "Load it with debug_api.initialize(config_file=..., feature_dirs=[<TE>/transformer_engine/debug/features],",
      "log_dir=LOG, statistics_logger=fp8a_capture.stats_logger(LOG)) and call",
      "debug_api.infer_and_assign_layer_names(model) after building the model; the logs land in",
      "LOG/nvdlfw_inspect_statistics_logs/. Without that logger nvdlfw_inspect prints 4 decimals (value={:.4f}):",
      "a gradient's cur_amax, std or mse under 5e-5 reads as 0; fp8a_capture's (python/) prints every digit.",
  };
  for (const LeftOut& l : plan.left_out) lines.push_back("Not logged: " + l.what + ": " + l.why + ".");
  const std::size_t tensor_stats = plan.tensor_stats.size();
  const std::size_t own = plan.fp8_stats.size() + plan.nvfp4_stats.size() - static_cast<std::size_t>(plan.what_if_casts);
  lines.push_back("Cost, derived from TE " + te_version_text(kTeNewest) +
                  "'s code, not measured: on a logged step, for each selected layer and each of X, dY and W, "
                  "LogTensorStats reduces the BF16 tensor for " + std::to_string(tensor_stats) + " statistics, the "
                  "training recipe's " + std::to_string(own) + " statistics read its own FP8 copy (no cast), and each of " +
                  std::to_string(plan.what_if_casts) + " what-if statistics casts the tensor once more "
                  "(log_fp8_tensor_stats.py update_aux_dict re-quantises per statistic) before its reduction; "
                  "the values are then reduced over the data-parallel group. Every pass is memory-bound: about " +
                  std::to_string(tensor_stats + own + 2 * static_cast<std::size_t>(plan.what_if_casts)) +
                  " reads of each tensor per logged step, 1/" + std::to_string(q.freq) + " of that per step.");
  return lines;
}

void emit_list(YAML::Emitter& out, const char* key, const std::vector<std::string>& items) {
  out << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& s : items) out << s;
  out << YAML::EndSeq;
}

void emit_feature(YAML::Emitter& out, const char* feature, const std::vector<std::string>& stats, const LogRequest& q) {
  out << YAML::Key << feature << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << true;
  emit_list(out, "tensors", kLoggedTensors);
  emit_list(out, "stats", stats);
  out << YAML::Key << "freq" << YAML::Value << q.freq;
  out << YAML::Key << "start_step" << YAML::Value << q.start_step;
  if (q.end_step >= 0) out << YAML::Key << "end_step" << YAML::Value << q.end_step;
  out << YAML::EndMap;
}

}  // namespace

LogPlan plan_logging(const LogRequest& q) {
  FP8A_CHECK(q.gpu != nullptr, "plan_logging: no GPU");
  LogPlan plan;
  // What run --training-log reads (engine/logged_rows.hpp): the amax, and std and mean for the
  // mean square that rel_mse and the flushed-energy bound divide by. Nothing it would skip.
  plan.tensor_stats = {"cur_amax", "mean", "std"};
  const RecipeKindTraits& kind = recipe_kind_traits(q.training.kind);
  if (!is_fp8(q.training.kind)) {
    plan.left_out.push_back({"every FP8 statistic", "the run trains in BF16, and LogFp8TensorStats logs nothing for a "
                                                    "layer without a quantizer (log_fp8_tensor_stats.py)"});
  } else if (q.te < kind.te_debug_since) {
    plan.left_out.push_back({std::string("every ") + kind.short_name + " statistic",
                             std::string("TE's debug tools take ") + kind.short_name + " from TE " +
                                 te_version_text(kind.te_debug_since) + " (" + kind.nvdlfw_stats + ")"});
  } else {
    if (operand_bits(q.training.kind) == 4) plan.nvfp4_stats = {"underflows%", "mse"};  // LogNvfp4TensorStats' two
    plan_fp8_stats(q, &plan);
  }
  return plan;
}

Artifact render_log_config(const LogRequest& q, const LogPlan& plan, const std::string& name) {
  YAML::Emitter out;
  for (const std::string& line : header_lines(q, plan)) out << YAML::Comment(visible_text(line)) << YAML::Newline;
  out << YAML::BeginMap << YAML::Key << "fp8_advisor_statistics" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "enabled" << YAML::Value << true;
  out << YAML::Key << "layers" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "layer_name_regex_pattern" << YAML::Value << YAML::SingleQuoted << q.layers << YAML::EndMap;
  out << YAML::Key << "transformer_engine" << YAML::Value << YAML::BeginMap;
  if (!plan.fp8_stats.empty()) emit_feature(out, "LogFp8TensorStats", plan.fp8_stats, q);
  if (!plan.nvfp4_stats.empty()) emit_feature(out, "LogNvfp4TensorStats", plan.nvfp4_stats, q);
  emit_feature(out, "LogTensorStats", plan.tensor_stats, q);
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  FP8A_CHECK(out.good(), "log-config: the YAML emitter failed");
  const std::size_t n = plan.fp8_stats.size() + plan.nvfp4_stats.size() + plan.tensor_stats.size();
  return {name, std::string(out.c_str(), out.size()) + "\n",
          std::to_string(n) + " statistics per tensor, " + std::to_string(plan.what_if_casts) + " what-if casts"};
}

}  // namespace fp8a

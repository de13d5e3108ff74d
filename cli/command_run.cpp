// fp8-advisor run: read captures, evaluate every recipe on every tensor, write the reports.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <span>

#include <unistd.h>

#include "cli/backend_registry.hpp"
#include "cli/mpi_cluster.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "pipeline/run_pipeline.hpp"
#include "cli/stop_signals.hpp"
#include "cli/version.hpp"
#include "core/error.hpp"
#include "core/gpu_target.hpp"
#include "core/recipe.hpp"
#include "core/suggest.hpp"
#include "core/text.hpp"
#include "datasets/capture.hpp"
#include "policies/cost_model.hpp"
#include "policies/layer_summary.hpp"
#include "policies/logged_stats_summary.hpp"
#include "policies/target_model.hpp"
#include "reports/answer_text.hpp"
#include "reports/artifact.hpp"
#include "reports/console_table.hpp"
#include "reports/gemms_csv.hpp"
#include "reports/consumers/megatron_args.hpp"
#include "reports/consumers/megatron_bridge.hpp"
#include "reports/metrics_csv.hpp"
#include "reports/nvdlfw_csv.hpp"
#include "reports/consumers/nvdlfw_inspect_yaml.hpp"
#include "reports/consumers/recipe_json.hpp"
#include "reports/report_html.hpp"
#include "reports/report_md.hpp"
#include "reports/summary_json.hpp"
#include "reports/consumers/te_precision_config.hpp"
#include "reports/consumers/te_snippet.hpp"
#include "reports/consumers/torchao_json.hpp"
#include "rundir/checkpoint.hpp"
#include "rundir/output_lock.hpp"
#include "rundir/output_set.hpp"

namespace fp8a::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The command line without --threads, --resume, --quiet, --progress-every and --rank-timeout
// (and their values).
std::vector<std::string> result_command_line(const std::vector<std::string>& words) {
  std::vector<std::string> kept;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--resume" || w == "--quiet") continue;
    if (w == "--threads" || w == "--progress-every" || w == "--rank-timeout") {
      ++i;  // and its value
      continue;
    }
    if (w.starts_with("--threads=") || w.starts_with("--progress-every=") || w.starts_with("--rank-timeout="))
      continue;
    kept.push_back(w);
  }
  return kept;
}

// What the checkpoint is keyed by besides each unit's own key: the build, the options that
// change results, and the identity of every file read (its notes on --resume name them).
CheckpointManifest checkpoint_manifest(const EvaluationOptions& eval, const RunRequest& request,
                                       const CaptureSet& captures, const TrainingLog& log, const FileSystem& fs) {
  CheckpointManifest m;
  m.build = std::string(FP8A_VERSION) + " (git " + FP8A_GIT_REVISION + ")";
  std::string recipes;
  for (const Recipe& r : request.config.recipes) recipes += (recipes.empty() ? "" : ",") + r.spec();
  m.options["--recipes"] = recipes;
  m.options["--format"] = format_option(request.config);
  m.options["--amax-reduction"] = eval.reduction_text;
  m.options["--npy-dtype"] = eval.npy_dtype_text;
  m.options["--gemm-rows"] = request.gemms ? request.gemm_sampling.text() : "none (--no-gemms)";
  for (const CaptureFile& f : captures.files) m.inputs[f.path] = f.identity;
  for (const std::string& f : log.files) m.inputs[f] = fs.map(f)->identity();
  return m;
}

// Every rank of a launch must evaluate the same work: the same arguments, capture files (by
// identity: size and mtime), tensors and training-log files as rank 0. Usage error
// fp8a.usage.230 naming the first rank and line that differ.
void check_ranks_agree(Cluster& cluster, const Invocation& inv, const CaptureSet& captures,
                       const TrainingLog& log) {
  std::string mine;
  for (const auto& a : inv.args) mine += "argument '" + a + "'\n";
  for (const auto& f : captures.files) mine += "capture file " + f.path + " (" + f.identity + ")\n";
  for (const auto& t : captures.tensors)
    mine += "tensor " + t.tensor_name + " " + shape_text(t.view.shape) + " in " + t.file + "\n";
  for (const auto& f : log.files) mine += "training log " + f + "\n";
  const std::vector<std::string> all = cluster.all_gather(mine);
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const auto lines = [](const std::string& s, std::size_t at) {
      const std::size_t end = s.find('\n', at);
      return at >= s.size() ? std::string("nothing more") : s.substr(at, end - at);
    };
    std::size_t at = 0;  // the start of the first line that differs
    for (std::size_t i = 0; i < std::min(all[0].size(), all[r].size()) && all[0][i] == all[r][i]; ++i)
      if (all[0][i] == '\n') at = i + 1;
    throw usage_error("fp8a.usage.230", "MPI rank " + std::to_string(r) + " has " + lines(all[r], at) +
                                            " where rank 0 has " + lines(all[0], at) +
                                            ": every rank must be given the same options and read the "
                                            "same files (a shared file system)");
  }
}

// `run`'s options, parsed and checked.
struct RunCommand {
  EvaluationOptions eval;
  RunRequest request;
  std::string out_dir;
  bool quiet = false, resume = false;
  bool default_recipes = false;  // --recipes not given
  double progress_every = 10.0;
  double rank_timeout = kDefaultRankTimeout;
  std::string cost;              // --cost: roofline, none, or empty (not given)
  double tokens_per_step = 0;    // --tokens-per-step; 0: not given
  // --price-as: the model the plan is priced at (its shapes and tokens per step), read before the run.
  std::optional<TargetModel> price_as;
  // Gates for CI: the plan must match --expect-plan's recipe.json (its text, read before the run)
  // and keep at least --min-fp8-share of the GEMM FLOPs in FP8; else exit kExitGate.
  std::string expect_plan_path, expect_plan_text;
  double min_fp8_share = 0;
  // No --capture: the format of the rows read from the training log's statistics.
  std::optional<TrainingFormat> logged_format;
  // --strict: exit kExitGate when anything was not judged (a GEMM, a tensor's NaN/Inf, a trace
  // that does not match the capture): each said on stderr.
  bool strict = false;
};

// --expect-plan's file, read and checked before anything is evaluated: input error fp8a.io.107
// when it cannot be read or is not a recipe.json.
std::string read_expected_plan(const std::string& path) {
  std::string text;
  try {
    const auto mapped = DiskFileSystem().map(path);
    const auto bytes = mapped->bytes();
    text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  } catch (const Error& e) {
    throw input_error("fp8a.io.107", "--expect-plan " + path + ": " + e.what());
  }
  std::string why;
  if (!plan_differences(text, text, &why))
    throw input_error("fp8a.io.107", "--expect-plan " + path + ": " + why);
  return text;
}

// The FP8 types of a training log's statistics: TE's what-if casts take the training run's, one
// format (--format when it names one, else TE's default, hybrid).
TrainingFormat logged_training_format(const RunConfig& c) {
  return !c.formats_by_kind && c.formats.size() == 1 ? c.formats.front() : TrainingFormat::kHybrid;
}

// The option values parse_run checks and turns into the request.
struct RunOptionTexts {
  std::string training_recipe, policy, gpu, te_version, price_as;
};

// run's options (a table: one entry each, with its help).
po::options_description run_options(RunCommand& cmd, RunOptionTexts& t) {
  po::options_description desc("Options");
  const std::string te_version_help =
      "the Transformer Engine release the written files are for (X.Y, from " + te_version_text(kTeOldest) + " to " +
      te_version_text(kTeNewest) + "): TE's names in recipe.json, nvdlfw_inspect.yaml and te_snippet.py, and "
      "candidates it cannot train with excluded (docs/VERSIONS.md)";
  add_evaluation_options(desc, cmd.eval, "recipes", false);
  desc.add_options()
      ("out", po::value(&cmd.out_dir)->required(), "output directory (created if missing)")
      ("training-recipe", po::value(&t.training_recipe),
       "the recipe the logged run trained with (one of --recipes): nvdlfw_inspect statistics "
       "without a recipe name are compared with it")
      ("no-gemms", "skip the GEMM-output error (gemms.csv)")
      ("policy", po::value(&t.policy)->default_value("default"),
       "the recommendation's criteria: default, te-autoswitch (TE PR #2883's rule) or a policy JSON file "
       "(docs/POLICY.md)")
      ("gpu", po::value(&t.gpu)->default_value("h100"),
       "the GPU the recommendation is for (its recipes and the cost model's peaks): a100, l4, l40s, "
       "rtx4090, h100, h200, b200, gb200, b300, gb300, rtx5090; on those with FP4 tensor cores "
       "(b200, gb200, b300, gb300) the default --recipes gain nvfp4")
      ("te-version", po::value(&t.te_version)->default_value(te_version_text(kTeNewest)),
       te_version_help.c_str())
      ("cost", po::value(&cmd.cost),
       "roofline: choose the fastest plan on --gpu by the GEMM roofline; none: by the numerics "
       "alone (the most GEMM FLOPs in FP8). Default: roofline when the tokens per step are known "
       "(--tokens-per-step or the capture), else none, said in the answer")
      ("tokens-per-step", po::value(&cmd.tokens_per_step)->default_value(0),
       "tokens one training step runs through each layer, over every data-parallel rank (global "
       "batch x sequence length); default: as the capture records it (0 = that, or unknown)")
      ("price-as", po::value(&t.price_as),
       "judge the numerics on the captured (proxy) layers, price the plan at a target model: "
       "llama-7b, llama-70b (Llama 2's shapes and 4M-token step) or a shapes JSON file "
       "(docs/OPTIONS.md); each captured layer stands for the target's modules of its role (qkv, "
       "proj, fc1, fc2, head)")
      ("expect-plan", po::value(&cmd.expect_plan_path),
       "a recipe.json of an earlier run: when this run's plan differs (the chosen candidate, the FP8 "
       "share, a GEMM's precision), say how on stderr and exit 4 after writing the files (a CI gate)")
      ("min-fp8-share", po::value(&cmd.min_fp8_share)->default_value(0),
       "exit 4 after writing the files when the plan keeps less than this share (0..1, as "
       "recipe.json's fp8_flop_share) of the GEMM FLOPs in FP8 (a CI gate)")
      ("strict",
       "exit 4 after writing the files when anything was not judged: a GEMM whose operands were not "
       "captured or paired, NaN/Inf in a tensor, a training log that does not match the capture "
       "(each on stderr; a CI gate)")
      ("quiet", "print only the answer on stdout (errors and warnings still go to stderr; no "
                "progress)")
      ("progress-every", po::value(&cmd.progress_every)->default_value(10.0),
       "progress on stderr: redrawn in place on a terminal; otherwise a line every this many "
       "seconds (0 = after every tensor and GEMM layer)")
      ("fail-on-nonfinite", "exit 3 when a tensor holds NaN or Inf (default: warn and leave "
                            "those elements out of the sums)")
      ("rank-timeout", po::value(&cmd.rank_timeout)->default_value(kDefaultRankTimeout),
       "over MPI ranks: how many seconds a rank waits in an exchange for the others before it "
       "ends the job (fp8a.usage.240, naming the ranks that did not answer)")
      ("resume", "continue a run that was killed or stopped: reuse the evaluations it finished, "
                 "kept in DIR/.fp8-advisor-checkpoint (without --resume it is started afresh)");
  return desc;
}

// The recommendation's options checked: the policy, GPU, TE release, cost, tokens per step and
// --price-as's target (read here, before anything runs).
RecommendationRequest recommendation_options(RunCommand& cmd, const RunOptionTexts& t, const po::variables_map& vm) {
  RecommendationRequest asked{load_policy(t.policy, DiskFileSystem()), nullptr, std::nullopt, kTeNewest};
  std::string gpu_why;
  asked.gpu = find_gpu_target(t.gpu, &gpu_why);
  if (asked.gpu == nullptr) throw usage_error("fp8a.usage.214", "--gpu: " + gpu_why);
  std::string te_why;
  const std::optional<TeVersion> te = parse_te_version(t.te_version, &te_why);
  if (!te) throw usage_error("fp8a.usage.242", "--te-version " + quoted_input(t.te_version) + ": " + te_why);
  asked.te_version = *te;
  if (vm.count("cost") != 0 && cmd.cost != "roofline" && cmd.cost != "none")
    throw usage_error("fp8a.usage.215", "--cost " + quoted_input(cmd.cost) + ": expected roofline or none" +
                                            did_you_mean(cmd.cost, {"roofline", "none"}));
  constexpr UsageId kBadTokensPerStep = "fp8a.usage.215";
  // A step of 10^12 tokens is far beyond any training run (Llama 3's largest was 1.6e7); beyond
  // it the roofline's sums lose meaning (1e305 printed "speedup -nanx").
  check_finite_option(kBadTokensPerStep, "tokens-per-step", cmd.tokens_per_step, 0, kMaxTokensPerStep);
  if (vm.count("price-as") != 0) {
    if (cmd.cost == "none")
      throw usage_error("fp8a.usage.245", "--price-as prices the plan on the roofline; --cost none judges no cost: "
                                          "give one of them");
    cmd.price_as = load_target_model(t.price_as, DiskFileSystem());
  }
  return asked;
}

// Unset: --help was printed. Usage errors name the option.
std::optional<RunCommand> parse_run(const Invocation& inv) {
  RunCommand cmd;
  RunOptionTexts texts;
  po::options_description desc = run_options(cmd, texts);
  po::variables_map vm;
  if (!parse_options(inv, desc, nullptr, &vm,
                     "fp8-advisor run --capture PATH [PATH ...] --out DIR [options]\n"
                     "       fp8-advisor run --training-log LOG [LOG ...] --out DIR [options]", std::cout))
    return std::nullopt;
  RunRequest& request = cmd.request;
  request.config = evaluation_config(cmd.eval);
  if (cmd.eval.capture_paths.empty()) {
    if (cmd.eval.log_paths.empty())
      throw usage_error("fp8a.usage.203", "fp8-advisor run: the option '--capture' is required but missing (or "
                                          "--training-log alone: advice from its statistics)");
    cmd.logged_format = logged_training_format(request.config);
  }
  check_out_option(cmd.out_dir);
  constexpr UsageId kBadProgressEvery = "fp8a.usage.205";
  check_finite_option(kBadProgressEvery, "progress-every", cmd.progress_every, 0);
  if (!(cmd.rank_timeout > 0) || !std::isfinite(cmd.rank_timeout))
    throw usage_error("fp8a.usage.241", "--rank-timeout must be a number of seconds > 0");
  RecommendationRequest asked = recommendation_options(cmd, texts, vm);
  constexpr UsageId kBadMinFp8Share = "fp8a.usage.244";
  check_finite_option(kBadMinFp8Share, "min-fp8-share", cmd.min_fp8_share, 0, 1);
  if (!cmd.expect_plan_path.empty()) cmd.expect_plan_text = read_expected_plan(cmd.expect_plan_path);
  if (!cmd.eval.recipes_given) request.config.recipes = default_run_recipes(*asked.gpu, asked.te_version);
  request.recommend = std::move(asked);
  if (vm.count("training-recipe") != 0) {
    // It names the recipe of the --training-log's statistics: without a log there are none.
    if (cmd.eval.log_paths.empty())
      throw usage_error("fp8a.usage.211", "--training-recipe names the recipe of --training-log's nvdlfw_inspect "
                                          "statistics; give --training-log too");
    request.training_recipe = parse_recipe(texts.training_recipe);
    const std::vector<Recipe>& recipes = request.config.recipes;
    if (std::find(recipes.begin(), recipes.end(), *request.training_recipe) == recipes.end())
      throw usage_error("fp8a.usage.211", "--training-recipe " + request.training_recipe->spec() +
                                              " is not among --recipes; add it there");
  }
  request.gemms = vm.count("no-gemms") == 0;
  request.gemm_sampling = cmd.eval.gemm_sampling;
  request.nonfinite = vm.count("fail-on-nonfinite") != 0 ? NonFiniteAction::kFail : NonFiniteAction::kWarn;
  request.reports = true;
  cmd.quiet = vm.count("quiet") != 0;
  cmd.strict = vm.count("strict") != 0;
  cmd.resume = vm.count("resume") != 0;
  cmd.default_recipes = !cmd.eval.recipes_given;
  return cmd;
}

// --expect-plan and --min-fp8-share.
int check_plan_gates(const RunCommand& cmd, const std::vector<Artifact>& artifacts, const Recommendation* rec) {
  const auto recipe = std::find_if(artifacts.begin(), artifacts.end(), [](const Artifact& a) { return a.name == "recipe.json"; });
  if (recipe == artifacts.end()) {
    if (cmd.expect_plan_path.empty() && !(cmd.min_fp8_share > 0)) return kExitOk;
    std::cerr << "fp8-advisor: gate: no plan to check (--no-gemms makes no recommendation)\n";
    return kExitGate;
  }
  int rc = kExitOk;
  if (!cmd.expect_plan_path.empty()) {
    std::string why;
    const auto diff = plan_differences(cmd.expect_plan_text, recipe->contents, &why);
    FP8A_CHECK(diff.has_value(), "run's own recipe.json is a recipe.json");
    if (!diff->empty()) {
      std::cerr << "fp8-advisor: gate: the plan differs from --expect-plan " << terminal_text(cmd.expect_plan_path)
                << " (" << diff->size() << (diff->size() == 1 ? " difference" : " differences") << "):\n";
      constexpr std::size_t kShown = 20;
      for (std::size_t i = 0; i < diff->size() && i < kShown; ++i) std::cerr << "  " << (*diff)[i] << "\n";
      if (diff->size() > kShown) std::cerr << "  and " << diff->size() - kShown << " more\n";
      rc = kExitGate;
    }
  }
  if (cmd.min_fp8_share > 0) {
    const double share = rec != nullptr && rec->chosen ? rec->candidates[*rec->chosen].fp8_flop_share : 0.0;
    if (share < cmd.min_fp8_share) {
      std::cerr << format_text("fp8-advisor: gate: the plan keeps %.1f %% of the GEMM FLOPs in FP8, under "
                               "--min-fp8-share %.1f %%\n",
                               100 * share, 100 * cmd.min_fp8_share);
      rc = kExitGate;
    }
  }
  return rc;
}

// The gates of a finished run, each failure a line on stderr; kExitGate when any failed.
// `not_judged`: what the run could not judge (its warnings, the GEMMs not judged), which
// --strict refuses.
int check_gates(const RunCommand& cmd, const std::vector<Artifact>& artifacts, const Recommendation* rec,
                const std::vector<std::string>& not_judged) {
  int strict = kExitOk;
  if (cmd.strict && !not_judged.empty()) {
    std::cerr << "fp8-advisor: gate: --strict: " << not_judged.size() << " thing"
              << (not_judged.size() == 1 ? " was" : "s were") << " not judged:\n";
    for (const std::string& u : not_judged) std::cerr << "  " << terminal_text(u) << "\n";
    strict = kExitGate;
  }
  const int rc = check_plan_gates(cmd, artifacts, rec);
  return rc != kExitOk ? rc : strict;
}

// --price-as: the roofline at the target's shapes and tokens per step (--tokens-per-step when
// given), every captured layer mapped by its role; usage error fp8a.usage.246 naming the layers
// it cannot map.
CostOptions price_as_target(const TargetModel& target, const std::vector<std::string>& layers, double tokens_per_step) {
  const bool given = tokens_per_step > 0;
  std::vector<std::string> unmapped;
  auto pricing = std::make_shared<TargetPricing>(
      price_at_target(target, layers, given ? tokens_per_step : target.tokens_per_step,
                      given ? "--tokens-per-step" : target.tokens_source, &unmapped));
  if (!unmapped.empty()) {
    std::string names;
    for (std::size_t i = 0; i < unmapped.size() && i < 3; ++i) names += (i ? ", " : "") + quoted_input(unmapped[i], 120);
    if (unmapped.size() > 3) names += format_text(" and %zu more", unmapped.size() - 3);
    throw usage_error("fp8a.usage.246",
                      "--price-as " + escaped_input(target.name, 80) + ": no module role (qkv, proj, fc1, fc2, head) " +
                          "the target prices for captured layer" + (unmapped.size() == 1 ? " " : "s ") + names +
                          "; a shapes file's roles.<role>.names can map them (docs/OPTIONS.md)");
  }
  if (pricing->layers.empty())
    throw usage_error("fp8a.usage.246", "--price-as " + escaped_input(target.name, 80) +
                                            ": the capture holds no layer the target prices");
  return CostOptions{pricing->tokens_per_step, pricing->tokens_source, std::move(pricing)};
}

// The cost the recommendation is priced with, once the captures say what they record: the roofline
// at --tokens-per-step, else at the capture's tokens per step; without either, --cost roofline
// prices the captured tokens and the default judges no cost, saying why.
void price_at_tokens(const RunCommand& cmd, const CaptureSet& captures, const LoggedRows* logged,
                     RecommendationRequest& asked) {
  if (cmd.cost == "none") return;
  const CaptureTokens& recorded = captures.tokens;
  if (cmd.price_as) {
    // The layers in the order the captures (or the log's rows) hold them.
    std::vector<std::string> layers;
    for (const CapturedTensor& t : captures.tensors)
      if (layers.empty() || layers.back() != t.key.layer) layers.push_back(t.key.layer);
    if (logged != nullptr)
      for (const EvaluationRow& r : logged->rows)
        if (std::find(layers.begin(), layers.end(), r.key.layer) == layers.end()) layers.push_back(r.key.layer);
    asked.roofline = price_as_target(*cmd.price_as, layers, cmd.tokens_per_step);
  } else if (logged != nullptr) {
    asked.cost_unjudged = "not judged: a training log holds no shapes (--price-as MODEL: the target's shapes and "
                          "tokens per step); the numerics decide, and the FP8 share counts every GEMM alike";
  } else if (cmd.tokens_per_step > 0) {
    asked.roofline = CostOptions{cmd.tokens_per_step, "--tokens-per-step"};
  } else if (recorded.tokens_per_step > 0) {
    asked.roofline = CostOptions{static_cast<double>(recorded.tokens_per_step),
                                 (recorded.how == "counted" ? "counted by fp8a_capture in " : "recorded in ") + recorded.file};
  } else if (cmd.cost == "roofline") {
    asked.roofline = CostOptions{};
  } else {
    asked.cost_unjudged = "not judged: the capture does not record its tokens per step (--tokens-per-step N: "
                          "global batch x sequence length); the numerics decide";
  }
}

// The provenance every report records. Options that change how the results are reached, not
// what they are, are left out of it, so the files of a resumed run, or of one with other threads,
// are byte for byte those of any other run of the same inputs and options.
RunInfo run_provenance(const Invocation& inv, const RunRequest& request, const EvaluationBackend& evaluator) {
  RunInfo info;
  info.version = FP8A_VERSION;
  info.git_revision = FP8A_GIT_REVISION;
  info.command_line = result_command_line(inv.command_line);
  info.recipes = request.config.recipes;
  info.formats = evaluated_formats(request.config);
  info.format_option = format_option(request.config);
  info.format_description = describe_formats(request.config);
  info.amax_reduction = request.config.amax_reduction;
  if (request.training_recipe) info.training_recipe = request.training_recipe->spec();
  info.requested_device = device_choice_name(evaluator.device_choice);
  info.backend = evaluator.backend->name();
  info.device = evaluator.backend->device();
  info.cuda_compiled = evaluator.backends.cuda_compiled;
  info.cuda_devices = evaluator.backends.cuda_devices;
  return info;
}

// The training log given to the run: with no --recipes, the delayed recipes its trace's search
// puts first replace the default list's (every rank searches the same log).
void use_training_log(RunCommand& cmd, const TrainingLog& log) {
  if (cmd.eval.log_paths.empty()) return;
  cmd.request.config.training_log = &log;
  if (cmd.default_recipes && !cmd.logged_format) search_delayed_recipes(cmd.request, log);
}

// Takes the training log's statistics as they are read: its rows (LoggedRowsBuilder), and beside
// captures the FP8 statistics of the captured steps, for nvdlfw_stats.csv.
class RunLogSink final : public LoggedStepSink {
 public:
  RunLogSink(const std::optional<Recipe>& training_recipe, TrainingFormat format, const CaptureSet& captures)
      : rows(training_recipe, format) {
    for (const CapturedTensor& t : captures.tensors) captured_.insert(t.key.step);
  }
  void add_step(const LoggedStep& step) override {
    rows.add_step(step);
    if (captured_.contains(step.step))
      kept.insert(kept.end(), step.fp8.begin(), step.fp8.end());
    else
      not_kept += step.fp8.size();
  }
  LoggedRowsBuilder rows;
  std::vector<LoggedFp8Stat> kept;  // at the captured steps
  std::size_t not_kept = 0;         // FP8 statistics of the other steps

 private:
  std::set<std::int64_t> captured_;
};

// Beside captures: the training log's rows of the recipes and formats the run evaluates, in the
// training format, to extend the captures to the steps and layers they do not hold.
LoggedRows logged_extension_rows(const RunCommand& cmd, LoggedRows logged) {
  const RunConfig& c = cmd.request.config;
  std::erase_if(logged.rows, [&](const EvaluationRow& r) {
    return std::find(c.recipes.begin(), c.recipes.end(), r.recipe) == c.recipes.end() || !evaluates(c, r.recipe, r.format);
  });
  return logged;
}

// No --capture: the rows of the training log's statistics (input error fp8a.trace.507 when it
// logged none a recipe could be judged on), and the run's recipes and format become theirs.
LoggedRows logged_run_rows(RunCommand& cmd, LoggedRows logged) {
  if (logged.rows.empty()) {
    std::string why = logged.notes.empty() ? "" : " (" + logged.notes.front() + ")";
    throw input_error("fp8a.trace.507",
                      "--training-log: no LogFp8TensorStats statistic of activation, weight or gradient to judge a "
                      "recipe on" + why + "; log them as `fp8-advisor log-config` asks, or give --capture");
  }
  RunConfig& config = cmd.request.config;
  if (cmd.eval.recipes_given)  // the candidates asked for, among what the log holds
    std::erase_if(logged.rows, [&](const EvaluationRow& r) {
      return std::find(config.recipes.begin(), config.recipes.end(), r.recipe) == config.recipes.end();
    });
  if (logged.rows.empty())
    throw input_error("fp8a.trace.507", "--training-log: it logged no LogFp8TensorStats statistic under --recipes' "
                                        "recipes (TE logs current, block and mxfp8 what-ifs, and the training recipe)");
  config.recipes.clear();
  for (const EvaluationRow& r : logged.rows)
    if (std::find(config.recipes.begin(), config.recipes.end(), r.recipe) == config.recipes.end())
      config.recipes.push_back(r.recipe);
  config.formats = {*cmd.logged_format};
  config.formats_by_kind = false;
  return logged;
}

// Reads --training-log into *log (the run's config points at it), step by step through a
// RunLogSink: the logged rows, when the run is on the log alone or the log holds FP8 statistics.
std::optional<LoggedRows> read_training_log(RunCommand& cmd, const CaptureSet& captures, const FileSystem& fs,
                                            TrainingLog* log) {
  if (cmd.eval.log_paths.empty()) return std::nullopt;
  RunLogSink sink(cmd.request.training_recipe,
                  cmd.logged_format ? *cmd.logged_format : logged_training_format(cmd.request.config), captures);
  *log = load_training_log(cmd.eval.log_paths, fs, &sink);
  log->fp8_stats = std::move(sink.kept);
  use_training_log(cmd, *log);
  if (cmd.logged_format) return logged_run_rows(cmd, sink.rows.finish());
  if (log->fp8_stat_count == 0) return std::nullopt;
  LoggedRows logged = logged_extension_rows(cmd, sink.rows.finish());
  if (sink.not_kept > 0)
    logged.notes.push_back(format_text("%zu logged FP8 statistics of steps no capture holds are judged as logged "
                                       "rows, not listed in nvdlfw_stats.csv (it sets the captured steps' beside ours)",
                                       sink.not_kept));
  return logged;
}

// What the run could not judge, for --strict: its warnings, and the GEMMs the answer could not
// judge (each said on stderr here too, with why and what the files train them in).
std::vector<std::string> report_not_judged(const RunInfo& info, const AnswerContext& answer) {
  std::vector<std::string> not_judged = info.warnings;
  if (const Recommendation* rec = answer.recommendation; rec != nullptr) {
    if (const std::string none = nothing_judged(rec->candidates); !none.empty()) not_judged.push_back(none);
    for (const std::string& u : plan_fallbacks(*rec).unjudged) {
      std::cerr << "fp8-advisor: warning: not judged: " << terminal_text(u) << "\n";
      not_judged.push_back("not judged: " + u);
    }
  }
  return not_judged;
}

// stdout: with --quiet the answer alone (with the files written); otherwise the header and the
// tables, then the answer, so that the last screen a person sees is the answer.
void print_outcome(const RunCommand& cmd, const CaptureSet& captures, const RunInfo& info,
                   const std::vector<LayerSummary>& layers, const std::string& answer_text) {
  if (!cmd.quiet) {
    std::cout << "fp8-advisor " << FP8A_VERSION << ": " << captures.tensors.size() << " tensors from "
              << captures.files.size() << " file(s), " << info.recipes.size() << " recipe(s), format "
              << info.format_description << ", backend " << info.backend << " (" << info.device << ")"
              << (info.gemm_path.empty() ? "" : ", GEMM error " + info.gemm_path) << "\n\n"
              << render_layer_table(layers);
    if (info.logged_stats)
      std::cout << render_logged_stats_line(*info.logged_stats, cmd.request.training_recipe.has_value());
    std::cout << "\n";
  }
  std::cout << answer_text;
  std::cout.flush();
}

// A run that fails from the checkpoint on (an error thrown: a bad input, a capture changed under
// it, an output that cannot be rendered) leaves --out as it found it: the checkpoint it started
// goes, and with it the directory if the run created it. A --resume keeps its checkpoint; a stop
// (SIGINT/SIGTERM) returns, and keeps it too.
struct DiscardOnFailure {
  Checkpoint* checkpoint;
  ~DiscardOnFailure() {
    if (checkpoint != nullptr && std::uncaught_exceptions() > 0) checkpoint->discard();
  }
};

// A stop request ended the run: what is finished is in the checkpoint (rank 0's; null on the
// other ranks). Returns the exit status, 128 + the signal.
int stopped_run(const Invocation& inv, const StopRequest& stop, Checkpoint* checkpoint, bool resume, bool redrawn) {
  if (checkpoint == nullptr) return stop.signal != 0 ? 128 + stop.signal : int{kExitOk};
  if (redrawn) std::cerr << "\n";
  const int signal = stop.signal;
  if (!resume && checkpoint->done(UnitKind::kShard) + checkpoint->done(UnitKind::kGemmLayer) == 0) {
    checkpoint->discard();  // nothing to resume: --out as it was
    std::cerr << "fp8-advisor: stopped by " << StopOnSignals::signal_name(signal)
              << " before any evaluation finished: nothing kept, nothing written\n";
    return 128 + signal;
  }
  std::vector<std::string> again;
  for (const std::string& w : inv.command_line)
    if (w != "--resume") again.push_back(w);
  again.emplace_back("--resume");
  std::cerr << "fp8-advisor: stopped by " << StopOnSignals::signal_name(signal) << ": "
            << checkpoint->done(UnitKind::kShard) << " evaluations (tensor x recipe) and "
            << checkpoint->done(UnitKind::kGemmLayer) << " GEMM layers are kept in " << checkpoint->dir()
            << "; resume with: " << join_command_line(again) << "\n";
  return 128 + signal;
}

// The files of the run, in the order they are written and listed; records the result's timings,
// GEMM path, warnings, outputs and logged-statistics summary in the provenance, and fills the
// answer, on the way.
std::vector<Artifact> render_run(const RunRequest& request, const RunResult& result,
                                 std::span<const LayerSummary> layers, RunInfo& info, AnswerContext& answer) {
  info.evaluate_seconds = result.evaluate_seconds;
  info.gemm_seconds = result.gemm_seconds;
  info.gemm_path = result.gemm_path;
  info.warnings = result.warnings;
  for (const auto& s : result.skipped_pairings) info.warnings.push_back("gemms: " + s.line);
  std::vector<Artifact> artifacts;
  // summary.json's not_written: every file run writes in some run and not in this one, with why,
  // in the order they would be written. The terminal says the optional ones' absence once (the
  // answer's "no recommendation" line) or not at all (gemms.csv, nvdlfw_stats.csv).
  std::vector<std::string> not_written;
  artifacts.push_back(render_metrics_csv(result.rows));
  if (request.gemms) artifacts.push_back(render_gemms_csv(result.gemms));
  else not_written.push_back("gemms.csv not written: --no-gemms");
  const bool logged_only = result.logged_only();
  const TrainingLog* log = request.config.training_log;
  const bool fp8_logged = log != nullptr && log->fp8_stat_count > 0;
  if (result.logged_stats.empty())
    not_written.push_back(log == nullptr ? "nvdlfw_stats.csv not written: no --training-log"
                          : logged_only ? "nvdlfw_stats.csv not written: no capture to set the logged statistics beside"
                          : fp8_logged  ? "nvdlfw_stats.csv not written: the --training-log files log no FP8 statistic "
                                          "at a captured step"
                                        : "nvdlfw_stats.csv not written: the --training-log files hold no nvdlfw_inspect "
                                          "FP8 statistics (LogFp8TensorStats)");
  if (!result.logged_stats.empty()) {
    info.logged_stats = summarize_logged_stats(result.logged_stats);
    artifacts.push_back(render_nvdlfw_csv(result.logged_stats, info.log_files));
  } else if (request.training_recipe && !logged_only && !fp8_logged) {
    const std::string w = "--training-recipe: no nvdlfw_inspect FP8 statistics (LogFp8TensorStats) "
                          "in the --training-log files, nothing to compare";
    std::cerr << "fp8-advisor: warning: " << w << "\n";
    info.warnings.push_back(w);
  }
  // The recommendation and the configs for the tools people train with.
  if (result.recommendation) {
    const Recommendation& rec = *result.recommendation;
    answer.recommendation = &rec;
    answer.delayed_search = result.delayed_search;
    // The consumer plan, decided once: every consumer file and the answer format it.
    const ConsumerPlan& plan = answer.consumers.emplace(rec);
    artifacts.push_back(render_recipe_json(plan, info));
    artifacts.push_back(render_megatron_args(plan));
    artifacts.push_back(render_megatron_bridge(plan));
    for (auto* render : {&render_te_precision_config, &render_nvdlfw_inspect_yaml}) {
      std::string why;
      if (auto a = (*render)(plan, &why)) {
        artifacts.push_back(std::move(*a));
      } else {
        answer.not_written.push_back(why);  // the answer's "not written:" lines
        not_written.push_back(why);
      }
    }
    artifacts.push_back(render_te_snippet(plan));
    artifacts.push_back(render_torchao_json(plan));
  } else {
    answer.skipped = {"no recommendation: --no-gemms leaves no GEMM evidence to judge", request.recommend->gpu,
                      request.recommend->cost_source(), request.recommend->cost_basis()};
    for (const char* file : {"recipe.json", "megatron_args.txt", "megatron_bridge.yaml", "te_precision_config.yaml",
                             "nvdlfw_inspect.yaml", "te_snippet.py", "torchao.json"})
      not_written.push_back(std::string(file) + " not written: --no-gemms leaves no GEMM evidence to judge");
  }
  artifacts.push_back(render_report_md(info, result.rows, layers, answer));
  for (const auto& a : artifacts) info.outputs.push_back(a.name);
  info.not_written = std::move(not_written);
  info.outputs.push_back("summary.json");
  info.outputs.push_back("report.html");
  artifacts.push_back(render_summary_json(info, result.rows, layers, &answer));
  artifacts.push_back(render_report_html({&info, result.rows, result.gemms, layers, answer.recommendation, &answer,
                                          result.forecasts, result.histograms, request.config.training_log,
                                          request.logged != nullptr ? std::span<const LoggedSeries>(request.logged->series)
                                                                    : std::span<const LoggedSeries>()}));
  return artifacts;
}

}  // namespace

int command_run(const Invocation& inv) {
  std::optional<RunCommand> parsed = parse_run(inv);
  if (!parsed) return kExitOk;
  RunCommand& cmd = *parsed;
  RunRequest& request = cmd.request;
  set_rank_timeout(inv.cluster, cmd.rank_timeout);
  // Over several MPI ranks every rank evaluates its share; rank 0 alone reports, keeps the
  // checkpoint and writes.
  const bool lead = !is_distributed(inv.cluster) || inv.cluster->rank() == 0;
  std::optional<TerminalProgress> progress;
  if (!cmd.quiet && lead) progress.emplace(stderr, ::isatty(STDERR_FILENO) != 0, cmd.progress_every);
  const EvaluationBackend evaluator = start_backend(cmd.eval);

  std::optional<OutputLock> out_lock;  // one run per --out
  if (lead) out_lock.emplace(cmd.out_dir, join_command_line(inv.command_line));
  // SIGINT/SIGTERM (recorded since main's first line): stop at the next tensor or GEMM layer.
  static const StopRequest kNever;
  const StopRequest& stop = inv.stop != nullptr ? *inv.stop : kNever;
  // A signal before anything is read: exit 128 + it, --out as it was (the lock removes a
  // directory it created). Over several ranks the engine's exchanges stop them together.
  if (stop.requested() && !is_distributed(inv.cluster)) {
    const int signal = stop.signal.load();
    std::cerr << "fp8-advisor: stopped by " << StopOnSignals::signal_name(signal)
              << " before the run started: nothing written\n";
    return 128 + signal;
  }
  if (cmd.resume && lead) {
    try {
      check_output_set(cmd.out_dir, "run");
    } catch (const Error& e) {
      std::cerr << "fp8-advisor: --resume: " << e.what() << "\n";
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  DiskFileSystem fs;
  const CaptureSet captures = cmd.logged_format ? CaptureSet{}
                                                : load_captures(cmd.eval.capture_paths, fs,
                                                                capture_options(cmd.eval.npy_dtype_text));
  TrainingLog training_log;
  std::optional<LoggedRows> logged = read_training_log(cmd, captures, fs, &training_log);
  if (logged) request.logged = &*logged;
  price_at_tokens(cmd, captures, request.logged, *request.recommend);
  // The provenance, once the recipe list is final.
  RunInfo info = run_provenance(inv, request, evaluator);
  info.inputs = captures.files;
  if (!cmd.eval.log_paths.empty()) {
    info.log_files = training_log.files;
    info.log_rounded = training_log.rounded;
    info.log_notes = training_log.notes;
    if (logged) info.log_notes.insert(info.log_notes.end(), logged->notes.begin(), logged->notes.end());
  }
  if (is_distributed(inv.cluster)) check_ranks_agree(*inv.cluster, inv, captures, training_log);
  info.read_seconds = seconds_since(t0);

  // Every finished unit goes to the checkpoint as the run goes; --resume takes them back.
  // Rank 0's alone: the engine saves there the units the other ranks computed too.
  std::optional<Checkpoint> checkpoint;
  if (lead) {
    checkpoint.emplace(cmd.out_dir, checkpoint_manifest(cmd.eval, request, captures, training_log, fs), cmd.resume);
    for (const std::string& note : checkpoint->notes()) std::cerr << "fp8-advisor: " << note << "\n";
  }
  // A checkpoint this run started (nothing resumed) goes with a failure; one it resumed stays.
  const DiscardOnFailure discard_on_failure{checkpoint && checkpoint->started() ? &*checkpoint : nullptr};
  const RunContext context{progress ? &*progress : nullptr, checkpoint ? &*checkpoint : nullptr, &stop, inv.cluster};
  if (lead) request.on_warning = [](const std::string& w) { std::cerr << "fp8-advisor: warning: " << w << "\n"; };
  // With the CUDA backend every GEMM also runs in cuBLASLt (engine=cublaslt rows).
  const auto gemm_engine = request.gemms ? make_gemm_engine(*evaluator.backend) : nullptr;
  RunResult result;
  try {
    result = run_pipeline(request, captures, *evaluator.backend, gemm_engine.get(), context);
  } catch (const StopRequested&) {
    return stopped_run(inv, stop, checkpoint ? &*checkpoint : nullptr, cmd.resume,
                       progress && ::isatty(STDERR_FILENO) != 0);
  }
  if (!lead) return kExitOk;
  // The layers whose GEMMs could not be paired: the answer calls them not judged; say why here.
  for (const PairingSkip& s : result.skipped_pairings)
    std::cerr << "fp8-advisor: warning: gemms not judged: " << terminal_text(s.line) << "\n";

  AnswerContext answer;
  const auto layers = summarize_layers(result.rows);
  const std::vector<Artifact> artifacts = render_run(request, result, layers, info, answer);
  const std::vector<std::string> not_judged = report_not_judged(info, answer);
  check_captures_unchanged(captures);  // no outputs from a capture rewritten under the run
  const std::string wrote = write_artifacts(cmd.out_dir, "run", artifacts, info.command_line);
  if (cmd.resume)
    std::cerr << "fp8-advisor: resumed: " << checkpoint->reused(UnitKind::kShard) << " of "
              << checkpoint->done(UnitKind::kShard) << " evaluations (tensor x recipe) and "
              << checkpoint->reused(UnitKind::kGemmLayer) << " of " << checkpoint->done(UnitKind::kGemmLayer)
              << " GEMM layers taken from " << terminal_text(checkpoint->dir()) << "\n";
  print_outcome(cmd, captures, info, layers, render_answer(answer) + terminal_text(wrote) + "\n");
  return check_gates(cmd, artifacts, answer.recommendation, not_judged);
}

}  // namespace fp8a::cli

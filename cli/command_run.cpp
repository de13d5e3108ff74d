// fp8-advisor run: read captures, evaluate every recipe on every tensor, write the reports.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>

#include <unistd.h>

#include <tbb/global_control.h>

#include "cli/backend_registry.hpp"
#include "cli/mpi_cluster.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/stop_signals.hpp"
#include "cli/version.hpp"
#include "core/error.hpp"
#include "core/suggest.hpp"
#include "core/text.hpp"
#include "datasets/capture.hpp"
#include "engine/run.hpp"
#include "engine/gemm_error.hpp"
#include "engine/logged_stats.hpp"
#include "core/gpu_target.hpp"
#include "engine/evaluation_index.hpp"
#include "engine/gemm_pairing.hpp"
#include "engine/histogram.hpp"
#include "engine/schedule.hpp"
#include "policies/advice.hpp"
#include "policies/amax_trend.hpp"
#include "policies/cost_model.hpp"
#include "policies/delayed_search.hpp"
#include "policies/layer_summary.hpp"
#include "policies/logged_stats_summary.hpp"
#include "policies/nonfinite.hpp"
#include "policies/policy.hpp"
#include "reports/answer_text.hpp"
#include "reports/artifact.hpp"
#include "rundir/atomic_file.hpp"
#include "rundir/checkpoint.hpp"
#include "reports/console_table.hpp"
#include "reports/gemms_csv.hpp"
#include "reports/megatron_args.hpp"
#include "reports/metrics_csv.hpp"
#include "rundir/output_lock.hpp"
#include "rundir/output_set.hpp"
#include "reports/nvdlfw_csv.hpp"
#include "reports/nvdlfw_inspect_yaml.hpp"
#include "reports/recipe_json.hpp"
#include "reports/report_html.hpp"
#include "reports/report_md.hpp"
#include "reports/summary_json.hpp"
#include "reports/te_precision_config.hpp"
#include "reports/torchao_json.hpp"

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
CheckpointManifest checkpoint_manifest(const EvaluationOptions& eval, const RunConfig& config,
                                       bool gemms, const CaptureSet& captures,
                                       const TrainingLog& log, const FileSystem& fs) {
  CheckpointManifest m;
  m.build = std::string(FP8A_VERSION) + " (git " + FP8A_GIT_REVISION + ")";
  std::string recipes;
  for (const Recipe& r : config.recipes) recipes += (recipes.empty() ? "" : ",") + r.spec();
  m.options["--recipes"] = recipes;
  m.options["--format"] = training_format_list(config.formats);
  m.options["--amax-reduction"] = eval.reduction_text;
  m.options["--npy-dtype"] = eval.npy_dtype_text;
  m.options["--gemm-rows"] =
      !gemms ? "none (--no-gemms)" : eval.gemm_rows == kGemmRowsAuto ? "auto" : std::to_string(eval.gemm_rows);
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

}  // namespace

int command_run(const Invocation& inv) {
  EvaluationOptions eval;
  std::string out_dir, training_recipe_text, policy_text, gpu_text, cost_text;
  double tokens_per_step = 0;
  double progress_every = 10.0;
  double rank_timeout = kDefaultRankTimeout;
  po::options_description desc("Options");
  add_evaluation_options(desc, eval, "recipes");
  desc.add_options()
      ("out", po::value(&out_dir)->required(), "output directory (created if missing)")
      ("training-recipe", po::value(&training_recipe_text),
       "the recipe the logged run trained with (one of --recipes): nvdlfw_inspect statistics "
       "without a recipe name are compared with it")
      ("no-gemms", "skip the GEMM-output error (gemms.csv)")
      ("policy", po::value(&policy_text)->default_value("default"),
       "the advice's criteria: default, te-autoswitch (TE PR #2883's rule) or a policy JSON file "
       "(docs/POLICY.md)")
      ("gpu", po::value(&gpu_text)->default_value("h100"),
       "the GPU the advice is for (its recipes and the cost model's peaks): a100, l4, l40s, "
       "rtx4090, h100, h200, b200, gb200, rtx5090")
      ("cost", po::value(&cost_text)->default_value("roofline"),
       "roofline: choose the fastest plan on --gpu by the GEMM roofline; none: by the numerics "
       "alone (the most GEMM FLOPs in FP8)")
      ("tokens-per-step", po::value(&tokens_per_step)->default_value(0),
       "tokens each layer processes per step (all ranks) when the captures hold a sample of "
       "them; 0 = the captured tokens")
      ("quiet", "print only the answer on stdout (errors and warnings still go to stderr; no "
                "progress)")
      ("progress-every", po::value(&progress_every)->default_value(10.0),
       "progress on stderr: redrawn in place on a terminal; otherwise a line every this many "
       "seconds (0 = after every tensor and GEMM layer)")
      ("fail-on-nonfinite", "exit 3 when a tensor holds NaN or Inf (default: warn and leave "
                            "those elements out of the sums)")
      ("rank-timeout", po::value(&rank_timeout)->default_value(kDefaultRankTimeout),
       "over MPI ranks: how many seconds a rank waits in an exchange for the others before it "
       "ends the job (fp8a.usage.240, naming the ranks that did not answer)")
      ("resume", "continue a run that was killed or stopped: reuse the evaluations it finished, "
                 "kept in DIR/.fp8-advisor-checkpoint (without --resume it is started afresh)");
  po::variables_map vm;
  if (!parse_options(inv, desc, nullptr, &vm,
                     "fp8-advisor run --capture PATH [PATH ...] --out DIR [options]", std::cout))
    return kExitOk;
  const RunConfig config = evaluation_config(eval);
  constexpr UsageId kBadProgressEvery = "fp8a.usage.205";
  check_finite_option(kBadProgressEvery, "progress-every", progress_every, 0);
  if (!(rank_timeout > 0) || !std::isfinite(rank_timeout))
    throw usage_error("fp8a.usage.241", "--rank-timeout must be a number of seconds > 0");
  set_rank_timeout(inv.cluster, rank_timeout);
  const Policy policy = load_policy(policy_text, DiskFileSystem());
  std::string gpu_why;
  const GpuTarget* gpu = find_gpu_target(gpu_text, &gpu_why);
  if (gpu == nullptr) throw usage_error("fp8a.usage.214", "--gpu: " + gpu_why);
  if (cost_text != "roofline" && cost_text != "none")
    throw usage_error("fp8a.usage.215", "--cost " + quoted_input(cost_text) + ": expected roofline or none" +
                                            did_you_mean(cost_text, {"roofline", "none"}));
  constexpr UsageId kBadTokensPerStep = "fp8a.usage.215";
  check_finite_option(kBadTokensPerStep, "tokens-per-step", tokens_per_step, 0);
  const bool quiet = vm.count("quiet") != 0;
  // Over several MPI ranks every rank evaluates its share; rank 0 alone reports, keeps the
  // checkpoint and writes.
  const bool lead = !is_distributed(inv.cluster) || inv.cluster->rank() == 0;
  std::optional<TerminalProgress> progress;
  if (!quiet && lead) progress.emplace(stderr, ::isatty(STDERR_FILENO) != 0, progress_every);

  RunInfo info;
  info.version = FP8A_VERSION;
  info.git_revision = FP8A_GIT_REVISION;
  // Options that change how the results are reached, not what they are, are left out of the
  // provenance, so the files of a resumed run, or of one with other threads, are byte for byte
  // those of any other run of the same inputs and options.
  info.command_line = result_command_line(inv.command_line);
  const bool resume = vm.count("resume") != 0;
  info.config = config;
  std::optional<Recipe> training_recipe;
  if (vm.count("training-recipe") != 0) {
    training_recipe = parse_recipe(training_recipe_text);
    if (std::find(info.config.recipes.begin(), info.config.recipes.end(), *training_recipe) ==
        info.config.recipes.end())
      throw usage_error("fp8a.usage.211", "--training-recipe " + training_recipe->spec() +
                                              " is not among --recipes; add it there");
    info.training_recipe = training_recipe->spec();
  }
  const EvaluationBackend evaluator = start_backend(eval);
  const Backend* backend = evaluator.backend.get();
  info.requested_device = device_choice_name(evaluator.device_choice);
  info.backend = backend->name();
  info.device = backend->device();
  info.cuda_compiled = evaluator.backends.cuda_compiled;
  info.cuda_devices = evaluator.backends.cuda_devices;

  std::optional<OutputLock> out_lock;  // one run per --out
  if (lead) out_lock.emplace(out_dir, join_command_line(inv.command_line));
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
  if (resume && lead) {
    try {
      check_output_set(out_dir, "run");
    } catch (const Error& e) {
      std::cerr << "fp8-advisor: --resume: " << e.what() << "\n";
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  DiskFileSystem fs;
  const CaptureSet captures = load_captures(eval.capture_paths, fs, capture_options(eval.npy_dtype_text));
  info.inputs = captures.files;
  const TrainingLog training_log = load_evaluation_log(eval, fs);
  if (!eval.log_paths.empty()) {
    info.config.training_log = &training_log;
    info.log_files = training_log.files;
    info.log_rounded = training_log.rounded;
    info.log_notes = training_log.notes;
  }
  // A trace and no --recipes: delayed scaling's options are searched on the trace, and its
  // front-runners replace the default list's delayed recipes (every rank searches the same log).
  std::optional<DelayedSearch> delayed_search;
  if (!eval.log_paths.empty() && vm["recipes"].defaulted()) {
    delayed_search = search_delayed_options(training_log, info.config.formats,
                                            {.horizon_steps = policy.delayed_forecast.horizon_steps});
    info.config.recipes = with_front_runners(info.config.recipes, *delayed_search);
  }
  if (is_distributed(inv.cluster)) check_ranks_agree(*inv.cluster, inv, captures, training_log);
  info.read_seconds = seconds_since(t0);

  // Every finished unit goes to the checkpoint as the run goes; --resume takes them back.
  const bool gemms_wanted = vm.count("no-gemms") == 0;
  // Rank 0's alone: the engine saves there the units the other ranks computed too.
  std::optional<Checkpoint> checkpoint;
  if (lead) {
    checkpoint.emplace(out_dir, checkpoint_manifest(eval, config, gemms_wanted, captures, training_log, fs), resume);
    for (const std::string& note : checkpoint->notes()) std::cerr << "fp8-advisor: " << note << "\n";
  }
  // A run that fails from here on (an error thrown: a bad input, a capture changed under it, an
  // output that cannot be rendered) leaves --out as it found it: the checkpoint it started goes,
  // and with it the directory if the run created it. A --resume keeps its checkpoint; a stop
  // (SIGINT/SIGTERM) returns, and keeps it too.
  struct DiscardOnFailure {
    Checkpoint* checkpoint;
    ~DiscardOnFailure() {
      if (checkpoint != nullptr && std::uncaught_exceptions() > 0) checkpoint->discard();
    }
  } const discard_on_failure{checkpoint && !resume ? &*checkpoint : nullptr};
  RunContext context;
  context.store = checkpoint ? &*checkpoint : nullptr;
  context.stop = &stop;
  context.cluster = inv.cluster;
  // A stop request ends the run here: what is finished is in the checkpoint.
  const auto stopped = [&] {
    if (!lead) return stop.signal != 0 ? 128 + stop.signal : int{kExitOk};
    if (progress && ::isatty(STDERR_FILENO) != 0) std::cerr << "\n";
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
  };

  t0 = std::chrono::steady_clock::now();
  context.progress = progress ? &*progress : nullptr;
  std::vector<EvaluationRow> rows;
  try {
    rows = evaluate_captures(captures, info.config, *backend, context);
  } catch (const StopRequested&) {
    return stopped();
  }
  info.evaluate_seconds = seconds_since(t0);

  const NonFiniteVerdict nonfinite = judge_nonfinite(
      rows, vm.count("fail-on-nonfinite") != 0 ? NonFiniteAction::kFail : NonFiniteAction::kWarn);
  if (nonfinite.failure) throw input_error("fp8a.capture.406", *nonfinite.failure);  // discard_on_failure
  info.warnings = nonfinite.warnings;
  if (lead)
    for (const auto& w : info.warnings) std::cerr << "fp8-advisor: warning: " << w << "\n";

  // The GEMM layers (X, W, dY paired per step and rank): the GEMM error and the advice use them.
  std::vector<GemmLayer> gemm_layers;
  std::vector<GemmRow> gemms;
  if (vm.count("no-gemms") == 0) {
    t0 = std::chrono::steady_clock::now();
    std::vector<std::string> skipped;
    gemm_layers = pair_gemm_operands(captures, &skipped);
    // With the CUDA backend every GEMM also runs in cuBLASLt (engine=cublaslt rows).
    const auto gemm_engine = make_gemm_engine(*backend);
    try {
      gemms = evaluate_gemm_errors(gemm_layers, rows, GemmOptions{eval.gemm_rows, gemm_engine.get()}, context);
    } catch (const StopRequested&) {
      return stopped();
    }
    const std::size_t threads = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
    info.gemm_path = "emulated on the CPU, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
                     (gemm_engine != nullptr ? "; " + gemm_engine->name() + " rows on the GPU" : "");
    info.gemm_seconds = seconds_since(t0);
    for (const auto& s : skipped) info.warnings.push_back("gemms: " + s);
  }
  // The rest (the advice, report.html's histograms, the files) is rank 0's: every rank has every
  // row now, and what follows is cheap next to the evaluation.
  if (!lead) return kExitOk;

  // The advice: every candidate judged on the GEMMs' evidence, under the policy and the GPU.
  // Without GEMM errors (--no-gemms) there is no GEMM evidence, so no advice.
  const EvaluationIndex index(rows);
  std::optional<Recommendation> recommendation;
  std::vector<DelayedForecast> forecasts;
  AnswerContext answer;
  answer.gpu = gpu->name;
  answer.cost_source = cost_text;
  if (vm.count("no-gemms") != 0) {
    answer.skipped = "advice skipped: --no-gemms leaves no GEMM evidence to judge";
  } else {
    if (!eval.log_paths.empty())
      forecasts = forecast_delayed_scaling(&training_log, rows, captures, index.recipes(), index.formats(),
                                           {.horizon_steps = policy.delayed_forecast.horizon_steps});
    AdviceInputs in;
    in.index = &index;
    in.gemms = gemms;
    in.layers = gemm_layers;
    in.candidates = index_candidates(index);
    in.forecasts = forecasts;
    std::optional<CostModel> cost;
    if (cost_text == "roofline")
      cost = build_cost_model(gemm_layers, index.recipes(), *gpu, CostOptions{tokens_per_step});
    recommendation = recommend(in, policy, *gpu, cost ? &*cost : nullptr);
    answer.recommendation = &*recommendation;
    if (delayed_search)
      answer.delayed_search = delayed_search_summary(*delayed_search, recommendation->candidates, cost.has_value());
  }

  // The files of the run, in the order they are written and listed.
  std::vector<Artifact> artifacts;
  artifacts.push_back(render_metrics_csv(rows));
  if (vm.count("no-gemms") == 0) artifacts.push_back(render_gemms_csv(gemms));
  if (!training_log.fp8_stats.empty()) {
    const auto compared = compare_logged_stats(training_log.fp8_stats, rows, training_recipe);
    info.logged_stats = summarize_logged_stats(compared);
    artifacts.push_back(render_nvdlfw_csv(compared, training_log.files));
  } else if (training_recipe) {
    const std::string w = "--training-recipe: no nvdlfw_inspect FP8 statistics (LogFp8TensorStats) "
                          "in the --training-log files, nothing to compare";
    std::cerr << "fp8-advisor: warning: " << w << "\n";
    info.warnings.push_back(w);
  }
  // The recommendation and the configs for the tools people train with.
  if (recommendation) {
    artifacts.push_back(render_recipe_json(*recommendation, info));
    artifacts.push_back(render_megatron_args(*recommendation));
    std::string why;
    if (auto a = render_te_precision_config(*recommendation, &why)) artifacts.push_back(std::move(*a));
    else answer.not_written.push_back(why);
    if (auto a = render_nvdlfw_inspect_yaml(*recommendation, &why)) artifacts.push_back(std::move(*a));
    else answer.not_written.push_back(why);
    artifacts.push_back(render_torchao_json(*recommendation));
  }
  const auto layers = summarize_layers(rows);
  artifacts.push_back(render_report_md(info, rows, layers, answer));
  for (const auto& a : artifacts) info.outputs.push_back(a.name);
  info.outputs.push_back("summary.json");
  info.outputs.push_back("report.html");
  artifacts.push_back(render_summary_json(info, rows, layers, &answer));
  // report.html's magnitude histograms: one pass over each operand's tensor (its shards merged)
  // at the step report_histogram_choices picks.
  std::vector<OperandHistogram> histograms;
  for (const HistogramChoice& c : report_histogram_choices(rows)) {
    OperandHistogram h{c.key, {}};
    for (const CapturedTensor& t : captures.tensors)
      if (t.key == c.key) {
        h.histogram.merge(log2_histogram(t.view));
        t.view.release();  // the resident set stays one tensor (TensorStorage::release)
      }
    histograms.push_back(std::move(h));
  }
  artifacts.push_back(render_report_html(
      {&info, rows, gemms, layers, answer.recommendation, &answer, forecasts, histograms}));

  check_captures_unchanged(captures);  // no outputs from a capture rewritten under the run
  const std::string wrote = write_artifacts(out_dir, "run", artifacts, info.command_line);
  if (resume)
    std::cerr << "fp8-advisor: resumed: " << checkpoint->reused(UnitKind::kShard) << " of "
              << checkpoint->done(UnitKind::kShard) << " evaluations (tensor x recipe) and "
              << checkpoint->reused(UnitKind::kGemmLayer) << " of " << checkpoint->done(UnitKind::kGemmLayer)
              << " GEMM layers taken from " << checkpoint->dir() << "\n";
  // The answer first (with the files written), then the tables.
  const std::string answer_text = render_answer(answer) + wrote + "\n";
  if (quiet) {
    std::cout << answer_text;
    return kExitOk;
  }
  std::cout << "fp8-advisor " << FP8A_VERSION << ": " << captures.tensors.size() << " tensors from "
            << captures.files.size() << " file(s), " << info.config.recipes.size()
            << " recipe(s), format " << training_format_list(info.config.formats) << ", backend "
            << info.backend << " (" << info.device << ")"
            << (info.gemm_path.empty() ? "" : ", GEMM error " + info.gemm_path) << "\n\n"
            << answer_text << "\n"
            << render_layer_table(layers);
  if (info.logged_stats) std::cout << render_logged_stats_line(*info.logged_stats, training_recipe.has_value());
  return kExitOk;
}

}  // namespace fp8a::cli

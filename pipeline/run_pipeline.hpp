// The pipeline of `run`, shared by whatif, compare and bench: the captures evaluated under every
// recipe, the GEMM layers paired and their output error, and, on rank 0, the recommendation, the
// logged statistics compared and report.html's histograms. Values in, values out: the caller
// parses, renders and writes (cli/command_run.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/gpu_target.hpp"
#include "core/te_version.hpp"
#include "datasets/capture.hpp"
#include "engine/backend.hpp"
#include "engine/evaluation_index.hpp"
#include "engine/gemm_engine.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_pairing.hpp"
#include "engine/logged_rows.hpp"
#include "engine/logged_stats.hpp"
#include "engine/run.hpp"
#include "engine/schedule.hpp"
#include "policies/advice.hpp"
#include "policies/amax_trend.hpp"
#include "policies/cost_model.hpp"
#include "policies/delayed_search.hpp"
#include "policies/histogram_choice.hpp"
#include "policies/nonfinite.hpp"
#include "policies/policy.hpp"

namespace fp8a {

// What the recommendation is asked for: the policy, the GPU (--gpu) and, with --cost roofline,
// the cost model's options (unset: --cost none, the numerics alone).
struct RecommendationRequest {
  Policy policy;
  const GpuTarget* gpu = nullptr;  // never null
  std::optional<CostOptions> roofline;
  TeVersion te_version = kTeNewest;  // --te-version: the release the files are written for
  // Without roofline: why the cost was not judged (the token count is unknown); empty: --cost none.
  std::string cost_unjudged = {};
  const char* cost_source() const { return roofline ? "roofline" : "none"; }
  // Recommendation::cost_basis as this request sets it where no recommendation is made.
  std::string cost_basis() const;
};

// Everything that decides what a pipeline computes (the live configuration; provenance is RunInfo).
struct RunRequest {
  RunConfig config;  // recipes, formats, --amax-reduction and the training log (null: none)
  // The GEMM-output error; false: none (--no-gemms), and so no recommendation.
  bool gemms = true;
  GemmSampling gemm_sampling = GemmSampling::automatic();  // its sample (--gemm-rows)
  // Set: rows and GEMM layers of this captured step only, once every step is evaluated (the
  // delayed replay needs their history); whatif --step.
  std::optional<std::int64_t> only_step;
  NonFiniteAction nonfinite = NonFiniteAction::kWarn;  // kFail: input error fp8a.capture.406
  // Told each NaN/Inf warning when the evaluation finds it (run: stderr); may be empty.
  std::function<void(const std::string&)> on_warning;
  // Unset: no recommendation (whatif, compare).
  std::optional<RecommendationRequest> recommend;
  // run's reports: the training log's nvdlfw_inspect statistics compared with the rows (under
  // training_recipe, --training-recipe, for bare statistic names) and report.html's histograms.
  bool reports = false;
  std::optional<Recipe> training_recipe;
  // Rows read from config.training_log's statistics (engine/logged_rows.hpp). With no capture they
  // are the rows, and there is no GEMM output, clipping or histogram to measure; beside captures
  // they extend them to the (step, layer)s no capture holds, the captures judging what they cover.
  const LoggedRows* logged = nullptr;
  // Set by search_delayed_recipes (run with a training log and the default --recipes): the search
  // over delayed scaling's options; its front-runners are among config.recipes.
  std::optional<DelayedSearch> delayed_search;
};

struct RunResult {
  std::vector<EvaluationRow> rows;     // evaluate_captures, then request.logged's rows
  // The rows measured on captured tensors: those before the first logged one.
  std::span<const EvaluationRow> captured() const {
    const auto first = std::find_if(rows.begin(), rows.end(), [](const EvaluationRow& r) { return r.logged.has_value(); });
    return {rows.data(), static_cast<std::size_t>(first - rows.begin())};
  }
  // No capture: every row was read from a training log's statistics.
  bool logged_only() const { return !rows.empty() && rows.front().logged.has_value(); }
  std::vector<std::string> warnings;   // judge_nonfinite's, a line per tensor with NaN or Inf
  double evaluate_seconds = 0;
  // With request.gemms: the paired layers, what could not be paired, the GEMM rows, where they
  // ran ("emulated on the CPU, N threads" and the GPU engine's rows) and how long it took.
  std::vector<GemmLayer> gemm_layers;
  std::vector<PairingSkip> skipped_pairings;
  std::vector<GemmRow> gemms;
  std::string gemm_path;
  double gemm_seconds = 0;
  // The sampled GEMMs whose sampling error could have changed the answer, recomputed exactly
  // before it was taken (policies/refinement.hpp); their rows in `gemms` are the exact ones.
  std::vector<GemmSite> refined;
  // Rank 0 only (the other ranks of an MPI launch stop after the GEMMs): with gemms and an
  // recommendation request, the delayed forecasts (with a training log) and the recommendation.
  std::vector<DelayedForecast> forecasts;
  std::optional<Recommendation> recommendation;
  // With request.delayed_search and a recommendation: delayed_search_summary, the answer's line.
  std::string delayed_search;
  // With request.reports: the logged statistics compared, and the histograms.
  std::vector<LoggedComparison> logged_stats;
  std::vector<OperandHistogram> histograms;
};

// The whole pipeline on `backend`, every GEMM also run on `gemm_engine` when given
// (make_gemm_engine: cuBLASLt with the CUDA backend). Throws StopRequested on a stop request
// (context.stop), and input error fp8a.capture.406 for a NaN/Inf under NonFiniteAction::kFail.
RunResult run_pipeline(const RunRequest& request, const CaptureSet& captures, const Backend& backend,
                       const GemmEngine* gemm_engine, const RunContext& context = {});

// Searches delayed scaling's options on `log` (request.delayed_search) and puts the search's
// front-runners in place of config.recipes' delayed recipes. request.recommend must be set (its
// policy's forecast horizon).
void search_delayed_recipes(RunRequest& request, const TrainingLog& log);

// The recipes `run` evaluates when --recipes is not given: the default list, which gains nvfp4 on
// a GPU with FP4 tensor cores (b200, gb200, b300, gb300) whose TE release trains it, so that the
// plan can take its three tiers (NVFP4, MXFP8 for what NVFP4 cannot carry, BF16); elsewhere, or
// on a TE release without NVFP4BlockScaling, it could only be excluded. A training log's search
// (search_delayed_recipes) then replaces its delayed specs.
std::vector<Recipe> default_run_recipes(const GpuTarget& gpu, TeVersion te);

// Its recommendation step alone, on result's rows and GEMMs: sets result.forecasts (with a training
// log; the clipping measured on `captures` by engine/operand_pass.hpp), result.recommendation and
// result.delayed_search (bench times it on its own). request.recommend must be set. run_pipeline
// does the same steps, with report.html's histograms measured in the same read of each operand.
void recommend_run(const RunRequest& request, const CaptureSet& captures, RunResult& result);

// The clipping each delayed forecast predicts (policies/amax_trend.hpp clipping_requests,
// predict_clippings), measured on `captures` in one read of each operand it names
// (engine/operand_pass.hpp), together with report.html's histograms of `shown`: an operand both
// need is read once. The one place forecasts are measured: run, bench and the tests call it.
std::vector<OperandHistogram> measure_clipping_and_histograms(const CaptureSet& captures,
                                                              std::span<const EvaluationRow> rows,
                                                              std::vector<DelayedForecast>& forecasts,
                                                              std::span<const HistogramChoice> shown);
// The clipping alone.
void measure_clipping(const CaptureSet& captures, std::span<const EvaluationRow> rows,
                      std::vector<DelayedForecast>& forecasts);

// What recommend() judges, from `index` (over result.rows) and result's GEMMs and forecasts.
RecommendationInputs recommendation_inputs(const EvaluationIndex& index, const RunResult& result);

}  // namespace fp8a

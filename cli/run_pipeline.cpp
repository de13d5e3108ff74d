#include "cli/run_pipeline.hpp"

#include <tbb/global_control.h>

#include <chrono>

#include "core/error.hpp"
#include "engine/histogram.hpp"
#include "policies/candidate.hpp"

namespace fp8a::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The GEMM layers (X, W, dY paired per step and rank) and their output error.
void evaluate_gemms(const RunRequest& request, const CaptureSet& captures, const GemmEngine* gemm_engine,
                    const RunContext& context, RunResult& result) {
  const auto t0 = std::chrono::steady_clock::now();
  result.gemm_layers = pair_gemm_operands(captures, &result.skipped_pairings);
  if (request.only_step)
    std::erase_if(result.gemm_layers, [&](const GemmLayer& g) { return g.step != *request.only_step; });
  result.gemms = evaluate_gemm_errors(result.gemm_layers, result.rows, GemmOptions{request.gemm_rows, gemm_engine},
                                      context);
  const std::size_t threads = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  result.gemm_path = "emulated on the CPU, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
                     (gemm_engine != nullptr ? "; " + gemm_engine->name() + " rows on the GPU" : "");
  result.gemm_seconds = seconds_since(t0);
}

// report.html's histograms: one pass over each operand's tensor (its shards merged) at the step
// histogram_choices picks, releasing each tensor after it (the resident set stays one tensor).
std::vector<OperandHistogram> operand_histograms(const CaptureSet& captures, std::span<const EvaluationRow> rows) {
  std::vector<OperandHistogram> histograms;
  for (const HistogramChoice& c : histogram_choices(rows)) {
    OperandHistogram h{c, {}};
    for (const CapturedTensor& t : captures.tensors)
      if (t.key == c.key) {
        h.histogram.merge(log2_histogram(t.view));
        t.view.release();
      }
    histograms.push_back(std::move(h));
  }
  return histograms;
}

}  // namespace

RecommendationInputs recommendation_inputs(const EvaluationIndex& index, const RunResult& result) {
  RecommendationInputs in;
  in.index = &index;
  in.gemms = result.gemms;
  in.layers = result.gemm_layers;
  in.candidates = index_candidates(index);
  in.forecasts = result.forecasts;
  return in;
}

void search_delayed_recipes(RunRequest& request, const TrainingLog& log) {
  FP8A_CHECK(request.recommend.has_value(), "search_delayed_recipes: no recommendation was asked for");
  request.delayed_search = search_delayed_options(
      log, request.config.formats, {.horizon_steps = request.recommend->policy.delayed_forecast.horizon_steps});
  request.config.recipes = with_front_runners(request.config.recipes, *request.delayed_search);
}

void recommend_run(const RunRequest& request, const CaptureSet& captures, RunResult& result) {
  FP8A_CHECK(request.recommend && request.recommend->gpu != nullptr, "recommend_run: no recommendation was asked for");
  const RecommendationRequest& asked = *request.recommend;
  const EvaluationIndex index(result.rows);
  const TrainingLog* log = request.config.training_log;
  if (log != nullptr)
    result.forecasts = forecast_delayed_scaling(log, result.rows, captures, index.recipes(), index.formats(),
                                                {.horizon_steps = asked.policy.delayed_forecast.horizon_steps});
  std::optional<CostModel> cost;
  if (asked.roofline) cost = build_cost_model(result.gemm_layers, index.recipes(), *asked.gpu, *asked.roofline);
  result.recommendation =
      recommend(recommendation_inputs(index, result), asked.policy, *asked.gpu, cost ? &*cost : nullptr);
  result.recommendation->te_version = asked.te_version;
  if (request.delayed_search)
    result.delayed_search =
        delayed_search_summary(*request.delayed_search, result.recommendation->candidates, cost.has_value());
}

RunResult run_pipeline(const RunRequest& request, const CaptureSet& captures, const Backend& backend,
                       const GemmEngine* gemm_engine, const RunContext& context) {
  RunResult result;
  auto t0 = std::chrono::steady_clock::now();
  result.rows = evaluate_captures(captures, request.config, backend, context);
  result.evaluate_seconds = seconds_since(t0);
  NonFiniteVerdict nonfinite = judge_nonfinite(result.rows, request.nonfinite);
  if (nonfinite.failure) throw input_error("fp8a.capture.406", *nonfinite.failure);
  result.warnings = std::move(nonfinite.warnings);
  if (request.on_warning)
    for (const std::string& w : result.warnings) request.on_warning(w);
  if (request.only_step)
    std::erase_if(result.rows, [&](const EvaluationRow& r) { return r.key.step != *request.only_step; });
  if (request.gemms) evaluate_gemms(request, captures, gemm_engine, context, result);

  // The rest is rank 0's: every rank has every row now, and what follows is cheap next to the
  // evaluation. Without GEMM errors (--no-gemms) there is no GEMM evidence, so no recommendation.
  if (is_distributed(context.cluster) && context.cluster->rank() != 0) return result;
  if (request.recommend && request.gemms) recommend_run(request, captures, result);
  if (!request.reports) return result;
  const TrainingLog* log = request.config.training_log;
  if (log != nullptr && !log->fp8_stats.empty())
    result.logged_stats = compare_logged_stats(log->fp8_stats, result.rows, request.training_recipe);
  result.histograms = operand_histograms(captures, result.rows);
  return result;
}

}  // namespace fp8a::cli

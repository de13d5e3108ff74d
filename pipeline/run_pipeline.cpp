#include "pipeline/run_pipeline.hpp"

#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "core/text.hpp"
#include "engine/operand_pass.hpp"
#include "engine/row_flush.hpp"
#include "policies/candidate.hpp"
#include "policies/refinement.hpp"

namespace fp8a {

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
  result.gemms = evaluate_gemm_errors(result.gemm_layers, result.rows, GemmOptions{request.gemm_sampling, gemm_engine},
                                      context);
  const std::size_t threads = tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
  result.gemm_path = "emulated on the CPU, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
                     (gemm_engine != nullptr ? "; " + gemm_engine->name() + " rows on the GPU" : "");
  result.gemm_seconds = seconds_since(t0);
}

// The forecasts' clipping and report.html's histograms of `shown`, into result.
void measure_operands_of(const CaptureSet& captures, std::span<const HistogramChoice> shown, RunResult& result) {
  result.histograms = measure_clipping_and_histograms(captures, result.captured(), result.forecasts, shown);
}

// The rows a flush breaches the underflow count of, measured row by row (engine/row_flush.hpp)
// where the policy judges its rows (max_lost_rows_pct).
void measure_lost_rows(const RunRequest& request, const CaptureSet& captures, RunResult& result) {
  const UnderflowCriterion& c = request.recommend->policy.underflow;
  if (!c.enabled || !c.max_lost_rows_pct) return;
  measure_row_flush(captures, result.rows, [&](const EvaluationRow& r) { return r.metrics.underflow_pct > c.max_pct; });
}

// The delayed forecasts on the training log and the rows (none without a log), their clipping
// not yet measured.
// With no capture, the forecasts come from the logged rows (a delayed training recipe's), and
// their clipping, which needs a tensor's values, is said not judged.
void forecast_run(const RunRequest& request, const EvaluationIndex& index, RunResult& result) {
  const TrainingLog* log = request.config.training_log;
  result.forecasts.clear();
  if (log == nullptr) return;
  const bool logged_only = result.logged_only();
  result.forecasts = forecast_delayed_scaling(log, logged_only ? std::span<const EvaluationRow>(result.rows) : result.captured(),
                                              index.recipes(),
                                              formats_of_kind(request.config, RecipeKind::kPerTensorDelayed),
                                              {.horizon_steps = request.recommend->policy.delayed_forecast.horizon_steps});
  if (logged_only)
    for (DelayedForecast& f : result.forecasts)
      f.clipping.none = "a training log holds no tensor to clip: a capture of " + f.layer + " " + role_name(f.role) +
                        " judges it";
}

// A capture mistake the answer must not hide: a warning (stderr, summary.json) and the first of
// what the advice could not judge.
void warn_first(const RunRequest& request, RunResult& result, std::string m) {
  if (request.on_warning) request.on_warning(m);
  result.warnings.push_back(m);
  auto& limits = result.recommendation->limits;
  limits.insert(limits.begin(), std::move(m));
}

// The first of what advice from logged statistics alone could not judge.
constexpr const char* kLoggedOnlyLimit =
    "every GEMM judged on its operands' logged statistics alone: the GEMM-output criteria "
    "(gemm_amplification, wgrad_zeroed, wgrad_sign_flip, wgrad_direction) need a capture and are not judged";

// Beside captures: the logged rows of the (step, layer)s no capture holds, after the captured rows.
void extend_with_logged(const LoggedRows& logged, std::vector<EvaluationRow>& rows) {
  std::set<std::pair<std::int64_t, std::string>> captured;
  for (const EvaluationRow& r : rows) captured.emplace(r.key.step, r.key.layer);
  for (const EvaluationRow& r : logged.rows)
    if (!captured.contains({r.key.step, r.key.layer})) rows.push_back(r);
}

// What the answer says of the GEMMs the log alone covers.
std::string logged_extension_limit(const RunResult& result) {
  std::set<std::int64_t> steps;
  std::set<std::string> layers, captured_layers;
  for (const EvaluationRow& r : result.captured()) captured_layers.insert(r.key.layer);
  for (std::size_t i = result.captured().size(); i < result.rows.size(); ++i) {
    steps.insert(result.rows[i].key.step);
    if (!captured_layers.contains(result.rows[i].key.layer)) layers.insert(result.rows[i].key.layer);
  }
  std::string where = format_text("%zu step%s", steps.size(), steps.size() == 1 ? "" : "s");
  where += steps.size() == 1 ? format_text(" (%lld)", static_cast<long long>(*steps.begin()))
                             : format_text(" (%lld to %lld)", static_cast<long long>(*steps.begin()),
                                           static_cast<long long>(*steps.rbegin()));
  if (!layers.empty()) where += format_text(" and %zu layer%s", layers.size(), layers.size() == 1 ? "" : "s");
  return "the training log's statistics extend the captures to " + where +
         " no capture holds: there each GEMM is judged on its operands' logged statistics, said \"logged\" in its "
         "reason, and the GEMM-output criteria are not judged";
}

// What a refined GEMM's rows say in gemms.csv's note.
constexpr const char* kRefinedNote =
    "computed exactly: within 2 standard errors of its sample the answer could change";

// Decisions that respect the sampling error: the sampled GEMMs whose estimates, moved by two
// standard errors, could change the answer are recomputed exactly (every recipe and format of
// each), their rows replaced, and the answer taken again. On rank 0 alone (the other ranks of an
// MPI launch have stopped), without the cluster; the store keeps the exact rows like any others.
// `again` recommends on other GEMM rows.
void refine_run(const RunRequest& request, const GemmEngine* gemm_engine, const RunContext& context,
                const Recommender& again, RunResult& result) {
  result.refined = gemms_to_refine(result.gemms, *result.recommendation, again);
  if (result.refined.empty()) return;
  RunContext local = context;
  local.cluster = nullptr;
  std::vector<GemmRow> exact = evaluate_exact_gemms(result.gemm_layers, result.rows, result.refined,
                                                    GemmOptions{request.gemm_sampling, gemm_engine}, local);
  for (GemmRow& r : exact) r.note = r.note.empty() ? kRefinedNote : r.note + "; " + kRefinedNote;
  // Each refined (site, recipe, format)'s rows in place of the sampled ones, where the first of
  // them stood (the engine may run on an exact GEMM where it did not on the sample: the counts
  // can differ).
  const auto key = [](const GemmRow& r) {
    return std::tuple{r.step, r.layer, r.gemm, r.recipe.spec(), r.format};
  };
  std::map<decltype(key(exact.front())), std::vector<GemmRow>> by_key;
  for (GemmRow& r : exact) by_key[key(r)].push_back(std::move(r));
  std::vector<GemmRow> merged;
  for (GemmRow& r : result.gemms) {
    if (!std::binary_search(result.refined.begin(), result.refined.end(), GemmSite{r.step, r.layer, r.gemm})) {
      merged.push_back(std::move(r));
      continue;
    }
    const auto found = by_key.find(key(r));
    if (found == by_key.end()) continue;  // its rows already placed
    for (GemmRow& e : found->second) merged.push_back(std::move(e));
    by_key.erase(found);
  }
  FP8A_CHECK(by_key.empty(), "refine_run: exact rows of a recipe the sample did not have");
  result.gemms = std::move(merged);
  result.recommendation = again(result.gemms);
}

// The recommendation on the rows, GEMMs and (measured) forecasts, with the GEMMs it could hang
// on refined (gemm_engine and context: as the GEMMs were evaluated).
void choose_run(const RunRequest& request, const EvaluationIndex& index, const GemmEngine* gemm_engine,
                const RunContext& context, RunResult& result) {
  const RecommendationRequest& asked = *request.recommend;
  std::optional<CostModel> cost;
  if (asked.roofline) cost = build_cost_model(result.gemm_layers, index.recipes(), *asked.gpu, *asked.roofline);
  const Recommender again = [&](std::span<const GemmRow> gemms) {
    RecommendationInputs in = recommendation_inputs(index, result);
    in.gemms = gemms;
    in.pricing = cost && cost->options.pricing ? cost->options.pricing.get() : nullptr;
    return recommend(in, asked.policy, *asked.gpu, cost ? &*cost : nullptr, asked.te_version);
  };
  result.recommendation = again(result.gemms);
  refine_run(request, gemm_engine, context, again, result);
  if (!cost && !asked.cost_unjudged.empty()) result.recommendation->cost_basis = asked.cost_unjudged;
  // A training log from another run: said first among what the advice could not judge.
  if (const TrainingLog* log = request.config.training_log; log != nullptr && request.logged == nullptr)
    if (std::string m = trace_mismatch(*log, result.captured()); !m.empty())
      warn_first(request, result, std::move(m));
  if (request.delayed_search)
    result.delayed_search =
        delayed_search_summary(*request.delayed_search, result.recommendation->candidates, index.rows(),
                               cost.has_value());
}

}  // namespace

std::vector<OperandHistogram> measure_clipping_and_histograms(const CaptureSet& captures,
                                                              std::span<const EvaluationRow> rows,
                                                              std::vector<DelayedForecast>& forecasts,
                                                              std::span<const HistogramChoice> shown) {
  const std::vector<ClippingRequest> clips = clipping_requests(forecasts, rows);
  std::vector<OperandPass> passes;
  for (const ClippingRequest& q : clips) passes.push_back({q.key, false, q.thresholds});
  std::vector<std::size_t> histogram_pass;  // shown[i]'s pass
  for (const HistogramChoice& c : shown) {
    const auto same = std::find_if(passes.begin(), passes.end(), [&](const OperandPass& p) { return p.key == c.key; });
    histogram_pass.push_back(static_cast<std::size_t>(same - passes.begin()));
    if (same == passes.end()) passes.push_back({c.key, true, {}});
    else same->histogram = true;
  }
  std::vector<OperandMeasures> measures = measure_operands(captures, passes);
  std::vector<std::vector<ClipDamage>> damage;
  for (std::size_t i = 0; i < clips.size(); ++i) damage.push_back(std::move(measures[i].damage));
  predict_clippings(forecasts, rows, clips, damage);
  std::vector<OperandHistogram> histograms;
  for (std::size_t i = 0; i < shown.size(); ++i)
    histograms.push_back({shown[i], std::move(measures[histogram_pass[i]].histogram)});
  return histograms;
}

void measure_clipping(const CaptureSet& captures, std::span<const EvaluationRow> rows,
                      std::vector<DelayedForecast>& forecasts) {
  (void)measure_clipping_and_histograms(captures, rows, forecasts, {});
}

std::string RecommendationRequest::cost_basis() const {
  if (roofline) return roofline_basis(*roofline);
  return cost_unjudged.empty() ? kNumericsOnlyBasis : cost_unjudged;
}

RecommendationInputs recommendation_inputs(const EvaluationIndex& index, const RunResult& result) {
  RecommendationInputs in;
  in.index = &index;
  in.gemms = result.gemms;
  in.layers = result.gemm_layers;
  in.skipped = result.skipped_pairings;
  in.candidates = index_candidates(index);
  in.forecasts = result.forecasts;
  return in;
}

void search_delayed_recipes(RunRequest& request, const TrainingLog& log) {
  FP8A_CHECK(request.recommend.has_value(), "search_delayed_recipes: no recommendation was asked for");
  request.delayed_search = search_delayed_options(
      log, formats_of_kind(request.config, RecipeKind::kPerTensorDelayed), {.horizon_steps = request.recommend->policy.delayed_forecast.horizon_steps});
  request.config.recipes = with_front_runners(request.config.recipes, *request.delayed_search);
}

std::vector<Recipe> default_run_recipes(const GpuTarget& gpu, TeVersion te) {
  std::vector<Recipe> recipes = parse_recipe_list(default_recipe_list());
  const Recipe nvfp4 = parse_recipe("nvfp4");
  if (recipe_support(nvfp4, gpu).runs && te_release_cannot_train(nvfp4, te, gpu.sm).empty()) recipes.push_back(nvfp4);
  return recipes;
}

void recommend_run(const RunRequest& request, const CaptureSet& captures, RunResult& result) {
  FP8A_CHECK(request.recommend && request.recommend->gpu != nullptr, "recommend_run: no recommendation was asked for");
  measure_lost_rows(request, captures, result);
  const EvaluationIndex index(result.rows);
  forecast_run(request, index, result);
  measure_operands_of(captures, {}, result);
  choose_run(request, index, nullptr, {}, result);
}

RunResult run_pipeline(const RunRequest& request, const CaptureSet& captures, const Backend& backend,
                       const GemmEngine* gemm_engine, const RunContext& context) {
  RunResult result;
  auto t0 = std::chrono::steady_clock::now();
  const bool logged_only = request.logged != nullptr && captures.tensors.empty();
  if (!logged_only) result.rows = evaluate_captures(captures, request.config, backend, context);
  if (request.logged != nullptr) extend_with_logged(*request.logged, result.rows);
  result.evaluate_seconds = seconds_since(t0);
  NonFiniteVerdict nonfinite = judge_nonfinite(result.rows, request.nonfinite);
  if (nonfinite.failure) throw input_error("fp8a.capture.406", *nonfinite.failure);
  result.warnings = std::move(nonfinite.warnings);
  if (request.on_warning)
    for (const std::string& w : result.warnings) request.on_warning(w);
  if (request.only_step)
    std::erase_if(result.rows, [&](const EvaluationRow& r) { return r.key.step != *request.only_step; });
  if (request.gemms && !logged_only) evaluate_gemms(request, captures, gemm_engine, context, result);

  // The rest is rank 0's: every rank has every row now, and what follows is cheap next to the
  // evaluation. Without GEMM errors (--no-gemms) there is no GEMM evidence, so no recommendation.
  if (is_distributed(context.cluster) && context.cluster->rank() != 0) return result;
  const bool recommends = request.recommend && request.gemms;
  FP8A_CHECK(!recommends || request.recommend->gpu != nullptr, "run_pipeline: a recommendation without a GPU");
  std::optional<EvaluationIndex> index;
  if (recommends) {
    measure_lost_rows(request, captures, result);  // captured rows only
    index.emplace(result.rows);
    forecast_run(request, *index, result);
  }
  std::vector<HistogramChoice> shown;
  if (request.reports) shown = histogram_choices(result.captured());
  if ((recommends || request.reports) && !logged_only) measure_operands_of(captures, shown, result);
  if (recommends) {
    choose_run(request, *index, gemm_engine, context, result);
    if (logged_only) {
      // A warning too: --strict, a gate on everything judged, exits 4.
      if (!request.logged->not_kept.empty())
        result.recommendation->limits.insert(result.recommendation->limits.begin(), request.logged->not_kept);
      warn_first(request, result, kLoggedOnlyLimit);
      return result;
    }
    if (result.rows.size() > result.captured().size()) {
      result.recommendation->limits.push_back(logged_extension_limit(result));
      if (!request.logged->not_kept.empty()) result.recommendation->limits.push_back(request.logged->not_kept);
    }
    // Forwards captured without a single gradient (under torch.no_grad(), or before backward):
    // every dgrad and wgrad is unjudged, and the answer says why before anything else.
    if (const MissingRoles m = missing_roles(captures); m.none_of(Role::kGradient) && !m.none_of(Role::kActivation))
      warn_first(request, result,
                 "dgrad and wgrad of every layer: the capture holds no gradient (dY); it was taken under "
                 "torch.no_grad() or before backward: capture a training step");
  }
  if (!request.reports) return result;
  const TrainingLog* log = request.config.training_log;
  if (log != nullptr && !log->fp8_stats.empty())
    result.logged_stats = compare_logged_stats(log->fp8_stats, result.captured(), request.training_recipe);
  return result;
}

}  // namespace fp8a

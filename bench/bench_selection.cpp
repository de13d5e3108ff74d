// The selection against the evaluation: how long recommend() takes on the evaluation table of a
// Megatron-like capture, next to the evaluation that made the table.
//
//   bench_selection [--layers 96] [--steps 3] [--step-every 100] [--tokens 256] [--hidden 256]
//                   [--ffn 1024] [--repeat 5] [--threads N] [--gemm-rows 0] [--gpu h100]
//                   [--tokens-per-step 0]
//
// The capture is generated in memory by the synth generator (datasets/synth.hpp) from a preset
// built here: --layers / 4 transformer blocks of layers.<i>.{self_attention.linear_qkv,
// self_attention.linear_proj, mlp.linear_fc1, mlp.linear_fc2}, X [tokens, in], W [out, in],
// dY [tokens, out], captured at steps 100, 200, ... (--step-every) with the amax trace of every
// step from 0 (forecast_delayed_scaling fits up to 1024 of its points per layer and role).
// Most layers are healthy; block 0's QKV is sensitive-first, the last block's FC2
// sensitive-last, every 6th block's FC2 has growing outliers and every 8th block's FC1 a wide
// gradient, so the selection has failing GEMMs to judge and send to BF16, as on a real model.
//
// Evaluation, as `fp8-advisor run` does it by default, through run's pipeline
// (pipeline/run_pipeline.hpp): the CPU backend, the default recipe list, --format e4m3,hybrid, the amax
// trace as --training-log (exact delayed replay), pair_gemm_operands and evaluate_gemm_errors on
// every token row. Timed once.
// Selection, everything `run` does between the evaluation and the renderers: the EvaluationIndex,
// forecast_delayed_scaling, the candidates, recommend() under the default policy with
// --cost none and with --cost roofline on --gpu (build_cost_model timed on its own), then the
// pipeline's recommend_run() whole under each. Timed --repeat times each, median and min. Wall clock
// (steady_clock) throughout.
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_model.hpp"
#include "core/error.hpp"
#include "core/gpu_target.hpp"
#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "datasets/synth.hpp"
#include "datasets/training_log.hpp"
#include "pipeline/run_pipeline.hpp"
#include "engine/cpu_backend.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Options {
  int layers = 96;  // 4 per transformer block
  int steps = 3;
  int step_every = 100;  // captured steps 1x, 2x, ... this; the trace covers 0 .. the last
  std::int64_t tokens = 256, hidden = 256, ffn = 1024;
  int repeat = 5;
  int threads = 0;
  fp8a::GemmSampling gemm_sampling = fp8a::GemmSampling::all();  // --gemm-rows 0 (every row) or N
  double tokens_per_step = 0;  // CostOptions, as run's --tokens-per-step
  std::string gpu = "h100";
};

struct Timing {
  double median = 0, min = 0;
};

template <class F>
Timing time_repeated(int repeat, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

bool parse_args(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (a == "--layers") o->layers = std::atoi(v);
    else if (a == "--steps") o->steps = std::atoi(v);
    else if (a == "--step-every") o->step_every = std::atoi(v);
    else if (a == "--tokens") o->tokens = std::atoll(v);
    else if (a == "--hidden") o->hidden = std::atoll(v);
    else if (a == "--ffn") o->ffn = std::atoll(v);
    else if (a == "--repeat") o->repeat = std::atoi(v);
    else if (a == "--threads") o->threads = std::atoi(v);
    else if (a == "--gemm-rows") {
      const std::int64_t rows = std::atoll(v);
      if (rows < 0) return false;
      o->gemm_sampling = rows == 0 ? fp8a::GemmSampling::all() : fp8a::GemmSampling::of_rows(rows);
    } else if (a == "--gpu") o->gpu = v;
    else if (a == "--tokens-per-step") o->tokens_per_step = std::atof(v);
    else return false;
  }
  return o->layers >= 4 && o->layers % 4 == 0 && o->steps >= 1 && o->step_every >= 1 && o->tokens > 0 && o->hidden > 0 &&
         o->ffn > 0 && o->repeat >= 1 && o->threads >= 0 &&
         o->tokens_per_step >= 0;
}

}  // namespace

namespace {

// The capture and its amax trace, generated in memory, then read as `run` reads them.
struct BenchCapture {
  fp8a::MemoryFileSystem mfs;
  fp8a::CaptureSet captures;
  fp8a::TrainingLog log;
  double generate_s = 0, read_s = 0;
  std::int64_t elements = 0;
};

std::unique_ptr<BenchCapture> make_capture(const Options& o) {
  auto b = std::make_unique<BenchCapture>();
  auto t0 = Clock::now();
  const fp8a::bench::ModelPreset bp = fp8a::bench::make_model_preset({o.layers, o.steps, o.step_every, o.tokens, o.hidden, o.ffn});
  std::vector<std::string> paths;
  for (fp8a::SynthFile& f : fp8a::synthesize(bp.preset, 1, bp.preset.default_steps)) {
    std::vector<std::byte> bytes(f.contents.size());
    std::transform(f.contents.begin(), f.contents.end(), bytes.begin(), [](char c) { return static_cast<std::byte>(c); });
    f.contents = std::string();
    b->mfs.add_file("c/" + f.name, std::move(bytes));
    if (f.name.ends_with(".safetensors")) paths.push_back("c/" + f.name);
  }
  b->generate_s = seconds_since(t0);
  t0 = Clock::now();
  b->captures = fp8a::load_captures(paths, b->mfs);
  b->log = fp8a::load_training_log({"c/amax_trace.csv"}, b->mfs);
  b->read_s = seconds_since(t0);
  for (const auto& t : b->captures.tensors) b->elements += t.view.numel();
  return b;
}

// The selection's steps, each timed over o.repeat runs, and each --cost's recommendation.
struct SelectionTimings {
  Timing index, fit, forecast, none, cost, roofline, whole_none, whole_roofline;
  std::size_t candidates_all = 0;
  std::optional<fp8a::Recommendation> rec_none, rec_roofline;
};

// The selection, as `run` does it after the evaluation: its steps timed one by one, then the
// pipeline's recommendation step whole under each --cost.
SelectionTimings time_selection(const Options& o, const fp8a::RunRequest& request, const BenchCapture& b,
                                const fp8a::GpuTarget* gpu, fp8a::RunResult& result) {
  SelectionTimings t;
  const std::vector<fp8a::EvaluationRow>& rows = result.rows;
  fp8a::RunRequest none = request, roofline = request;
  none.recommend = fp8a::RecommendationRequest{fp8a::default_policy(), gpu, std::nullopt};
  roofline.recommend = fp8a::RecommendationRequest{fp8a::default_policy(), gpu, fp8a::CostOptions{o.tokens_per_step}};
  const fp8a::Policy& policy = none.recommend->policy;
  t.index = time_repeated(o.repeat, [&] { const fp8a::EvaluationIndex index(rows); });
  const fp8a::EvaluationIndex index(rows);
  t.candidates_all = fp8a::index_candidates(index).size();
  // Of it, the Theil-Sen fit of every (layer, role)'s amax series.
  t.fit = time_repeated(o.repeat, [&] { (void)fp8a::fit_amax_trends(&b.log, rows, {}); });
  t.forecast = time_repeated(o.repeat, [&] {
    // With its clipping measured on the captures, as the pipeline does (pipeline/run_pipeline.cpp).
    result.forecasts = fp8a::forecast_delayed_scaling(&b.log, rows, index.recipes(), index.formats());
    fp8a::measure_clipping(b.captures, rows, result.forecasts);
  });
  t.none = time_repeated(o.repeat, [&] {
    t.rec_none = fp8a::recommend(fp8a::recommendation_inputs(index, result), policy, *gpu, nullptr);
  });
  std::optional<fp8a::CostModel> cost;
  t.cost = time_repeated(o.repeat, [&] {
    cost = fp8a::build_cost_model(result.gemm_layers, index.recipes(), *gpu, *roofline.recommend->roofline);
  });
  t.roofline = time_repeated(o.repeat, [&] {
    t.rec_roofline = fp8a::recommend(fp8a::recommendation_inputs(index, result), policy, *gpu, &*cost);
  });
  // One whole selection per --cost, as `run` does it once (index, forecasts, model, recommend).
  t.whole_none = time_repeated(o.repeat, [&] {
    fp8a::recommend_run(none, b.captures, result);
    t.rec_none = std::move(result.recommendation);
  });
  t.whole_roofline = time_repeated(o.repeat, [&] {
    fp8a::recommend_run(roofline, b.captures, result);
    t.rec_roofline = std::move(result.recommendation);
  });
  return t;
}

void print_report(const Options& o, const fp8a::RunRequest& request, const BenchCapture& b, const fp8a::GpuTarget* gpu,
                  const fp8a::RunResult& result, const SelectionTimings& t) {
  const double evaluate_s = result.evaluate_seconds, gemm_s = result.gemm_seconds;
  const double evaluation_s = evaluate_s + gemm_s;
  std::printf("bench_selection: %d layers (%d blocks x qkv/proj/fc1/fc2), %d step(s), tokens %lld, "
              "hidden %lld, ffn %lld: %zu BF16 tensors, %lld elements (generated in %.2f s, read %.2f s)\n",
              o.layers, o.layers / 4, o.steps, static_cast<long long>(o.tokens), static_cast<long long>(o.hidden),
              static_cast<long long>(o.ffn), b.captures.tensors.size(), static_cast<long long>(b.elements), b.generate_s,
              b.read_s);
  std::printf("  recipes %zu (%s), formats e4m3,hybrid, training log: %zu steps traced; threads %s; "
              "gemm rows %s; tokens per step %s\n",
              request.config.recipes.size(), fp8a::default_recipe_list().c_str(),
              static_cast<std::size_t>(o.step_every) * static_cast<std::size_t>(o.steps) + 1,
              o.threads > 0 ? std::to_string(o.threads).c_str() : "all",
              o.gemm_sampling == fp8a::GemmSampling::all() ? "all" : o.gemm_sampling.text().c_str(),
              o.tokens_per_step > 0 ? std::to_string(o.tokens_per_step).c_str() : "captured");
  std::printf("  evaluation rows %zu, GEMM layers %zu, GEMM rows %zu, forecasts %zu, candidates %zu "
              "(--cost none on %s: %zu runnable), skipped pairings %zu\n",
              result.rows.size(), result.gemm_layers.size(), result.gemms.size(), result.forecasts.size(),
              t.candidates_all, gpu->name, t.rec_none->candidates.size(), result.skipped_pairings.size());
  for (const auto* r : {&t.rec_none, &t.rec_roofline}) {
    const auto& rec = **r;
    std::printf("  --cost %-8s chose %s: %.200s\n", rec.cost_source,
                rec.chosen ? fp8a::candidate_name(rec.candidates[*rec.chosen].candidate).c_str() : "none",
                rec.why.c_str());
  }
  std::printf("\n| what | runs | median s | min s | share of the evaluation |\n"
              "| --- | --- | --- | --- | --- |\n");
  auto row = [&](const char* what, int runs, Timing x) {
    std::printf("| %s | %d | %.4g | %.4g | %.2f %% |\n", what, runs, x.median, x.min, 100.0 * x.median / evaluation_s);
  };
  row("evaluation: `evaluate_captures` (CPU backend)", 1, {evaluate_s, evaluate_s});
  row("evaluation: `pair_gemm_operands` + `evaluate_gemm_errors`", 1, {gemm_s, gemm_s});
  row("**evaluation, total**", 1, {evaluation_s, evaluation_s});
  row("`EvaluationIndex` construction", o.repeat, t.index);
  row("`forecast_delayed_scaling`", o.repeat, t.forecast);
  row("of it, `fit_amax_trends` (Theil-Sen fit per layer and role)", o.repeat, t.fit);
  row("`recommend`, `--cost none`", o.repeat, t.none);
  row("`build_cost_model` (roofline)", o.repeat, t.cost);
  row("`recommend`, `--cost roofline`", o.repeat, t.roofline);
  row("**selection, total, `--cost none`** (index + forecast + recommend)", o.repeat, t.whole_none);
  row("**selection, total, `--cost roofline`** (index + forecast + model + recommend)", o.repeat, t.whole_roofline);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s [--layers 96 (a multiple of 4)] [--steps 3] [--step-every 100] [--tokens 256] [--hidden 256] "
                 "[--ffn 1024] [--repeat 5] [--threads N] [--gemm-rows 0] [--gpu h100] "
                 "[--tokens-per-step 0]\n",
                 argv[0]);
    return 2;
  }
  std::unique_ptr<tbb::global_control> limit;
  if (o.threads > 0)
    limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                  static_cast<std::size_t>(o.threads));
  try {
    std::string why;
    const fp8a::GpuTarget* gpu = fp8a::find_gpu_target(o.gpu, &why);
    if (gpu == nullptr) {
      std::fprintf(stderr, "bench_selection: --gpu: %s\n", why.c_str());
      return 2;
    }
    const std::unique_ptr<BenchCapture> b = make_capture(o);
    // The evaluation, as `fp8-advisor run` with its defaults (pipeline/run_pipeline.hpp).
    fp8a::RunRequest request;
    request.config.recipes = fp8a::parse_recipe_list(fp8a::default_recipe_list());
    request.config.formats = fp8a::parse_training_format_list("e4m3,hybrid");
    request.config.training_log = &b->log;
    request.gemm_sampling = o.gemm_sampling;
    const fp8a::CpuBackend backend;
    fp8a::RunResult result = fp8a::run_pipeline(request, b->captures, backend, nullptr);
    const SelectionTimings t = time_selection(o, request, *b, gpu, result);
    print_report(o, request, *b, gpu, result, t);
  } catch (const fp8a::Error& e) {
    std::fprintf(stderr, "bench_selection: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}

// Several formats in one run (RunConfig::formats) on the sample: the table and the GEMM rows are
// those of the single-format runs one after the other, row for row, and a tensor is evaluated once
// per (recipe, FP8 type): the second format costs only the gradients' E5M2 candidates.
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/gemm_error.hpp"
#include "engine/run.hpp"

namespace {

using fp8a::Fp8Format;
using fp8a::TrainingFormat;

// The CPU backend, counting the candidates it is asked to evaluate, by FP8 type.
class CountingBackend final : public fp8a::Backend {
 public:
  std::string name() const override { return inner_.name(); }
  std::string device() const override { return inner_.device(); }
  fp8a::TensorEvaluation evaluate(std::span<const fp8a::Candidate> candidates,
                                  const fp8a::TensorView& tensor) const override {
    for (const auto& c : candidates) ++(c.format == Fp8Format::kE4M3 ? e4m3 : e5m2);
    return inner_.evaluate(candidates, tensor);
  }
  std::size_t total() const { return e4m3 + e5m2; }
  mutable std::atomic<std::size_t> e4m3{0}, e5m2{0};

 private:
  fp8a::CpuBackend inner_;
};

// A GEMM engine that only counts the GEMMs it is given (and runs none).
class CountingEngine final : public fp8a::GemmEngine {
 public:
  std::string name() const override { return "counting"; }
  fp8a::GemmRun run(const fp8a::GemmProblem&) const override {
    ++runs;
    fp8a::GemmRun r;
    r.note = "counting only";
    return r;
  }
  mutable std::atomic<std::size_t> runs{0};
};

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Every field a report writes, compared exactly.
void check_same_row(const fp8a::EvaluationRow& a, const fp8a::EvaluationRow& b) {
  CHECK(a.key == b.key);
  CHECK(a.file == b.file);
  CHECK(a.shape == b.shape);
  CHECK(a.ranks == b.ranks);
  CHECK(a.recipe.spec() == b.recipe.spec());
  CHECK(a.format == b.format);
  CHECK(a.fp8 == b.fp8);
  CHECK(a.orientation == b.orientation);
  CHECK(a.applicability.ok == b.applicability.ok);
  CHECK(a.applicability.reason == b.applicability.reason);
  CHECK(same(a.stats.amax, b.stats.amax));
  CHECK(a.stats.numel == b.stats.numel);
  CHECK(same(a.metrics.scale, b.metrics.scale));
  CHECK(same(a.metrics.scale_inv_min, b.metrics.scale_inv_min));
  CHECK(same(a.metrics.scale_inv_max, b.metrics.scale_inv_max));
  CHECK(same(a.metrics.mse, b.metrics.mse));
  CHECK(same(a.metrics.rel_mse, b.metrics.rel_mse));
  CHECK(same(a.metrics.sqnr_db, b.metrics.sqnr_db));
  CHECK(same(a.metrics.cos, b.metrics.cos));
  CHECK(a.metrics.sums.underflow_count == b.metrics.sums.underflow_count);
  CHECK(a.metrics.sums.overflow_count == b.metrics.sums.overflow_count);
  CHECK(a.metrics.sums.saturated_count == b.metrics.sums.saturated_count);
  CHECK(a.replay.mode == b.replay.mode);
  CHECK(same(a.replay.scale, b.replay.scale));
  CHECK(same(a.current_scale, b.current_scale));
}

void check_same_gemm(const fp8a::GemmRow& a, const fp8a::GemmRow& b) {
  CHECK(a.step == b.step);
  CHECK(a.layer == b.layer);
  CHECK(a.gemm == b.gemm);
  CHECK(a.recipe.spec() == b.recipe.spec());
  CHECK(a.format == b.format);
  CHECK(same(a.rel_fro_err, b.rel_fro_err));
  CHECK(same(a.cos, b.cos));
  CHECK(a.engine == b.engine);
  CHECK(a.note == b.note);
}

struct Run {
  std::vector<fp8a::EvaluationRow> rows;
  std::vector<fp8a::GemmRow> gemms;
  std::size_t e4m3 = 0, e5m2 = 0;  // candidates evaluated
  std::size_t gemm_runs = 0;       // GEMMs given to the engine
};

Run run(const fp8a::CaptureSet& captures, std::vector<TrainingFormat> formats, bool by_kind = false) {
  fp8a::RunConfig config;
  config.recipes = fp8a::parse_recipe_list(fp8a::default_recipe_list());
  config.formats = std::move(formats);
  config.formats_by_kind = by_kind;
  const CountingBackend backend;
  Run r;
  r.rows = fp8a::evaluate_captures(captures, config, backend);
  r.e4m3 = backend.e4m3;
  r.e5m2 = backend.e5m2;
  const CountingEngine engine;
  std::vector<fp8a::PairingSkip> skipped;
  r.gemms =
      fp8a::evaluate_gemm_errors(captures, r.rows, fp8a::GemmOptions{fp8a::GemmSampling::all(), &engine}, &skipped);
  r.gemm_runs = engine.runs;
  return r;
}

}  // namespace

TEST_CASE("e4m3,hybrid on the sample: the two single-format runs row for row, evaluated once") {
  const fp8a::DiskFileSystem fs;
  const auto captures =
      fp8a::load_captures({std::string(FP8A_SOURCE_DIR) + "/datasets/sample"}, fs, {});
  REQUIRE(captures.tensors.size() == 24);  // 2 steps x 4 layers x 3 roles
  const Run e4m3 = run(captures, {TrainingFormat::kE4M3});
  const Run hybrid = run(captures, {TrainingFormat::kHybrid});
  const Run both = run(captures, fp8a::kAllTrainingFormats);

  REQUIRE(both.rows.size() == e4m3.rows.size() + hybrid.rows.size());
  for (std::size_t i = 0; i < both.rows.size(); ++i) {
    const bool first = i < e4m3.rows.size();
    INFO("row " << i);
    check_same_row(both.rows[i], first ? e4m3.rows[i] : hybrid.rows[i - e4m3.rows.size()]);
  }
  REQUIRE(!e4m3.gemms.empty());
  REQUIRE(both.gemms.size() == e4m3.gemms.size() + hybrid.gemms.size());
  for (std::size_t i = 0; i < both.gemms.size(); ++i) {
    const bool first = i < e4m3.gemms.size();
    INFO("gemm row " << i);
    check_same_gemm(both.gemms[i], first ? e4m3.gemms[i] : hybrid.gemms[i - e4m3.gemms.size()]);
  }

  // The sharing: hybrid adds only its E5M2 candidates (FP8 recipes on gradients); activation,
  // weight and every BF16 evaluation are e4m3's.
  CHECK(e4m3.e5m2 == 0);
  CHECK(hybrid.e5m2 > 0);
  CHECK(both.e4m3 == e4m3.e4m3);
  CHECK(both.e5m2 == hybrid.e5m2);
  CHECK(both.e4m3 + both.e5m2 < e4m3.e4m3 + hybrid.e4m3 + hybrid.e5m2);
  // The GEMMs: fprop (X, W: E4M3 in both) and BF16 run once; dgrad and wgrad of the FP8 recipes
  // (they read dY) once per format.
  std::size_t hybrid_dy_runs = 0;
  for (const auto& g : hybrid.gemms)
    if (g.gemm != fp8a::Gemm::kFprop && g.recipe.kind != fp8a::RecipeKind::kBf16) ++hybrid_dy_runs;
  CHECK(hybrid_dy_runs > 0);
  CHECK(both.gemm_runs == e4m3.gemm_runs + hybrid_dy_runs);
}

TEST_CASE("--format auto on the sample: each recipe in its kind's format only, the single-format runs' rows") {
  const fp8a::DiskFileSystem fs;
  const auto captures =
      fp8a::load_captures({std::string(FP8A_SOURCE_DIR) + "/datasets/sample"}, fs, {});
  const Run e4m3 = run(captures, {TrainingFormat::kE4M3});
  const Run hybrid = run(captures, {TrainingFormat::kHybrid});
  const Run by_kind = run(captures, {TrainingFormat::kHybrid, TrainingFormat::kE4M3}, true);
  // Expected, written out: MXFP8 in e4m3 (TE's default, Megatron-Bridge's preset), every other
  // recipe and BF16 in hybrid; the table hybrid's rows first, as config.formats orders them.
  const auto mx = [](const auto& r) { return r.recipe.kind == fp8a::RecipeKind::kMx; };
  std::vector<const fp8a::EvaluationRow*> want;
  for (const auto& r : hybrid.rows)
    if (!mx(r)) want.push_back(&r);
  for (const auto& r : e4m3.rows)
    if (mx(r)) want.push_back(&r);
  REQUIRE(by_kind.rows.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("row " << i);
    check_same_row(by_kind.rows[i], *want[i]);
  }
  std::vector<const fp8a::GemmRow*> want_gemms;
  for (const auto& g : hybrid.gemms)
    if (!mx(g)) want_gemms.push_back(&g);
  for (const auto& g : e4m3.gemms)
    if (mx(g)) want_gemms.push_back(&g);
  REQUIRE(by_kind.gemms.size() == want_gemms.size());
  for (std::size_t i = 0; i < want_gemms.size(); ++i) {
    INFO("gemm row " << i);
    check_same_gemm(by_kind.gemms[i], *want_gemms[i]);
  }
  // Half the work of both formats: no E5M2 cast of an MXFP8 gradient, no E4M3 one of the others'.
  CHECK(by_kind.e5m2 < hybrid.e5m2);
  CHECK(by_kind.e4m3 + by_kind.e5m2 < hybrid.e4m3 + hybrid.e5m2 + e4m3.e5m2 + 1);

  fp8a::RunConfig config;
  config.recipes = fp8a::parse_recipe_list("current,block,mxfp8,bf16");
  config.formats = {TrainingFormat::kHybrid, TrainingFormat::kE4M3};
  config.formats_by_kind = true;
  CHECK(fp8a::describe_formats(config) == "auto (hybrid: current, block; e4m3: mxfp8)");
  CHECK(fp8a::format_option(config) == "auto");
  CHECK(fp8a::format_of_bf16(config) == TrainingFormat::kHybrid);
  config.recipes = fp8a::parse_recipe_list("mxfp8,bf16");
  CHECK(fp8a::format_of_bf16(config) == TrainingFormat::kE4M3);
  CHECK(fp8a::evaluated_formats(config) == std::vector<TrainingFormat>{TrainingFormat::kE4M3});
  config.formats_by_kind = false;
  CHECK(fp8a::describe_formats(config) == "hybrid,e4m3");
  CHECK(fp8a::evaluates(config, config.recipes[0], TrainingFormat::kHybrid));
}

// Issue 55: what is not judged is not BF16, and what TE cannot run in FP8 is not a candidate. On
// captures made here (safetensors in memory): a layer without gradients has its fprop judged and
// its dgrad and wgrad not judged; two ranks that pair into no split leave their GEMMs not judged
// with the pairing's reason; Megatron's router and LM head, and a layer TE's FP8 modules refuse
// (X [64, 100]: 100 % 16 != 0), are BF16 whatever their numbers, outside the FP8 share and the watch list.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/gpu_target.hpp"
#include "datasets/capture.hpp"
#include "datasets/file_system.hpp"
#include "datasets/safetensors_writer.hpp"
#include "engine/evaluation_index.hpp"
#include "pipeline/run_pipeline.hpp"
#include "policies/advice.hpp"
#include "support/evaluated.hpp"
#include "support/layer_capture.hpp"

namespace {

using namespace fp8a;

using fp8a::testing::add_layer;

struct Run {
  MemoryFileSystem fs;
  fp8a::testing::Evaluated e;
  Recommendation rec;
};

void add_file(Run& r, const std::string& path, const std::vector<SafetensorsTensorOut>& t) {
  const std::string bytes = safetensors_bytes(t, {{"step", "1"}});
  std::vector<std::byte> b(bytes.size());
  std::memcpy(b.data(), bytes.data(), bytes.size());
  r.fs.add_file(path, std::move(b));
}

// Every default recipe kind in its default format, judged for b200 without a cost model.
void advise(Run& r, const std::vector<std::string>& paths, const std::string& recipes = "current,block,mxfp8") {
  r.e.captures = load_captures(paths, r.fs);
  fp8a::testing::evaluate(r.e, recipes, {TrainingFormat::kHybrid});
  const EvaluationIndex index(r.e.rows);
  RunResult result;
  result.gemm_layers = r.e.layers;
  result.skipped_pairings = r.e.skipped;
  result.gemms = r.e.gemms;
  const RecommendationInputs in = recommendation_inputs(index, result);
  r.rec = recommend(in, default_policy(), *find_gpu_target("b200"), nullptr);
}

const LayerDecision& decision(const Recommendation& rec, const std::string& layer) {
  for (const LayerDecision& l : rec.layers)
    if (l.layer == layer) return l;
  FAIL("no decision for " << layer);
  return rec.layers.front();
}

const CandidatePlan& candidate(const Recommendation& rec, const std::string& name) {
  for (const CandidatePlan& c : rec.candidates)
    if (candidate_name(c.candidate) == name) return c;
  FAIL("no candidate " << name);
  return rec.candidates.front();
}

}  // namespace

TEST_CASE("no gradients: fprop judged with its FLOPs from X and W, dgrad and wgrad not judged") {
  Run r;
  std::mt19937 rng(1);
  std::vector<SafetensorsTensorOut> t;
  add_layer(&t, "layers.0.mlp.linear_fc1", 64, 128, 96, rng, false);
  add_file(r, "c/step_1.safetensors", t);
  advise(r, {"c/step_1.safetensors"});
  REQUIRE(r.rec.chosen.has_value());
  for (const CandidatePlan& c : r.rec.candidates) {
    const LayerJudgement& l = c.layers.at(0);
    CHECK(l.incomplete);
    CHECK(l.gemms[0].judged);
    CHECK(l.gemms[0].flops == 2.0 * 64 * 128 * 96);  // fprop: 2 m n k from X [64, 96], W [128, 96]
    CHECK_FALSE(l.gemms[1].judged);
    CHECK(l.gemms[1].unjudged == "no gradient (dY) captured: dgrad needs dY and W");
    CHECK_FALSE(l.gemms[2].judged);
    CHECK(l.gemms[2].unjudged == "no gradient (dY) captured: wgrad needs dY and X");
    CHECK(c.total_flops == 2.0 * 64 * 128 * 96);
  }
  // The Gaussian fprop passes: the plan trains FP8, so the files leave dgrad and wgrad under the
  // recipe, and the decision says so.
  const LayerDecision& d = decision(r.rec, "layers.0.mlp.linear_fc1");
  CHECK(d.precision == Precision::kFp8);
  CHECK(d.gemms[0].judged);
  CHECK_FALSE(d.gemms[1].judged);
  CHECK(d.gemms[1].precision == Precision::kFp8);
  CHECK(d.gemms[1].reason.starts_with("not judged: no gradient (dY) captured: dgrad needs dY and W; the files "
                                      "train it under "));
  CHECK(r.rec.whole_modules->fp8_flop_share == 1.0);
}

TEST_CASE("two ranks that pair into no split: every GEMM not judged, nothing chosen") {
  Run r;
  std::vector<std::string> paths;
  for (int rank = 0; rank < 2; ++rank) {
    std::mt19937 rng(100 + rank);
    std::vector<SafetensorsTensorOut> t;
    add_layer(&t, "layers.0.mlp.linear_fc1", 64, 128, 64, rng);
    const std::string path = "c/rank_" + std::to_string(rank) + "/step_1.safetensors";
    add_file(r, path, t);
    paths.push_back(path);
  }
  advise(r, paths);
  REQUIRE(r.e.skipped.size() == 1);
  CHECK(r.e.skipped[0].step == 1);
  CHECK(r.e.skipped[0].layer == "layers.0.mlp.linear_fc1");
  CHECK_FALSE(r.rec.chosen.has_value());
  CHECK(r.rec.why == "nothing judged: no GEMM has both of its operands captured and paired at any step "
                     "(layers.0.mlp.linear_fc1 fprop: " + r.e.skipped[0].line + ")");
  for (const CandidatePlan& c : r.rec.candidates)
    for (const GemmJudgement& j : c.layers.at(0).gemms) {
      CHECK_FALSE(j.judged);
      CHECK(j.unjudged == r.e.skipped[0].line);
    }
}

TEST_CASE("router, LM head and shapes TE refuses: BF16 whatever the numbers, outside the share") {
  Run r;
  std::mt19937 rng(7);
  std::vector<SafetensorsTensorOut> t;
  add_layer(&t, "layers.0.mlp.router", 64, 4, 256, rng);                // Megatron's TopKRouter
  add_layer(&t, "layers.0.mlp.linear_fc1", 64, 256, 256, rng);          // healthy
  add_layer(&t, "layers.0.self_attention.linear_proj", 64, 100, 100, rng);  // X [64, 100], W [100, 100]: 100 % 16 != 0
  add_layer(&t, "layers.1.mlp.linear_fc1", 64, 64, 48, rng);            // K 48: FP8 yes, MXFP8 (32) no
  add_layer(&t, "output_layer", 64, 96, 256, rng);                      // the LM head, dims fit MXFP8
  add_file(r, "c/step_1.safetensors", t);
  advise(r, {"c/step_1.safetensors"});
  REQUIRE(r.rec.chosen.has_value());
  const auto flops = [](double m, double n, double k) { return 3 * 2.0 * m * n * k; };  // a layer's three GEMMs
  const double router = flops(64, 4, 256), fc1 = flops(64, 256, 256), proj = flops(64, 100, 100),
               fc1b = flops(64, 64, 48), head = flops(64, 96, 256);
  const double total = router + fc1 + proj + fc1b + head;
  const auto forced = [](const CandidatePlan& c, const std::string& layer) {
    for (const LayerJudgement& l : c.layers)
      if (l.layer == layer) {
        for (const GemmJudgement& j : l.gemms) CHECK(j.forced_bf16 == l.gemms[0].forced_bf16);
        return l.gemms[0].forced_bf16;
      }
    FAIL("no layer " << layer);
    return std::string();
  };
  const std::string kRouter = "layers.0.mlp.router", kFc1 = "layers.0.mlp.linear_fc1",
                    kProj = "layers.0.self_attention.linear_proj", kFc1b = "layers.1.mlp.linear_fc1",
                    kHead = "output_layer";
  for (const char* name : {"current/hybrid", "block/hybrid"}) {
    const CandidatePlan& c = candidate(r.rec, name);
    INFO(std::string(name));
    CHECK(forced(c, kRouter).starts_with("Megatron's MoE router is not a TE module"));
    CHECK(forced(c, kFc1).empty());
    CHECK(forced(c, kProj).starts_with("TE cannot run it in FP8: step 1 activation [64, 100] (2-D view 64 x 100): TE's "
                                   "linear modules need the leading dims' product divisible by 8 and the last dim "
                                   "by 16 (transformer_engine/pytorch/utils.py assert_dim_for_fp8_exec raises)"));
    CHECK(forced(c, kFc1b).empty());
    CHECK(forced(c, kHead).starts_with("Megatron's LM head (output_layer) is a ColumnParallelLinear, not a TE module"));
    // The healthy layers pass; the forced ones are BF16 and are not the numbers' fallbacks.
    CHECK(c.gemms_to_bf16 == 0);
    CHECK(c.worst_failure.empty());
    CHECK(c.fp8_flop_share == doctest::Approx((fc1 + fc1b) / total));
  }
  const CandidatePlan& mx = candidate(r.rec, "mxfp8/hybrid");
  CHECK(forced(mx, kFc1b).starts_with("TE cannot run it in MXFP8: step 1 activation [64, 48] (2-D view 64 x 48): "
                                  "MXFP8 needs both dims divisible by 32"));
  CHECK(forced(mx, kHead).empty());  // under MXFP8 Megatron can run the head in FP8 (fp8_output_proj)
  CHECK(mx.fp8_flop_share == doctest::Approx((fc1 + head) / total));
  // The chosen plan's decisions say forced, and no forced GEMM is on the watch list.
  for (const LayerDecision& l : r.rec.layers)
    for (const GemmDecision& g : l.gemms)
      if (g.forced) CHECK(g.precision == Precision::kBf16);
  CHECK(decision(r.rec, "layers.0.mlp.router").gemms[1].forced);
  for (const WatchItem& w : r.rec.watch) {
    CHECK(w.layer != "layers.0.mlp.router");
    CHECK(w.layer != "layers.0.self_attention.linear_proj");
  }
}

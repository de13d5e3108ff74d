// A tensor captured as several rank shards is evaluated as one tensor: with the amax reduced over
// the ranks its metrics equal those of the concatenated tensor (for recipes whose blocks do not
// cross the shard boundary); without reduction each shard keeps its own scale. The GEMM-output
// error of a tensor-parallel layer equals the whole layer's.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu_backend.hpp"
#include "engine/gemm_error.hpp"
#include "engine/run.hpp"
#include "support/close.hpp"

namespace {

using fp8a::testing::check_close;

// median_rel_err of tensor-parallel ranks put together against the whole layer: the float32
// accumulation is cut differently; measured at most 9.6e-5 relative over these tests' GEMMs on
// oneDNN's AMX kernels, 1.06e-4 on its AVX2 float32 kernels (1.2e-5 with Eigen's, before).
constexpr double kMedianRelTol = 2e-4;

struct Fixture {
  std::vector<float> a, b, whole;
  fp8a::CaptureSet set;
};

// Two 32x32 shards (ranks 0 and 1, amax about 1 and 4) of layer "l", and their row-wise
// concatenation as layer "whole".
void build(Fixture* f) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 0.3f);
  for (int i = 0; i < 32 * 32; ++i) f->a.push_back(n(rng));
  for (int i = 0; i < 32 * 32; ++i) f->b.push_back(4.0f * n(rng));
  f->whole = f->a;
  f->whole.insert(f->whole.end(), f->b.begin(), f->b.end());
  auto add = [&](const std::string& layer, int rank, std::vector<float>& data, std::int64_t rows) {
    fp8a::CapturedTensor t;
    t.key = {5, layer, fp8a::Role::kActivation};
    t.rank = rank;
    t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(data.data()), fp8a::DType::kF32,
                                    {rows, 32});
    f->set.tensors.push_back(t);
  };
  add("l", 0, f->a, 32);
  add("l", 1, f->b, 32);
  add("whole", -1, f->whole, 64);
}

}  // namespace

TEST_CASE("--amax-reduction tp: shards evaluate like the concatenated tensor") {
  Fixture f;
  build(&f);
  fp8a::RunConfig config;
  config.recipes = fp8a::parse_recipe_list("current,current:pow2,mxfp8,bf16");
  config.formats = {fp8a::TrainingFormat::kE4M3};
  const auto rows = fp8a::evaluate_captures(f.set, config, fp8a::CpuBackend());
  // Rows: layer "l" (one per recipe and orientation), then layer "whole", in the same order.
  REQUIRE(rows.size() % 2 == 0);
  const std::size_t half = rows.size() / 2;
  for (std::size_t i = 0; i < half; ++i) {
    const auto& s = rows[i];
    const auto& w = rows[half + i];
    INFO(s.recipe.spec() << " " << std::string(fp8a::orientation_name(s.orientation)));
    REQUIRE(s.key.layer == "l");
    REQUIRE(w.key.layer == "whole");
    CHECK(s.ranks == 2);
    CHECK(s.stats.numel == w.stats.numel);
    CHECK(s.stats.amax == w.stats.amax);
    CHECK((s.metrics.scale == w.metrics.scale || (std::isnan(s.metrics.scale) && std::isnan(w.metrics.scale))));
    CHECK(s.metrics.sums.underflow_count == w.metrics.sums.underflow_count);
    CHECK(s.metrics.sums.overflow_count == w.metrics.sums.overflow_count);
    CHECK(s.metrics.sums.saturated_count == w.metrics.sums.saturated_count);
    CHECK(s.metrics.scale_inv_min == w.metrics.scale_inv_min);
    CHECK(s.metrics.scale_inv_max == w.metrics.scale_inv_max);
    check_close(s.metrics.sums.sum_sq_err, w.metrics.sums.sum_sq_err, "sum_sq_err");
    check_close(s.metrics.mse, w.metrics.mse, "mse");
    check_close(s.metrics.cos, w.metrics.cos, "cos");
  }
}

TEST_CASE("--amax-reduction none: each shard keeps its own current scale") {
  Fixture f;
  build(&f);
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("current")};
  config.formats = {fp8a::TrainingFormat::kE4M3};
  config.amax_reduction = fp8a::AmaxReduction::kNone;
  const auto rows = fp8a::evaluate_captures(f.set, config, fp8a::CpuBackend());
  REQUIRE(rows.size() == 2);
  const auto& s = rows[0];
  CHECK(std::isnan(s.metrics.scale));  // two scales: none to report
  // Expected: the two shards evaluated alone, their sums added.
  const std::vector<fp8a::Candidate> c(1);
  const auto ea = fp8a::CpuBackend().evaluate(c, f.set.tensors[0].view);
  const auto eb = fp8a::CpuBackend().evaluate(c, f.set.tensors[1].view);
  CHECK(s.metrics.sums.underflow_count ==
        ea.results[0].metrics.sums.underflow_count + eb.results[0].metrics.sums.underflow_count);
  check_close(s.metrics.sums.sum_sq_err,
              ea.results[0].metrics.sums.sum_sq_err + eb.results[0].metrics.sums.sum_sq_err, "sum_sq_err");
  CHECK(s.metrics.scale_inv_min == std::min(ea.results[0].metrics.scale_inv, eb.results[0].metrics.scale_inv));
  CHECK(s.metrics.scale_inv_max == std::max(ea.results[0].metrics.scale_inv, eb.results[0].metrics.scale_inv));
  // And it differs from the reduced evaluation: the small shard gets a finer scale.
  CHECK(s.metrics.sums.sum_sq_err < rows[1].metrics.sums.sum_sq_err);
}

// ---- GEMM-output error of tensor-parallel layers ---------------------------------------------

namespace {

// X [64, 256], W [256, 256], dY [64, 256] of one layer, and their shards over 2 ranks as
// Megatron/TE split them. Shard boundaries fall on 128 so that no block of any recipe straddles
// them: then the sharded layer quantises exactly like the whole one (TE quantises each shard).
struct TpLayer {
  static constexpr std::int64_t kM = 64, kK = 256, kN = 256;
  std::vector<float> x, w, dy;
  std::vector<std::vector<float>> shards;  // owned storage of the views
  fp8a::CaptureSet set;

  TpLayer() {
    std::mt19937 rng(9);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (std::int64_t i = 0; i < kM * kK; ++i) x.push_back(n(rng));
    for (std::int64_t i = 0; i < kN * kK; ++i) w.push_back(0.02f * n(rng) * (i >= kN * kK / 2 ? 4.0f : 1.0f));
    for (std::int64_t i = 0; i < kM * kN; ++i) dy.push_back(1e-3f * n(rng) * n(rng));
  }
  // Columns [c0, c0 + nc) of a row-major [rows, cols] matrix.
  static std::vector<float> columns(const std::vector<float>& m, std::int64_t cols, std::int64_t c0,
                                    std::int64_t nc) {
    std::vector<float> out;
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(m.size()) / cols; ++r)
      out.insert(out.end(), m.begin() + r * cols + c0, m.begin() + r * cols + c0 + nc);
    return out;
  }
  void add(const std::string& layer, fp8a::Role role, int rank, std::vector<float> data,
           std::int64_t rows, std::int64_t cols) {
    shards.push_back(std::move(data));
    fp8a::CapturedTensor t;
    t.key = {7, layer, role};
    t.rank = rank;
    t.tensor_name = layer + "." + fp8a::role_name(role);
    t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(shards.back().data()),
                                    fp8a::DType::kF32, {rows, cols});
    set.tensors.push_back(t);
  }
  // Layer `layer` split over 2 ranks: column-parallel (X whole on both, W's rows and dY's columns
  // halved) or row-parallel (X's and W's columns halved, dY whole on both). Shards of one tensor
  // are consecutive, in rank order, as load_captures lists them.
  void add_split(const std::string& layer, bool column) {
    shards.reserve(64);
    const std::int64_t h = column ? kN / 2 : kK / 2;
    for (int r = 0; r < 2; ++r)
      add(layer, fp8a::Role::kActivation, r, column ? x : columns(x, kK, r * h, h), kM, column ? kK : h);
    for (int r = 0; r < 2; ++r)
      add(layer, fp8a::Role::kWeight, r,
          column ? std::vector<float>(w.begin() + r * h * kK, w.begin() + (r + 1) * h * kK)
                 : columns(w, kK, r * h, h),
          column ? h : kN, column ? kK : h);
    for (int r = 0; r < 2; ++r)
      add(layer, fp8a::Role::kGradient, r, column ? columns(dy, kN, r * h, h) : dy, kM, column ? h : kN);
  }
  void add_whole(const std::string& layer) {
    shards.reserve(64);
    add(layer, fp8a::Role::kActivation, -1, x, kM, kK);
    add(layer, fp8a::Role::kWeight, -1, w, kN, kK);
    add(layer, fp8a::Role::kGradient, -1, dy, kM, kN);
  }
};

// The per-entry damage of the ranks' outputs put together (slices: every rank's entries; partial
// sums: the summed output) against the whole layer's: the same entries, their float32 values
// accumulated in another cut, which could move an entry near 0 and the median's
// relative error slightly (one entry of slack, kMedianRelTol).
void check_same_damage(const fp8a::GemmRow& got, const fp8a::GemmRow& want) {
  const double entry = 100.0 / static_cast<double>(want.m * want.n);
  CHECK(std::fabs(got.zeroed_pct - want.zeroed_pct) <= entry);
  CHECK(std::fabs(got.sign_flip_pct - want.sign_flip_pct) <= entry);
  CHECK(std::fabs(got.median_rel_err - want.median_rel_err) / want.median_rel_err <= kMedianRelTol);
}

std::vector<fp8a::GemmRow> gemms_of(const std::vector<fp8a::GemmRow>& all, const std::string& layer) {
  std::vector<fp8a::GemmRow> out;
  for (const auto& g : all)
    if (g.layer == layer) out.push_back(g);
  return out;
}

}  // namespace

TEST_CASE("tensor-parallel layers: the GEMM error of 2 column- or row-parallel ranks equals the whole layer's") {
  for (const bool column : {true, false}) {
    INFO((column ? "column-parallel" : "row-parallel"));
    TpLayer l;
    l.add_split("tp", column);
    l.add_whole("whole");
    fp8a::RunConfig config;
    config.recipes = fp8a::parse_recipe_list("current,block,mxfp8,bf16");
    config.formats = {fp8a::TrainingFormat::kHybrid};
    const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
    std::vector<fp8a::PairingSkip> skipped;
    const auto all = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{}, &skipped);
    CHECK(skipped.empty());
    const auto tp = gemms_of(all, "tp"), whole = gemms_of(all, "whole");
    REQUIRE(tp.size() == 12);  // 4 recipes x fprop, dgrad, wgrad
    REQUIRE(whole.size() == tp.size());
    for (std::size_t i = 0; i < tp.size(); ++i) {
      INFO(tp[i].recipe.spec() << " " << fp8a::gemm_name(tp[i].gemm));
      CHECK(tp[i].gemm == whole[i].gemm);
      CHECK(tp[i].m == whole[i].m);
      CHECK(tp[i].n == whole[i].n);
      CHECK(tp[i].k == whole[i].k);
      // The same quantised operands; only the float32 accumulation is cut differently.
      CHECK(tp[i].rel_fro_err == doctest::Approx(whole[i].rel_fro_err).epsilon(1e-5));
      CHECK(tp[i].cos == doctest::Approx(whole[i].cos).epsilon(1e-9));
      check_same_damage(tp[i], whole[i]);
      CHECK(tp[i].note == std::string("2 ranks, ") + (column ? "column-parallel" : "row-parallel"));
      CHECK(whole[i].note.empty());
      if (tp[i].recipe.kind != fp8a::RecipeKind::kBf16) CHECK(tp[i].rel_fro_err > 1e-3);
    }
  }
}

TEST_CASE("tensor-parallel layers, --amax-reduction none: each W shard keeps its own current scale") {
  TpLayer l;
  l.add_split("tp", true);
  fp8a::RunConfig config;
  config.recipes = {fp8a::parse_recipe("current")};
  config.formats = {fp8a::TrainingFormat::kE4M3};
  config.amax_reduction = fp8a::AmaxReduction::kNone;
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  const auto g = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{}, &skipped);
  REQUIRE(g.size() == 3);
  // Expected fprop, written out here: Y_r = X W_r^T per rank, each operand cast with the scale of
  // its own amax (X is the same on both ranks), the two slices side by side.
  const auto cast = [](const std::vector<float>& v) {
    float amax = 0;
    for (float e : v) amax = std::max(amax, std::fabs(e));
    const float scale = 448.0f / amax, inv = 1.0f / scale;
    std::vector<float> out;
    for (float e : v) out.push_back(fp8a::round_trip_e4m3(e * scale) * inv);
    return out;
  };
  const std::int64_t h = TpLayer::kN / 2, k = TpLayer::kK, m = TpLayer::kM;
  const auto xq = cast(l.x);
  double err2 = 0, ref2 = 0;
  for (int r = 0; r < 2; ++r) {
    const std::vector<float> wr(l.w.begin() + r * h * k, l.w.begin() + (r + 1) * h * k);
    const auto wq = cast(wr);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < h; ++j) {
        double ref = 0, got = 0;
        for (std::int64_t c = 0; c < k; ++c) {
          ref += double(l.x[i * k + c]) * double(wr[j * k + c]);
          got += double(xq[i * k + c]) * double(wq[j * k + c]);
        }
        err2 += (got - ref) * (got - ref);
        ref2 += ref * ref;
      }
  }
  CHECK(g[0].gemm == fp8a::Gemm::kFprop);
  // The tool accumulates in float32, this reference in float64.
  CHECK(g[0].rel_fro_err == doctest::Approx(std::sqrt(err2 / ref2)).epsilon(1e-4));
}

TEST_CASE("tensor-parallel layers that cannot be put together are skipped, saying why") {
  TpLayer l;
  l.add_split("tp", true);
  // Make rank 1's X differ: neither column- (same X) nor row-parallel (same dY) any more.
  l.shards[1][0] += 1.0f;
  // Sequence parallelism: X split by tokens, dY not.
  l.add("sp", fp8a::Role::kActivation, 0, std::vector<float>(l.x.begin(), l.x.begin() + 32 * 256), 32, 256);
  l.add("sp", fp8a::Role::kActivation, 1, std::vector<float>(l.x.begin() + 32 * 256, l.x.end()), 32, 256);
  l.add("sp", fp8a::Role::kWeight, 0, std::vector<float>(l.w.begin(), l.w.begin() + 128 * 256), 128, 256);
  l.add("sp", fp8a::Role::kWeight, 1, std::vector<float>(l.w.begin() + 128 * 256, l.w.end()), 128, 256);
  l.add("sp", fp8a::Role::kGradient, 0, TpLayer::columns(l.dy, 256, 0, 128), 64, 128);
  l.add("sp", fp8a::Role::kGradient, 1, TpLayer::columns(l.dy, 256, 128, 128), 64, 128);
  // Different numbers of ranks per operand.
  l.add("odd", fp8a::Role::kActivation, -1, l.x, 64, 256);
  l.add("odd", fp8a::Role::kWeight, 0, std::vector<float>(l.w.begin(), l.w.begin() + 128 * 256), 128, 256);
  l.add("odd", fp8a::Role::kWeight, 1, std::vector<float>(l.w.begin() + 128 * 256, l.w.end()), 128, 256);
  l.add("odd", fp8a::Role::kGradient, -1, l.dy, 64, 256);
  fp8a::RunConfig config;
  config.formats = {fp8a::TrainingFormat::kHybrid};
  config.recipes = {fp8a::parse_recipe("current")};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  const auto g = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{}, &skipped);
  CHECK(g.empty());
  std::vector<std::string> lines;
  for (const auto& s : skipped) lines.push_back(s.line);
  CHECK(lines == std::vector<std::string>{
                       "step 7 layer 'odd': X, W and dY were captured on different numbers of "
                       "ranks (1, 2, 1)",
                       "step 7 layer 'sp': rank 0's shards do not fit X [M,K], W [N,K], dY [M,N] "
                       "(sequence parallelism splits X by tokens: not supported) (X 32x256, W "
                       "128x256, dY 64x128)",
                       "step 7 layer 'tp': captured as 2 ranks, but neither column-parallel (the "
                       "same X on every rank), row-parallel (the same dY) nor data-parallel (the "
                       "same W)"});
}

TEST_CASE("data-parallel ranks (the same W, their own tokens): GEMM error of the whole batch") {
  TpLayer l;
  const std::int64_t m = TpLayer::kM, k = TpLayer::kK, n = TpLayer::kN, h = m / 2;
  for (int r = 0; r < 2; ++r)
    l.add("dp", fp8a::Role::kActivation, r, std::vector<float>(l.x.begin() + r * h * k, l.x.begin() + (r + 1) * h * k), h, k);
  for (int r = 0; r < 2; ++r) l.add("dp", fp8a::Role::kWeight, r, l.w, n, k);
  for (int r = 0; r < 2; ++r)
    l.add("dp", fp8a::Role::kGradient, r, std::vector<float>(l.dy.begin() + r * h * n, l.dy.begin() + (r + 1) * h * n), h, n);
  l.add_whole("whole");
  fp8a::RunConfig config;
  config.formats = {fp8a::TrainingFormat::kHybrid};
  // Not block: its 128-token columnwise blocks would straddle the 32-token rank boundary.
  config.recipes = fp8a::parse_recipe_list("current,mxfp8,bf16");
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  std::vector<fp8a::PairingSkip> skipped;
  const auto all = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{}, &skipped);
  CHECK(skipped.empty());
  const auto dp = gemms_of(all, "dp"), whole = gemms_of(all, "whole");
  REQUIRE(dp.size() == 9);
  REQUIRE(whole.size() == 9);
  for (std::size_t i = 0; i < dp.size(); ++i) {
    INFO(dp[i].recipe.spec() << " " << fp8a::gemm_name(dp[i].gemm));
    CHECK(dp[i].m == whole[i].m);
    CHECK(dp[i].n == whole[i].n);
    CHECK(dp[i].k == whole[i].k);
    CHECK(dp[i].rows_used == (dp[i].gemm == fp8a::Gemm::kWgrad ? n : m));  // tokens, or dW's rows
    CHECK(dp[i].rel_fro_err == doctest::Approx(whole[i].rel_fro_err).epsilon(1e-5));
    check_same_damage(dp[i], whole[i]);
    CHECK(dp[i].note == "2 ranks, data-parallel");
  }
}

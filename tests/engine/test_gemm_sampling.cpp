// The sample of a GEMM's output (engine/gemm_sampling.hpp): which units are drawn, what each
// stands for, the estimator's standard error against a plain formula, and its coverage against
// exact sums on layers with the pathologies LLMs have (a few tokens, channels or rows carrying
// most of the energy: issue 54's families).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/fp8_codec.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/evaluation_index.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_operands.hpp"
#include "engine/gemm_sampling.hpp"
#include "engine/gemm_stats.hpp"
#include "engine/run.hpp"
#include "support/gemm_layer.hpp"

namespace {

using Units = std::vector<std::int64_t>;

}  // namespace

TEST_CASE("draw_units: the heavy units with certainty, the rest systematically by energy") {
  // Energies of the tie layer's 8 units: 448^2 dominates. With 4 to draw: 448^2 * 4 >= the total,
  // so unit 0 is certain; then 1.1875^2 * 3 < the other 7 units' 7.66: no more. The 7 left sorted
  // by energy (ties by position): 1, 3, 5, 7, 2, 6, 4; drawn from the middle of 3 equal
  // intervals, positions 7/6, 21/6, 35/6 -> 1, 3, 5: units 3, 7, 6, each standing for 7/3.
  const std::vector<double> e = {448.0 * 448, 1, 1.0625 * 1.0625, 1, 1.1875 * 1.1875, 1, 1.0625 * 1.0625, 1};
  const fp8a::UnitDraw d = fp8a::draw_units(e, 4, 1);
  CHECK(d.idx == Units{0, 3, 6, 7});
  CHECK(d.weight == std::vector<double>{1, 7.0 / 3, 7.0 / 3, 7.0 / 3});
  CHECK(d.cluster == std::vector<std::int32_t>{-1, 0, 1, 2});
  CHECK(d.population == 8);
  CHECK(d.certain == 1);
  CHECK(d.rest_clusters == 7);
  CHECK(d.drawn_clusters == 3);
  CHECK(d.sampled());
  CHECK_FALSE(d.uniform());

  // Equal energies: no certainty, the middles of 3 intervals of 12: units 2, 6, 10, each 4.
  const fp8a::UnitDraw even = fp8a::draw_units(std::vector<double>(12, 1.0), 3, 1);
  CHECK(even.idx == Units{2, 6, 10});
  CHECK(even.weight == std::vector<double>(3, 4.0));
  CHECK(even.certain == 0);
  CHECK(even.uniform());

  // Three heavy units and 4 to draw: 1e9 * 4 and then 1e8 * 3 pass the rule, and 1e7 * 2 would,
  // but at most half the budget is certain, so that two are drawn from the rest and it has a
  // standard error.
  std::vector<double> heavy(16, 1.0);
  heavy[3] = 1e9, heavy[9] = 1e8, heavy[12] = 1e7;
  const fp8a::UnitDraw capped = fp8a::draw_units(heavy, 4, 1);
  CHECK(capped.certain == 2);
  CHECK(capped.drawn_clusters == 2);
    CHECK(std::find(capped.idx.begin(), capped.idx.end(), 3) != capped.idx.end());
  CHECK(std::find(capped.idx.begin(), capped.idx.end(), 9) != capped.idx.end());
  // Eight equally heavy units of 16: none alone passes the rule (1e6 * 4 < 8e6).
  std::vector<double> eight(16, 1.0);
  for (int i = 0; i < 8; ++i) eight[static_cast<std::size_t>(2 * i)] = 1e6;
  CHECK(fp8a::draw_units(eight, 4, 1).certain == 0);

  // Clusters: 10 units in aligned groups of 4 (sizes 4, 4, 2), 5 units -> 2 clusters. Cluster 1
  // (units 4..7) is heavy but 2 clusters leave none certain (two are drawn from the rest); the
  // 3 sorted by energy are 2, 0, 1 and the middles of 2 intervals are positions 0 and 2: clusters
  // 2 and 1.
  std::vector<double> grouped(10, 1.0);
  for (int u = 4; u < 8; ++u) grouped[static_cast<std::size_t>(u)] = 100.0;
  const fp8a::UnitDraw g = fp8a::draw_units(grouped, 5, 4);
  CHECK(g.idx == Units{4, 5, 6, 7, 8, 9});
  CHECK(g.cluster == std::vector<std::int32_t>{0, 0, 0, 0, 1, 1});
  CHECK(g.weight == std::vector<double>(6, 1.5));
  CHECK(g.rest_clusters == 3);
  CHECK(g.drawn_clusters == 2);

  // One unit asked for: two drawn (a standard error needs two), each standing for 4 of 8.
  const fp8a::UnitDraw one = fp8a::draw_units(std::vector<double>(8, 1.0), 1, 1);
  CHECK(one.idx == Units{2, 6});
  CHECK(one.weight == std::vector<double>(2, 4.0));
  CHECK(fp8a::even_units(8, 1, 1).idx == Units{0, 4});

  // Everything when the budget covers the units.
  const fp8a::UnitDraw all = fp8a::draw_units(e, 8, 1);
  CHECK_FALSE(all.sampled());
  CHECK(all.idx.size() == 8);
  CHECK(fp8a::draw_units(e, 0, 1).idx.size() == 8);
}

TEST_CASE("unit_energies: rows' and columns' squared norms, non-finite elements as 0") {
  std::vector<float> v = {1, 2, 3, NAN, -4, INFINITY, 0.5f, 0, 2};  // [3, 3]
  const fp8a::TensorView view =
      fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(v.data()), fp8a::DType::kF32, {3, 3});
  CHECK(fp8a::unit_energies(view, fp8a::GemmLayout::kKMajor) == std::vector<double>{14, 16, 4.25});
  CHECK(fp8a::unit_energies(view, fp8a::GemmLayout::kKOuter) == std::vector<double>{1.25, 20, 13});
}

TEST_CASE("weighted_median_nonnegative: the value where the weights pass half, equal weights as the plain median") {
  // [2, 3]: values 0.5, -1 (left out), 3 / 0.1, 0.2, 7; rows weigh 1 and 4, columns 1, 2, 1.
  const std::vector<double> v = {0.5, -1, 3, 0.1, 0.2, 7};
  const double row_w[] = {1, 4}, col_w[] = {1, 2, 1};
  // Weights: 0.5 -> 1, 3 -> 1, 0.1 -> 4, 0.2 -> 8, 7 -> 4; total 18, half 9. Sorted: 0.1 (4),
  // 0.2 (12 > 9): 0.2.
  CHECK(fp8a::weighted_median_nonnegative(v, 2, 3, row_w, col_w) == 0.2);
  // Equal weights: the mean of the two middle values of 0.1, 0.2, 0.5, 3, 7... five values: 0.5.
  const double ones[] = {1, 1};
  CHECK(fp8a::weighted_median_nonnegative(v, 2, 3, ones, nullptr) == fp8a::median_nonnegative(v));
  const std::vector<double> four = {4, 1, 3, 2};
  CHECK(fp8a::weighted_median_nonnegative(four, 1, 4, ones, nullptr) == 2.5);
  CHECK(fp8a::weighted_median_nonnegative(std::vector<double>{-1, -1}, 1, 2, ones, nullptr) == 0.0);
}

TEST_CASE("a stratified sample's estimate and standard error by the plain formula") {
  // One column, 8 rows drawn as in draw_units' first case: unit 0 certain, units 3, 6, 7 for 7
  // rows each 7/3. Per drawn unit e (squared error) and r (squared reference).
  const std::vector<double> e_all = {0, 0, 0.01, 0, 0.04, 0, 0.0625 * 0.0625, 0.09};
  const std::vector<double> r_all = {448.0 * 448, 1, 1.1, 1, 1.4, 1, 1.0625 * 1.0625, 2};
  const std::vector<double> energy = {448.0 * 448, 1, 1.0625 * 1.0625, 1, 1.1875 * 1.1875, 1, 1.0625 * 1.0625, 1};
  const fp8a::UnitDraw d = fp8a::draw_units(energy, 4, 1);
  REQUIRE(d.idx == Units{0, 3, 6, 7});
  std::vector<double> ref, got, rel(4);
  for (std::int64_t u : d.idx) {
    ref.push_back(std::sqrt(r_all[static_cast<std::size_t>(u)]));
    got.push_back(ref.back() + std::sqrt(e_all[static_cast<std::size_t>(u)]));
  }
  const fp8a::SampledOutput design{&d, nullptr};
  fp8a::ErrorSums sums;
  sums.add(ref.data(), 1, got.data(), 4, 1, 0, rel.data(), 1, -1, &design);
  fp8a::GemmRow row;
  sums.finish(&design, nullptr, rel, &row);
  // The plain formula: totals weighted, R their ratio; the rest's 3 of 7 units give
  // var T = 7^2 (1 - 3/7) s^2 / 3 of z = e - R r; se(R) = sqrt(var T) / T_r.
  double te = 0, tr = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    const double w = i == 0 ? 1.0 : 7.0 / 3.0;
    te += w * e_all[static_cast<std::size_t>(d.idx[i])];
    tr += w * r_all[static_cast<std::size_t>(d.idx[i])];
  }
  const double ratio = te / tr;
  std::vector<double> z;
  for (std::size_t i = 1; i < 4; ++i)
    z.push_back(e_all[static_cast<std::size_t>(d.idx[i])] - ratio * r_all[static_cast<std::size_t>(d.idx[i])]);
  const double mean = (z[0] + z[1] + z[2]) / 3;
  double s2 = 0;
  for (double v : z) s2 += (v - mean) * (v - mean) / 2;
  const double var_t = 49.0 * (1 - 3.0 / 7) * s2 / 3;
  CHECK(row.rel_fro_err == doctest::Approx(std::sqrt(ratio)).epsilon(1e-12));
  CHECK(row.rel_fro_err_se == doctest::Approx(std::sqrt(var_t) / tr / (2 * std::sqrt(ratio))).epsilon(1e-12));
}

namespace {

// A layer X [m, k], W [n, k], dY [m, n] with one of issue 54's pathologies, from a seed.
struct FamilyLayer {
  std::vector<float> x, w, dy;
  fp8a::CaptureSet set;
};

void make_family(char family, std::uint32_t seed, std::int64_t m, std::int64_t n, std::int64_t k, FamilyLayer* l) {
  std::mt19937_64 rng(seed * 1000u + static_cast<std::uint32_t>(family));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  l->x.resize(static_cast<std::size_t>(m * k));
  l->w.resize(static_cast<std::size_t>(n * k));
  l->dy.resize(static_cast<std::size_t>(m * n));
  for (float& v : l->x) v = normal(rng);
  for (float& v : l->w) v = 0.02f * normal(rng);
  for (float& v : l->dy) v = 1e-6f * normal(rng);
  const auto pick = [&](std::int64_t count, std::int64_t of, std::int64_t first) {
    std::vector<std::int64_t> all(static_cast<std::size_t>(of));
    for (std::int64_t i = 0; i < of; ++i) all[static_cast<std::size_t>(i)] = i;
    std::shuffle(all.begin() + 1, all.end(), rng);
    if (first < 0) std::shuffle(all.begin(), all.end(), rng);
    all.resize(static_cast<std::size_t>(count));
    return all;
  };
  switch (family) {
    case 'b': {  // 3 sink tokens (token 0 and 2 others), 4 channels at +-10^3..10^4
      const auto tokens = pick(3, m, 0), channels = pick(4, k, -1);
      for (std::int64_t t : tokens)
        for (std::int64_t c : channels)
          l->x[static_cast<std::size_t>(t * k + c)] = (uniform(rng) < 0.5f ? -1.0f : 1.0f) * std::pow(10.0f, 3.0f + uniform(rng));
      break;
    }
    case 'c':  // 6 outlier channels of X x 50..100
      for (std::int64_t c : pick(6, k, -1)) {
        const float f = 50.0f + 50.0f * uniform(rng);
        for (std::int64_t t = 0; t < m; ++t) l->x[static_cast<std::size_t>(t * k + c)] *= f;
      }
      break;
    case 'd':  // 4 rows of W x 100
      for (std::int64_t r : pick(4, n, -1))
        for (std::int64_t c = 0; c < k; ++c) l->w[static_cast<std::size_t>(r * k + c)] *= 100.0f;
      break;
    case 'e': {  // 24 tokens carry the gradient, the rest x 1e-4
      std::vector<bool> carry(static_cast<std::size_t>(m), false);
      for (std::int64_t t : pick(24, m, -1)) carry[static_cast<std::size_t>(t)] = true;
      for (std::int64_t t = 0; t < m; ++t)
        if (!carry[static_cast<std::size_t>(t)])
          for (std::int64_t c = 0; c < n; ++c) l->dy[static_cast<std::size_t>(t * n + c)] *= 1e-4f;
      break;
    }
    case 'f':  // lognormal dY, sigma 2
      for (float& v : l->dy) v = 1e-6f * (normal(rng) < 0 ? -1.0f : 1.0f) * std::exp(2.0f * normal(rng));
      break;
    default: break;
  }
  fp8a::testing::add_float_gemm_layer(l->x, l->w, l->dy, m, n, k, &l->set);
}

}  // namespace

TEST_CASE("the sampled GEMM error covers the exact one on layers whose few units carry the energy") {
  // 1024 tokens, 512 -> 384: 128 of the output's rows and 128 of its columns sampled, 6 seeds of
  // each family; z = (sampled - exact) / its standard error over every (GEMM, recipe).
  const std::int64_t m = 1024, n = 384, k = 512;
  fp8a::RunConfig config;
  config.recipes = fp8a::parse_recipe_list("current,block,mxfp8");
  config.formats = {fp8a::TrainingFormat::kHybrid};
  fp8a::GemmOptions sampled;
  sampled.sampling = fp8a::GemmSampling::of_rows(128, 128);
  double sum_z2 = 0, max_z = 0;
  int count = 0, within = 0;
  for (const char family : std::string("abcdef")) {
    double family_z2 = 0;
    int family_count = 0;
    for (std::uint32_t seed = 0; seed < 6; ++seed) {
      FamilyLayer l;
      make_family(family, seed, m, n, k, &l);
      const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
      std::vector<fp8a::PairingSkip> skipped;
      const auto exact = fp8a::evaluate_gemm_errors(l.set, rows, fp8a::GemmOptions{}, &skipped);
      const auto got = fp8a::evaluate_gemm_errors(l.set, rows, sampled, &skipped);
      REQUIRE(exact.size() == got.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        REQUIRE(got[i].sampled);
        CHECK_FALSE(exact[i].sampled);
        REQUIRE(got[i].rel_fro_err_se > 0);
        const double z = (got[i].rel_fro_err - exact[i].rel_fro_err) / got[i].rel_fro_err_se;
        INFO("family " << family << " seed " << seed << " " << fp8a::gemm_name(got[i].gemm) << " "
                       << got[i].recipe.spec() << ": " << got[i].rel_fro_err << " +- " << got[i].rel_fro_err_se
                       << " against " << exact[i].rel_fro_err);
        CHECK(std::fabs(z) <= 4.0);
        sum_z2 += z * z;
        family_z2 += z * z;
        max_z = std::max(max_z, std::fabs(z));
        within += std::fabs(z) < 2.0;
        ++count;
        ++family_count;
      }
    }
    MESSAGE("family " << std::string(1, family) << ": RMS z " << std::sqrt(family_z2 / family_count));
  }
  const double rms = std::sqrt(sum_z2 / count);
  MESSAGE("RMS z " << rms << ", max |z| " << max_z << ", within 2 SE " << 100.0 * within / count << " % of " << count);
  CHECK(rms <= 1.3);
  CHECK(within >= 0.9 * count);
}

namespace {

// Element (r, l) of a prepared operand of `rows` GEMM rows and reduction k, dequantised: its value
// times 2^exp2 / divisor (per-block codes times their scale inverse).
double dequantised(const fp8a::GemmInput& in, std::int64_t rows, std::int64_t k, std::int64_t r, std::int64_t l) {
  if (in.blocks > 0) {
    const std::int64_t b = l / fp8a::kKBlock;
    const auto code = in.block_codes[static_cast<std::size_t>((b * rows + r) * fp8a::kKBlock + l % fp8a::kKBlock)];
    return static_cast<double>(fp8a::bf16_to_float(code)) * in.block_scale_inv[static_cast<std::size_t>(b * rows + r)];
  }
  const auto at = static_cast<std::size_t>(in.layout == fp8a::GemmLayout::kKMajor ? r * k + l : l * rows + r);
  const double v = in.is_bf16 ? fp8a::bf16_to_float(in.bf16[at]) : in.f32[at];
  return std::ldexp(v, in.exp2) / in.divisor;
}

}  // namespace

TEST_CASE("drawn rows of a cast whose blocks span several rows get the whole tensor's cast of them") {
  // W [320, 272]: 128 x 128 blocks (block, block:fp32) with partial last blocks both ways, NVFP4's
  // 16 x 16 tiles. Rows 3, 130, 131, 257, 319 of W (fprop) and its columns 3, 130, 131, 200, 271
  // (dgrad's W^T), cast alone beside their blocks' amaxes, must equal those rows of the whole
  // tensor's cast, value for value; W holds outliers so that the blocks' amaxes lie in rows
  // that are not drawn.
  const std::int64_t m = 64, n = 320, k = 272;
  FamilyLayer l;
  make_family('a', 7, m, n, k, &l);
  for (const std::int64_t at : {std::int64_t{5 * k + 7}, std::int64_t{140 * k + 200}, std::int64_t{300 * k + 9}})
    l.w[static_cast<std::size_t>(at)] = 3.0f;
  fp8a::RunConfig config;
  config.recipes = fp8a::parse_recipe_list("block,block:fp32,nvfp4");
  config.formats = {fp8a::TrainingFormat::kHybrid};
  const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
  const fp8a::EvaluationIndex index(rows);
  const fp8a::CapturedTensor& w = l.set.tensors[1];
  REQUIRE(w.key.role == fp8a::Role::kWeight);
  int checked = 0;
  for (const fp8a::Recipe& recipe : index.recipes())
    for (const auto& [layout, orientation, drawn] :
         {std::tuple{fp8a::GemmLayout::kKMajor, fp8a::Orientation::kRowwise, std::vector<std::int64_t>{3, 130, 131, 257, 319}},
          std::tuple{fp8a::GemmLayout::kKOuter, fp8a::Orientation::kColumnwise,
                     std::vector<std::int64_t>{3, 130, 131, 200, 271}}}) {
      const fp8a::EvaluationRow* row = index.find_for_use(w.key, recipe, fp8a::TrainingFormat::kHybrid, orientation);
      REQUIRE(row != nullptr);
      REQUIRE(row->applicability.ok);
      const fp8a::QuantSpec spec = fp8a::spec_of(*row);
      REQUIRE(fp8a::block_height(layout, spec) > 1);
      fp8a::OperandSource whole, part;
      whole.view = part.view = &w.view;
      whole.layout = part.layout = layout;
      const std::int64_t gemm_rows = layout == fp8a::GemmLayout::kKMajor ? n : k;
      const std::int64_t reduction = layout == fp8a::GemmLayout::kKMajor ? k : n;
      for (std::int64_t r = 0; r < gemm_rows; ++r) whole.idx.push_back(r);
      part.idx = drawn;
      part.amaxes.push_back(std::make_shared<fp8a::BlockAmaxes>(fp8a::block_amaxes(w.view, spec.block)));
      fp8a::Floats work;
      fp8a::GemmInput all_in, part_in;
      fp8a::prepare(whole, whole.load(0, gemm_rows), NAN, 0, gemm_rows, &spec, false, &work, &all_in);
      fp8a::prepare(part, part.load(0, part.rows()), NAN, 0, part.rows(), &spec, false, &work, &part_in);
      for (std::size_t t = 0; t < drawn.size(); ++t)
        for (std::int64_t e = 0; e < reduction; ++e) {
          INFO(recipe.spec() << " row " << drawn[t] << " element " << e);
          REQUIRE(dequantised(part_in, part.rows(), reduction, static_cast<std::int64_t>(t), e) ==
                  dequantised(all_in, gemm_rows, reduction, drawn[t], e));
        }
      ++checked;
    }
  CHECK(checked == 6);
}

TEST_CASE("a streamed whole output gives the held one's numbers, in memory that does not grow with it") {
  // 300 tokens, 260 -> 800 (partial tiles both ways), every recipe kind; stream_entries 0 streams
  // every GEMM (tile by tile, twice), the default holds these whole: the same sums, shares and
  // exact median, the noise flips summed in another order.
  // Family e too: most of dY is flushed, so most of dgrad's relative errors are exactly 1 and
  // its median is found by the bits of that value.
  for (const char family : {'f', 'e'}) {
    INFO("family " << family);
    FamilyLayer l;
    make_family(family, 3, 300, 800, 260, &l);
    fp8a::RunConfig config;
    config.recipes = fp8a::parse_recipe_list("current,block,block:fp32,mxfp8,bf16");
    config.formats = {fp8a::TrainingFormat::kHybrid, fp8a::TrainingFormat::kE4M3};
    const auto rows = fp8a::evaluate_captures(l.set, config, fp8a::CpuBackend());
    std::vector<fp8a::PairingSkip> skipped;
    fp8a::GemmOptions held, streamed, banded;
    streamed.stream_entries = 0;
    banded.stream_entries = 0;
    banded.stream_band_bytes = 4 * 800 * 64;  // 64 rows of a at a time (wgrad's a is dY^T, 800 wide)
    banded.stream_gather = 16;  // the median found by the bits of its value, 22 at a time
    const auto a = fp8a::evaluate_gemm_errors(l.set, rows, held, &skipped);
    const auto b = fp8a::evaluate_gemm_errors(l.set, rows, streamed, &skipped);
    const auto c = fp8a::evaluate_gemm_errors(l.set, rows, banded, &skipped);
    REQUIRE(a.size() == b.size());
    REQUIRE(a.size() == c.size());
    REQUIRE(a.size() >= 24);  // 5 recipes x 3 GEMMs x 2 formats, less those some format does not run
    for (std::size_t i = 0; i < a.size(); ++i) {
      INFO(fp8a::gemm_name(a[i].gemm) << " " << a[i].recipe.spec() << " " << fp8a::training_format_name(a[i].format));
      CHECK(b[i].gemm == a[i].gemm);
      CHECK(b[i].rel_fro_err == a[i].rel_fro_err);
      CHECK(b[i].cos == a[i].cos);
      CHECK(b[i].zeroed_pct == a[i].zeroed_pct);
      CHECK(b[i].sign_flip_pct == a[i].sign_flip_pct);
      CHECK(b[i].median_rel_err == a[i].median_rel_err);
      CHECK(b[i].rows_used == a[i].rows_used);
      CHECK(b[i].cols_used == a[i].cols_used);
      CHECK_FALSE(b[i].sampled);
      CHECK(std::isnan(b[i].rel_fro_err_se));
      if (a[i].gemm == fp8a::Gemm::kWgrad) {
        CHECK(a[i].noise_sign_flip_pct >= 0);
        CHECK(b[i].noise_sign_flip_pct == doctest::Approx(a[i].noise_sign_flip_pct).epsilon(1e-12));
      } else {
        CHECK(std::isnan(b[i].noise_sign_flip_pct));
      }
      // In bands of a's rows: the sums added in another order, the counts and the median exact.
      CHECK(c[i].rel_fro_err == doctest::Approx(a[i].rel_fro_err).epsilon(1e-12));
      CHECK(c[i].cos == doctest::Approx(a[i].cos).epsilon(1e-12));
      CHECK(c[i].zeroed_pct == a[i].zeroed_pct);
      CHECK(c[i].sign_flip_pct == a[i].sign_flip_pct);
      CHECK(c[i].median_rel_err == a[i].median_rel_err);
      if (a[i].gemm == fp8a::Gemm::kWgrad)
        CHECK(c[i].noise_sign_flip_pct == doctest::Approx(a[i].noise_sign_flip_pct).epsilon(1e-10));
    }
  }
}

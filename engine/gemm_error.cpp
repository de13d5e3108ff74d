#include "engine/gemm_error.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "engine/cpu_gemm.hpp"
#include "engine/evaluation_index.hpp"
#include "engine/fake_quant.hpp"
#include "engine/gemm_operands.hpp"
#include "engine/gemm_pairing.hpp"
#include "engine/gemm_products.hpp"
#include "engine/gemm_sampling.hpp"
#include "engine/gemm_stats.hpp"
#include "engine/unit_codec.hpp"

namespace fp8a {

namespace {

// Everything a GEMM of a layer needs for every recipe: its parts, with their references, how its
// output's rows and columns were drawn and the noise table (wgrad).
struct GemmCase {
  Gemm gemm = Gemm::kFprop;
  std::vector<Part> parts;
  std::int64_t units = 0;  // output rows computed (every part's)
  // The output's rows (units 0..units-1 of the sums) and columns (b's rows) as drawn
  // (gemm_sampling.hpp); on layers split over ranks the rows evenly spaced per rank and the
  // columns all.
  UnitDraw rows, cols;
  NoiseTable noise;
  bool has_noise = false;
  // A whole output of more than GemmOptions::stream_entries entries on a single rank: no
  // reference or noise table is held; streamed_rows computes its rows tile by tile, twice.
  bool streamed = false;
  std::int64_t band_rows = 0;  // streamed: the a rows computed together
  std::int64_t stream_gather = 0;  // streamed: GemmOptions::stream_gather
  bool sampled() const { return rows.sampled() || cols.sampled(); }
  // What each computed entry stands for (null: the whole output computed).
  std::optional<SampledOutput> design() const {
    if (!sampled()) return std::nullopt;
    return SampledOutput{&rows, cols.sampled() ? &cols : nullptr};
  }
  // The first column of a tile at c0 in the per-column sums: -1 where the columns are all used.
  std::int64_t first_col(std::int64_t c0) const { return cols.sampled() ? c0 : -1; }
};

// How a layer's GEMM reads its ranks' operands: which role is a and b, their layouts, whether
// every rank's a is the same tensor or the output a sum over ranks, the rows each rank draws.
struct CaseReading {
  int ia = 0, ib = 0;
  std::size_t nr = 0;  // ranks
  bool wgrad = false, a_shared = false, summed = false;
  std::int64_t want = 0, rank_want = 0;  // a rows of the sample; per rank
  GemmSampleSize sample;
  GemmLayout a_layout = GemmLayout::kKMajor, b_layout = GemmLayout::kKMajor;
  static std::int64_t gemm_rows(const TensorView& v, GemmLayout layout) {
    return layout == GemmLayout::kKMajor ? v.rows : v.cols;
  }
};

CaseReading case_reading(const GemmLayer& job, const GemmOperandUse& u, const GemmOptions& options) {
  CaseReading r;
  r.ia = static_cast<int>(u.a);
  r.ib = static_cast<int>(u.b);
  r.nr = job.ranks.size();
  r.wgrad = u.gemm == Gemm::kWgrad;
  // a: fprop X, dgrad dY (token rows), wgrad dY^T (dW rows); b: W, W^T, X^T (the output's columns).
  const GemmDims dims = job.dims(u.gemm);
  r.sample = gemm_sample_for(options.sampling, dims.m, dims.n, dims.k, r.nr == 1);
  r.want = r.sample.rows;
  // Whether every rank's a operand is the same tensor (its rows the same units).
  r.a_shared = r.nr == 1 || (job.split == Split::kColumn && u.a == Role::kActivation) ||
               (job.split == Split::kRow && u.a == Role::kGradient);
  r.summed = output_is_sum(job.split, u.gemm);
  r.rank_want = r.a_shared || r.summed ? r.want
                                       : (r.want + static_cast<std::int64_t>(r.nr) - 1) / static_cast<std::int64_t>(r.nr);
  r.a_layout = r.wgrad ? GemmLayout::kKOuter : GemmLayout::kKMajor;
  r.b_layout = u.gemm == Gemm::kFprop ? GemmLayout::kKMajor : GemmLayout::kKOuter;
  return r;
}

// Each rank's term (its operands as the GEMM reads them, the blocks' amaxes where a single
// rank's draws split blocks), grouped into parts: one for a sum over ranks, else one per rank.
// Sets c.parts, c.units and c.streamed; returns whether the ranks' rows were sampled.
bool add_rank_terms(GemmCase& c, const GemmLayer& job, const CaseReading& r, const GemmOptions& options,
                    std::int64_t group, const std::vector<BlockShape>& a_blocks, const std::vector<BlockShape>& b_blocks) {
  std::int64_t next_unit = 0;
  bool rows_sampled = false;
  for (std::size_t k = 0; k < r.nr; ++k) {
    Term term;
    term.a_tensor = job.ranks[k][r.ia];
    term.b_tensor = job.ranks[k][r.ib];
    const TensorView& av = term.a_tensor->view;
    const TensorView& bv = term.b_tensor->view;
    term.a.view = &av;
    term.a.layout = r.a_layout;
    term.b.view = &bv;
    term.b.layout = r.b_layout;
    const std::int64_t a_rows = CaseReading::gemm_rows(av, r.a_layout);
    term.a.idx = r.nr == 1 ? c.rows.idx : even_units(a_rows, r.rank_want, group).idx;
    term.b.idx = r.nr == 1 ? c.cols.idx : all_units(CaseReading::gemm_rows(bv, r.b_layout)).idx;
    if (r.nr == 1) {  // the blocks' amaxes, where the draws split blocks
      if (c.rows.sampled())
        for (const BlockShape& b : a_blocks) term.a.amaxes.push_back(std::make_shared<BlockAmaxes>(block_amaxes(av, b)));
      if (c.cols.sampled())
        for (const BlockShape& b : b_blocks) term.b.amaxes.push_back(std::make_shared<BlockAmaxes>(block_amaxes(bv, b)));
    }
    rows_sampled = rows_sampled || term.a.rows() < a_rows;
    c.streamed = r.nr == 1 && !c.sampled() && term.a.rows() * term.b.rows() > options.stream_entries;
    if (!c.streamed) term.a_raw = term.a.load(0, term.a.rows());  // a streamed one loads its bands
    if (r.summed && k > 0) {
      c.parts[0].terms.push_back(std::move(term));
      continue;
    }
    Part p;
    p.rows = term.a.rows();
    p.cols = term.b.rows();
    p.first_unit = r.a_shared || r.summed ? 0 : next_unit;
    next_unit += p.rows;
    p.terms.push_back(std::move(term));
    c.parts.push_back(std::move(p));
  }
  c.units = r.a_shared || r.summed ? c.parts[0].rows : next_unit;
  return rows_sampled;
}

// A split layer's rows: the ranks' rows as one evenly spaced sample of the layer's, each standing
// for as many (every unit a cluster of its own); every column.
void split_rows(GemmCase& c, const GemmLayer& job, bool wgrad, bool rows_sampled) {
  const std::int64_t population = wgrad ? job.n : job.m;
  c.rows = all_units(population);
  if (rows_sampled) {  // the units as numbered in the sums: 0..units-1
    const auto units = static_cast<std::size_t>(c.units);
    c.rows.idx.resize(units);
    c.rows.weight.assign(units, static_cast<double>(population) / static_cast<double>(c.units));
    c.rows.cluster.resize(units);
    std::iota(c.rows.cluster.begin(), c.rows.cluster.end(), 0);
    c.rows.certain = 0;
    c.rows.rest_clusters = population;
    c.rows.drawn_clusters = c.units;
  }
  c.cols = all_units(c.parts[0].cols);
}

// The references, and wgrad's S (the product of the squared operands) for the noise table.
void compute_references(GemmCase& c, bool wgrad) {
  for (Part& p : c.parts) {
    const std::vector<TermSpecs> none(1, TermSpecs(p.terms.size()));
    p.ref.assign(static_cast<std::size_t>(p.rows * p.cols), 0.0);
    part_products(p, none, false, [&](std::int64_t, std::int64_t c0, std::int64_t n, std::size_t,
                                      const std::vector<double>& out) {
      put_tile(out, p.rows, c0, n, p.cols, p.ref.data());
    });
    if (!wgrad) continue;
    std::vector<NoiseTable> tiles(static_cast<std::size_t>(tile_count(p.cols)));
    const bool sampled = c.sampled();
    part_products(p, none, true, [&](std::int64_t tile, std::int64_t c0, std::int64_t n, std::size_t,
                                     const std::vector<double>& s) {
      std::vector<double> ref(s.size());
      for (std::int64_t i = 0; i < p.rows; ++i)
        std::copy(p.ref.begin() + i * p.cols + c0, p.ref.begin() + i * p.cols + c0 + n, ref.begin() + i * n);
      NoiseTable& t = tiles[static_cast<std::size_t>(tile)];
      if (sampled)
        t.add_weighted(ref, s, p.rows, n, c.rows.weight.data() + p.first_unit,
                       c.cols.sampled() ? c.cols.weight.data() + c0 : nullptr);
      else
        t.add(ref, s);
    });
    for (const NoiseTable& t : tiles) c.noise.merge(t);
  }
  if (wgrad) c.noise.finish();
}

// The GEMM's parts for a layer: the operands of each rank as the GEMM reads them (K-major, the a
// rows sampled, on a single-rank layer the b rows too), grouped into parts by the layer's split;
// the references; wgrad's noise table. group: the block height every recipe's a operand needs
// kept whole on layers split over ranks (evenly spaced groups; their b rows are all used); a_blocks,
// b_blocks: the casts' block shapes (tensor layout) that span several GEMM rows, whose amaxes a
// single rank's drawn rows are cast with (prepare).
GemmCase make_case(const GemmLayer& job, const GemmOperandUse& u, const GemmOptions& options, std::int64_t group,
                   const std::vector<BlockShape>& a_blocks, const std::vector<BlockShape>& b_blocks) {
  GemmCase c;
  c.gemm = u.gemm;
  const CaseReading r = case_reading(job, u, options);
  // A single-rank layer draws its rows and columns by their energies (a certainty stratum and
  // the rest); the ranks of a split layer draw their rows evenly spaced.
  if (r.nr == 1) {
    const TensorView& av = job.ranks[0][r.ia]->view;
    const TensorView& bv = job.ranks[0][r.ib]->view;
    const std::int64_t a_rows = CaseReading::gemm_rows(av, r.a_layout), b_rows = CaseReading::gemm_rows(bv, r.b_layout);
    c.rows = r.want <= 0 || r.want >= a_rows ? all_units(a_rows) : draw_units(unit_energies(av, r.a_layout), r.want, 1);
    c.cols = r.sample.cols <= 0 || r.sample.cols >= b_rows ? all_units(b_rows)
                                                           : draw_units(unit_energies(bv, r.b_layout), r.sample.cols, 1);
  }
  const bool rows_sampled = add_rank_terms(c, job, r, options, group, a_blocks, b_blocks);
  if (r.nr > 1) split_rows(c, job, r.wgrad, rows_sampled);
  c.has_noise = r.wgrad;
  if (c.streamed) {
    // None for a streamed output (streamed_rows computes them tile by tile): bands of a's rows
    // whose a operand, loaded and cast, holds about kGemmStreamBandBytes, whole blocks of every
    // cast (a multiple of `group`).
    const std::int64_t k = c.parts[0].terms[0].a.k();
    const std::int64_t rows = std::max<std::int64_t>(1, options.stream_band_bytes / (4 * std::max<std::int64_t>(1, k)));
    c.band_rows = std::max(group, rows / group * group);
    c.stream_gather = options.stream_gather;
    return c;
  }
  compute_references(c, r.wgrad);
  return c;
}

// Whether a use's casts leave both operands of every term as they are: BF16 of BF16 tensors. Its
// GEMM is then the reference GEMM, of the same values in the same order: its output is the
// reference, bit for bit, and no product is computed.
bool leaves_operands(const Part& p, const EvaluationRow& ra, const EvaluationRow& rb) {
  if (is_fp8(ra.recipe.kind) || is_fp8(rb.recipe.kind)) return false;
  for (const Term& t : p.terms)
    if (t.a_tensor->view.dtype != DType::kBF16 || t.b_tensor->view.dtype != DType::kBF16) return false;
  return true;
}

// What a row of the case's GEMM is of: its step, layer and GEMM, the whole GEMM's dims and the
// output rows and columns computed.
void describe(const GemmLayer& job, const GemmCase& c, GemmRow* row) {
  const GemmDims dims = job.dims(c.gemm);
  row->step = job.step;
  row->layer = job.layer;
  row->gemm = c.gemm;
  row->rows_used = c.units;
  row->cols_used = c.cols.sampled() ? c.cols.size() : dims.n;
  row->sampled = c.sampled();
  row->m = dims.m;
  row->n = dims.n;
  row->k = dims.k;
}

// A streamed GEMM's tiles (GemmCase::streamed), band by band: a band of a's rows at a time
// (GemmCase::band_rows, loaded and cast for the band), per tile of b the reference, wgrad's S
// (empty without noise) and every cast's product.
struct StreamedTiles {
  const GemmCase& c;
  const Part& p;
  const Term& term;
  std::size_t nu = 0;                                  // the uses
  std::vector<TermSpecs> casts;                        // the casts computed
  std::vector<std::optional<std::size_t>> cast_of;     // per use; unset: the reference itself
  std::size_t tiles_per_band = 0;
  std::int64_t bands = 0;
  std::size_t tiles = 0;  // band-major

  StreamedTiles(const GemmCase& gc, std::span<const std::pair<const EvaluationRow*, const EvaluationRow*>> uses)
      : c(gc), p(gc.parts[0]), term(gc.parts[0].terms[0]), nu(uses.size()) {
    tiles_per_band = static_cast<std::size_t>(tile_count(p.cols));
    bands = (p.rows + c.band_rows - 1) / c.band_rows;
    tiles = tiles_per_band * static_cast<std::size_t>(bands);
    cast_of.resize(nu);
    // A use that leaves both operands as they are is the reference itself.
    for (std::size_t u = 0; u < nu; ++u) {
      if (leaves_operands(p, *uses[u].first, *uses[u].second)) continue;
      cast_of[u] = casts.size();
      casts.push_back({{spec_for(*uses[u].first, *term.a_tensor), spec_for(*uses[u].second, *term.b_tensor)}});
    }
  }

  // f(tile, n, band's rows, ref, s (empty without noise), got of each use) for every tile of every
  // band, a band at a time (its a operand loaded and cast), its tiles as tasks; band_done() after
  // each band.
  template <class F, class Done>
  void each(const F& f, const Done& band_done) const {
    const std::vector<TermSpecs> none(1, TermSpecs(1));
    for (std::int64_t band = 0; band < bands; ++band) {
      Part part;
      part.first_unit = band * c.band_rows;
      part.rows = std::min(c.band_rows, p.rows - part.first_unit);
      part.cols = p.cols;
      Term t = term;
      t.a.idx.assign(term.a.idx.begin() + part.first_unit, term.a.idx.begin() + part.first_unit + part.rows);
      t.a_raw = t.a.load(0, part.rows);
      part.terms.push_back(std::move(t));
      const PreparedCasts ref_prepared = prepare_casts(part, none, false);
      const std::optional<PreparedCasts> s_prepared =
          c.has_noise ? std::optional<PreparedCasts>(prepare_casts(part, none, true)) : std::nullopt;
      const PreparedCasts prepared = prepare_casts(part, casts, false);
      for_each_tile(p.cols, [&](std::int64_t tile) {
        thread_local std::vector<std::vector<double>> ref, s, out;
        tile_products(part, ref_prepared, tile, &ref);
        if (s_prepared) tile_products(part, *s_prepared, tile, &s);
        else s.assign(1, {});
        tile_products(part, prepared, tile, &out);
        const std::int64_t n = std::min(kGemmTileRows, p.cols - tile * kGemmTileRows);
        std::vector<const std::vector<double>*> got(nu);
        for (std::size_t u = 0; u < nu; ++u) got[u] = cast_of[u] ? &out[*cast_of[u]] : &ref[0];
        f(static_cast<std::size_t>(band) * tiles_per_band + static_cast<std::size_t>(tile), n, part.rows, ref[0], s[0],
          got);
      });
      band_done();
    }
  }
};

constexpr int kStreamShift = 44;  // the top 20 bits of a double: sign (0 here), exponent, 8 of the mantissa
constexpr std::size_t kStreamBins = std::size_t{1} << 19;
constexpr int kLevelBits = 22;

// Pass 1's result: each use's error sums (added in tile order, as emulated_rows does: the same
// numbers), a histogram of its relative errors by their top 20 bits, and S's sum.
struct StreamedSums {
  std::vector<ErrorSums> total;
  std::vector<std::vector<std::uint32_t>> histogram;
  double s_total = 0;
};

StreamedSums sum_streamed_errors(const StreamedTiles& st) {
  const std::size_t nu = st.nu;
  const auto bin_of = [](double x) { return static_cast<std::size_t>(std::bit_cast<std::uint64_t>(x) >> kStreamShift); };
  // A band's tiles' sums, added into `total` in tile order once the band is done (band by band:
  // the same order on any thread count).
  std::vector<std::vector<ErrorSums>> sums(nu, std::vector<ErrorSums>(st.tiles_per_band));
  StreamedSums r;
  r.total.resize(nu);
  r.histogram.assign(nu, std::vector<std::uint32_t>(kStreamBins, 0));
  std::vector<double> s_sum(st.tiles, 0.0);
  st.each([&](std::size_t tile, std::int64_t n, std::int64_t rows, const std::vector<double>& ref,
              const std::vector<double>& s, const std::vector<const std::vector<double>*>& got) {
    thread_local std::vector<double> rel;
    rel.resize(ref.size());
    for (std::size_t u = 0; u < nu; ++u) {
      // Every row a unit of its own band: an output computed whole needs no per-unit sums.
      sums[u][tile % st.tiles_per_band].add(ref.data(), n, got[u]->data(), rows, n, 0, rel.data(), n);
      for (double x : rel)
        if (const std::size_t b = bin_of(x); b < kStreamBins)
          std::atomic_ref<std::uint32_t>(r.histogram[u][b]).fetch_add(1, std::memory_order_relaxed);
    }
    for (double v : s) s_sum[tile] += v;
  }, [&] {
    for (std::size_t u = 0; u < nu; ++u)
      for (ErrorSums& t : sums[u]) {
        r.total[u].merge(std::move(t));
        t = ErrorSums();
      }
  });
  for (double v : s_sum) r.s_total += v;
  return r;
}

// A rank of a use's relative errors being found by its bits (the order of non-negative doubles):
// its prefix of known top bits and its rank among the values that share it.
struct MedianTarget {
  std::uint64_t prefix = 0;  // the value's top bits, 64 - shift of them
  int shift = kStreamShift;
  std::size_t rank = 0, count = 0;  // its rank among the values with the prefix, and their count
  bool done = false;
  double value = 0;
  std::vector<std::uint32_t> histogram;     // counting the next bits
  std::vector<std::vector<double>> values;  // gathering, per tile
};

// The target's prefix and rank from a histogram of the bits below its prefix (width bits).
void descend(MedianTarget& t, const std::vector<std::uint32_t>& h, int width) {
  std::size_t before = 0, bin = 0;
  while (before + h[bin] <= t.rank) before += h[bin++];
  t.prefix = (t.prefix << width) | bin;
  t.shift -= width;
  t.rank -= before;
  t.count = h[bin];
  if (t.shift == 0) {
    t.done = true;
    t.value = std::bit_cast<double>(t.prefix);
  }
}

// Each use's median targets, ranks lo = (count - 1) / 2 and hi = count / 2, placed by pass 1's
// histogram (`counted`: each use's count). A use whose casts leave the operands as they are has
// every relative error 0.
std::vector<std::array<MedianTarget, 2>> median_targets(const StreamedTiles& st, const StreamedSums& sums,
                                                        std::vector<std::size_t>& counted) {
  std::vector<std::array<MedianTarget, 2>> target(st.nu);
  counted.assign(st.nu, 0);
  for (std::size_t u = 0; u < st.nu; ++u) {
    for (std::uint32_t k : sums.histogram[u]) counted[u] += k;
    if (counted[u] == 0 || !st.cast_of[u]) {
      for (MedianTarget& t : target[u]) t.done = true;  // value 0: none, or every relative error 0
      continue;
    }
    target[u][0].rank = (counted[u] - 1) / 2;
    target[u][1].rank = counted[u] / 2;
    for (MedianTarget& t : target[u]) {
      t.shift = 64;
      descend(t, sums.histogram[u], 64 - kStreamShift);
    }
  }
  return target;
}

// Passes 2, 3, ...: each target whose prefix holds at most `gather` values
// (GemmOptions::stream_gather) has them gathered and selected; one with more (a value most
// entries share: 0, or 1 where most are zeroed) has its next 22 bits counted instead, down to
// all 64 (the value itself). Pass 2 also sums wgrad's noise flips (NoiseTable::flips), the error
// sums known: returned per use and tile.
std::vector<std::vector<double>> refine_medians(const StreamedTiles& st, const StreamedSums& sums,
                                                std::vector<std::array<MedianTarget, 2>>& target) {
  const std::size_t nu = st.nu;
  const auto gather = static_cast<std::size_t>(st.c.stream_gather);
  std::vector<std::vector<double>> flips(nu, std::vector<double>(st.tiles, 0.0));
  std::vector<double> two_c(nu, 0.0);
  for (std::size_t u = 0; u < nu; ++u) two_c[u] = sums.s_total > 0 ? 2.0 * sums.total[u].err2 / sums.s_total : 0.0;
  const auto pending = [&] {
    for (const auto& ts : target)
      for (const MedianTarget& t : ts)
        if (!t.done) return true;
    return false;
  };
  for (bool first_pass = true; first_pass || pending(); first_pass = false) {
    for (auto& ts : target)
      for (MedianTarget& t : ts) {
        if (t.done) continue;
        if (t.count <= gather) t.values.assign(st.tiles, {});
        else t.histogram.assign(std::size_t{1} << std::min(kLevelBits, t.shift), 0);
      }
    st.each([&](std::size_t tile, std::int64_t, std::int64_t, const std::vector<double>& ref,
                const std::vector<double>& s, const std::vector<const std::vector<double>*>& got) {
      for (std::size_t u = 0; u < nu; ++u) {
        const std::vector<double>& g = *got[u];
        for (MedianTarget& t : target[u]) {
          if (t.done) continue;
          const int width = std::min(kLevelBits, t.shift);
          for (std::size_t e = 0; e < ref.size(); ++e) {
            const double rel = relative_error(ref[e], g[e]);
            if (rel < 0) continue;  // ref = 0
            const auto bits = std::bit_cast<std::uint64_t>(rel);
            if ((bits >> t.shift) != t.prefix) continue;
            if (!t.values.empty()) t.values[tile].push_back(rel);
            else
              std::atomic_ref<std::uint32_t>(t.histogram[(bits >> (t.shift - width)) & ((std::uint64_t{1} << width) - 1)])
                  .fetch_add(1, std::memory_order_relaxed);
          }
        }
        if (!first_pass || s.empty() || !(two_c[u] > 0) || !std::isfinite(two_c[u])) continue;
        const double cut = 64.0 * two_c[u];
        double sum = 0;
        for (std::size_t e = 0; e < ref.size(); ++e)
          if (const double t = noise_t(ref[e], s[e]); t > 0 && t < cut) sum += 0.5 * std::erfc(std::sqrt(t / two_c[u]));
        flips[u][tile] = sum;
      }
    }, [] {});
    for (auto& ts : target)
      for (MedianTarget& t : ts) {
        if (t.done) continue;
        if (!t.values.empty()) {
          std::vector<double> mid;
          for (auto& v : t.values) mid.insert(mid.end(), v.begin(), v.end());
          std::nth_element(mid.begin(), mid.begin() + static_cast<std::ptrdiff_t>(t.rank), mid.end());
          t.value = mid[t.rank];
          t.done = true;
          t.values.clear();
        } else {
          descend(t, t.histogram, std::min(kLevelBits, t.shift));
          t.histogram.clear();
        }
      }
  }
  return flips;
}

// The emulated rows of a streamed GEMM (GemmCase::streamed) under several casts, in memory that
// does not grow with the output (StreamedTiles): pass 1 sums the errors and histograms each
// cast's relative errors by their top 20 bits; further passes over the tiles find the median
// exactly (as median_nonnegative selects it) and, the error sums known, wgrad's noise flips
// (NoiseTable's definition, summed in tile order).
std::vector<GemmRow> streamed_rows(const GemmCase& c,
                                   std::span<const std::pair<const EvaluationRow*, const EvaluationRow*>> uses) {
  const StreamedTiles st(c, uses);
  StreamedSums sums = sum_streamed_errors(st);
  std::vector<std::size_t> counted;
  std::vector<std::array<MedianTarget, 2>> target = median_targets(st, sums, counted);
  sums.histogram.clear();
  const std::vector<std::vector<double>> flips = refine_medians(st, sums, target);
  std::vector<GemmRow> rows(st.nu);
  for (std::size_t u = 0; u < st.nu; ++u) {
    GemmRow& row = rows[u];
    sums.total[u].finish(nullptr, nullptr, {}, &row);
    const auto& [lo, hi] = target[u];
    row.median_rel_err = counted[u] == 0 ? 0.0 : counted[u] % 2 == 1 ? hi.value : (lo.value + hi.value) / 2.0;
    if (c.has_noise) {
      const double err2 = sums.total[u].err2;
      double sum = 0;
      for (double v : flips[u]) sum += v;
      const bool none_flip = sums.total[u].entries == 0 || !(sums.s_total > 0) || !std::isfinite(err2) || !(err2 > 0);
      row.noise_sign_flip_pct = none_flip ? 0.0 : 100.0 * sum / static_cast<double>(sums.total[u].entries);
    }
  }
  return rows;
}

// The emulated rows of a GEMM under several casts (a recipe and format each: the evaluation rows
// of its a and b operands): the quantised products against the references, every tile of b read
// once for all of them. rel: a buffer per cast for the entries' relative errors, kept from call
// to call.
std::vector<GemmRow> emulated_rows(const GemmLayer& job, const GemmCase& c,
                                   std::span<const std::pair<const EvaluationRow*, const EvaluationRow*>> uses,
                                   std::vector<std::vector<double>>* rel_buffers) {
  if (c.streamed) {
    std::vector<GemmRow> rows = streamed_rows(c, uses);
    for (GemmRow& row : rows) describe(job, c, &row);
    return rows;
  }
  std::vector<ErrorSums> sums(uses.size());
  const std::optional<SampledOutput> design = c.design();
  std::int64_t entries = 0;
  for (const Part& p : c.parts) entries += p.rows * p.cols;
  std::vector<std::vector<double>>& rel = *rel_buffers;
  if (rel.size() < uses.size()) rel.resize(uses.size());
  for (std::size_t u = 0; u < uses.size(); ++u) rel[u].resize(static_cast<std::size_t>(entries));
  std::int64_t offset = 0;  // the part's first entry in rel
  for (const Part& p : c.parts) {
    std::vector<TermSpecs> casts;
    std::vector<std::size_t> computed, same;  // the uses a product is computed for, and the others
    for (std::size_t u = 0; u < uses.size(); ++u) {
      const auto& [ra, rb] = uses[u];
      if (leaves_operands(p, *ra, *rb)) {
        same.push_back(u);
        continue;
      }
      TermSpecs specs;
      for (const Term& t : p.terms) specs.emplace_back(spec_for(*ra, *t.a_tensor), spec_for(*rb, *t.b_tensor));
      casts.push_back(std::move(specs));
      computed.push_back(u);
    }
    std::vector<std::vector<ErrorSums>> tiles(uses.size(), std::vector<ErrorSums>(static_cast<std::size_t>(tile_count(p.cols))));
    const auto add_tile = [&](std::size_t u, std::int64_t tile, std::int64_t c0, std::int64_t n,
                              const std::vector<double>& got) {
      tiles[u][static_cast<std::size_t>(tile)].add(p.ref.data() + c0, p.cols, got.data(), p.rows, n, p.first_unit,
                                                   rel[u].data() + offset + c0, p.cols, c.first_col(c0),
                                                   design ? &*design : nullptr);
    };
    if (!casts.empty())
      part_products(p, casts, false, [&](std::int64_t tile, std::int64_t c0, std::int64_t n, std::size_t cast,
                                         const std::vector<double>& got) { add_tile(computed[cast], tile, c0, n, got); });
    if (!same.empty())
      for_each_tile(p.cols, [&](std::int64_t tile) {
        thread_local std::vector<double> got;
        const std::int64_t c0 = tile * kGemmTileRows, n = std::min(kGemmTileRows, p.cols - c0);
        got.resize(static_cast<std::size_t>(p.rows * n));
        for (std::int64_t i = 0; i < p.rows; ++i)
          std::copy_n(p.ref.begin() + i * p.cols + c0, n, got.begin() + i * n);
        for (std::size_t u : same) add_tile(u, tile, c0, n, got);
      });
    for (std::size_t u = 0; u < uses.size(); ++u)
      for (ErrorSums& t : tiles[u]) sums[u].merge(std::move(t));
    offset += p.rows * p.cols;
  }
  // The statistics of each cast, the casts as tasks (each median and noise sum in blocks as tasks
  // of its own: an output of a million entries is one block).
  std::vector<GemmRow> rows(uses.size());
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(std::size_t{0}, uses.size(), [&](std::size_t u) {
      GemmRow& row = rows[u];
      describe(job, c, &row);
      sums[u].finish(design ? &*design : nullptr, c.has_noise ? &c.noise : nullptr, rel[u], &row);
    });
  });
  return rows;
}

// All the GEMM rows of an operand as loaded, K-major (the GemmEngine's layout).
Floats k_major(const OperandSource& src, Floats loaded) {
  if (src.layout == GemmLayout::kKMajor) return loaded;
  const std::int64_t n = src.rows(), k = src.k();
  Floats out(loaded.size());
  for (std::int64_t t = 0; t < k; ++t)
    for (std::int64_t r = 0; r < n; ++r) out[static_cast<std::size_t>(r * k + t)] = loaded[static_cast<std::size_t>(t * n + r)];
  return out;
}

// Runs one GEMM of a single-rank layer on the engine: a row of its own, or a note on the emulated
// row saying why not. The engine gets the operands as the emulated GEMM reads them (the a rows
// sampled, b whole), loaded here for it.
void run_on_engine(const GemmEngine& engine, const GemmCase& c, const EvaluationRow& ra, const EvaluationRow& rb,
                   const std::string& what, std::vector<GemmRow>* rows) {
  GemmRow& emulated = rows->back();
  const Term& term = c.parts[0].terms[0];
  const bool fprop = c.gemm == Gemm::kFprop, wgrad = c.gemm == Gemm::kWgrad;
  GemmProblem p;
  p.gemm = c.gemm;
  p.what = what;
  p.m = term.a.rows();
  p.n = term.b.rows();
  p.k = term.a.k();
  const QuantSpec sa = spec_of(ra), sb = spec_of(rb);
  // Drawn rows that split a cast's blocks: the engine would scale each block from the drawn rows
  // alone (the emulated cast takes the whole block's amax).
  if ((c.rows.sampled() && block_height(term.a.layout, sa) > 1) || (c.cols.sampled() && block_height(term.b.layout, sb) > 1)) {
    emulated.note = engine.name() + " not run: the sampled rows split this cast's blocks (--gemm-rows 0 runs it)";
    return;
  }
  const Floats a = k_major(term.a, term.a_raw), b = k_major(term.b, term.b.load(0, p.n));
  p.a.spec = wgrad ? transposed(sa) : sa;
  p.b.spec = fprop ? sb : transposed(sb);
  p.a.rows = p.m;
  p.b.rows = p.n;
  p.a.values = std::span<const float>(a);
  p.b.values = std::span<const float>(b);
  const GemmRun r = engine.run(p);
  if (!r.ran) {
    emulated.note = engine.name() + " not run: " + r.note;
    return;
  }
  const auto size = static_cast<std::size_t>(p.m * p.n);
  FP8A_CHECK(r.out.size() == size && r.reference.size() == size,
             "GemmEngine::run returned outputs of the wrong size");
  GemmRow row = emulated;
  row.engine = engine.name();
  row.accumulation = r.accumulation;
  row.m_padded = r.m_padded;
  row.n_padded = r.n_padded;
  row.k_padded = r.k_padded;
  row.note = r.note;
  const std::vector<double> ref(r.reference.begin(), r.reference.end()), got(r.out.begin(), r.out.end());
  ErrorSums sums;
  std::vector<double> rel(ref.size());
  const std::optional<SampledOutput> design = c.design();
  sums.add(ref.data(), p.n, got.data(), p.m, p.n, 0, rel.data(), p.n, c.first_col(0), design ? &*design : nullptr);
  sums.finish(design ? &*design : nullptr, c.has_noise ? &c.noise : nullptr, rel, &row);
  rows->push_back(std::move(row));
}

// The key of a (step, layer) job's rows: its operands' identities on every rank, and for every
// recipe, GEMM and format the evaluation rows its operands are quantised by (as spec_of reads
// them), with the options that change the rows.
// Which of a layer's GEMMs (fprop, dgrad, wgrad) are computed.
using GemmMask = std::array<bool, 3>;
constexpr GemmMask kEveryGemm = {true, true, true};

std::string gemm_unit_key(const GemmLayer& job, const EvaluationIndex& index, const GemmOptions& options,
                          const GemmMask& wanted) {
  ByteWriter w;
  w.str("GEMM layer 4");
  w.i64(job.step);
  w.str(job.layer);
  w.u8(static_cast<std::uint8_t>(job.split));
  w.u64(job.ranks.size());
  for (const auto& rank : job.ranks)
    for (const CapturedTensor* t : rank) {
      w.str(t->file);
      w.str(t->file_identity);
      w.str(t->tensor_name);
    }
  // The sampling as two numbers: rows (-1 auto, 0 all, else N) and columns (0 every one).
  const GemmSampling& sampling = options.sampling;
  const bool some_rows = sampling.mode == GemmSampling::Mode::kRows;
  w.i64(some_rows ? sampling.rows : sampling.mode == GemmSampling::Mode::kAuto ? -1 : 0);
  w.i64(some_rows ? sampling.cols : 0);
  w.i64(options.stream_entries);
  w.i64(options.stream_band_bytes);
  w.i64(options.stream_gather);
  for (bool b : wanted) w.u8(b ? 1 : 0);
  w.str(options.engine != nullptr ? options.engine->name() : std::string());
  const auto put_row = [&](const EvaluationRow* r) {
    w.u8(r == nullptr ? 0 : r->applicability.ok ? 1 : 2);
    if (r == nullptr || !r->applicability.ok) return;
    const QuantSpec s = spec_of(*r);
    write_recipe(w, r->recipe);
    w.u8(static_cast<std::uint8_t>(s.format));
    w.i64(s.block.rows);
    w.i64(s.block.cols);
    w.f32(s.scale);
    w.f32(s.value_for_inf);
    w.u8(static_cast<std::uint8_t>(r->key.role));
    w.u8(static_cast<std::uint8_t>(r->orientation));
  };
  w.u64(index.formats().size());
  for (const Recipe& recipe : index.recipes())
    for (const GemmOperandUse& u : kGemmOperandUses)
      for (const TrainingFormat f : index.formats()) {
        w.u8(static_cast<std::uint8_t>(f));
        put_row(index.find_for_use(job.ranks[0][static_cast<int>(u.a)]->key, recipe, f, u.a_orientation));
        put_row(index.find_for_use(job.ranks[0][static_cast<int>(u.b)]->key, recipe, f, u.b_orientation));
      }
  return w.take();
}

// How many casts of a GEMM emulated_rows takes at once: as many as keep their buffers (the
// entries' relative errors, the a operand as cast and, on a CPU without BF16 units, widened, a
// tile's output per thread) within kGemmGroupBytes, at least one.
std::size_t uses_per_group(const GemmCase& c) {
  std::int64_t bytes = 0;
  const auto threads = static_cast<std::int64_t>(tbb::this_task_arena::max_concurrency());
  for (const Part& p : c.parts) {
    // A streamed output holds a band of a's rows, no per-entry buffer.
    const std::int64_t rows = c.streamed ? std::min(p.rows, c.band_rows) : p.rows;
    bytes += (c.streamed ? 0 : p.rows * p.cols * 8) + threads * rows * kGemmTileRows * 8;
    for (const Term& t : p.terms) bytes += rows * t.a.k() * (cpu_gemm_native_bf16() ? 4 : 8);
  }
  return static_cast<std::size_t>(std::max<std::int64_t>(1, kGemmGroupBytes / std::max<std::int64_t>(1, bytes)));
}

// A layer's rows, one list per format: per recipe, per GEMM, the emulated row (and the engine's).
std::vector<std::vector<GemmRow>> compute_layer(const GemmLayer& job, const EvaluationIndex& index,
                                                const GemmOptions& options, const GemmMask& wanted) {
  const std::vector<TrainingFormat>& formats = index.formats();
  const std::size_t nrec = index.recipes().size();
  // rows[recipe][gemm][format]: filled GEMM by GEMM (one GEMM's references held at a time).
  std::vector<std::array<std::vector<std::vector<GemmRow>>, 3>> slots(nrec);
  const std::string split_note =
      job.split == Split::kNone ? std::string() : std::to_string(job.ranks.size()) + " ranks, " + split_name(job.split);
  const bool use_engine = options.engine != nullptr && job.ranks.size() == 1;
  for (const GemmOperandUse& u : kGemmOperandUses) {
    const int g = static_cast<int>(u.gemm);
    if (!wanted[static_cast<std::size_t>(g)]) continue;
    // The evaluation rows of every recipe and format, the block heights the a and b rows keep
    // (layers split over ranks) and the casts' blocks that span several rows (a single rank's
    // drawn rows are cast with their blocks' amaxes).
    std::int64_t group = 1;
    std::vector<BlockShape> a_blocks, b_blocks;
    const auto spanning = [](GemmLayout layout, const QuantSpec& spec, std::vector<BlockShape>* blocks) {
      if (block_height(layout, spec) > 1 && std::find(blocks->begin(), blocks->end(), spec.block) == blocks->end())
        blocks->push_back(spec.block);
    };
    std::vector<std::vector<std::pair<const EvaluationRow*, const EvaluationRow*>>> found(nrec);
    for (std::size_t ri = 0; ri < nrec; ++ri) {
      for (const TrainingFormat f : formats) {
        const Recipe& recipe = index.recipes()[ri];
        const EvaluationRow* ra = index.find_for_use(job.ranks[0][static_cast<int>(u.a)]->key, recipe, f, u.a_orientation);
        const EvaluationRow* rb = index.find_for_use(job.ranks[0][static_cast<int>(u.b)]->key, recipe, f, u.b_orientation);
        if (ra == nullptr || rb == nullptr || !ra->applicability.ok || !rb->applicability.ok) ra = rb = nullptr;
        found[ri].emplace_back(ra, rb);
        if (ra != nullptr) {
          const QuantSpec sa = u.gemm == Gemm::kWgrad ? transposed(spec_of(*ra)) : spec_of(*ra);
          group = std::max(group, sa.block.rows);
          spanning(u.gemm == Gemm::kWgrad ? GemmLayout::kKOuter : GemmLayout::kKMajor, spec_of(*ra), &a_blocks);
          spanning(u.gemm == Gemm::kFprop ? GemmLayout::kKMajor : GemmLayout::kKOuter, spec_of(*rb), &b_blocks);
        }
      }
    }
    const GemmCase c = make_case(job, u, options, group, a_blocks, b_blocks);
    std::vector<std::vector<double>> rel_buffers;  // emulated_rows', one group after another
    // Per recipe, a format whose operands have an earlier format's FP8 types (fprop, whose X and
    // W are E4M3 in every format; BF16) gets copies of that format's rows: computed once. The
    // others of every recipe are computed together, sharing the reads of b and the casts they
    // have in common, in groups whose buffers fit kGemmGroupBytes.
    std::vector<std::vector<std::size_t>> same(nrec, std::vector<std::size_t>(formats.size()));
    std::vector<std::pair<std::size_t, std::size_t>> todo;  // (recipe, format)
    for (std::size_t ri = 0; ri < nrec; ++ri) {
      slots[ri][g].resize(formats.size());
      std::vector<std::size_t> computed;
      for (std::size_t f = 0; f < formats.size(); ++f) {
        const auto [ra, rb] = found[ri][f];
        same[ri][f] = f;
        if (ra == nullptr) continue;
        for (std::size_t e : computed)
          if (found[ri][e].first->fp8 == ra->fp8 && found[ri][e].second->fp8 == rb->fp8) {
            same[ri][f] = e;
            break;
          }
        if (same[ri][f] == f) {
          computed.push_back(f);
          todo.emplace_back(ri, f);
        }
      }
    }
    const std::size_t per_group = uses_per_group(c);
    for (std::size_t g0 = 0; g0 < todo.size(); g0 += per_group) {
      const std::size_t g1 = std::min(todo.size(), g0 + per_group);
      std::vector<std::pair<const EvaluationRow*, const EvaluationRow*>> uses;
      for (std::size_t i = g0; i < g1; ++i) uses.push_back(found[todo[i].first][todo[i].second]);
      std::vector<GemmRow> rows = emulated_rows(job, c, uses, &rel_buffers);
      for (std::size_t i = g0; i < g1; ++i) {
        const auto [ri, f] = todo[i];
        const Recipe& recipe = index.recipes()[ri];
        GemmRow& row = rows[i - g0];
        row.recipe = recipe;
        row.format = formats[f];
        row.note = split_note;
        if (!split_note.empty() && options.engine != nullptr)
          row.note += "; " + options.engine->name() + " not run: rank shards";
        slots[ri][g][f].push_back(std::move(row));
        if (use_engine)
          run_on_engine(*options.engine, c, *uses[i - g0].first, *uses[i - g0].second,
                        "step " + std::to_string(job.step) + " layer '" + job.layer + "' " + gemm_name(u.gemm) + " " +
                            recipe.spec(),
                        &slots[ri][g][f]);
      }
    }
    for (std::size_t ri = 0; ri < nrec; ++ri)
      for (std::size_t f = 0; f < formats.size(); ++f) {
        if (found[ri][f].first == nullptr || same[ri][f] == f) continue;
        slots[ri][g][f] = slots[ri][g][same[ri][f]];
        for (GemmRow& r : slots[ri][g][f]) r.format = formats[f];
      }
  }
  std::vector<std::vector<GemmRow>> results(formats.size());
  for (std::size_t ri = 0; ri < nrec; ++ri)
    for (int g = 0; g < 3; ++g)
      for (std::size_t f = 0; f < formats.size(); ++f)
        for (GemmRow& r : slots[ri][g][f]) results[f].push_back(std::move(r));
  return results;
}

}  // namespace

GemmSampling GemmSampling::of_rows(std::int64_t rows, std::int64_t cols) {
  FP8A_CHECK(rows >= 1 && cols >= 0, "GemmSampling::of_rows: at least one row, no negative column count");
  return {Mode::kRows, rows, cols};
}

std::string GemmSampling::text() const {
  switch (mode) {
    case Mode::kAuto: return "auto";
    case Mode::kAll: return "0";
    case Mode::kRows: return std::to_string(rows);
  }
  return "auto";
}

GemmSampleSize gemm_sample_for(const GemmSampling& sampling, std::int64_t m, std::int64_t n, std::int64_t k,
                               bool cols_too) {
  if (sampling.mode == GemmSampling::Mode::kAll) return {m, n};
  if (sampling.mode == GemmSampling::Mode::kRows) {
    FP8A_CHECK(sampling.rows >= 1, "GemmSampling kRows without rows");
    return {std::min(sampling.rows, m), cols_too && sampling.cols > 0 ? std::min(sampling.cols, n) : n};
  }
  const std::int64_t nk = std::max<std::int64_t>(1, n * k);
  if (m <= kGemmAutoMacs / nk) return {m, n};
  // A sample of at least half the entries saves too little to be worth its standard error:
  // the whole output.
  const auto whole_if_most = [&](GemmSampleSize s) {
    return 2.0 * static_cast<double>(s.rows) * static_cast<double>(s.cols) >= static_cast<double>(m) * static_cast<double>(n)
               ? GemmSampleSize{m, n}
               : s;
  };
  if (!cols_too) return whole_if_most({std::min(m, std::max(kGemmAutoMinRows, kGemmAutoMacs / nk)), n});
  const std::int64_t entries = kGemmAutoMacs / std::max<std::int64_t>(1, k);  // rows x columns
  const auto side = static_cast<std::int64_t>(std::sqrt(static_cast<double>(entries)));
  const auto share = [&](std::int64_t other) {  // the other dimension's count given this one's
    return std::max(kGemmAutoMinRows, entries / std::max<std::int64_t>(1, other));
  };
  if (m <= side) return whole_if_most({m, std::min(n, share(m))});
  if (n <= side) return whole_if_most({std::min(m, share(n)), n});
  const std::int64_t s = std::max(kGemmAutoMinRows, side);
  return whole_if_most({std::min(m, s), std::min(n, s)});
}

std::vector<GemmRow> evaluate_gemm_errors(const CaptureSet& captures,
                                          std::span<const EvaluationRow> rows,
                                          const GemmOptions& options,
                                          std::vector<PairingSkip>* skipped,
                                          const RunContext& context) {
  return evaluate_gemm_errors(pair_gemm_operands(captures, skipped), rows, options, context);
}

namespace {

// The rows of jobs' GEMMs wanted[j] (evaluate_gemm_errors' order).
std::vector<GemmRow> evaluate_jobs(std::span<const GemmLayer> jobs, std::span<const GemmMask> wanted,
                                   std::span<const EvaluationRow> rows, const GemmOptions& options,
                                   const RunContext& context) {
  const EvaluationIndex index(rows);
  const std::vector<TrainingFormat>& formats = index.formats();
  // Each job a unit, shared out over ranks by its m*n*k, kept whole under its key.
  std::vector<Unit> units(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    Unit& u = units[j];
    u.name = jobs[j].layer;
    for (const auto& rank : jobs[j].ranks)
      for (const CapturedTensor* t : rank) u.inputs.push_back(&t->view);
    u.cost = static_cast<std::uint64_t>(jobs[j].m) * static_cast<std::uint64_t>(jobs[j].n) *
             static_cast<std::uint64_t>(jobs[j].k);
    u.kind = UnitKind::kGemmLayer;
    u.keys = {gemm_unit_key(jobs[j], index, options, wanted[j])};
  }
  std::vector<std::vector<std::vector<GemmRow>>> results(jobs.size());  // per job, per format
  UnitWork work;
  work.compute = [&](std::size_t j, UnitStore* store) {
    load_or_compute(
        store, UnitKind::kGemmLayer, units[j].keys.front(),
        [&](std::string_view bytes) {
          auto r = decode_gemm_rows(bytes);
          if (r.size() != formats.size()) return false;
          results[j] = std::move(r);
          return true;
        },
        [&] {
          results[j] = compute_layer(jobs[j], index, options, wanted[j]);
          return encode_gemm_rows(results[j]);
        });
  };
  run_units(context, "GEMM layers", units, work);
  std::vector<GemmRow> out;
  for (std::size_t f = 0; f < formats.size(); ++f)
    for (auto& r : results)
      for (auto& g : r[f]) out.push_back(std::move(g));
  return out;
}

}  // namespace

std::vector<GemmRow> evaluate_gemm_errors(std::span<const GemmLayer> jobs,
                                          std::span<const EvaluationRow> rows,
                                          const GemmOptions& options,
                                          const RunContext& context) {
  const std::vector<GemmMask> every(jobs.size(), kEveryGemm);
  return evaluate_jobs(jobs, every, rows, options, context);
}

std::vector<GemmRow> evaluate_exact_gemms(std::span<const GemmLayer> layers, std::span<const EvaluationRow> rows,
                                          std::span<const GemmSite> sites, const GemmOptions& options,
                                          const RunContext& context) {
  std::vector<GemmLayer> jobs;
  std::vector<GemmMask> wanted;
  for (const GemmLayer& l : layers) {
    GemmMask m = {false, false, false};
    for (const GemmSite& s : sites)
      if (s.step == l.step && s.layer == l.layer) m[static_cast<std::size_t>(s.gemm)] = true;
    if (m == GemmMask{false, false, false}) continue;
    jobs.push_back(l);
    wanted.push_back(m);
  }
  GemmOptions exact = options;
  exact.sampling = GemmSampling::all();
  return evaluate_jobs(jobs, wanted, rows, exact, context);
}

}  // namespace fp8a

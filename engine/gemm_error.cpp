#include "engine/gemm_error.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/evaluation_index.hpp"
#include "engine/fake_quant.hpp"
#include "engine/gemm_pairing.hpp"
#include "engine/unit_codec.hpp"

namespace fp8a {

namespace {

using MatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The tensor as floats, non-finite elements set to 0 (they would make every GEMM NaN).
MatrixF load_matrix(const TensorView& v) {
  MatrixF m(v.rows, v.cols);
  v.load_floats(0, v.numel(), m.data());
  m = m.unaryExpr([](float x) { return std::isfinite(x) ? x : 0.0f; });
  return m;
}

// The spec an evaluation row was computed with (per-tensor scale as evaluated, delayed included).
QuantSpec spec_of(const EvaluationRow& row) {
  QuantSpec s;
  s.kind = row.recipe.kind;
  s.format = row.fp8;
  s.block = block_shape(row.recipe, row.key.role, row.orientation);
  s.scale = row.metrics.scale;
  s.pow2_scales = row.recipe.pow2_scales;
  s.mx_rule = row.recipe.mx_rule;
  s.value_for_inf = input_type_max(row.input_dtype);
  return s;
}

// The spec of one rank's shard: the row's, except current scaling with --amax-reduction none,
// where each shard has the scale of its own amax (the merged row then has no single scale).
QuantSpec spec_for(const EvaluationRow& row, const CapturedTensor& shard) {
  QuantSpec s = spec_of(row);
  if (row.ranks > 1 && is_per_tensor(row.recipe.kind) &&
      !replays_history(row.recipe.kind) && std::isnan(s.scale))
    s.scale = per_tensor_scale(row.recipe, row.fp8, compute_tensor_stats(shard.view).amax);
  return s;
}

// The bands of output rows a product of `rows` rows is computed in: {first row, rows}.
std::vector<std::pair<Eigen::Index, Eigen::Index>> row_bands(Eigen::Index rows) {
  std::vector<std::pair<Eigen::Index, Eigen::Index>> bands;
  for (Eigen::Index r = 0; r < rows;) {
    Eigen::Index n = std::min<Eigen::Index>(kGemmBandRows, rows - r);
    if (rows - r - n < kGemmMinBandRows) n = rows - r;
    bands.emplace_back(r, n);
    r += n;
  }
  return bands;
}

// f(first row, rows) for every band of `rows`, as tasks. Isolated: a thread waiting for the bands
// runs only bands, never another job or GEMM that would hold its own operands meanwhile.
template <class F>
void for_each_band(Eigen::Index rows, const F& f) {
  const auto bands = row_bands(rows);
  tbb::this_task_arena::isolate([&] {
    tbb::parallel_for(std::size_t{0}, bands.size(), [&](std::size_t i) { f(bands[i].first, bands[i].second); });
  });
}

// out = lhs * rhs, in bands of output rows. Each band is evaluated into a temporary and copied, as
// `out = lhs * rhs` is: with that form the bands give the whole product's numbers bit for bit
// (measured; writing each band in place with noalias() moved float32 outputs by an ulp).
template <class Out, class Lhs, class Rhs>
Out product(const Lhs& lhs, const Rhs& rhs) {
  Out out(lhs.rows(), rhs.cols());
  for_each_band(lhs.rows(), [&](Eigen::Index r, Eigen::Index n) {
    out.middleRows(r, n) = lhs.middleRows(r, n) * rhs;
  });
  return out;
}

MatrixF fake_quantized(const MatrixF& x, const QuantSpec& spec) {
  MatrixF out(x.rows(), x.cols());
  FP8A_CHECK(spec.block.rows <= 1 || kGemmBandRows % spec.block.rows == 0,
             "GEMM bands must hold whole blocks");
  for_each_band(x.rows(), [&](Eigen::Index r, Eigen::Index n) {
    FakeQuantCounts unused;
    fake_quantize_rows(spec, x.data() + r * x.cols(), n, x.cols(), out.data() + r * x.cols(), &unused);
  });
  return out;
}

std::vector<std::int64_t> sample(std::int64_t m, std::int64_t want) {
  std::vector<std::int64_t> idx;
  const std::int64_t n = (want <= 0 || want >= m) ? m : want;
  for (std::int64_t i = 0; i < n; ++i) idx.push_back(i * m / n);
  return idx;
}

MatrixF take_rows(const MatrixF& x, const std::vector<std::int64_t>& idx) {
  MatrixF out(static_cast<Eigen::Index>(idx.size()), x.cols());
  for (std::size_t i = 0; i < idx.size(); ++i) out.row(static_cast<Eigen::Index>(i)) = x.row(idx[i]);
  return out;
}

// The flips independent rounding noise would make in an output (METRICS.md
// noise_sign_flip_pct): each entry's noise variance c * S, where S is the output of the squared
// operands (sum over the reduction of a^2 b^2, what per-element rounding of the operands puts
// into that entry), c scaled so that the variances add up to ||got - ref||^2. S and the reference
// are the same for every recipe, so a table per (layer, step, GEMM) holds t = ref^2 / S of the
// entries with ref != 0 < S, sorted: a row's sum covers only the entries its noise can reach.
struct NoiseTable {
  std::vector<double> t;   // grouped by binade, ascending binades (finish)
  std::vector<std::size_t> binade_end;  // t[binade_end[b - 1], binade_end[b]) have ilogb b + kMinBinade
  double s_sum = 0;        // S over every entry
  std::int64_t entries = 0;
  static constexpr int kMinBinade = -1100, kBinades = 2200;  // every finite positive double's ilogb
  void add(const MatrixD& ref, const MatrixD& s) {
    entries += ref.size();
    s_sum += s.sum();
    for (Eigen::Index i = 0; i < ref.size(); ++i) {
      const double r = ref.data()[i], v = s.data()[i];
      if (r != 0.0 && v > 0.0) {
        const double ti = r * r / v;
        if (std::isfinite(ti) && ti > 0) t.push_back(ti);
      }
    }
  }
  // Groups t by binade (a counting sort, two passes: cheaper than sorting, and all flips needs).
  void finish() {
    std::vector<std::size_t> count(kBinades + 1, 0);
    for (double ti : t) ++count[static_cast<std::size_t>(std::ilogb(ti) - kMinBinade + 1)];
    for (std::size_t b = 1; b < count.size(); ++b) count[b] += count[b - 1];
    binade_end.assign(count.begin() + 1, count.end());
    std::vector<double> grouped(t.size());
    for (double ti : t) grouped[count[static_cast<std::size_t>(std::ilogb(ti) - kMinBinade)]++] = ti;
    t = std::move(grouped);
  }
  // 100 / entries * sum over those entries of P(N(0, c S) < -|ref|) = erfc(sqrt(t / 2c)) / 2.
  // Entries beyond 8 noise deviations (erfc(8) / 2 = 5.6e-30) add nothing a double holds next
  // to the rest: the sum stops at the binade past t = 64 * 2c.
  double flips(double err2) const {
    if (entries == 0 || !(s_sum > 0) || !std::isfinite(err2) || !(err2 > 0)) return 0.0;
    const double two_c = 2.0 * err2 / s_sum, cut = 64.0 * two_c;
    const int last = std::isfinite(cut) ? std::min(std::ilogb(cut) - kMinBinade, kBinades - 1) : kBinades - 1;
    const std::size_t end = last < 0 ? 0 : binade_end[static_cast<std::size_t>(last)];
    double p = 0;
    for (std::size_t i = 0; i < end; ++i)
      if (t[i] < cut) p += 0.5 * std::erfc(std::sqrt(t[i] / two_c));
    return 100.0 * p / static_cast<double>(entries);
  }
};

// The per-entry damage of an output (METRICS.md, gemms.csv): entries zeroed, signs flipped, and
// every |got - ref| / |ref| over entries with ref != 0, gathered over the parts of an output.
struct EntryDamage {
  std::int64_t entries = 0, zeroed = 0, flipped = 0;
  std::vector<double> rel;
  void add(const MatrixD& ref, const MatrixD& got) {
    const Eigen::Index n = ref.size();
    entries += n;
    rel.reserve(rel.size() + static_cast<std::size_t>(n));
    for (Eigen::Index i = 0; i < n; ++i) {
      const double r = ref.data()[i], g = got.data()[i];
      if (r == 0.0) continue;
      zeroed += g == 0.0;
      flipped += g != 0.0 && ((g < 0.0) != (r < 0.0));
      const double e = std::fabs(g - r) / std::fabs(r);
      rel.push_back(std::isnan(e) ? INFINITY : e);  // a NaN (inf - inf in float32) is the worst
    }
  }
  // The median: the middle value, or the mean of the two middle values of an even count; exact
  // whatever the order the entries came in (nth_element on the gathered copy).
  double median() {
    if (rel.empty()) return 0.0;
    const std::size_t h = rel.size() / 2;
    std::nth_element(rel.begin(), rel.begin() + static_cast<std::ptrdiff_t>(h), rel.end());
    const double upper = rel[h];
    if (rel.size() % 2 == 1) return upper;
    const double lower = *std::max_element(rel.begin(), rel.begin() + static_cast<std::ptrdiff_t>(h));
    return (lower + upper) / 2.0;
  }
  void finish(GemmRow* row) {
    const double e = static_cast<double>(entries);
    row->zeroed_pct = entries > 0 ? 100.0 * static_cast<double>(zeroed) / e : 0.0;
    row->sign_flip_pct = entries > 0 ? 100.0 * static_cast<double>(flipped) / e : 0.0;
    row->median_rel_err = median();
  }
};

// ||got - ref||_F, ||ref||_F, ||got||_F and <got, ref>, summed over the parts of an output (the
// ranks' slices of a tensor-parallel GEMM), then rel_fro_err and cos; the per-entry damage; and
// the noise's flips from the output's NoiseTable.
// With `units` (sampled fprop and dgrad) also ||got - ref||^2 and ||ref||^2 of each sampled token's
// output row, summed over the parts that hold the same tokens, for rel_fro_err_se.
struct ErrorSums {
  double err2 = 0, ref2 = 0, got2 = 0, dot = 0;
  EntryDamage damage;
  std::int64_t units = 0;                  // sampled tokens (0: no standard error)
  std::int64_t population = 0;             // of the layer's tokens
  std::vector<double> unit_err2, unit_ref2;
  // first_unit: the token of ref's row 0 among the units (0 unless the parts hold different tokens).
  void add(const MatrixD& ref, const MatrixD& got, std::int64_t first_unit = 0) {
    err2 += (got - ref).squaredNorm();
    ref2 += ref.squaredNorm();
    got2 += got.squaredNorm();
    dot += got.cwiseProduct(ref).sum();
    damage.add(ref, got);
    if (units == 0) return;
    unit_err2.resize(static_cast<std::size_t>(units), 0.0);
    unit_ref2.resize(static_cast<std::size_t>(units), 0.0);
    FP8A_CHECK(first_unit + ref.rows() <= units, "GEMM output rows beyond the sampled tokens");
    for (Eigen::Index i = 0; i < ref.rows(); ++i) {
      const auto u = static_cast<std::size_t>(first_unit + i);
      unit_err2[u] += (got.row(i) - ref.row(i)).squaredNorm();
      unit_ref2[u] += ref.row(i).squaredNorm();
    }
  }
  // The ratio estimator's standard error (METRICS.md rel_fro_err_se): R = sum e / sum r over the
  // n sampled of M tokens, var R ~ (1 - n/M) / (n rbar^2) * sum (e - R r)^2 / (n - 1), and
  // rel_fro_err = sqrt R, so its standard error is se(R) / (2 sqrt R).
  double standard_error() const {
    const auto n = static_cast<double>(units);
    if (units < 2) return INFINITY;
    double e = 0, r = 0;
    for (std::size_t u = 0; u < unit_err2.size(); ++u) e += unit_err2[u], r += unit_ref2[u];
    if (!(r > 0)) return e > 0 ? INFINITY : 0.0;
    const double ratio = e / r, rbar = r / n;
    double s2 = 0;
    for (std::size_t u = 0; u < unit_err2.size(); ++u) {
      const double d = unit_err2[u] - ratio * unit_ref2[u];
      s2 += d * d;
    }
    s2 /= n - 1;
    const double fpc = std::max(0.0, 1.0 - n / static_cast<double>(population));
    const double se_ratio = std::sqrt(fpc * s2 / n) / rbar;
    return ratio > 0 ? se_ratio / (2.0 * std::sqrt(ratio)) : 0.0;
  }
  void finish(const NoiseTable& noise, GemmRow* row) {
    const double ref_norm = std::sqrt(ref2), got_norm = std::sqrt(got2), err = std::sqrt(err2);
    row->rel_fro_err = ref_norm > 0 ? err / ref_norm : (err > 0 ? INFINITY : 0.0);
    row->cos = (ref_norm > 0 && got_norm > 0) ? dot / (ref_norm * got_norm)
                                              : (ref_norm == 0 && got_norm == 0 ? 1.0 : 0.0);
    damage.finish(row);
    row->rel_fro_err_se = units > 0 ? standard_error() : std::nan("");
    row->noise_sign_flip_pct = noise.entries > 0 ? noise.flips(err2) : std::nan("");
  }
};

// units, population: ErrorSums's (0 when the output's rows are not a sample of the tokens).
void compare(const MatrixD& ref, const MatrixF& got, const NoiseTable& noise, std::int64_t units,
             std::int64_t population, GemmRow* row) {
  ErrorSums sums;
  sums.units = units;
  sums.population = population;
  sums.add(ref, got.cast<double>());
  sums.finish(noise, row);
}

// The spec of an operand that the engine gets transposed (a columnwise copy, laid out K-major).
QuantSpec transposed(QuantSpec s) {
  s.block = BlockShape{s.block.cols, s.block.rows};
  return s;
}

// Whether the sampled token rows still hold the recipe's blocks whole: they are the rows of `a` in
// fprop and dgrad, and the reduction dimension of both operands in wgrad.
bool sampling_keeps_blocks(const GemmProblem& p) {
  if (p.gemm != Gemm::kWgrad) return p.a.spec.block.rows <= 1;
  return p.a.spec.block.cols <= 1 && p.b.spec.block.cols <= 1;
}

// Runs one GEMM on the engine: a row of its own, or a note on the emulated row saying why not.
void run_on_engine(const GemmEngine& engine, const GemmProblem& p, bool sampled,
                   std::int64_t population, const NoiseTable& noise, std::vector<GemmRow>* rows) {
  GemmRow& emulated = rows->back();
  if (sampled && !sampling_keeps_blocks(p)) {
    emulated.note = engine.name() +
                    " not run: --gemm-rows samples token rows, which cuts the recipe's blocks "
                    "along them (use --gemm-rows 0)";
    return;
  }
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
  const MatrixD ref = Eigen::Map<const MatrixF>(r.reference.data(), p.m, p.n).cast<double>();
  const std::int64_t units = sampled && p.gemm != Gemm::kWgrad ? p.m : 0;
  compare(ref, Eigen::Map<const MatrixF>(r.out.data(), p.m, p.n), noise, units, population, &row);
  rows->push_back(std::move(row));
}

// The key of a (step, layer) job's rows: its operands' identities on every rank, and for every
// recipe, GEMM and format the evaluation rows its operands are quantised by (as spec_of reads
// them), with the options that change the rows.
std::string gemm_unit_key(const GemmLayer& job, const EvaluationIndex& index, const GemmOptions& options) {
  ByteWriter w;
  w.str("GEMM layer 1");
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
  w.i64(options.sample_rows);
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

// A layer's operands as every GEMM of every recipe uses them: per rank the operands by role, the
// sampled token rows and the float64 references; the references of outputs that add up over the
// ranks; the wgrad noise table; the engine's K-major copies.
struct LayerData {
  struct Rank {
    std::array<MatrixF, 3> full;     // X, W, dY
    std::vector<std::int64_t> idx;   // the token rows used
    MatrixF xs, dys;                 // those rows of X and dY
    std::array<MatrixD, 3> ref;      // fprop, dgrad, wgrad in float64
    std::array<MatrixD, 3> sq;       // wgrad's: the GEMM of the squared operands (NoiseTable)
    std::int64_t first_unit = 0;     // its first token among the sampled ones (data-parallel)
  };
  std::vector<Rank> ranks;
  bool sampled = false;
  std::int64_t rows_used = 0;
  std::array<MatrixD, 3> ref_total;  // per GEMM whose output adds up over the ranks
  std::array<NoiseTable, 3> noise;
  std::string split_note;
  bool use_engine = false;
  MatrixF wt, dyst, xst;  // the engine's K-major operands (gemm_engine.hpp): W^T, dY^T, X^T
};

// In float32 (sums of positive terms, no cancellation; a variance estimate), the operand divided
// by its amax first so no square under- or overflows, the scale put back in float64 (*scale2).
MatrixF unit_square(const MatrixF& a, double* scale2) {
  const float amax = a.size() > 0 ? a.cwiseAbs().maxCoeff() : 0.0f;
  *scale2 = static_cast<double>(amax) * static_cast<double>(amax);
  if (!(amax > 0.0f) || !std::isfinite(amax)) {
    *scale2 = 0.0;
    return MatrixF::Zero(a.rows(), a.cols());
  }
  return (a / amax).cwiseAbs2();
}

LayerData load_layer(const GemmLayer& job, const GemmOptions& options) {
  const std::size_t nr = job.ranks.size();
  LayerData l;
  l.ranks.resize(nr);
  // The token rows each rank uses (data-parallel ranks share the layer's).
  const std::int64_t want = gemm_rows_for(options.sample_rows, job.m, job.n, job.k);
  const std::int64_t rank_rows =
      job.split == Split::kData ? (want + static_cast<std::int64_t>(nr) - 1) / static_cast<std::int64_t>(nr) : want;
  for (std::size_t r = 0; r < nr; ++r) {
    LayerData::Rank& d = l.ranks[r];
    for (int role = 0; role < 3; ++role) d.full[role] = load_matrix(job.ranks[r][role]->view);
    d.idx = sample(d.full[0].rows(), rank_rows);
    if (job.split == Split::kData) d.first_unit = l.rows_used;
    l.sampled = l.sampled || static_cast<std::int64_t>(d.idx.size()) < d.full[0].rows();
    if (r == 0 || job.split == Split::kData) l.rows_used += static_cast<std::int64_t>(d.idx.size());
    d.xs = take_rows(d.full[0], d.idx);
    d.dys = take_rows(d.full[2], d.idx);
    const MatrixD xd = d.xs.cast<double>(), wd = d.full[1].cast<double>(), dyd = d.dys.cast<double>();
    d.ref = {product<MatrixD>(xd, wd.transpose()), product<MatrixD>(dyd, wd),
             product<MatrixD>(dyd.transpose(), xd)};
    double sx = 0, sdy = 0;
    const MatrixF x2 = unit_square(d.xs, &sx), dy2 = unit_square(d.dys, &sdy);
    d.sq[static_cast<int>(Gemm::kWgrad)] = product<MatrixF>(dy2.transpose(), x2).cast<double>() * (sdy * sx);
  }
  // Per GEMM whose output adds up over the ranks: the reference summed once, for every recipe's
  // row and the noise table.
  for (const GemmOperandUse& u : kGemmOperandUses) {
    if (!output_is_sum(job.split, u.gemm)) continue;
    const int g = static_cast<int>(u.gemm);
    l.ref_total[g] = l.ranks[0].ref[g];
    for (std::size_t r = 1; r < nr; ++r) l.ref_total[g] += l.ranks[r].ref[g];
  }
  // The noise table of the whole wgrad output (the ranks' slices, or their sum): only wgrad's
  // flips are judged (Adam's per-parameter update), and the sum costs an erfc for about a
  // fifth of the entries of every row, so fprop and dgrad rows go without (an empty table).
  const int g = static_cast<int>(Gemm::kWgrad);
  if (output_is_sum(job.split, Gemm::kWgrad)) {
    MatrixD sq_sum = l.ranks[0].sq[g];
    for (std::size_t r = 1; r < nr; ++r) sq_sum += l.ranks[r].sq[g];
    l.noise[g].add(l.ref_total[g], sq_sum);
  } else {
    for (std::size_t r = 0; r < nr; ++r) l.noise[g].add(l.ranks[r].ref[g], l.ranks[r].sq[g]);
  }
  l.noise[g].finish();
  l.split_note = job.split == Split::kNone ? std::string() : std::to_string(nr) + " ranks, " + split_name(job.split);
  l.use_engine = options.engine != nullptr && nr == 1;
  if (l.use_engine) {
    l.wt = l.ranks[0].full[1].transpose();
    l.dyst = l.ranks[0].dys.transpose();
    l.xst = l.ranks[0].xs.transpose();
  }
  return l;
}

// One GEMM of the recipe from the operands' rows: the emulated row (and the engine's) to out.
void compute_gemm(const GemmLayer& job, const LayerData& l, const GemmOptions& options, const Recipe& recipe,
                  const GemmOperandUse& u, const EvaluationRow& ra, const EvaluationRow& rb, TrainingFormat format,
                  std::vector<GemmRow>* out) {
  const int ia = static_cast<int>(u.a), ib = static_cast<int>(u.b);
  ErrorSums sums;
  if (l.sampled && u.gemm != Gemm::kWgrad) sums.units = l.rows_used;
  sums.population = job.m;
  MatrixD got_sum;  // an output that adds up over the ranks (its reference: ref_total)
  const bool summed = output_is_sum(job.split, u.gemm);
  for (std::size_t r = 0; r < l.ranks.size(); ++r) {
    const LayerData::Rank& d = l.ranks[r];
    // Quantise whole operands (scales see every row), then take the sampled token rows.
    const MatrixF aq = take_rows(fake_quantized(d.full[ia], spec_for(ra, *job.ranks[r][ia])), d.idx);
    const MatrixF bq_full = fake_quantized(d.full[ib], spec_for(rb, *job.ranks[r][ib]));
    MatrixF got;
    switch (u.gemm) {
      case Gemm::kFprop: got = product<MatrixF>(aq, bq_full.transpose()); break;
      case Gemm::kDgrad: got = product<MatrixF>(aq, bq_full); break;
      case Gemm::kWgrad: got = product<MatrixF>(aq.transpose(), take_rows(bq_full, d.idx)); break;
    }
    if (!summed) {
      sums.add(d.ref[static_cast<int>(u.gemm)], got.cast<double>(), d.first_unit);
    } else if (r == 0) {
      got_sum = got.cast<double>();
    } else {
      got_sum += got.cast<double>();
    }
  }
  if (summed) sums.add(l.ref_total[static_cast<int>(u.gemm)], got_sum);
  GemmRow row;
  row.step = job.step;
  row.layer = job.layer;
  row.gemm = u.gemm;
  row.recipe = recipe;
  row.format = format;
  row.rows_used = l.rows_used;
  row.sampled = l.sampled;
  const GemmDims dims = job.dims(u.gemm);
  row.m = dims.m;
  row.n = dims.n;
  row.k = dims.k;
  sums.finish(l.noise[static_cast<int>(u.gemm)], &row);
  row.note = l.split_note;
  if (!l.split_note.empty() && options.engine != nullptr)
    row.note += "; " + options.engine->name() + " not run: rank shards";
  out->push_back(row);
  if (!l.use_engine) return;
  const LayerData::Rank& d = l.ranks[0];
  GemmProblem p;
  p.gemm = u.gemm;
  p.what = "step " + std::to_string(job.step) + " layer '" + job.layer + "' " + gemm_name(u.gemm) + " " +
           recipe.spec();
  const QuantSpec sa = spec_of(ra), sb = spec_of(rb);
  const bool fprop = u.gemm == Gemm::kFprop, dgrad = u.gemm == Gemm::kDgrad;
  const MatrixF* a = fprop ? &d.xs : dgrad ? &d.dys : &l.dyst;
  const MatrixF* b = fprop ? &d.full[1] : dgrad ? &l.wt : &l.xst;
  p.a.spec = fprop || dgrad ? sa : transposed(sa);
  p.b.spec = fprop ? sb : transposed(sb);
  p.m = a->rows();
  p.n = b->rows();
  p.k = a->cols();
  p.a.rows = p.m;
  p.b.rows = p.n;
  p.a.values = std::span<const float>(a->data(), static_cast<std::size_t>(a->size()));
  p.b.values = std::span<const float>(b->data(), static_cast<std::size_t>(b->size()));
  run_on_engine(*options.engine, p, l.sampled, job.m, l.noise[static_cast<int>(u.gemm)], out);
}

// A layer's rows, one list per format.
std::vector<std::vector<GemmRow>> compute_layer(const GemmLayer& job, const EvaluationIndex& index,
                                                const GemmOptions& options) {
  const std::vector<TrainingFormat>& formats = index.formats();
  const LayerData data = load_layer(job, options);
  std::vector<std::vector<GemmRow>> results(formats.size());
  for (const Recipe& recipe : index.recipes()) {
    for (const GemmOperandUse& u : kGemmOperandUses) {
      // A format whose operands have an earlier format's FP8 types (fprop, whose X and W are
      // E4M3 in every format; BF16) gets copies of that format's rows: computed once.
      struct Computed {
        Fp8Format a, b;
        std::size_t format, begin, end;  // its rows: results[format][begin, end)
      };
      std::vector<Computed> computed;
      for (std::size_t f = 0; f < formats.size(); ++f) {
        std::vector<GemmRow>& rows_f = results[f];
        const EvaluationRow* ra =
            index.find_for_use(job.ranks[0][static_cast<int>(u.a)]->key, recipe, formats[f], u.a_orientation);
        const EvaluationRow* rb =
            index.find_for_use(job.ranks[0][static_cast<int>(u.b)]->key, recipe, formats[f], u.b_orientation);
        if (ra == nullptr || rb == nullptr || !ra->applicability.ok || !rb->applicability.ok) continue;
        const auto same = std::find_if(computed.begin(), computed.end(), [&](const Computed& c) {
          return c.a == ra->fp8 && c.b == rb->fp8;
        });
        if (same != computed.end()) {
          for (std::size_t i = same->begin; i < same->end; ++i) {
            rows_f.push_back(results[same->format][i]);
            rows_f.back().format = formats[f];
          }
          continue;
        }
        const std::size_t begin = rows_f.size();
        compute_gemm(job, data, options, recipe, u, *ra, *rb, formats[f], &rows_f);
        computed.push_back({ra->fp8, rb->fp8, f, begin, rows_f.size()});
      }
    }
  }
  return results;
}

}  // namespace

std::int64_t gemm_rows_for(std::int64_t sample_rows, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (sample_rows != kGemmRowsAuto) return sample_rows <= 0 ? m : std::min(sample_rows, m);
  const std::int64_t nk = std::max<std::int64_t>(1, n * k);
  if (m <= kGemmAutoMacs / nk) return m;
  return std::min(m, std::max(kGemmAutoMinRows, kGemmAutoMacs / nk));
}

std::vector<GemmRow> evaluate_gemm_errors(const CaptureSet& captures,
                                          std::span<const EvaluationRow> rows,
                                          const GemmOptions& options,
                                          std::vector<std::string>* skipped,
                                          const RunContext& context) {
  return evaluate_gemm_errors(pair_gemm_operands(captures, skipped), rows, options, context);
}

std::vector<GemmRow> evaluate_gemm_errors(std::span<const GemmLayer> jobs,
                                          std::span<const EvaluationRow> rows,
                                          const GemmOptions& options,
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
    u.keys = {gemm_unit_key(jobs[j], index, options)};
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
          results[j] = compute_layer(jobs[j], index, options);
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

}  // namespace fp8a

#include "engine/gemm_error.hpp"

#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "core/error.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/evaluation_index.hpp"
#include "engine/fake_quant.hpp"

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
  if (row.ranks > 1 && row.recipe.kind == RecipeKind::kPerTensorCurrent && std::isnan(s.scale))
    s.scale = per_tensor_scale(row.recipe, row.fp8, compute_tensor_stats(shard.view).amax);
  return s;
}

MatrixF fake_quantized(const MatrixF& x, const QuantSpec& spec) {
  MatrixF out(x.rows(), x.cols());
  FakeQuantCounts unused;
  fake_quantize_rows(spec, x.data(), x.rows(), x.cols(), out.data(), &unused);
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

// ||got - ref||_F, ||ref||_F, ||got||_F and <got, ref>, summed over the parts of an output (the
// ranks' slices of a tensor-parallel GEMM), then rel_fro_err and cos.
struct ErrorSums {
  double err2 = 0, ref2 = 0, got2 = 0, dot = 0;
  void add(const MatrixD& ref, const MatrixD& got) {
    err2 += (got - ref).squaredNorm();
    ref2 += ref.squaredNorm();
    got2 += got.squaredNorm();
    dot += got.cwiseProduct(ref).sum();
  }
  void finish(GemmRow* row) const {
    const double ref_norm = std::sqrt(ref2), got_norm = std::sqrt(got2), err = std::sqrt(err2);
    row->rel_fro_err = ref_norm > 0 ? err / ref_norm : (err > 0 ? INFINITY : 0.0);
    row->cos = (ref_norm > 0 && got_norm > 0) ? dot / (ref_norm * got_norm)
                                              : (ref_norm == 0 && got_norm == 0 ? 1.0 : 0.0);
  }
};

void compare(const MatrixD& ref, const MatrixF& got, GemmRow* row) {
  ErrorSums sums;
  sums.add(ref, got.cast<double>());
  sums.finish(row);
}

// The three operands of one layer at one step, indexed by Role (activation X, weight W, gradient
// dY); with tensor parallelism, one such triple per rank.
using Operands = std::array<const CapturedTensor*, 3>;

// How a layer's GEMMs are split over tensor-parallel ranks (Megatron/TE): column-parallel layers
// (QKV, FC1) hold all of X and a slice of W's rows and of dY's columns; row-parallel layers (proj,
// FC2) a slice of X's and W's columns and all of dY; data-parallel ranks the same W and their own
// tokens of X and dY. A GEMM whose reduction dimension is split (fprop of row-parallel, dgrad of
// column-parallel, wgrad of data-parallel) sums the ranks' outputs (an all-reduce); the other
// GEMMs' outputs are the ranks' slices side by side.
enum class Split { kNone, kColumn, kRow, kData };

bool output_is_sum(Split split, Gemm g) {
  return (split == Split::kColumn && g == Gemm::kDgrad) ||
         (split == Split::kRow && g == Gemm::kFprop) || (split == Split::kData && g == Gemm::kWgrad);
}

const char* split_name(Split s) {
  return s == Split::kColumn ? "column-parallel" : s == Split::kRow ? "row-parallel" : "data-parallel";
}

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.shape == b.shape &&
         std::memcmp(a.data, b.data, static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype)) == 0;
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
                   std::vector<GemmRow>* rows) {
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
  compare(ref, Eigen::Map<const MatrixF>(r.out.data(), p.m, p.n), &row);
  rows->push_back(std::move(row));
}

}  // namespace

std::vector<GemmRow> evaluate_gemm_errors(const CaptureSet& captures,
                                          std::span<const EvaluationRow> rows,
                                          const GemmOptions& options,
                                          std::vector<std::string>* skipped) {
  // Operands by (step, layer), one triple per rank (captures list a key's shards in rank order).
  std::map<std::pair<std::int64_t, std::string>, std::array<std::vector<const CapturedTensor*>, 3>> layers;
  for (const auto& t : captures.tensors)
    layers[{t.key.step, t.key.layer}][static_cast<int>(t.key.role)].push_back(&t);
  const EvaluationIndex index(rows);

  struct Job {
    std::int64_t step;
    std::string layer;
    std::vector<Operands> ranks;  // one without tensor parallelism
    Split split = Split::kNone;
  };
  std::vector<Job> jobs;
  const auto fits = [](const Operands& o) {
    const auto &x = o[0]->view, &w = o[1]->view, &dy = o[2]->view;
    return x.cols == w.cols && dy.cols == w.rows && x.rows == dy.rows;
  };
  const auto shapes = [](const Operands& o) {
    const auto &x = o[0]->view, &w = o[1]->view, &dy = o[2]->view;
    return "X " + std::to_string(x.rows) + "x" + std::to_string(x.cols) + ", W " +
           std::to_string(w.rows) + "x" + std::to_string(w.cols) + ", dY " +
           std::to_string(dy.rows) + "x" + std::to_string(dy.cols);
  };
  for (const auto& [key, by_role] : layers) {
    if (by_role[0].empty() || by_role[1].empty() || by_role[2].empty()) continue;
    const std::string where = "step " + std::to_string(key.first) + " layer '" + key.second + "': ";
    const std::size_t r = by_role[0].size();
    if (by_role[1].size() != r || by_role[2].size() != r) {
      skipped->push_back(where + "X, W and dY were captured on different numbers of ranks (" +
                         std::to_string(r) + ", " + std::to_string(by_role[1].size()) + ", " +
                         std::to_string(by_role[2].size()) + ")");
      continue;
    }
    Job job{key.first, key.second, {}, Split::kNone};
    for (std::size_t i = 0; i < r; ++i) job.ranks.push_back({by_role[0][i], by_role[1][i], by_role[2][i]});
    bool ok = true;
    for (std::size_t i = 0; i < r && ok; ++i) {
      if (fits(job.ranks[i])) continue;
      ok = false;
      skipped->push_back(where + (r == 1 ? "operand shapes do not fit X [M,K], W [N,K], dY [M,N] ("
                                         : "rank " + std::to_string(job.ranks[i][0]->rank) +
                                               "'s shards do not fit X [M,K], W [N,K], dY [M,N] "
                                               "(sequence parallelism splits X by tokens: not "
                                               "supported) (") +
                         shapes(job.ranks[i]) + ")");
    }
    if (!ok) continue;
    if (r > 1) {
      const auto replicated = [&](int role) {
        for (std::size_t i = 1; i < r; ++i)
          if (!same_bytes(job.ranks[i][role]->view, job.ranks[0][role]->view)) return false;
        return true;
      };
      const bool x_same = replicated(0), w_same = replicated(1), dy_same = replicated(2);
      if (x_same && !w_same && !dy_same) job.split = Split::kColumn;
      else if (dy_same && !x_same && !w_same) job.split = Split::kRow;
      else if (w_same && !x_same && !dy_same) job.split = Split::kData;
      else {
        skipped->push_back(where + "captured as " + std::to_string(r) +
                           " ranks, but neither column-parallel (the same X on every rank), "
                           "row-parallel (the same dY) nor data-parallel (the same W)");
        continue;
      }
    }
    jobs.push_back(std::move(job));
  }

  std::vector<std::vector<GemmRow>> results(jobs.size());
  tbb::parallel_for(std::size_t{0}, jobs.size(), [&](std::size_t j) {
    const Job& job = jobs[j];
    const std::size_t nr = job.ranks.size();
    // Per rank: the operands by role, the sampled token rows, the float64 references.
    struct RankData {
      std::array<MatrixF, 3> full;     // X, W, dY
      std::vector<std::int64_t> idx;   // the token rows used
      MatrixF xs, dys;                 // those rows of X and dY
      std::array<MatrixD, 3> ref;      // fprop, dgrad, wgrad in float64
    };
    std::vector<RankData> data(nr);
    bool sampled = false;
    std::int64_t rows_used = 0;
    for (std::size_t r = 0; r < nr; ++r) {
      RankData& d = data[r];
      for (int role = 0; role < 3; ++role) d.full[role] = load_matrix(job.ranks[r][role]->view);
      d.idx = sample(d.full[0].rows(), options.sample_rows);
      sampled = sampled || static_cast<std::int64_t>(d.idx.size()) < d.full[0].rows();
      if (r == 0 || job.split == Split::kData) rows_used += static_cast<std::int64_t>(d.idx.size());
      d.xs = take_rows(d.full[0], d.idx);
      d.dys = take_rows(d.full[2], d.idx);
      const MatrixD xd = d.xs.cast<double>(), wd = d.full[1].cast<double>(), dyd = d.dys.cast<double>();
      d.ref = {xd * wd.transpose(), dyd * wd, dyd.transpose() * xd};
    }
    // Dims of the whole GEMM: N adds up over column-parallel ranks, K over row-parallel ones, the
    // tokens M over data-parallel ones.
    std::int64_t m_all = 0, n_all = 0, k_all = 0;
    for (std::size_t r = 0; r < nr; ++r) {
      m_all += job.split == Split::kData || r == 0 ? job.ranks[r][0]->view.rows : 0;
      n_all += job.split == Split::kColumn || r == 0 ? job.ranks[r][1]->view.rows : 0;
      k_all += job.split == Split::kRow || r == 0 ? job.ranks[r][1]->view.cols : 0;
    }
    const std::string split_note =
        job.split == Split::kNone ? std::string()
        : std::to_string(nr) + " ranks, " + split_name(job.split);
    // The engine's K-major operands (gemm_engine.hpp): W^T for dgrad, dY^T and X^T for wgrad.
    const bool use_engine = options.engine != nullptr && nr == 1;
    MatrixF wt, dyst, xst;
    if (use_engine) {
      wt = data[0].full[1].transpose();
      dyst = data[0].dys.transpose();
      xst = data[0].xs.transpose();
    }
    for (const Recipe& recipe : index.recipes()) {
      struct Use {
        Gemm gemm;
        int a;  // role of the left operand
        Orientation ao;
        int b;  // role of the right operand
        Orientation bo;
      };
      const Use uses[3] = {
          {Gemm::kFprop, 0, Orientation::kRowwise, 1, Orientation::kRowwise},
          {Gemm::kDgrad, 2, Orientation::kRowwise, 1, Orientation::kColumnwise},
          {Gemm::kWgrad, 2, Orientation::kColumnwise, 0, Orientation::kColumnwise},
      };
      for (const Use& u : uses) {
        const EvaluationRow* ra = index.find_for_use(job.ranks[0][u.a]->key, recipe, u.ao);
        const EvaluationRow* rb = index.find_for_use(job.ranks[0][u.b]->key, recipe, u.bo);
        if (ra == nullptr || rb == nullptr || !ra->applicability.ok || !rb->applicability.ok) continue;
        ErrorSums sums;
        MatrixD ref_sum, got_sum;  // outputs that add up over the ranks
        const bool summed = output_is_sum(job.split, u.gemm);
        for (std::size_t r = 0; r < nr; ++r) {
          const RankData& d = data[r];
          // Quantise whole operands (scales see every row), then take the sampled token rows.
          const MatrixF aq = take_rows(fake_quantized(d.full[u.a], spec_for(*ra, *job.ranks[r][u.a])), d.idx);
          const MatrixF bq_full = fake_quantized(d.full[u.b], spec_for(*rb, *job.ranks[r][u.b]));
          MatrixF got;
          switch (u.gemm) {
            case Gemm::kFprop: got = aq * bq_full.transpose(); break;
            case Gemm::kDgrad: got = aq * bq_full; break;
            case Gemm::kWgrad: got = aq.transpose() * take_rows(bq_full, d.idx); break;
          }
          const MatrixD& ref = d.ref[static_cast<int>(u.gemm)];
          if (!summed) {
            sums.add(ref, got.cast<double>());
          } else if (r == 0) {
            ref_sum = ref;
            got_sum = got.cast<double>();
          } else {
            ref_sum += ref;
            got_sum += got.cast<double>();
          }
        }
        if (summed) sums.add(ref_sum, got_sum);
        GemmRow row;
        row.step = job.step;
        row.layer = job.layer;
        row.gemm = u.gemm;
        row.recipe = recipe;
        row.format = ra->format;
        row.rows_used = rows_used;
        row.sampled = sampled;
        switch (u.gemm) {
          case Gemm::kFprop: row.m = m_all; row.n = n_all; row.k = k_all; break;
          case Gemm::kDgrad: row.m = m_all; row.n = k_all; row.k = n_all; break;
          case Gemm::kWgrad: row.m = n_all; row.n = k_all; row.k = m_all; break;
        }
        sums.finish(&row);
        row.note = split_note;
        if (!split_note.empty() && options.engine != nullptr)
          row.note += "; " + options.engine->name() + " not run: rank shards";
        results[j].push_back(row);
        if (!use_engine) continue;
        const RankData& d = data[0];
        GemmProblem p;
        p.gemm = u.gemm;
        p.what = "step " + std::to_string(job.step) + " layer '" + job.layer + "' " +
                 gemm_name(u.gemm) + " " + recipe.spec();
        const QuantSpec sa = spec_of(*ra), sb = spec_of(*rb);
        const bool fprop = u.gemm == Gemm::kFprop, dgrad = u.gemm == Gemm::kDgrad;
        const MatrixF* a = fprop ? &d.xs : dgrad ? &d.dys : &dyst;
        const MatrixF* b = fprop ? &d.full[1] : dgrad ? &wt : &xst;
        p.a.spec = fprop || dgrad ? sa : transposed(sa);
        p.b.spec = fprop ? sb : transposed(sb);
        p.m = a->rows();
        p.n = b->rows();
        p.k = a->cols();
        p.a.rows = p.m;
        p.b.rows = p.n;
        p.a.values = std::span<const float>(a->data(), static_cast<std::size_t>(a->size()));
        p.b.values = std::span<const float>(b->data(), static_cast<std::size_t>(b->size()));
        run_on_engine(*options.engine, p, sampled, &results[j]);
      }
    }
  });
  std::vector<GemmRow> out;
  for (auto& r : results)
    for (auto& g : r) out.push_back(std::move(g));
  return out;
}

}  // namespace fp8a

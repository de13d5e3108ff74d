#include "engine/gemm_error.hpp"

#include <tbb/parallel_for.h>

#include <Eigen/Core>
#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "engine/core/error.hpp"
#include "engine/cpu_backend.hpp"
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

void compare(const MatrixD& ref, const MatrixF& got, GemmRow* row) {
  const MatrixD g = got.cast<double>();
  const double ref_norm = ref.norm(), got_norm = g.norm();
  const double err = (g - ref).norm();
  row->rel_fro_err = ref_norm > 0 ? err / ref_norm : (err > 0 ? INFINITY : 0.0);
  row->cos = (ref_norm > 0 && got_norm > 0) ? (g.cwiseProduct(ref).sum() / (ref_norm * got_norm))
                                            : (ref_norm == 0 && got_norm == 0 ? 1.0 : 0.0);
}

struct Operands {
  const CapturedTensor* x = nullptr;
  const CapturedTensor* w = nullptr;
  const CapturedTensor* dy = nullptr;
};

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
  // Operands by (step, layer).
  std::map<std::pair<std::int64_t, std::string>, Operands> layers;
  std::map<std::pair<std::int64_t, std::string>, bool> sharded;
  for (const auto& t : captures.tensors) {
    auto& ops = layers[{t.key.step, t.key.layer}];
    const CapturedTensor*& slot =
        t.key.role == Role::kActivation ? ops.x : t.key.role == Role::kWeight ? ops.w : ops.dy;
    if (slot != nullptr) sharded[{t.key.step, t.key.layer}] = true;
    slot = &t;
  }
  // Evaluation rows by (step, layer, role, recipe spec, orientation).
  std::map<std::tuple<std::int64_t, std::string, Role, std::string, Orientation>, const EvaluationRow*> by_key;
  std::vector<Recipe> recipes;
  for (const auto& r : rows) {
    by_key[{r.key.step, r.key.layer, r.key.role, r.recipe.spec(), r.orientation}] = &r;
    bool seen = false;
    for (const auto& x : recipes) seen = seen || x == r.recipe;
    if (!seen) recipes.push_back(r.recipe);
  }
  // Which row quantises an operand: the requested orientation, else rowwise (per-tensor recipes
  // and 128x128 weight tiles have one set of numbers for both).
  auto find = [&](const CapturedTensor* t, const Recipe& r, Orientation o) -> const EvaluationRow* {
    for (Orientation candidate : {o, Orientation::kRowwise}) {
      auto it = by_key.find({t->key.step, t->key.layer, t->key.role, r.spec(), candidate});
      if (it != by_key.end()) return it->second;
    }
    return nullptr;
  };

  struct Job {
    std::int64_t step;
    std::string layer;
    Operands ops;
  };
  std::vector<Job> jobs;
  for (const auto& [key, ops] : layers) {
    if (ops.x == nullptr || ops.w == nullptr || ops.dy == nullptr) continue;
    if (sharded.count(key) != 0) {
      skipped->push_back("step " + std::to_string(key.first) + " layer '" + key.second +
                         "': captured as several ranks; the GEMM error of tensor-parallel shards "
                         "is not computed yet");
      continue;
    }
    const auto& x = ops.x->view;
    const auto& w = ops.w->view;
    const auto& dy = ops.dy->view;
    if (x.cols != w.cols || dy.cols != w.rows || x.rows != dy.rows) {
      skipped->push_back("step " + std::to_string(key.first) + " layer '" + key.second +
                         "': operand shapes do not fit X [M,K], W [N,K], dY [M,N] (X " +
                         std::to_string(x.rows) + "x" + std::to_string(x.cols) + ", W " +
                         std::to_string(w.rows) + "x" + std::to_string(w.cols) + ", dY " +
                         std::to_string(dy.rows) + "x" + std::to_string(dy.cols) + ")");
      continue;
    }
    jobs.push_back({key.first, key.second, ops});
  }

  std::vector<std::vector<GemmRow>> results(jobs.size());
  tbb::parallel_for(std::size_t{0}, jobs.size(), [&](std::size_t j) {
    const Job& job = jobs[j];
    const MatrixF x = load_matrix(job.ops.x->view);
    const MatrixF w = load_matrix(job.ops.w->view);
    const MatrixF dy = load_matrix(job.ops.dy->view);
    const auto idx = sample(x.rows(), options.sample_rows);
    const bool sampled = static_cast<std::int64_t>(idx.size()) < x.rows();
    const MatrixF xs = take_rows(x, idx), dys = take_rows(dy, idx);
    // References in float64, shared by every recipe.
    const MatrixD xd = xs.cast<double>(), wd = w.cast<double>(), dyd = dys.cast<double>();
    const MatrixD ref[3] = {xd * wd.transpose(), dyd * wd, dyd.transpose() * xd};
    // The engine's K-major operands (gemm_engine.hpp): W^T for dgrad, dY^T and X^T for wgrad.
    MatrixF wt, dyst, xst;
    if (options.engine != nullptr) {
      wt = w.transpose();
      dyst = dys.transpose();
      xst = xs.transpose();
    }
    for (const Recipe& recipe : recipes) {
      struct Use {
        Gemm gemm;
        const CapturedTensor* a;
        Orientation ao;
        const CapturedTensor* b;
        Orientation bo;
      };
      const Use uses[3] = {
          {Gemm::kFprop, job.ops.x, Orientation::kRowwise, job.ops.w, Orientation::kRowwise},
          {Gemm::kDgrad, job.ops.dy, Orientation::kRowwise, job.ops.w, Orientation::kColumnwise},
          {Gemm::kWgrad, job.ops.dy, Orientation::kColumnwise, job.ops.x, Orientation::kColumnwise},
      };
      for (const Use& u : uses) {
        const EvaluationRow* ra = find(u.a, recipe, u.ao);
        const EvaluationRow* rb = find(u.b, recipe, u.bo);
        if (ra == nullptr || rb == nullptr || !ra->applicability.ok || !rb->applicability.ok) continue;
        const MatrixF& a_full = u.a == job.ops.x ? x : dy;
        const MatrixF& b_full = u.b == job.ops.w ? w : x;
        // Quantise whole operands (scales see every row), then take the sampled token rows.
        const MatrixF aq = take_rows(fake_quantized(a_full, spec_of(*ra)), idx);
        const MatrixF bq_full = fake_quantized(b_full, spec_of(*rb));
        GemmRow row;
        row.step = job.step;
        row.layer = job.layer;
        row.gemm = u.gemm;
        row.recipe = recipe;
        row.format = ra->format;
        row.rows_used = static_cast<std::int64_t>(idx.size());
        row.sampled = sampled;
        MatrixF got;
        switch (u.gemm) {
          case Gemm::kFprop:
            got = aq * bq_full.transpose();
            row.m = x.rows(); row.n = w.rows(); row.k = x.cols();
            break;
          case Gemm::kDgrad:
            got = aq * bq_full;
            row.m = x.rows(); row.n = w.cols(); row.k = w.rows();
            break;
          case Gemm::kWgrad:
            got = aq.transpose() * take_rows(bq_full, idx);
            row.m = w.rows(); row.n = w.cols(); row.k = x.rows();
            break;
        }
        compare(ref[static_cast<int>(u.gemm)], got, &row);
        results[j].push_back(row);
        if (options.engine == nullptr) continue;
        GemmProblem p;
        p.gemm = u.gemm;
        p.what = "step " + std::to_string(job.step) + " layer '" + job.layer + "' " +
                 gemm_name(u.gemm) + " " + recipe.spec();
        const QuantSpec sa = spec_of(*ra), sb = spec_of(*rb);
        const bool fprop = u.gemm == Gemm::kFprop, dgrad = u.gemm == Gemm::kDgrad;
        const MatrixF* a = fprop ? &xs : dgrad ? &dys : &dyst;
        const MatrixF* b = fprop ? &w : dgrad ? &wt : &xst;
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

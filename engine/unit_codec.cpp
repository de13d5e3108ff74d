#include "engine/unit_codec.hpp"

#include <bit>
#include <cstring>

namespace fp8a {

static_assert(std::endian::native == std::endian::little, "unit_codec writes the machine's little-endian bytes");

void ByteWriter::u64(std::uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  out_.append(b, 8);
}
void ByteWriter::f32(float v) {
  u64(std::bit_cast<std::uint32_t>(v));
}
void ByteWriter::f64(double v) { u64(std::bit_cast<std::uint64_t>(v)); }
void ByteWriter::str(std::string_view s) {
  u64(s.size());
  out_.append(s);
}

std::string_view ByteReader::take(std::size_t n) {
  if (n > in_.size() - pos_) throw DecodeError("truncated: " + std::to_string(n) + " bytes wanted, " +
                                               std::to_string(in_.size() - pos_) + " left");
  const std::string_view s = in_.substr(pos_, n);
  pos_ += n;
  return s;
}
std::uint8_t ByteReader::u8() { return static_cast<std::uint8_t>(take(1)[0]); }
std::uint64_t ByteReader::u64() {
  std::uint64_t v;
  std::memcpy(&v, take(8).data(), 8);
  return v;
}
float ByteReader::f32() {
  const std::uint64_t v = u64();
  if (v > 0xFFFFFFFFu) throw DecodeError("a float32 field out of range");
  return std::bit_cast<float>(static_cast<std::uint32_t>(v));
}
double ByteReader::f64() { return std::bit_cast<double>(u64()); }
std::string ByteReader::str() {
  const std::uint64_t n = u64();
  if (n > in_.size() - pos_) throw DecodeError("truncated string");
  return std::string(take(static_cast<std::size_t>(n)));
}
std::size_t ByteReader::count(std::size_t min_bytes) {
  const std::uint64_t n = u64();
  if (min_bytes > 0 && n > (in_.size() - pos_) / min_bytes) throw DecodeError("count past the end");
  return static_cast<std::size_t>(n);
}
void ByteReader::expect_done() const {
  if (!done()) throw DecodeError(std::to_string(in_.size() - pos_) + " bytes after the end");
}

namespace {

// A tag and version at the start of each encoding: bytes of another kind or layout are refused.
constexpr std::uint64_t kTensorEvaluationTag = 0x32'6C'61'76'65'61'38'66;  // "f8aeval2"
constexpr std::uint64_t kGemmRowsTag = 0x35'6D'6D'65'67'61'38'66;          // "f8agemm5"

template <class E>
E enum_from(std::uint8_t v, E last, const char* what) {
  if (v > static_cast<std::uint8_t>(last)) throw DecodeError(std::string("bad ") + what);
  return static_cast<E>(v);
}

void put(ByteWriter& w, const TensorStats& s) {
  w.i64(s.numel);
  w.i64(s.nan_count);
  w.i64(s.inf_count);
  w.i64(s.zero_count);
  w.f32(s.amax);
  w.f32(s.amax_finite);
  w.f32(s.amin_nonzero);
  w.f64(s.sum_sq);
}
TensorStats get_stats(ByteReader& r) {
  TensorStats s;
  s.numel = r.i64();
  s.nan_count = r.i64();
  s.inf_count = r.i64();
  s.zero_count = r.i64();
  s.amax = r.f32();
  s.amax_finite = r.f32();
  s.amin_nonzero = r.f32();
  s.sum_sq = r.f64();
  return s;
}

void put(ByteWriter& w, const QuantMetrics& m) {
  for (float f : {m.scale, m.scale_inv, m.scale_inv_min, m.scale_inv_max}) w.f32(f);
  w.i64(m.sums.underflow_count);
  w.i64(m.sums.overflow_count);
  w.i64(m.sums.saturated_count);
  for (double d : {m.sums.sum_sq_err, m.sums.sum_x_deq, m.sums.sum_deq_sq, m.sums.sum_sq_underflow,
                   m.mse, m.rel_mse, m.sqnr_db, m.cos, m.underflow_pct, m.overflow_pct,
                   m.saturated_pct, m.underflow_energy_pct})
    w.f64(d);
}
QuantMetrics get_metrics(ByteReader& r) {
  QuantMetrics m;
  for (float* f : {&m.scale, &m.scale_inv, &m.scale_inv_min, &m.scale_inv_max}) *f = r.f32();
  m.sums.underflow_count = r.i64();
  m.sums.overflow_count = r.i64();
  m.sums.saturated_count = r.i64();
  for (double* d : {&m.sums.sum_sq_err, &m.sums.sum_x_deq, &m.sums.sum_deq_sq, &m.sums.sum_sq_underflow,
                    &m.mse, &m.rel_mse, &m.sqnr_db, &m.cos, &m.underflow_pct, &m.overflow_pct,
                    &m.saturated_pct, &m.underflow_energy_pct})
    *d = r.f64();
  return m;
}

void put(ByteWriter& w, const Recipe& rc) {
  w.u8(static_cast<std::uint8_t>(rc.kind));
  w.u8(rc.pow2_scales ? 1 : 0);
  w.f32(rc.amax_epsilon);
  w.i64(rc.history);
  w.u8(static_cast<std::uint8_t>(rc.algo));
  w.i64(rc.margin);
  w.u8(static_cast<std::uint8_t>(rc.mx_rule));
  w.u8(rc.block_2d ? 1 : 0);
  w.u8((rc.nvfp4_rht ? 1 : 0) | (rc.nvfp4_sr ? 2 : 0) | (rc.nvfp4_2d ? 4 : 0));  // NVFP4's switches
}
// A recipe kind is valid when kRecipeKinds has its row, so a kind added there decodes too.
RecipeKind recipe_kind_from(std::uint8_t v) {
  for (const RecipeKindTraits& t : kRecipeKinds)
    if (static_cast<std::uint8_t>(t.kind) == v) return t.kind;
  throw DecodeError("bad recipe kind");
}

Recipe get_recipe(ByteReader& r) {
  Recipe rc;
  rc.kind = recipe_kind_from(r.u8());
  rc.pow2_scales = r.u8() != 0;
  rc.amax_epsilon = r.f32();
  rc.history = static_cast<int>(r.i64());
  rc.algo = enum_from(r.u8(), DelayedAlgo::kMostRecent, "delayed algo");
  rc.margin = static_cast<int>(r.i64());
  rc.mx_rule = enum_from(r.u8(), MxScaleRule::kOcpFloor, "MX scale rule");
  rc.block_2d = r.u8() != 0;
  const std::uint8_t b = r.u8();
  if (b > 7) throw DecodeError("bad NVFP4 switches");
  rc.nvfp4_rht = (b & 1) != 0;
  rc.nvfp4_sr = (b & 2) != 0;
  rc.nvfp4_2d = (b & 4) != 0;
  return rc;
}

void put(ByteWriter& w, const GemmRow& g) {
  w.i64(g.step);
  w.str(g.layer);
  w.u8(static_cast<std::uint8_t>(g.gemm));
  put(w, g.recipe);
  w.u8(static_cast<std::uint8_t>(g.format));
  for (std::int64_t v : {g.m, g.n, g.k, g.rows_used, g.cols_used}) w.i64(v);
  w.u8(g.sampled ? 1 : 0);
  w.f64(g.rel_fro_err);
  w.f64(g.cos);
  w.str(g.engine);
  w.str(g.accumulation);
  for (std::int64_t v : {g.m_padded, g.n_padded, g.k_padded}) w.i64(v);
  w.str(g.note);
  for (double d : {g.zeroed_pct, g.sign_flip_pct, g.median_rel_err, g.noise_sign_flip_pct, g.rel_fro_err_se,
                   g.zeroed_pct_se, g.sign_flip_pct_se})
    w.f64(d);
}
GemmRow get_gemm_row(ByteReader& r) {
  GemmRow g;
  g.step = r.i64();
  g.layer = r.str();
  g.gemm = enum_from(r.u8(), Gemm::kWgrad, "GEMM");
  g.recipe = get_recipe(r);
  g.format = enum_from(r.u8(), TrainingFormat::kHybrid, "training format");
  for (std::int64_t* v : {&g.m, &g.n, &g.k, &g.rows_used, &g.cols_used}) *v = r.i64();
  g.sampled = r.u8() != 0;
  g.rel_fro_err = r.f64();
  g.cos = r.f64();
  g.engine = r.str();
  g.accumulation = r.str();
  for (std::int64_t* v : {&g.m_padded, &g.n_padded, &g.k_padded}) *v = r.i64();
  g.note = r.str();
  for (double* d : {&g.zeroed_pct, &g.sign_flip_pct, &g.median_rel_err, &g.noise_sign_flip_pct, &g.rel_fro_err_se,
                    &g.zeroed_pct_se, &g.sign_flip_pct_se})
    *d = r.f64();
  return g;
}

void expect_tag(ByteReader& r, std::uint64_t tag, const char* what) {
  if (r.u64() != tag) throw DecodeError(std::string("not ") + what);
}

}  // namespace

std::optional<UnitKind> unit_kind_from(std::uint8_t v) {
  const auto kind = static_cast<UnitKind>(v);
  switch (kind) {  // every kind, no default: -Wswitch names a kind added to UnitKind but not here
    case UnitKind::kShard:
    case UnitKind::kGemmLayer:
      return kind;
  }
  return std::nullopt;
}

void write_recipe(ByteWriter& w, const Recipe& recipe) { put(w, recipe); }

std::string encode_tensor_evaluation(const TensorEvaluation& e) {
  ByteWriter w;
  w.u64(kTensorEvaluationTag);
  put(w, e.stats);
  w.u64(e.results.size());
  for (const CandidateResult& c : e.results) {
    w.u8(c.applicability.ok ? 1 : 0);
    w.str(c.applicability.reason);
    put(w, c.metrics);
  }
  return w.take();
}

TensorEvaluation decode_tensor_evaluation(std::string_view bytes) {
  ByteReader r(bytes);
  expect_tag(r, kTensorEvaluationTag, "a tensor evaluation");
  TensorEvaluation e;
  e.stats = get_stats(r);
  e.results.resize(r.count(9));
  for (CandidateResult& c : e.results) {
    c.applicability.ok = r.u8() != 0;
    c.applicability.reason = r.str();
    c.metrics = get_metrics(r);
  }
  r.expect_done();
  return e;
}

std::string encode_gemm_rows(const std::vector<std::vector<GemmRow>>& per_format) {
  ByteWriter w;
  w.u64(kGemmRowsTag);
  w.u64(per_format.size());
  for (const auto& rows : per_format) {
    w.u64(rows.size());
    for (const GemmRow& g : rows) put(w, g);
  }
  return w.take();
}

std::vector<std::vector<GemmRow>> decode_gemm_rows(std::string_view bytes) {
  ByteReader r(bytes);
  expect_tag(r, kGemmRowsTag, "GEMM rows");
  std::vector<std::vector<GemmRow>> out(r.count(8));
  for (auto& rows : out) {
    rows.resize(r.count(8));
    for (GemmRow& g : rows) g = get_gemm_row(r);
  }
  r.expect_done();
  return out;
}

}  // namespace fp8a

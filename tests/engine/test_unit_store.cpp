// The units a checkpoint keeps (engine/unit_codec.hpp, engine/unit_store.hpp): encodings that give
// back every bit, keys that change with everything a result depends on, and runs that take their
// units from a store giving the rows a run without one gives, without calling the backend.
#include <doctest/doctest.h>

#include <algorithm>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "datasets/synth.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_pairing.hpp"
#include "engine/run.hpp"
#include "engine/unit_codec.hpp"
#include "support/unit_stores.hpp"
#include "engine/unit_store.hpp"

namespace {

using namespace fp8a;
using fp8a::testing::CountingBackend;
using fp8a::testing::MapStore;
using fp8a::testing::Synth;
using fp8a::testing::load_synth;

// The bit patterns of every float and double field: what "the same result" means here.
template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

const float kNaNPayload = std::bit_cast<float>(0x7FC01234u);
const double kNaNPayloadD = std::bit_cast<double>(0x7FF8000000ABCDEFull);

RunConfig config_of(const char* recipes) {
  RunConfig c;
  c.recipes = parse_recipe_list(recipes);
  return c;
}

// Every field of two rows compared: floats by bits.
void check_same_rows(const std::vector<EvaluationRow>& a, const std::vector<EvaluationRow>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].key == b[i].key);
    CHECK(a[i].recipe == b[i].recipe);
    CHECK(a[i].format == b[i].format);
    CHECK(a[i].orientation == b[i].orientation);
    CHECK(a[i].applicability.ok == b[i].applicability.ok);
    CHECK(encode_tensor_evaluation({a[i].stats, {{a[i].applicability, a[i].metrics}}}) ==
          encode_tensor_evaluation({b[i].stats, {{b[i].applicability, b[i].metrics}}}));
    CHECK(same_bits(a[i].current_scale, b[i].current_scale));
    CHECK(same_bits(a[i].replay.scale, b[i].replay.scale));
  }
}

}  // namespace

TEST_CASE("a tensor evaluation encodes and decodes to the same bits, NaN payloads and -0 included") {
  TensorEvaluation e;
  e.stats.numel = 1234567890123;
  e.stats.nan_count = 3;
  e.stats.amax = kNaNPayload;
  e.stats.amax_finite = std::numeric_limits<float>::denorm_min();
  e.stats.amin_nonzero = std::numeric_limits<float>::infinity();
  e.stats.sum_sq = -0.0;
  CandidateResult ok;
  ok.metrics.scale = 448.0f / 3.0f;
  ok.metrics.scale_inv_min = -0.0f;
  ok.metrics.sums.underflow_count = -7;  // any bits survive, not only sensible ones
  ok.metrics.sums.sum_sq_err = kNaNPayloadD;
  ok.metrics.rel_mse = std::numeric_limits<double>::denorm_min();
  ok.metrics.underflow_energy_pct = 1.0 / 3.0;
  CandidateResult no{Applicability::no("MXFP8 needs dims divisible by 32; shape is [3, 5]"), {}};
  e.results = {ok, no};
  const std::string bytes = encode_tensor_evaluation(e);
  const TensorEvaluation d = decode_tensor_evaluation(bytes);
  CHECK(std::bit_cast<std::uint32_t>(d.stats.amax) == 0x7FC01234u);
  CHECK(same_bits(d.stats.amax_finite, e.stats.amax_finite));
  CHECK(std::signbit(d.stats.sum_sq));
  CHECK(d.stats.numel == 1234567890123);
  REQUIRE(d.results.size() == 2);
  CHECK(same_bits(d.results[0].metrics.scale, ok.metrics.scale));
  CHECK(std::signbit(d.results[0].metrics.scale_inv_min));
  CHECK(d.results[0].metrics.sums.underflow_count == -7);
  CHECK(std::bit_cast<std::uint64_t>(d.results[0].metrics.sums.sum_sq_err) == 0x7FF8000000ABCDEFull);
  CHECK(same_bits(d.results[0].metrics.underflow_energy_pct, ok.metrics.underflow_energy_pct));
  CHECK(!d.results[1].applicability.ok);
  CHECK(d.results[1].applicability.reason == no.applicability.reason);
  CHECK(encode_tensor_evaluation(d) == bytes);
}

TEST_CASE("GEMM rows encode and decode to the same fields") {
  GemmRow g;
  g.step = 300;
  g.layer = "layers.0.mlp.fc2";
  g.gemm = Gemm::kWgrad;
  g.recipe = parse_recipe("delayed:history=16:algo=most_recent:margin=1");
  g.format = TrainingFormat::kE4M3;
  g.m = 256;
  g.n = 1024;
  g.k = 4096;
  g.rows_used = 128;
  g.cols_used = 640;
  g.sampled = true;
  g.rel_fro_err = 0.0123456789;
  g.cos = 0.99999;
  g.engine = "cublaslt";
  g.accumulation = "split";
  g.m_padded = 256;
  g.note = "2 ranks, column-parallel";
  g.zeroed_pct = 2.344;
  g.noise_sign_flip_pct = std::nan("");
  g.rel_fro_err_se = 0.000157;
  const std::vector<std::vector<GemmRow>> per_format{{g, g}, {}};
  const auto d = decode_gemm_rows(encode_gemm_rows(per_format));
  REQUIRE(d.size() == 2);
  REQUIRE(d[0].size() == 2);
  CHECK(d[1].empty());
  const GemmRow& r = d[0][1];
  CHECK(r.step == 300);
  CHECK(r.layer == g.layer);
  CHECK(r.gemm == Gemm::kWgrad);
  CHECK(r.recipe == g.recipe);
  CHECK(r.recipe.spec() == "delayed:history=16:algo=most_recent:margin=1");
  CHECK(r.format == TrainingFormat::kE4M3);
  CHECK(r.k == 4096);
  CHECK(r.rows_used == 128);
  CHECK(r.cols_used == 640);
  CHECK(r.sampled);
  CHECK(same_bits(r.rel_fro_err, g.rel_fro_err));
  CHECK(r.engine == "cublaslt");
  CHECK(r.accumulation == "split");
  CHECK(r.note == g.note);
  CHECK(same_bits(r.zeroed_pct, 2.344));
  CHECK(std::isnan(r.noise_sign_flip_pct));
  CHECK(same_bits(r.rel_fro_err_se, 0.000157));
}

TEST_CASE("truncated, padded or foreign bytes are refused, not misread") {
  TensorEvaluation e;
  e.results.resize(3);
  const std::string bytes = encode_tensor_evaluation(e);
  for (std::size_t cut : {std::size_t{0}, std::size_t{7}, std::size_t{8}, bytes.size() - 1})
    CHECK_THROWS_AS(decode_tensor_evaluation(std::string_view(bytes).substr(0, cut)), DecodeError);
  CHECK_THROWS_AS(decode_tensor_evaluation(bytes + "x"), DecodeError);
  CHECK_THROWS_AS(decode_gemm_rows(bytes), DecodeError);  // another kind's tag
  std::string huge = bytes.substr(0, 8 + 4 * 8 + 3 * 8 + 8);  // stats, then a count
  std::uint64_t n = std::uint64_t{1} << 60;
  std::memcpy(huge.data() + huge.size() - 8, &n, 8);
  CHECK_THROWS_AS(decode_tensor_evaluation(huge), DecodeError);  // a count the bytes cannot hold
}

TEST_CASE("unit_kind_from: the byte of each kind, and none past the last") {
  CHECK(fp8a::unit_kind_from(0) == fp8a::UnitKind::kShard);
  CHECK(fp8a::unit_kind_from(1) == fp8a::UnitKind::kGemmLayer);
  CHECK_FALSE(fp8a::unit_kind_from(2).has_value());
  CHECK_FALSE(fp8a::unit_kind_from(255).has_value());
}

TEST_CASE("a shard's key changes with its file's identity and its tensor, a candidate's with each field") {
  CapturedTensor t;
  t.file = "a.safetensors";
  t.file_identity = "size 100, mtime 1.5";
  t.tensor_name = "l.activation";
  std::vector<float> data(4, 1.0f);
  t.view = make_tensor_view(reinterpret_cast<const std::byte*>(data.data()), DType::kF32, {2, 2});
  const std::string base = shard_unit_key(t);
  CHECK(shard_unit_key(t) == base);
  CapturedTensor t2 = t;
  t2.file_identity = "size 100, mtime 1.6";
  CHECK(shard_unit_key(t2) != base);
  t2 = t;
  t2.tensor_name = "l.gradient";
  CHECK(shard_unit_key(t2) != base);
  t2 = t;
  t2.file = "b.safetensors";
  CHECK(shard_unit_key(t2) != base);

  const Candidate c{parse_recipe("delayed"), Fp8Format::kE4M3, Role::kActivation, Orientation::kRowwise, 2.0f};
  const std::string cbase = candidate_unit_key(c);
  Candidate c2 = c;
  c2.given_scale = std::nextafter(2.0f, 3.0f);
  CHECK(candidate_unit_key(c2) != cbase);
  c2 = c;
  c2.recipe.margin = 1;
  CHECK(candidate_unit_key(c2) != cbase);
  c2 = c;
  c2.format = Fp8Format::kE5M2;
  CHECK(candidate_unit_key(c2) != cbase);
  c2 = c;
  c2.orientation = Orientation::kColumnwise;
  CHECK(candidate_unit_key(c2) != cbase);
  c2 = c;
  c2.role = Role::kWeight;
  CHECK(candidate_unit_key(c2) != cbase);
  // NVFP4: each switch and the ranks' shared amax are in the key.
  const Candidate n{parse_recipe("nvfp4"), Fp8Format::kE4M3, Role::kGradient, Orientation::kColumnwise};
  std::vector<std::string> keys = {candidate_unit_key(n)};
  for (const char* spec : {"nvfp4:no_rht", "nvfp4:no_sr", "nvfp4:no_2d"}) {
    Candidate n2 = n;
    n2.recipe = parse_recipe(spec);
    keys.push_back(candidate_unit_key(n2));
  }
  Candidate n3 = n;
  n3.given_amax = 3.0f;
  keys.push_back(candidate_unit_key(n3));
  std::sort(keys.begin(), keys.end());
  CHECK(std::adjacent_find(keys.begin(), keys.end()) == keys.end());
}

TEST_CASE("NVFP4 recipes round-trip through the GEMM rows' encoding, each switch kept") {
  for (const char* spec : {"nvfp4", "nvfp4:no_rht", "nvfp4:no_sr:no_2d"}) {
    GemmRow g;
    g.layer = "l";
    g.recipe = parse_recipe(spec);
    const auto d = decode_gemm_rows(encode_gemm_rows({{g}}));
    REQUIRE(d.size() == 1);
    REQUIRE(d[0].size() == 1);
    CHECK(d[0][0].recipe == g.recipe);
    CHECK(d[0][0].recipe.spec() == spec);
  }
}

TEST_CASE("a run that takes every unit from the store gives the same rows and never calls the backend") {
  Synth s;
  load_synth(s, "all");
  RunConfig config = config_of("current,delayed,block,mxfp8,bf16");
  const CountingBackend backend;
  const auto plain = evaluate_captures(s.captures, config, backend);
  const int plain_calls = backend.calls;
  MapStore store;
  RunContext with_store;
  with_store.store = &store;
  const auto first = evaluate_captures(s.captures, config, backend, with_store);
  check_same_rows(plain, first);
  CHECK(backend.calls == 2 * plain_calls);
  CHECK(store.saves[UnitKind::kShard] == plain_calls);
  CHECK(store.hits[UnitKind::kShard] == 0);
  CHECK(store.reused[UnitKind::kShard] == 0);
  const auto second = evaluate_captures(s.captures, config, backend, with_store);
  check_same_rows(plain, second);
  CHECK(backend.calls == 2 * plain_calls);  // nothing evaluated again
  CHECK(store.hits[UnitKind::kShard] == plain_calls);
  CHECK(store.computed[UnitKind::kShard] == store.reused[UnitKind::kShard]);

  // GEMM layers: the same, byte for byte in their encoding.
  const auto layers = pair_gemm_operands(s.captures, nullptr);
  REQUIRE(!layers.empty());
  GemmOptions o;
  const auto gemm_plain = evaluate_gemm_errors(layers, plain, o);
  const auto gemm_first = evaluate_gemm_errors(layers, plain, o, with_store);
  CHECK(store.saves[UnitKind::kGemmLayer] == static_cast<int>(layers.size()));
  const auto gemm_second = evaluate_gemm_errors(layers, plain, o, with_store);
  CHECK(store.hits[UnitKind::kGemmLayer] == static_cast<int>(layers.size()));
  CHECK(encode_gemm_rows({gemm_plain}) == encode_gemm_rows({gemm_first}));
  CHECK(encode_gemm_rows({gemm_plain}) == encode_gemm_rows({gemm_second}));
}

TEST_CASE("with more recipes, only the candidates the store lacks are evaluated, and the rows are a plain run's") {
  Synth s;
  load_synth(s, "all");
  const CpuBackend cpu;
  MapStore store;
  RunContext with_store;
  with_store.store = &store;
  RunConfig fewer = config_of("current,block");
  evaluate_captures(s.captures, fewer, cpu, with_store);
  const std::uint64_t first = store.computed[UnitKind::kShard];
  RunConfig more = config_of("current,delayed,block,mxfp8");
  const auto plain = evaluate_captures(s.captures, more, cpu);
  const auto resumed = evaluate_captures(s.captures, more, cpu, with_store);
  check_same_rows(plain, resumed);
  CHECK(store.reused[UnitKind::kShard] == first);  // every current and block evaluation
  CHECK(store.computed[UnitKind::kShard] > first);  // and the delayed and MXFP8 ones
}

TEST_CASE("a stop request: no unit is started after it, and the run says it stopped") {
  Synth s;
  load_synth(s, "all");
  RunConfig config = config_of("current");
  const CountingBackend backend;
  StopRequest stop;
  stop.signal = 2;
  RunContext stopping;
  stopping.stop = &stop;
  CHECK_THROWS_AS(evaluate_captures(s.captures, config, backend, stopping), StopRequested);
  CHECK(backend.calls == 0);
  const auto rows = evaluate_captures(s.captures, config, backend);
  CHECK_THROWS_AS(evaluate_gemm_errors(pair_gemm_operands(s.captures, nullptr), rows, GemmOptions{}, stopping),
                  StopRequested);
}

// The CPU backend's code paths (engine/cpu_isa.hpp) against its baseline path, bit for bit: every
// recipe kind in both orientations and for each role's block shape, on tensors with awkward
// values and sizes, on every path this CPU runs (the others are skipped, saying so). The
// baseline's own numbers are checked against an independent reference elsewhere
// (test_cpu_backend.cpp, test_blocked_recipes.cpp); here the reference for the sums' order is a
// sequential float64 sum in chunk order, written out below.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/fp8_codec.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/cpu_isa.hpp"
#include "support/fills.hpp"

namespace {

using fp8a::CpuIsa;

// A tensor stored in its own bytes.
struct OwnedTensor {
  std::vector<std::byte> bytes;
  fp8a::TensorView view;
  std::string what;
};

OwnedTensor make_tensor(const std::vector<float>& values, fp8a::DType dtype,
                        std::vector<std::int64_t> shape, std::string what) {
  OwnedTensor t;
  if (dtype == fp8a::DType::kF32) {
    t.bytes.resize(values.size() * 4);
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  } else {  // BF16 by rounding the floats
    t.bytes.resize(values.size() * 2);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint16_t h = fp8a::float_to_bf16(values[i]);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    }
  }
  t.view = fp8a::make_tensor_view(t.bytes.data(), dtype, std::move(shape));
  t.what = std::move(what);
  return t;
}

// Random 16-bit patterns as BF16 or FP16: every class of value (subnormals, NaN payloads, +-inf,
// +-0) in the decode loops.
OwnedTensor make_bits16(std::size_t n, fp8a::DType dtype, std::uint32_t seed, std::int64_t cols) {
  std::mt19937 rng(seed);
  OwnedTensor t;
  t.bytes.resize(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    const auto h = static_cast<std::uint16_t>(rng());
    std::memcpy(t.bytes.data() + 2 * i, &h, 2);
  }
  t.view = fp8a::make_tensor_view(t.bytes.data(), dtype,
                                  {static_cast<std::int64_t>(n) / cols, cols});
  t.what = std::string(dtype == fp8a::DType::kBF16 ? "bf16" : "f16") + " random bit patterns";
  return t;
}

// Random 32-bit patterns scaled into the FP8 range and beyond, with NaN/Inf/zeros/subnormals.
std::vector<float> make_bits32(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t r = rng();
    switch (r % 4) {
      case 0: v[i] = fp8a::bits_float(rng()); break;  // anything, NaN/Inf included
      case 1: v[i] = fp8a::bits_float(rng() & 0x807FFFFFu); break;  // float subnormals
      case 2: v[i] = 0.0f; break;
      default: v[i] = std::ldexp(static_cast<float>(static_cast<std::int32_t>(rng())) / 2147483648.0f,
                                  static_cast<int>(r % 64) - 32);
    }
  }
  return v;
}

// Every recipe kind, in both orientations (the backend evaluates either, whatever the role), for
// activations (1x128 blocks) and weights (128x128), E4M3 and E5M2; per-tensor recipes also with
// given scales, normal, huge and tiny.
std::vector<fp8a::Candidate> all_candidates() {
  const auto recipes = fp8a::parse_recipe_list(fp8a::default_recipe_list() +
                                               ",current:pow2,current:eps=1000,block:2d");
  const float given_scales[] = {1.0f, 3.0f, 0x1p100f, 0x1p-120f, FLT_MAX};
  std::vector<fp8a::Candidate> out;
  for (const auto& r : recipes)
    for (auto role : {fp8a::Role::kActivation, fp8a::Role::kWeight})
      for (auto o : {fp8a::Orientation::kRowwise, fp8a::Orientation::kColumnwise})
        for (auto f : {fp8a::Fp8Format::kE4M3, fp8a::Fp8Format::kE5M2}) {
          fp8a::Candidate c{r, f, role, o};
          if (!fp8a::is_per_tensor(r.kind)) {
            out.push_back(c);
            continue;
          }
          if (r.kind == fp8a::RecipeKind::kPerTensorCurrent) out.push_back(c);  // from the amax
          if (role != fp8a::Role::kActivation || o != fp8a::Orientation::kRowwise) continue;
          for (float s : given_scales) {
            c.given_scale = s;
            out.push_back(c);
          }
        }
  return out;
}

// Appends the bytes of each field (not of the structs: their padding is indeterminate).
template <class T>
void put(std::vector<unsigned char>* out, const T& v) {
  const auto* p = reinterpret_cast<const unsigned char*>(&v);
  out->insert(out->end(), p, p + sizeof v);
}

std::vector<unsigned char> stats_bytes(const fp8a::TensorStats& s) {
  std::vector<unsigned char> b;
  put(&b, s.numel), put(&b, s.nan_count), put(&b, s.inf_count), put(&b, s.zero_count);
  put(&b, s.amax), put(&b, s.amax_finite), put(&b, s.amin_nonzero), put(&b, s.sum_sq);
  return b;
}

std::vector<unsigned char> result_bytes(const fp8a::CandidateResult& r) {
  std::vector<unsigned char> b;
  put(&b, r.applicability.ok);
  const auto& m = r.metrics;
  put(&b, m.scale), put(&b, m.scale_inv), put(&b, m.scale_inv_min), put(&b, m.scale_inv_max);
  const auto& s = m.sums;
  put(&b, s.underflow_count), put(&b, s.overflow_count), put(&b, s.saturated_count);
  put(&b, s.sum_sq_err), put(&b, s.sum_x_deq), put(&b, s.sum_deq_sq), put(&b, s.sum_sq_underflow);
  put(&b, m.mse), put(&b, m.rel_mse), put(&b, m.sqnr_db), put(&b, m.cos);
  put(&b, m.underflow_pct), put(&b, m.overflow_pct), put(&b, m.saturated_pct);
  put(&b, m.underflow_energy_pct);
  return b;
}

bool same_bytes(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// The tensors: odd shapes (1 element; widths and lengths not multiples of 4, 8, 16 or 128; one
// over two chunks) times the fill cases, scaled down and up, as F32 and BF16, plus random bits.
std::vector<OwnedTensor> awkward_tensors() {
  const std::vector<std::vector<std::int64_t>> shapes = {{1, 1}, {1, 17}, {5, 160}, {3, 129},
                                                         {217, 256}, {2, 5, 3, 33}, {520, 131}};
  std::vector<OwnedTensor> out;
  std::uint32_t seed = 1;
  for (const auto& shape : shapes) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    for (auto fill : fp8a::testing::kFills) {
      const auto x = fp8a::testing::make_fill(static_cast<std::size_t>(n), fill, seed++);
      // Scaled copies for the smaller shapes (the scale is what moves values across FP8's range).
      for (float factor : {1.0f, 0x1p-60f, 0x1p60f}) {
        if (factor != 1.0f && n > 20000) continue;
        std::vector<float> scaled = x;
        for (float& v : scaled) v *= factor;
        const std::string what = std::string(fp8a::testing::fill_name(fill)) + " x " +
                                 std::to_string(factor) + " [" + std::to_string(n) + " elements]";
        out.push_back(make_tensor(scaled, fp8a::DType::kF32, shape, "f32 " + what));
        if (factor == 1.0f) out.push_back(make_tensor(scaled, fp8a::DType::kBF16, shape, "bf16 " + what));
      }
    }
    out.push_back(make_tensor(make_bits32(static_cast<std::size_t>(n), seed++), fp8a::DType::kF32,
                              shape, "f32 random bit patterns [" + std::to_string(n) + " elements]"));
  }
  for (auto dtype : {fp8a::DType::kBF16, fp8a::DType::kF16})
    out.push_back(make_bits16(520 * 131, dtype, seed++, 131));
  return out;
}

}  // namespace

TEST_CASE("every CPU path gives the baseline's bits for every recipe, orientation and awkward tensor") {
  const auto candidates = all_candidates();
  const auto tensors = awkward_tensors();
  const fp8a::CpuBackend baseline(CpuIsa::kBaseline);
  std::vector<fp8a::TensorEvaluation> want;
  for (const auto& t : tensors) want.push_back(baseline.evaluate(candidates, t.view));
  for (CpuIsa isa : {CpuIsa::kV3, CpuIsa::kV4}) {
    if (!fp8a::cpu_isa_supported(isa)) {
      MESSAGE("skipped: this CPU lacks the " << fp8a::cpu_isa_label(isa) << " path (x86-64-"
                                             << fp8a::cpu_isa_name(isa) << ")");
      continue;
    }
    const fp8a::CpuBackend backend(isa);
    std::size_t compared = 0, failures = 0;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const auto got = backend.evaluate(candidates, tensors[i].view);
      INFO("path " << fp8a::cpu_isa_name(isa) << ", tensor " << tensors[i].what);
      CHECK(same_bytes(stats_bytes(got.stats), stats_bytes(want[i].stats)));
      REQUIRE(got.results.size() == candidates.size());
      for (std::size_t j = 0; j < candidates.size(); ++j) {
        ++compared;
        if (same_bytes(result_bytes(got.results[j]), result_bytes(want[i].results[j]))) continue;
        ++failures;
        const auto& c = candidates[j];
        const std::string which = c.recipe.spec() + " " + fp8a::kFp8Traits[static_cast<int>(c.format)].name +
                                  " " + fp8a::role_name(c.role) + " " + fp8a::orientation_name(c.orientation) +
                                  " given_scale " + std::to_string(c.given_scale);
        FAIL_CHECK("differs: " << which);
        if (failures > 20) return;
      }
      // Standalone statistics pass and fake quantisation on this path as well.
      CHECK(same_bytes(stats_bytes(fp8a::compute_tensor_stats(tensors[i].view, isa)),
                       stats_bytes(want[i].stats)));
    }
    MESSAGE(fp8a::cpu_isa_name(isa) << ": " << compared << " evaluations bit-identical to baseline");
  }
}

TEST_CASE("the sums are float64 chains in index order within a chunk, chunks merged in order") {
  // The order the baseline had before the paths existed (Eigen 3.4's unvectorised sum()), so its
  // numbers did not change. Reference: the sum written out, over a tensor of three chunks.
  const std::int64_t cols = 300, rows = 3 * fp8a::rows_per_chunk(cols) - 7;
  auto x = fp8a::testing::make_fill(static_cast<std::size_t>(rows * cols), fp8a::testing::Fill::kWide, 77);
  x[5] = NAN;
  x[900] = -INFINITY;
  const auto t = make_tensor(x, fp8a::DType::kF32, {rows, cols}, "wide");
  const std::int64_t chunk = fp8a::rows_per_chunk(cols) * cols;
  double want = 0.0;
  for (std::int64_t c0 = 0; c0 < rows * cols; c0 += chunk) {
    double part = 0.0;
    for (std::int64_t i = c0; i < std::min(rows * cols, c0 + chunk); ++i)
      if (std::isfinite(x[i])) part += static_cast<double>(x[i]) * x[i];
    want += part;
  }
  for (CpuIsa isa : fp8a::supported_cpu_isas()) {
    INFO("path " << fp8a::cpu_isa_name(isa));
    const double got = fp8a::compute_tensor_stats(t.view, isa).sum_sq;
    CHECK(std::memcmp(&got, &want, sizeof got) == 0);
  }
}

TEST_CASE("FP8A_CPU_ISA values and the CPU's paths") {
  CHECK(fp8a::parse_cpu_isa("baseline", "FP8A_CPU_ISA") == CpuIsa::kBaseline);
  CHECK_THROWS_WITH_AS(fp8a::parse_cpu_isa("avx512", "FP8A_CPU_ISA"),
                       "[fp8a.usage.227] FP8A_CPU_ISA='avx512': expected baseline, v3 or v4",
                       fp8a::Error);
  CHECK_THROWS_WITH_AS(fp8a::parse_cpu_isa("v5", "FP8A_CPU_ISA"),
                       "[fp8a.usage.227] FP8A_CPU_ISA='v5': expected baseline, v3 or v4",
                       fp8a::Error);
  CHECK(fp8a::supported_cpu_isas().front() == CpuIsa::kBaseline);
  for (CpuIsa isa : {CpuIsa::kV3, CpuIsa::kV4}) {
    if (fp8a::cpu_isa_supported(isa)) {
      CHECK(fp8a::parse_cpu_isa(fp8a::cpu_isa_name(isa), "FP8A_CPU_ISA") == isa);
      const std::string device = fp8a::CpuBackend(isa).device();
      CHECK(device.ends_with(" threads (oneTBB), " + std::string(fp8a::cpu_isa_label(isa))));
    } else {
      std::string message;
      try {
        (void)fp8a::CpuBackend{isa};
      } catch (const fp8a::Error& e) {
        message = e.what();
      }
      CHECK(message.starts_with("[fp8a.usage.227] CPU path " + std::string(fp8a::cpu_isa_name(isa)) +
                                ": this CPU lacks the "));
    }
  }
}

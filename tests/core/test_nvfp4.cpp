// NVFP4's block quantiser (core/nvfp4.hpp) against a reference written here from TE's rules
// (docs/NVFP4-TE.md §2): E2M1 and E4M3 by searching their value tables for the nearest value
// (ties to the even code), the scales in FP32 one operation at a time.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "core/nvfp4.hpp"

namespace {

using fp8a::Nvfp4BlockRule;

// Nearest of a sorted table of magnitudes, ties to the even index (the even code), saturated at
// the last; the sign kept.
double nearest(const std::vector<double>& table, double x) {
  const double a = std::fabs(x);
  std::size_t best = 0;
  for (std::size_t i = 1; i < table.size(); ++i) {
    const double d = std::fabs(table[i] - a), b = std::fabs(table[best] - a);
    if (d < b || (d == b && i % 2 == 0)) best = i;
  }
  if (a > table.back()) best = table.size() - 1;
  return std::copysign(table[best], x);
}

const std::vector<double> kE2M1 = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

std::vector<double> e4m3_table() {
  std::vector<double> t;
  for (int code = 0; code < 0x7F; ++code) {  // 0x7F is NaN
    const int e = code >> 3, m = code & 7;
    t.push_back(e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1 + m / 8.0) * std::ldexp(1.0, e - 7));
  }
  return t;
}

double e2m1_ref(double x) { return nearest(kE2M1, x); }
double e4m3_ref(double x) {
  static const std::vector<double> t = e4m3_table();
  return nearest(t, x);
}

// The block as TE quantises it, each FP32 operation written out.
float block_ref(const std::vector<float>& x, float s_enc, Nvfp4BlockRule rule, std::vector<double>* codes) {
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const float six = 6.0f, inv_six = 1.0f / six;
  float s;
  if (rule == Nvfp4BlockRule::kScaleFirst) {
    const float m = s_enc * inv_six;
    s = amax * m;
  } else {
    const float d = amax / six;
    s = d * s_enc;
  }
  const auto scale = static_cast<float>(e4m3_ref(std::min(s, FLT_MAX)));
  const float s_dec = 1.0f / s_enc;
  const float prod = scale * s_dec;
  const float factor = std::min(1.0f / prod, FLT_MAX);
  codes->clear();
  for (float v : x) {
    const float scaled = v * factor;
    codes->push_back(e2m1_ref(scaled));
  }
  return scale;
}

}  // namespace

TEST_CASE("E2M1: nearest-even onto 0, 0.5, 1, 1.5, 2, 3, 4, 6, saturating at 6") {
  // The ties of TE's reference quantiser (docs/NVFP4-TE.md §2.4).
  const std::pair<float, float> ties[] = {{0.25f, 0},   {0.75f, 1},   {1.25f, 1}, {1.75f, 2}, {2.5f, 2},
                                          {3.5f, 4},    {5.0f, 4},    {5.01f, 6}, {7.0f, 6},  {1e30f, 6},
                                          {-0.75f, -1}, {-5.5f, -6}, {0.2f, 0},  {0.26f, 0.5f}};
  for (const auto& [x, want] : ties) {
    INFO(x);
    CHECK(fp8a::round_trip_e2m1(x) == want);
  }
  CHECK(fp8a::round_trip_e2m1(INFINITY) == 6.0f);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> exponent(-6, 4);
  for (int i = 0; i < 20000; ++i) {
    const auto x = static_cast<float>(std::exp2(exponent(rng)) * (rng() % 2 ? 1 : -1));
    INFO(x);
    CHECK(fp8a::round_trip_e2m1(x) == e2m1_ref(x));
  }
}

TEST_CASE("NVFP4's per-tensor scale: 2688 / amax, at most FLT_MAX, 1 for 0 and inf") {
  CHECK(fp8a::nvfp4_global_encode_scale(2688.0f) == 1.0f);
  CHECK(fp8a::nvfp4_global_encode_scale(1.0f) == 2688.0f);
  CHECK(fp8a::nvfp4_global_encode_scale(0.0f) == 1.0f);
  CHECK(fp8a::nvfp4_global_encode_scale(INFINITY) == 1.0f);
  CHECK(fp8a::nvfp4_global_encode_scale(1e-40f) == FLT_MAX);
  CHECK(fp8a::nvfp4_global_encode_scale(3.0f) == 2688.0f / 3.0f);
}

TEST_CASE("NVFP4 blocks: scales and codes as TE forms them, both block-scale rules") {
  CHECK(fp8a::nvfp4_block_rule({2, 13}) == Nvfp4BlockRule::kDivideFirst);
  CHECK(fp8a::nvfp4_block_rule({2, 14}) == Nvfp4BlockRule::kScaleFirst);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> spread(-12, 12);
  int rules_differ = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    const float block_gain = std::exp2(spread(rng)), tensor_amax = block_gain * std::exp2(spread(rng) / 3 + 2);
    std::vector<float> x(fp8a::kNvfp4Block);
    for (float& v : x) v = normal(rng) * block_gain;
    if (trial % 50 == 0) x[3] = 0.0f;
    const float s_enc = fp8a::nvfp4_global_encode_scale(tensor_amax);
    float scales[2];
    for (const Nvfp4BlockRule rule : {Nvfp4BlockRule::kDivideFirst, Nvfp4BlockRule::kScaleFirst}) {
      std::vector<double> want;
      const float want_scale = block_ref(x, s_enc, rule, &want);
      std::vector<float> got(x.size());
      const float scale = fp8a::nvfp4_quantize_block(x.data(), static_cast<std::int64_t>(x.size()), 1, s_enc, rule,
                                                     got.data());
      INFO("trial " << trial);
      CHECK(scale == want_scale);
      for (std::size_t i = 0; i < x.size(); ++i) CHECK(got[i] == want[i]);
      scales[rule == Nvfp4BlockRule::kScaleFirst] = scale;
    }
    rules_differ += scales[0] != scales[1];
  }
  // On random data the two FP32 orders (an ulp apart at most) give the same E4M3 scale...
  CHECK(rules_differ == 0);
  // ...but not next to an E4M3 midpoint: block amaxes a few ulps around the amax that lands the
  // scale on one. The release matters there.
  const std::vector<double> e4m3 = e4m3_table();
  for (int trial = 0; trial < 400; ++trial) {
    const float s_enc = fp8a::nvfp4_global_encode_scale(std::exp2(spread(rng)));
    const std::size_t k = 8 + rng() % 100;
    const double mid = (e4m3[k] + e4m3[k + 1]) / 2;
    float amax = static_cast<float>(mid * 6 / s_enc);
    for (int u = 0; u < 4; ++u) amax = std::nextafter(amax, 0.0f);
    for (int u = 0; u < 8; ++u, amax = std::nextafter(amax, INFINITY))
      rules_differ += fp8a::nvfp4_block_scale(amax, s_enc, Nvfp4BlockRule::kDivideFirst) !=
                      fp8a::nvfp4_block_scale(amax, s_enc, Nvfp4BlockRule::kScaleFirst);
  }
  INFO(rules_differ);
  CHECK(rules_differ > 0);
}

TEST_CASE("NVFP4: a zero block, and a block whose scale rounds to 0 under a large tensor amax") {
  const float s_enc = fp8a::nvfp4_global_encode_scale(1e6f);
  std::vector<float> zero(16, 0.0f), codes(16);
  CHECK(fp8a::nvfp4_quantize_block(zero.data(), 16, 1, s_enc, Nvfp4BlockRule::kScaleFirst, codes.data()) == 0.0f);
  for (float c : codes) CHECK(c == 0.0f);
  // amax 1e-3 in a tensor of amax 1e6: the block scale 1e-3 / 6 * 2.688e-3 is below 2^-10, so 0;
  // its nonzero elements saturate to +-6, which the zero scale decodes to 0 (TE does the same).
  std::vector<float> tiny(16, 1e-3f);
  tiny[5] = -1e-3f;
  CHECK(fp8a::nvfp4_quantize_block(tiny.data(), 16, 1, s_enc, Nvfp4BlockRule::kScaleFirst, codes.data()) == 0.0f);
  CHECK(codes[0] == 6.0f);
  CHECK(codes[5] == -6.0f);
  // Strided: the columnwise copy's block runs down a column.
  std::vector<float> m(16 * 3);
  for (int i = 0; i < 16; ++i) m[i * 3 + 1] = static_cast<float>(i) * 0.25f;
  const float s1 = fp8a::nvfp4_global_encode_scale(3.75f);
  const float scale = fp8a::nvfp4_quantize_block(m.data() + 1, 16, 3, s1, Nvfp4BlockRule::kScaleFirst, codes.data());
  CHECK(scale > 0.0f);
  CHECK(codes[15] == 6.0f);  // the block's amax maps to E2M1's largest value
}

// lm-spike's step-3 gradient under NVFP4 reported 28.9 % saturated: blocks whose scale is 0 under
// the spike's level-2 scale, which decode to 0 (flushed). Only a scale that rounds down past E2M1's
// last boundary saturates: E4M3's subnormal scales are coarse (steps of 2^-9).
TEST_CASE("NVFP4 tally: a zero-scale block is flushed, not saturated; a coarse subnormal scale saturates") {
  const float amax = 1e6f;
  const float s_enc = fp8a::nvfp4_global_encode_scale(amax);  // 2688 / 1e6
  // Block 0 holds the amax; block 1's amax 1e-3 scales to 1e-3 / 6 * 2.688e-3 < 2^-10: scale 0.
  // Block 2's amax 6.3215 scales to 6.3215 / 6 * 2.688e-3 = 1.45 * 2^-9, which E4M3 rounds to
  // 2^-9: its largest element lands at 6 * 1.45 = 8.7 E2M1 units, past 7, and clips to 6.
  std::vector<float> x(48, 1.0f), out(48);
  for (int i = 0; i < 16; ++i) x[i] = amax, x[16 + i] = 1e-3f;
  x[32] = 6.3215f;
  fp8a::Nvfp4Tally tally;
  fp8a::nvfp4_quantize_piece(x.data(), 1, 48, fp8a::Nvfp4Copy{}, s_enc, fp8a::nvfp4_decode_factor(amax), {},
                             out.data(), &tally);
  for (int i = 16; i < 32; ++i) CHECK(out[i] == 0.0f);  // flushed: the metrics count underflow
  CHECK(tally.saturated == 1);  // block 2's largest only: 1.0 lands at 1.45 * 6 / 6.3215 = 1.38
  CHECK(tally.overflow == 1);
  const double unit = std::ldexp(1.0, -9) * amax / 2688.0;  // 2^-9 * decode
  CHECK(out[32] == doctest::Approx(6.0 * unit).epsilon(1e-6));  // 4.36, clipped from 6.32
}

TEST_CASE("NVFP4's Hadamard transform: (v * s) H16 / 4, each output rounded to BF16") {
  // H16 by Sylvester's doubling, built here; the signs as TE hard-codes them.
  std::vector<std::vector<int>> h = {{1}};
  while (h.size() < 16) {
    const std::size_t n = h.size();
    std::vector<std::vector<int>> g(2 * n, std::vector<int>(2 * n));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        g[i][j] = g[i][j + n] = g[i + n][j] = h[i][j];
        g[i + n][j + n] = -h[i][j];
      }
    h = g;
  }
  const int signs[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
  const auto bf16 = [](double x) {  // nearest BF16 (8 significant bits), ties to even
    int e = 0;
    const double m = std::frexp(x, &e);
    return std::ldexp(std::nearbyint(std::ldexp(m, 8)), e - 8);
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<float> v(16 * 2);  // stride 2: a column of a row-major [16, 2] tile
    for (float& x : v) x = fp8a::bf16_to_float(fp8a::float_to_bf16(normal(rng) * std::exp2(float(trial % 20 - 10))));
    float out[16];
    fp8a::nvfp4_rht16(v.data(), 2, out);
    for (int j = 0; j < 16; ++j) {
      double want = 0;
      for (int i = 0; i < 16; ++i) want += static_cast<double>(v[2 * i]) * signs[i] * h[i][j];
      INFO("trial " << trial << ", output " << j);
      CHECK(out[j] == bf16(want / 4));
    }
  }
  // A spike spreads over the block: e_0 becomes 0.25 everywhere, so a block outlier no longer
  // sets the whole block's scale alone.
  float e0[16] = {1}, out[16];
  fp8a::nvfp4_rht16(e0, 1, out);
  for (float o : out) CHECK(o == 0.25f);
}

TEST_CASE("NVFP4's stochastic rounding: the grid neighbours only, unbiased over the 256 dithers") {
  for (const float x : {0.3f, 1.1f, 1.9f, 2.4f, 3.75f, 4.5f, 5.9f, -0.8f, -3.3f, 0.0f, 6.0f}) {
    INFO(x);
    double mean = 0;
    float lo = 6, hi = -6;
    for (int r = 0; r < 256; ++r) {
      const float q = fp8a::stochastic_round_e2m1(x, static_cast<std::uint8_t>(r));
      mean += q / 256.0;
      lo = std::min(lo, q);
      hi = std::max(hi, q);
    }
    // Every draw is one of the two grid values around x; their mean is x to the dither's 1/256.
    CHECK(hi - lo <= (std::fabs(x) < 2 ? 0.5f : std::fabs(x) < 4 ? 1.0f : 2.0f));
    CHECK(lo <= x);
    CHECK(hi >= x);
    const double step = std::fabs(x) < 2 ? 0.5 : std::fabs(x) < 4 ? 1.0 : 2.0;
    CHECK(std::fabs(mean - x) < step / 256);  // the 8-bit dither's bias, below one 256th of a step
  }
  CHECK(fp8a::stochastic_round_e2m1(7.0f, 255) == 6.0f);  // saturates
}

namespace {

// A [rows, cols] tensor of lognormal magnitudes with a few outliers, as BF16 values.
std::vector<float> tensor(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> t(static_cast<std::size_t>(rows * cols));
  for (float& v : t) v = fp8a::bf16_to_float(fp8a::float_to_bf16(normal(rng) * std::exp(normal(rng))));
  for (int k = 0; k < 5; ++k) t[rng() % t.size()] *= 64.0f;
  return t;
}

// The reference decode of one block of values (already transformed where the copy transforms):
// block_ref's codes times its scale times the decode factor, amax / 2688 rounded to FP32.
double decode_ref(float amax) { return static_cast<float>(static_cast<double>(amax) / 2688.0); }
void decode_block_ref(const std::vector<float>& block, float amax, Nvfp4BlockRule rule, std::vector<double>* out) {
  std::vector<double> codes;
  const float scale = block_ref(block, fp8a::nvfp4_global_encode_scale(amax), rule, &codes);
  out->clear();
  for (double c : codes) out->push_back(static_cast<float>(c * scale * decode_ref(amax)));
}

}  // namespace

TEST_CASE("NVFP4 tensor copies: rowwise and columnwise 1x16 blocks, 16x16 tiles, partial blocks") {
  const std::int64_t rows = 40, cols = 36;  // partial blocks both ways
  const std::vector<float> x = tensor(rows, cols, 3);
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  for (const bool columnwise : {false, true}) {
    INFO((columnwise ? "columnwise" : "rowwise"));
    std::vector<float> got(x.size());
    fp8a::Nvfp4Copy copy;
    copy.columnwise = columnwise;
    CHECK(fp8a::nvfp4_fake_quantize(x.data(), rows, cols, copy, got.data()) == amax);
    const std::int64_t lines = columnwise ? cols : rows, length = columnwise ? rows : cols;
    for (std::int64_t l = 0; l < lines; ++l)
      for (std::int64_t b = 0; b < length; b += 16) {
        std::vector<float> block;
        std::vector<std::int64_t> at;
        for (std::int64_t k = b; k < std::min(length, b + 16); ++k) {
          at.push_back(columnwise ? k * cols + l : l * cols + k);
          block.push_back(x[static_cast<std::size_t>(at.back())]);
        }
        std::vector<double> want;
        decode_block_ref(block, amax, Nvfp4BlockRule::kScaleFirst, &want);
        for (std::size_t k = 0; k < at.size(); ++k) CHECK(got[static_cast<std::size_t>(at[k])] == want[k]);
      }
  }
  // 16x16 tiles: one scale per tile, and the copy is the same read either way (W and W^T agree).
  std::vector<float> rows_2d(x.size()), cols_2d(x.size());
  fp8a::Nvfp4Copy tile;
  tile.two_d = true;
  fp8a::nvfp4_fake_quantize(x.data(), rows, cols, tile, rows_2d.data());
  tile.columnwise = true;
  fp8a::nvfp4_fake_quantize(x.data(), rows, cols, tile, cols_2d.data());
  CHECK(rows_2d == cols_2d);
  std::vector<float> tile0;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) tile0.push_back(x[static_cast<std::size_t>(r * cols + c)]);
  std::vector<float> first(tile0.begin(), tile0.begin() + 16);
  float tmax = 0;
  for (float v : tile0) tmax = std::max(tmax, std::fabs(v));
  // The first row of tile 0 is coded with the tile's scale: the same as a block holding the
  // tile's largest value.
  const float s_enc = fp8a::nvfp4_global_encode_scale(amax);
  const float scale = fp8a::nvfp4_block_scale(tmax, s_enc, Nvfp4BlockRule::kScaleFirst);
  const float factor = fp8a::nvfp4_element_factor(scale, s_enc);
  for (int c = 0; c < 16; ++c)
    CHECK(rows_2d[static_cast<std::size_t>(c)] ==
          static_cast<float>(e2m1_ref(first[static_cast<std::size_t>(c)] * factor) * scale * decode_ref(amax)));
}

TEST_CASE("NVFP4 with the Hadamard transform: quantised in the transformed domain, decoded back") {
  const std::int64_t rows = 64, cols = 8;
  const std::vector<float> x = tensor(rows, cols, 9);
  fp8a::Nvfp4Copy copy;
  copy.columnwise = true;  // wgrad's copy: 16 tokens down each column
  copy.rht = true;
  std::vector<float> got(x.size());
  const float amax = fp8a::nvfp4_fake_quantize(x.data(), rows, cols, copy, got.data());
  // The reference: the transform by a matrix built here, BF16 outputs, the amax over them, each
  // block decoded, the transform undone in double.
  const int signs[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};
  const auto h = [](int i, int j) { return __builtin_popcount(static_cast<unsigned>(i & j)) % 2 ? -1 : 1; };
  std::vector<float> t(x.size());
  for (std::int64_t c = 0; c < cols; ++c)
    for (std::int64_t b = 0; b < rows; b += 16)
      for (int j = 0; j < 16; ++j) {
        double s = 0;
        for (int i = 0; i < 16; ++i) s += static_cast<double>(x[static_cast<std::size_t>((b + i) * cols + c)]) * signs[i] * h(i, j);
        t[static_cast<std::size_t>((b + j) * cols + c)] = fp8a::bf16_to_float(fp8a::float_to_bf16(static_cast<float>(s / 4)));
      }
  float tmax = 0;
  for (float v : t) tmax = std::max(tmax, std::fabs(v));
  CHECK(amax == tmax);
  for (std::int64_t c = 0; c < cols; ++c)
    for (std::int64_t b = 0; b < rows; b += 16) {
      std::vector<float> block;
      for (int i = 0; i < 16; ++i) block.push_back(t[static_cast<std::size_t>((b + i) * cols + c)]);
      std::vector<double> q;
      decode_block_ref(block, tmax, Nvfp4BlockRule::kScaleFirst, &q);
      for (int j = 0; j < 16; ++j) {
        double back = 0;
        for (int i = 0; i < 16; ++i) back += q[static_cast<std::size_t>(i)] * h(i, j);
        INFO("column " << c << ", row " << b + j);
        CHECK(got[static_cast<std::size_t>((b + j) * cols + c)] == static_cast<float>(back / 4 * signs[j]));
      }
    }
}

TEST_CASE("NVFP4 stochastic rounding: reproducible from its seed, another seed draws otherwise") {
  const std::vector<float> x = tensor(32, 32, 4);
  fp8a::Nvfp4Copy copy;
  copy.stochastic = true;
  copy.seed = 42;
  std::vector<float> a(x.size()), b(x.size()), c(x.size()), rn(x.size());
  fp8a::nvfp4_fake_quantize(x.data(), 32, 32, copy, a.data());
  fp8a::nvfp4_fake_quantize(x.data(), 32, 32, copy, b.data());
  CHECK(a == b);
  copy.seed = 43;
  fp8a::nvfp4_fake_quantize(x.data(), 32, 32, copy, c.data());
  CHECK(a != c);
  // Unbiased where nearest rounding is not: over many seeds the mean error shrinks below RN's.
  copy.stochastic = false;
  fp8a::nvfp4_fake_quantize(x.data(), 32, 32, copy, rn.data());
  std::vector<double> mean(x.size(), 0.0);
  copy.stochastic = true;
  for (std::uint64_t s = 0; s < 64; ++s) {
    copy.seed = 1000 + s;
    fp8a::nvfp4_fake_quantize(x.data(), 32, 32, copy, c.data());
    for (std::size_t i = 0; i < x.size(); ++i) mean[i] += c[i] / 64.0;
  }
  double bias_sr = 0, bias_rn = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    bias_sr += std::fabs(mean[i] - x[i]);
    bias_rn += std::fabs(rn[i] - x[i]);
  }
  CHECK(bias_sr < 0.5 * bias_rn);
}

// What lets the BF16 GEMM path serve NVFP4 (issue 39): every E2M1 value times every finite E4M3
// scale is exactly a BF16 value (at most 2 x 4 significant bits, within BF16's exponent range),
// so a BF16 x BF16 product with FP32 accumulation forms the sums TE's FP4 GEMM forms.
TEST_CASE("NVFP4: E2M1 value x E4M3 scale is exactly a BF16 value, for every pair") {
  int pairs = 0;
  for (const double e : kE2M1)
    for (const double s : e4m3_table()) {
      const auto v = static_cast<float>(e * s);
      CHECK(static_cast<double>(v) == e * s);
      CHECK(fp8a::bf16_to_float(fp8a::float_to_bf16(v)) == v);
      ++pairs;
    }
  CHECK(pairs == 8 * 127);
}

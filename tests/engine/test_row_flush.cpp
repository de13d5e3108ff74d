// Which rows a cast flushes (engine/row_flush.hpp) against a reference written here: each element
// cast by table search (support/fp8_ref.hpp) under a scale computed here from TE's definitions
// (current scaling 448 / amax; Float8BlockScaling's power-of-two 1x128 scales, a columnwise copy's
// blocks running down 128 rows of one column), and a row lost when its flushed elements carry more
// than half its energy.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "engine/quant_spec.hpp"
#include "engine/row_flush.hpp"
#include "support/fp8_ref.hpp"

namespace {

using namespace fp8a;

TensorView view_of(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
  return make_tensor_view(reinterpret_cast<const std::byte*>(x.data()), DType::kF32, {rows, cols});
}

// Rows whose elements flushed under E4M3 at scale(r, c) carry more than half their energy.
std::int64_t lost_rows_ref(const std::vector<float>& x, std::int64_t rows, std::int64_t cols,
                           const std::function<double(std::int64_t, std::int64_t)>& scale) {
  std::int64_t lost = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double energy = 0, flushed = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = x[static_cast<std::size_t>(r * cols + c)];
      if (!std::isfinite(v)) continue;
      energy += double(v) * v;
      const unsigned code = ref::encode_ref(ref::kE4M3, static_cast<float>(v * scale(r, c)));
      if (v != 0.0f && ref::decode_ref(ref::kE4M3, code) == 0.0) flushed += double(v) * v;
    }
    if (flushed > energy / 2) ++lost;
  }
  return lost;
}

RowFlush cast(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, const char* recipe,
              Orientation orientation) {
  const TensorView v = view_of(x, rows, cols);
  TensorStats stats;
  stats.amax = 0;
  for (float f : x)
    if (!std::isnan(f)) stats.amax = std::fmax(stats.amax, std::fabs(f));
  QuantSpec spec;
  REQUIRE(make_quant_spec({parse_recipe(recipe), Fp8Format::kE4M3, Role::kActivation, orientation}, stats, v.dtype,
                          &spec)
              .ok);
  return row_flush(v, spec);
}

}  // namespace

TEST_CASE("row_flush: rows that lose over half their energy, worked by hand") {
  // amax 448: current scaling's scale is 1, and E4M3 flushes |x| <= 2^-10 (half its least
  // subnormal 2^-9; the tie rounds to 0, the even code). Row 0 the outlier; row 1 flushes whole;
  // row 2 keeps its 1.0 and loses 2e-8 of its energy; row 3 flushes whole, its 2t = 2^-10 by the
  // tie; row 4 zeros (no energy: not lost); row 5 a NaN, left out, and t, all its energy.
  const float t = std::ldexp(1.0f, -11), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {
      448, 448, 448, 448,  //
      t,   -t,  t,   t,    // every element flushes
      1,   1e-4f, 1e-4f, 0,  // 1e-8 + 1e-8 of 1.00000002 flushes
      t,   t,   t,   2 * t,  // every element flushes
      0,   0,   0,   0,    //
      nan, t,   0,   0,    //
  };
  const RowFlush f = cast(x, 6, 4, "current", Orientation::kRowwise);
  CHECK(f.rows == 6);
  CHECK(f.lost_rows == 3);  // rows 1, 3, 5
  CHECK(f.pct() == doctest::Approx(50.0));
  CHECK(lost_rows_ref(x, 6, 4, [](std::int64_t, std::int64_t) { return 1.0; }) == 3);
}

TEST_CASE("row_flush: per-tensor current scaling against the reference") {
  // 300 tokens x 40 channels, |x| = 2^u with u over [b, b + 4] by a fixed sequence, each token's b
  // from -20 to -8 (r mod 13), and token 7 an outlier 4096: the flush threshold 2^-10 / (448 /
  // 4096), about 2^-6.8, passes below some tokens, through others and above the rest.
  const std::int64_t rows = 300, cols = 40;
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  std::uint32_t s = 12345;
  for (std::size_t i = 0; i < x.size(); ++i) {
    s = s * 1664525u + 1013904223u;
    const std::int64_t r = static_cast<std::int64_t>(i) / cols;
    const double u = -20.0 + static_cast<double>(r % 13) + 4.0 * ((s >> 8) & 0xFFFF) / 65536.0;
    x[i] = static_cast<float>(((s >> 30) & 1 ? -1 : 1) * std::exp2(u));
  }
  for (std::int64_t c = 0; c < cols; ++c) x[static_cast<std::size_t>(7 * cols + c)] = 4096.0f;
  const double scale = 448.0 / 4096.0;
  const std::int64_t want = lost_rows_ref(x, rows, cols, [&](std::int64_t, std::int64_t) { return scale; });
  CHECK(want > rows / 10);  // the case flushes some rows and keeps others
  CHECK(want < rows * 9 / 10);
  const RowFlush f = cast(x, rows, cols, "current", Orientation::kRowwise);
  CHECK(f.rows == rows);
  CHECK(f.lost_rows == want);
}

TEST_CASE("row_flush: a columnwise block copy loses the tokens that share a 128-token block with an outlier") {
  // 256 tokens x 3 channels of 1.0 (the wgrad copy of X: 1x128 blocks down the tokens); token 0 is
  // 2^20. Its blocks' power-of-two scale 2^ilogb(448 / 2^20) = 2^-12 sends 1.0 to 2^-12 <= 2^-10:
  // tokens 1-127 flush whole; tokens 128-255 share no block with it (scale 2^8: kept).
  const std::int64_t rows = 256, cols = 3;
  std::vector<float> x(static_cast<std::size_t>(rows * cols), 1.0f);
  for (std::int64_t c = 0; c < cols; ++c) x[static_cast<std::size_t>(c)] = std::ldexp(1.0f, 20);
  const auto block_scale = [&](std::int64_t r, std::int64_t c) {
    float amax = 0;
    for (std::int64_t k = r / 128 * 128; k < r / 128 * 128 + 128; ++k)
      amax = std::fmax(amax, std::fabs(x[static_cast<std::size_t>(k * cols + c)]));
    return std::ldexp(1.0, std::ilogb(448.0f / amax));
  };
  CHECK(lost_rows_ref(x, rows, cols, block_scale) == 127);
  const RowFlush col = cast(x, rows, cols, "block", Orientation::kColumnwise);
  CHECK(col.rows == 256);
  CHECK(col.lost_rows == 127);
  // The rowwise copy's blocks run along each token: nothing flushes.
  CHECK(cast(x, rows, cols, "block", Orientation::kRowwise).lost_rows == 0);
  // Shards merge.
  RowFlush both = col;
  both.merge(col);
  CHECK(both.rows == 512);
  CHECK(both.lost_rows == 254);
}

// What clipping a tensor at a threshold costs (engine/clip_damage.hpp): hand-built tensors whose
// sums are worked out in the comments.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "engine/clip_damage.hpp"

namespace {

fp8a::TensorView view_of(const std::vector<float>& x, std::vector<std::int64_t> shape) {
  return fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(x.data()), fp8a::DType::kF32, std::move(shape));
}

}  // namespace

TEST_CASE("clip_damage: counts, squared error and energy at several thresholds; shards merge") {
  // |x| = 1, 2, 3, 4 (signs mixed), a NaN and an inf left out: energy 1 + 4 + 9 + 16 = 30.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> a = {1.0f, -2.0f, nan, 3.0f, -4.0f, inf};
  const double thresholds[] = {2.5, 4.0, 0.5};
  const auto d = fp8a::clip_damage(view_of(a, {2, 3}), thresholds);
  REQUIRE(d.size() == 3);
  for (const auto& x : d) {
    CHECK(x.finite == 4);
    CHECK(x.energy == 30.0);
  }
  // At 2.5: 3 and 4 clip, (0.5^2 + 1.5^2) = 2.5.
  CHECK(d[0].clipped == 2);
  CHECK(d[0].clipped_sq_err == 2.5);
  CHECK(d[0].clipped_pct() == 50.0);
  CHECK(d[0].clipped_rel_mse() == 2.5 / 30.0);
  // At the amax nothing clips (strictly above only).
  CHECK(d[1].clipped == 0);
  CHECK(d[1].clipped_sq_err == 0.0);
  // At 0.5 all four: 0.25 + 2.25 + 6.25 + 12.25 = 21.
  CHECK(d[2].clipped == 4);
  CHECK(d[2].clipped_sq_err == 21.0);
  // A second shard {5}: at 2.5 one more clip of 2.5^2; energy 30 + 25.
  const std::vector<float> b = {5.0f};
  fp8a::ClipDamage m = d[0];
  m.merge(fp8a::clip_damage(view_of(b, {1}), thresholds).front());
  CHECK(m.finite == 5);
  CHECK(m.clipped == 3);
  CHECK(m.clipped_sq_err == 2.5 + 6.25);
  CHECK(m.energy == 55.0);
  // Nothing finite: every share 0.
  const fp8a::ClipDamage none;
  CHECK(none.clipped_pct() == 0.0);
  CHECK(none.clipped_rel_mse() == 0.0);
}

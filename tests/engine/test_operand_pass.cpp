// measure_operands (engine/operand_pass.hpp): hand-built captures whose histogram and clipping
// sums are worked out in the comments; each shard read is released once.
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "engine/operand_pass.hpp"

namespace {

// Counts the releases of the shards it backs.
struct CountingStorage : fp8a::TensorStorage {
  mutable int releases = 0;
  void release(const std::byte*, std::size_t) const override { ++releases; }
};

fp8a::CapturedTensor shard(const fp8a::CaptureKey& key, int rank, const std::vector<float>& x,
                           const CountingStorage& storage) {
  fp8a::CapturedTensor t;
  t.key = key;
  t.rank = rank;
  t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(x.data()), fp8a::DType::kF32,
                                  {1, static_cast<std::int64_t>(x.size())});
  t.view.storage = &storage;
  return t;
}

}  // namespace

TEST_CASE("measure_operands: every shard of a key in one read, histogram and clipping together") {
  const fp8a::CaptureKey a{3, "layers.0.mlp.linear_fc1", fp8a::Role::kActivation};
  const fp8a::CaptureKey b{3, "layers.0.mlp.linear_fc1", fp8a::Role::kWeight};
  const fp8a::CaptureKey missing{4, "layers.0.mlp.linear_fc1", fp8a::Role::kActivation};
  // a: shards {1, -2} and {3, 0}; b: {0.5, 4}.
  const std::vector<float> a0 = {1.0f, -2.0f}, a1 = {3.0f, 0.0f}, b0 = {0.5f, 4.0f};
  CountingStorage sa, sb;
  fp8a::CaptureSet captures;
  captures.tensors = {shard(a, 0, a0, sa), shard(a, 1, a1, sa), shard(b, 0, b0, sb)};
  const std::vector<fp8a::OperandPass> passes = {
      {a, true, {1.5, 2.5}}, {b, false, {1.0}}, {missing, true, {1.0}}};
  const auto m = fp8a::measure_operands(captures, passes);
  REQUIRE(m.size() == 3);

  // a's histogram over both shards: |x| 1 in bin 0, 2 and 3 in bin 1, one zero.
  CHECK(m[0].histogram.numel == 4);
  CHECK(m[0].histogram.zeros == 1);
  CHECK(m[0].histogram.min_exp == 0);
  CHECK(m[0].histogram.counts == std::vector<std::int64_t>{1, 2});
  // a at 1.5: 2 and 3 clip, 0.5^2 + 1.5^2 = 2.5; at 2.5: 3 clips, 0.25. Energy 1 + 4 + 9 = 14.
  REQUIRE(m[0].damage.size() == 2);
  CHECK(m[0].damage[0].finite == 4);
  CHECK(m[0].damage[0].energy == 14.0);
  CHECK(m[0].damage[0].clipped == 2);
  CHECK(m[0].damage[0].clipped_sq_err == 2.5);
  CHECK(m[0].damage[1].clipped == 1);
  CHECK(m[0].damage[1].clipped_sq_err == 0.25);
  // b: no histogram asked; at 1.0 only 4 clips, 3^2 = 9.
  CHECK(m[1].histogram.numel == 0);
  REQUIRE(m[1].damage.size() == 1);
  CHECK(m[1].damage[0].clipped == 1);
  CHECK(m[1].damage[0].clipped_sq_err == 9.0);
  CHECK(m[1].damage[0].energy == 16.25);
  // A key with no tensor measures nothing.
  CHECK(m[2].histogram.numel == 0);
  REQUIRE(m[2].damage.size() == 1);
  CHECK(m[2].damage[0].finite == 0);
  // One release per shard: histogram and clipping share the read.
  CHECK(sa.releases == 2);
  CHECK(sb.releases == 1);
}

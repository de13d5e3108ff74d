// Every pass over tensor bytes tells the tensor's storage when it is done with them
// (TensorStorage::release), so a mapped capture's resident set does not grow with its size: the
// evaluation releases each tensor (each rank shard) once its group is evaluated, the GEMM pass
// each operand once its layer job is done, the pairing each compared shard.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu_backend.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_pairing.hpp"
#include "engine/run.hpp"

namespace {

// Counts the releases of each byte range.
class CountingStorage final : public fp8a::TensorStorage {
 public:
  void release(const std::byte* data, std::size_t size) const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++count_[{data, size}];
  }
  int count(const fp8a::TensorView& v) const {
    const auto it = count_.find({v.data, v.byte_size()});
    return it == count_.end() ? 0 : it->second;
  }
  std::size_t ranges() const { return count_.size(); }

 private:
  mutable std::mutex mutex_;
  mutable std::map<std::pair<const std::byte*, std::size_t>, int> count_;
};

// Layer "l" at steps 1 and 2 (X [8,32], W [16,32], dY [8,16]), and at step 1 a layer "tp" whose X
// is captured as two identical rank shards (column-parallel).
struct Capture {
  std::vector<std::vector<float>> data;
  fp8a::CaptureSet set;
};

void build(Capture* c, const fp8a::TensorStorage* storage) {
  c->data.reserve(16);
  auto add = [&](std::int64_t step, const std::string& layer, fp8a::Role role, int rank,
                 std::int64_t rows, std::int64_t cols, float amp) {
    std::vector<float>& d = c->data.emplace_back(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = amp * (static_cast<float>(i % 13) - 6.0f);
    fp8a::CapturedTensor t;
    t.key = {step, layer, role};
    t.rank = rank;
    t.tensor_name = layer + "." + fp8a::role_name(role);
    t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(d.data()), fp8a::DType::kF32,
                                    {rows, cols}, storage);
    c->set.tensors.push_back(t);
  };
  for (std::int64_t step : {1, 2}) {
    add(step, "l", fp8a::Role::kActivation, -1, 8, 32, 1.0f);
    add(step, "l", fp8a::Role::kWeight, -1, 16, 32, 0.1f);
    add(step, "l", fp8a::Role::kGradient, -1, 8, 16, 0.01f);
  }
  for (int rank : {0, 1}) {
    add(1, "tp", fp8a::Role::kActivation, rank, 8, 32, 1.0f);  // the same X on both ranks
    add(1, "tp", fp8a::Role::kWeight, rank, 16, 32, 0.1f * static_cast<float>(rank + 1));
    add(1, "tp", fp8a::Role::kGradient, rank, 8, 16, 0.01f * static_cast<float>(rank + 1));
  }
  std::sort(c->set.tensors.begin(), c->set.tensors.end(),
            [](const fp8a::CapturedTensor& a, const fp8a::CapturedTensor& b) {
              return a.key < b.key || (a.key == b.key && a.rank < b.rank);
            });
}

fp8a::RunConfig config() {
  fp8a::RunConfig c;
  c.recipes = fp8a::parse_recipe_list("delayed,current,mxfp8,bf16");  // delayed: waves by step
  return c;
}

}  // namespace

TEST_CASE("evaluate_captures releases every tensor once, after its group; the rows do not change") {
  CountingStorage storage;
  Capture with, without;
  build(&with, &storage);
  build(&without, nullptr);
  const auto rows = fp8a::evaluate_captures(with.set, config(), fp8a::CpuBackend());
  CHECK(storage.ranges() == with.set.tensors.size());
  for (const auto& t : with.set.tensors) {
    INFO(t.tensor_name << " rank " << t.rank);
    CHECK(storage.count(t.view) == 1);
  }
  const auto reference = fp8a::evaluate_captures(without.set, config(), fp8a::CpuBackend());
  REQUIRE(rows.size() == reference.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].key == reference[i].key);
    CHECK(rows[i].format == reference[i].format);
    CHECK(rows[i].metrics.sums.sum_sq_err == reference[i].metrics.sums.sum_sq_err);
  }
}

TEST_CASE("the pairing releases the shards it compares; the GEMM pass every operand of its jobs") {
  CountingStorage storage;
  Capture c;
  build(&c, &storage);
  std::vector<fp8a::PairingSkip> skipped;
  const auto layers = fp8a::pair_gemm_operands(c.set, &skipped);
  CHECK(skipped.empty());
  REQUIRE(layers.size() == 3);
  for (const auto& t : c.set.tensors) CHECK(storage.count(t.view) == (t.rank >= 0 ? 1 : 0));
  CountingStorage none;
  Capture plain;
  build(&plain, &none);
  const auto rows = fp8a::evaluate_captures(plain.set, config(), fp8a::CpuBackend());
  const auto plain_layers = fp8a::pair_gemm_operands(plain.set, &skipped);
  const auto gemms = fp8a::evaluate_gemm_errors(plain_layers, rows, fp8a::GemmOptions{});
  CHECK(!gemms.empty());
  // Each tensor: once by the evaluation, once by its GEMM job, and the shards once by the pairing.
  for (const auto& t : plain.set.tensors) {
    INFO(t.tensor_name << " step " << t.key.step << " rank " << t.rank);
    CHECK(none.count(t.view) == (t.rank >= 0 ? 3 : 2));
  }
}

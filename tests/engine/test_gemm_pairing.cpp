// Pairing X, W and dY into GEMM layers (engine/gemm_pairing.hpp) on captures built by hand: one
// rank, column-, row- and data-parallel splits with the whole layer's m, n, k, and the layers that
// cannot be paired, skipped with their messages word for word.
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "engine/gemm_pairing.hpp"

namespace {

using fp8a::Gemm;
using fp8a::GemmDims;
using fp8a::Role;
using fp8a::Split;

struct Capture {
  std::deque<std::vector<float>> data;  // the views' storage (a deque: elements never move)
  fp8a::CaptureSet set;

  // A [rows, cols] tensor of `layer` at `step`; equal `seed`s give equal bytes.
  void add(std::int64_t step, const std::string& layer, Role role, int rank, std::int64_t rows,
           std::int64_t cols, int seed) {
    auto& v = data.emplace_back(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(seed) + 0.25f * static_cast<float>(i);
    fp8a::CapturedTensor t;
    t.key = {step, layer, role};
    t.rank = rank;
    t.view = fp8a::make_tensor_view(reinterpret_cast<const std::byte*>(v.data()), fp8a::DType::kF32,
                                    {rows, cols});
    set.tensors.push_back(t);
  }
  // One rank's X [m, k], W [n, k], dY [m, n], with seeds x, w, dy.
  void add_layer(std::int64_t step, const std::string& layer, int rank, std::int64_t m, std::int64_t n,
                 std::int64_t k, int x = 1, int w = 2, int dy = 3) {
    add(step, layer, Role::kActivation, rank, m, k, x);
    add(step, layer, Role::kWeight, rank, n, k, w);
    add(step, layer, Role::kGradient, rank, m, n, dy);
  }
};

// Tensors of one layer in capture order: by role, each role's shards in rank order.
void sort_by_key(Capture* c) {
  std::stable_sort(c->set.tensors.begin(), c->set.tensors.end(),
                   [](const auto& a, const auto& b) { return a.key < b.key; });
}

}  // namespace

TEST_CASE("the operand-use table: which copy of which operand each GEMM consumes") {
  for (int g = 0; g < 3; ++g) CHECK(static_cast<int>(fp8a::kGemmOperandUses[g].gemm) == g);
  const auto& fprop = fp8a::kGemmOperandUses[0];
  CHECK((fprop.a == Role::kActivation && fprop.a_orientation == fp8a::Orientation::kRowwise));
  CHECK((fprop.b == Role::kWeight && fprop.b_orientation == fp8a::Orientation::kRowwise));
  const auto& dgrad = fp8a::kGemmOperandUses[1];
  CHECK((dgrad.a == Role::kGradient && dgrad.a_orientation == fp8a::Orientation::kRowwise));
  CHECK((dgrad.b == Role::kWeight && dgrad.b_orientation == fp8a::Orientation::kColumnwise));
  const auto& wgrad = fp8a::kGemmOperandUses[2];
  CHECK((wgrad.a == Role::kGradient && wgrad.a_orientation == fp8a::Orientation::kColumnwise));
  CHECK((wgrad.b == Role::kActivation && wgrad.b_orientation == fp8a::Orientation::kColumnwise));
}

TEST_CASE("a single-rank layer: its operands, no split, and m, n, k of each GEMM") {
  Capture c;
  c.add_layer(4, "fc1", -1, 6, 5, 3);
  c.add(4, "no_grad", Role::kActivation, -1, 6, 3, 1);  // no W, no dY: left out silently
  c.add(4, "no_grad", Role::kWeight, -1, 5, 3, 2);
  std::vector<fp8a::PairingSkip> skipped;
  const auto layers = fp8a::pair_gemm_operands(c.set, &skipped);
  CHECK(skipped.empty());
  REQUIRE(layers.size() == 1);
  const auto& l = layers[0];
  CHECK(l.step == 4);
  CHECK(l.layer == "fc1");
  CHECK(l.split == Split::kNone);
  REQUIRE(l.ranks.size() == 1);
  CHECK(l.ranks[0][0] == &c.set.tensors[0]);
  CHECK(l.ranks[0][1] == &c.set.tensors[1]);
  CHECK(l.ranks[0][2] == &c.set.tensors[2]);
  CHECK((l.m == 6 && l.n == 5 && l.k == 3));
  CHECK(l.dims(Gemm::kFprop) == GemmDims{6, 5, 3});  // Y [M, N], reduction K
  CHECK(l.dims(Gemm::kDgrad) == GemmDims{6, 3, 5});  // dX [M, K], reduction N
  CHECK(l.dims(Gemm::kWgrad) == GemmDims{5, 3, 6});  // dW [N, K], reduction M
}

TEST_CASE("layers in (step, layer) order, the layer names in plain string order") {
  Capture c;
  c.add_layer(2, "layers.2", -1, 2, 2, 2);
  c.add_layer(2, "layers.10", -1, 2, 2, 2);
  c.add_layer(1, "layers.2", -1, 2, 2, 2);
  const auto layers = fp8a::pair_gemm_operands(c.set, nullptr);
  REQUIRE(layers.size() == 3);
  CHECK((layers[0].step == 1 && layers[0].layer == "layers.2"));
  CHECK((layers[1].step == 2 && layers[1].layer == "layers.10"));
  CHECK((layers[2].step == 2 && layers[2].layer == "layers.2"));
}

TEST_CASE("column-, row- and data-parallel ranks: the split and the whole layer's m, n, k") {
  Capture c;
  // Column-parallel: X [6, 4] the same on both ranks, W [3, 4] and dY [6, 3] each its own slice.
  c.add_layer(1, "col", 0, 6, 3, 4, 1, 10, 20);
  c.add_layer(1, "col", 1, 6, 3, 4, 1, 11, 21);
  // Row-parallel: X [6, 2] and W [5, 2] each a slice of K, dY [6, 5] the same on both.
  c.add_layer(1, "row", 0, 6, 5, 2, 30, 40, 3);
  c.add_layer(1, "row", 1, 6, 5, 2, 31, 41, 3);
  // Data-parallel: W [5, 4] the same, X [3, 4] and dY [3, 5] each rank's own tokens.
  c.add_layer(1, "data", 0, 3, 5, 4, 50, 2, 60);
  c.add_layer(1, "data", 1, 3, 5, 4, 51, 2, 61);
  sort_by_key(&c);
  std::vector<fp8a::PairingSkip> skipped;
  const auto layers = fp8a::pair_gemm_operands(c.set, &skipped);
  CHECK(skipped.empty());
  REQUIRE(layers.size() == 3);  // "col", "data", "row"

  const auto& col = layers[0];
  CHECK(col.layer == "col");
  CHECK(col.split == Split::kColumn);
  REQUIRE(col.ranks.size() == 2);
  CHECK(col.ranks[0][1]->rank == 0);
  CHECK(col.ranks[1][1]->rank == 1);
  CHECK(col.dims(Gemm::kFprop) == GemmDims{6, 6, 4});  // N = 3 + 3
  CHECK(col.dims(Gemm::kDgrad) == GemmDims{6, 4, 6});
  CHECK(col.dims(Gemm::kWgrad) == GemmDims{6, 4, 6});

  const auto& data = layers[1];
  CHECK(data.layer == "data");
  CHECK(data.split == Split::kData);
  CHECK(data.dims(Gemm::kFprop) == GemmDims{6, 5, 4});  // M = 3 + 3
  CHECK(data.dims(Gemm::kWgrad) == GemmDims{5, 4, 6});

  const auto& row = layers[2];
  CHECK(row.layer == "row");
  CHECK(row.split == Split::kRow);
  CHECK(row.dims(Gemm::kFprop) == GemmDims{6, 5, 4});  // K = 2 + 2
  CHECK(row.dims(Gemm::kDgrad) == GemmDims{6, 4, 5});

  CHECK(std::string(fp8a::split_name(Split::kNone)) == "none");
  CHECK(std::string(fp8a::split_name(Split::kColumn)) == "column-parallel");
  CHECK(std::string(fp8a::split_name(Split::kRow)) == "row-parallel");
  CHECK(std::string(fp8a::split_name(Split::kData)) == "data-parallel");
  // The GEMM whose reduction dimension the split cuts sums the ranks' outputs.
  CHECK(fp8a::output_is_sum(Split::kColumn, Gemm::kDgrad));
  CHECK(fp8a::output_is_sum(Split::kRow, Gemm::kFprop));
  CHECK(fp8a::output_is_sum(Split::kData, Gemm::kWgrad));
  for (const Gemm g : {Gemm::kFprop, Gemm::kDgrad, Gemm::kWgrad}) CHECK_FALSE(fp8a::output_is_sum(Split::kNone, g));
  CHECK_FALSE(fp8a::output_is_sum(Split::kColumn, Gemm::kFprop));
  CHECK_FALSE(fp8a::output_is_sum(Split::kRow, Gemm::kWgrad));
  CHECK_FALSE(fp8a::output_is_sum(Split::kData, Gemm::kDgrad));
}

TEST_CASE("layers that cannot be paired are skipped, with their messages word for word") {
  Capture c;
  // One rank, W's K differs from X's.
  c.add(3, "a_shape", Role::kActivation, -1, 4, 2, 1);
  c.add(3, "a_shape", Role::kWeight, -1, 1, 3, 2);
  c.add(3, "a_shape", Role::kGradient, -1, 4, 1, 3);
  // W on 2 ranks, X and dY on 1.
  c.add(3, "b_ranks", Role::kActivation, -1, 4, 2, 1);
  c.add(3, "b_ranks", Role::kWeight, 0, 3, 2, 2);
  c.add(3, "b_ranks", Role::kWeight, 1, 3, 2, 4);
  c.add(3, "b_ranks", Role::kGradient, -1, 4, 6, 3);
  // Sequence parallelism: X split by tokens, W and dY column-parallel; rank 0 already misfits.
  c.add_layer(3, "c_seq", 0, 4, 3, 2, 1, 10, 20);
  c.add_layer(3, "c_seq", 1, 4, 3, 2, 2, 11, 21);
  for (auto& t : c.set.tensors)
    if (t.key.layer == "c_seq" && t.key.role == Role::kActivation)
      t.view = fp8a::make_tensor_view(t.view.data, fp8a::DType::kF32, {2, 2});
  // Two ranks, nothing the same on both: no split.
  c.add_layer(3, "d_none", 0, 4, 3, 2, 1, 10, 20);
  c.add_layer(3, "d_none", 1, 4, 3, 2, 2, 11, 21);
  // Two ranks, everything the same: no split either.
  c.add_layer(3, "e_all", 0, 4, 3, 2);
  c.add_layer(3, "e_all", 1, 4, 3, 2);
  sort_by_key(&c);
  std::vector<fp8a::PairingSkip> skipped;
  CHECK(fp8a::pair_gemm_operands(c.set, &skipped).empty());
  const std::string neither =
      " ranks, but neither column-parallel (the same X on every rank), row-parallel (the same dY) "
      "nor data-parallel (the same W)";
  REQUIRE(skipped.size() == 5);
  CHECK(skipped[0].step == 3);
  CHECK(skipped[3].layer == "d_none");
  std::vector<std::string> lines;
  for (const auto& s : skipped) lines.push_back(s.line);
  CHECK(lines == std::vector<std::string>{
                       "step 3 layer 'a_shape': operand shapes do not fit X [M,K], W [N,K], dY "
                       "[M,N] (X 4x2, W 1x3, dY 4x1)",
                       "step 3 layer 'b_ranks': X, W and dY were captured on different numbers of "
                       "ranks (1, 2, 1)",
                       "step 3 layer 'c_seq': rank 0's shards do not fit X [M,K], W [N,K], dY "
                       "[M,N] (sequence parallelism splits X by tokens: not supported) (X 2x2, W "
                       "3x2, dY 4x3)",
                       "step 3 layer 'd_none': captured as 2" + neither,
                       "step 3 layer 'e_all': captured as 2" + neither,
                   });
  CHECK(fp8a::pair_gemm_operands(c.set, nullptr).empty());  // no list: skipped silently
}

// Work shared out over the ranks of a run (engine/cluster.hpp): the assignment is fixed, balanced
// and gives every unit one owner; a run over N in-process ranks (threads exchanging through
// memory, the MPI exchange's stand-in) gives every rank exactly the rows of one process, with
// each shard evaluated by one rank only, and a checkpoint on rank 0 that holds the whole run.
// The reference is the single-process run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "datasets/synth.hpp"
#include "engine/cluster.hpp"
#include "engine/cpu_backend.hpp"
#include "engine/gemm_error.hpp"
#include "engine/gemm_pairing.hpp"
#include "engine/run.hpp"
#include "engine/unit_codec.hpp"
#include "support/thread_cluster.hpp"
#include "support/unit_stores.hpp"

namespace {

using namespace fp8a;
using fp8a::testing::CountingBackend;
using fp8a::testing::Exchange;
using fp8a::testing::MapStore;
using fp8a::testing::Synth;
using fp8a::testing::ThreadCluster;
using fp8a::testing::load_synth;

// A row's every field that reaches the outputs, floats as bits.
std::string row_bytes(const EvaluationRow& r) {
  ByteWriter w;
  w.str(r.key.layer);
  w.i64(r.key.step);
  w.u8(static_cast<std::uint8_t>(r.key.role));
  write_recipe(w, r.recipe);
  w.u8(static_cast<std::uint8_t>(r.format));
  w.u8(static_cast<std::uint8_t>(r.fp8));
  w.u8(static_cast<std::uint8_t>(r.orientation));
  w.f32(r.current_scale);
  w.f32(r.replay.scale);
  w.u8(static_cast<std::uint8_t>(r.replay.mode));
  w.str(encode_tensor_evaluation({r.stats, {{r.applicability, r.metrics}}}));
  return w.take();
}

std::vector<std::string> all_row_bytes(const std::vector<EvaluationRow>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(row_bytes(r));
  return out;
}

}  // namespace

TEST_CASE("assign_balanced: every unit owned once, fixed, within one unit of balance") {
  const std::vector<std::uint64_t> costs = {5, 1, 9, 9, 2, 7, 3, 3, 0, 8, 4, 6};
  for (int ranks : {1, 2, 3, 5, 12, 20}) {
    INFO(ranks);
    const auto owner = assign_balanced(costs, ranks);
    REQUIRE(owner.size() == costs.size());
    std::vector<std::uint64_t> load(static_cast<std::size_t>(ranks), 0);
    for (std::size_t u = 0; u < costs.size(); ++u) {
      REQUIRE(owner[u] >= 0);
      REQUIRE(owner[u] < ranks);
      load[static_cast<std::size_t>(owner[u])] += costs[u];
    }
    CHECK(std::accumulate(load.begin(), load.end(), std::uint64_t{0}) == 57);
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    CHECK(*hi - *lo <= 9);  // the costliest unit
    CHECK(assign_balanced(costs, ranks) == owner);  // the same every time it is asked
  }
  // Worked by hand, costliest first, each to the less loaded rank (loads after it):
  // 9(u2)->r0 (9), 9(u3)->r1 (9), 8(u9)->r0 (17), 7(u5)->r1 (16), 6(u11)->r1 (22), 5(u0)->r0 (22),
  // 4(u10)->r0 (26), 3(u6)->r1 (25), 3(u7)->r1 (28), 2(u4)->r0 (28), 1(u1)->r0 (29), 0(u8)->r1.
  CHECK(assign_balanced(costs, 2) == std::vector<int>{0, 0, 0, 1, 0, 1, 1, 1, 1, 0, 0, 1});
  // Equal costs: the earlier unit to the lower rank.
  CHECK(assign_balanced(std::vector<std::uint64_t>{4, 4, 4, 4}, 3) == std::vector<int>{0, 1, 2, 0});
  CHECK(assign_balanced(std::vector<std::uint64_t>{}, 3).empty());
}

TEST_CASE("a run over 2 and 3 in-process ranks gives every rank the rows of one process") {
  Synth s;
  load_synth(s, "all");
  RunConfig config;
  config.recipes = parse_recipe_list("current,delayed,block,mxfp8,bf16");  // delayed: one wave a step
  const CountingBackend single_backend;
  const auto single = evaluate_captures(s.captures, config, single_backend);
  const auto layers = pair_gemm_operands(s.captures, nullptr);
  REQUIRE(layers.size() > 2);
  const auto single_gemms = evaluate_gemm_errors(layers, single, GemmOptions{});
  for (int n : {2, 3}) {
    INFO(n, " ranks");
    Exchange x(n);
    std::vector<std::vector<EvaluationRow>> rows(static_cast<std::size_t>(n));
    std::vector<std::vector<GemmRow>> gemms(static_cast<std::size_t>(n));
    std::vector<CountingBackend> backends(static_cast<std::size_t>(n));
    MapStore rank0_store;  // a checkpoint on rank 0 only
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r)
      ranks.emplace_back([&, r] {
        const auto i = static_cast<std::size_t>(r);
        ThreadCluster cluster(&x, r);
        RunContext c;
        c.cluster = &cluster;
        if (r == 0) c.store = &rank0_store;
        rows[i] = evaluate_captures(s.captures, config, backends[i], c);
        gemms[i] = evaluate_gemm_errors(layers, rows[i], GemmOptions{}, c);
      });
    for (auto& t : ranks) t.join();
    int calls = 0;
    for (int r = 0; r < n; ++r) {
      INFO("rank ", r);
      const auto i = static_cast<std::size_t>(r);
      CHECK(all_row_bytes(rows[i]) == all_row_bytes(single));
      CHECK(encode_gemm_rows({gemms[i]}) == encode_gemm_rows({single_gemms}));
      CHECK(backends[i].calls > 0);  // every rank did a share
      calls += backends[i].calls;
    }
    CHECK(calls == single_backend.calls);  // each shard evaluated once, by its owner
    // One exchange a step (the delayed recipes' waves) and one for the GEMM layers; with a
    // checkpoint on rank 0, each is preceded by its offers, and each stage asks who has a store.
    std::map<std::int64_t, int> steps;
    for (const auto& t : s.captures.tensors) steps[t.key.step] = 1;
    CHECK(x.gathers == 2 * (static_cast<int>(steps.size()) + 1) + 2);
    // Resumed over the same ranks from rank 0's checkpoint: rank 0 offers the others their
    // shares, and no rank calls its backend.
    {
      Exchange again(n);
      std::vector<CountingBackend> resumed_backends(static_cast<std::size_t>(n));
      std::vector<std::vector<EvaluationRow>> resumed_rows(static_cast<std::size_t>(n));
      std::vector<std::thread> resumed_ranks;
      for (int r = 0; r < n; ++r)
        resumed_ranks.emplace_back([&, r] {
          const auto i = static_cast<std::size_t>(r);
          ThreadCluster cluster(&again, r);
          RunContext c;
          c.cluster = &cluster;
          if (r == 0) c.store = &rank0_store;
          resumed_rows[i] = evaluate_captures(s.captures, config, resumed_backends[i], c);
        });
      for (auto& t : resumed_ranks) t.join();
      for (int r = 0; r < n; ++r) {
        CHECK(all_row_bytes(resumed_rows[static_cast<std::size_t>(r)]) == all_row_bytes(single));
        CHECK(resumed_backends[static_cast<std::size_t>(r)].calls == 0);
      }
    }
    // Rank 0's checkpoint holds every rank's units: one process resumed from it computes nothing.
    RunContext resumed;
    resumed.store = &rank0_store;
    const CountingBackend resumed_backend;
    CHECK(all_row_bytes(evaluate_captures(s.captures, config, resumed_backend, resumed)) == all_row_bytes(single));
    CHECK(resumed_backend.calls == 0);
    const int gemm_hits = rank0_store.hits[UnitKind::kGemmLayer];
    CHECK(encode_gemm_rows({evaluate_gemm_errors(layers, single, GemmOptions{}, resumed)}) ==
          encode_gemm_rows({single_gemms}));
    CHECK(rank0_store.hits[UnitKind::kGemmLayer] - gemm_hits == static_cast<int>(layers.size()));
  }
}

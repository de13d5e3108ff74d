// The scheduler of units (engine/schedule.hpp) on work that is only bookkeeping: waves in order,
// each unit computed once and released, progress told of each; a stop request ends the run at
// the next wave; load_or_compute takes what the store holds and computes the rest; over
// in-process ranks each unit is computed by one rank and every rank ends with every result.
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/schedule.hpp"
#include "engine/unit_codec.hpp"
#include "support/thread_cluster.hpp"
#include "support/unit_stores.hpp"

namespace {

using namespace fp8a;
using fp8a::testing::Exchange;
using fp8a::testing::MapStore;
using fp8a::testing::ThreadCluster;

// Storage that counts the releases of each tensor (by its first byte).
class CountingStorage final : public TensorStorage {
 public:
  explicit CountingStorage(std::size_t tensors) : released(tensors) {}
  void release(const std::byte* data, std::size_t) const override {
    ++released[static_cast<std::size_t>(data - base)];
  }
  const std::byte* base = nullptr;
  mutable std::vector<std::atomic<int>> released;
};

class RecordingProgress final : public ProgressSink {
 public:
  void begin_stage(std::string_view s, std::uint64_t u, std::uint64_t b) override {
    const std::lock_guard<std::mutex> l(mutex);
    stage = s;
    units = u;
    bytes = b;
  }
  void unit_done(std::string_view name, std::uint64_t b) override {
    const std::lock_guard<std::mutex> l(mutex);
    done.emplace_back(name);
    done_bytes += b;
  }
  void end_stage() override { ++ended; }
  std::mutex mutex;
  std::string stage;
  std::uint64_t units = 0, bytes = 0, done_bytes = 0;
  std::vector<std::string> done;
  int ended = 0;
};

// Units u = 0..n-1 in the given waves, unit u reading one F32 tensor of u + 1 elements (its
// cost), kept under the key "u<u>".
struct Fixture {
  explicit Fixture(const std::vector<std::int64_t>& waves)
      : bytes(64 * waves.size()), storage(waves.size()), views(waves.size()), units(waves.size()) {
    storage.base = bytes.data();
    for (std::size_t u = 0; u < waves.size(); ++u) {
      TensorView& v = views[u];
      v.data = bytes.data() + u;
      v.rows = 1;
      v.cols = static_cast<std::int64_t>(u) + 1;
      v.shape = {v.cols};
      v.storage = &storage;
      units[u].name = "layer " + std::to_string(u);
      units[u].inputs = {&v};
      units[u].cost = u + 1;
      units[u].wave = waves[u];
      units[u].kind = UnitKind::kGemmLayer;
      units[u].keys = {"u" + std::to_string(u)};
    }
  }
  std::vector<std::byte> bytes;
  CountingStorage storage;
  std::vector<TensorView> views;
  std::vector<Unit> units;
};

// The result of unit u.
std::string result_of(std::size_t u) { return "result " + std::to_string(u * u); }

}  // namespace

TEST_CASE("run_units: waves in order, each unit computed once and released, progress told of each") {
  Fixture f({0, 0, 1, 1, 1, 2});
  RecordingProgress progress;
  RunContext context;
  context.progress = &progress;
  std::mutex mutex;
  std::vector<int> computed(f.units.size(), 0);
  std::vector<std::pair<std::size_t, std::size_t>> waves;
  int out_of_order = 0;  // counted on the workers, checked here (doctest asserts on one thread)
  UnitWork work;
  work.compute = [&](std::size_t u, UnitStore* store) {
    const std::lock_guard<std::mutex> l(mutex);
    if (store != nullptr) ++out_of_order;
    for (const auto& w : waves) out_of_order += u < w.second ? 1 : 0;  // a wave waits for the one before
    ++computed[u];
  };
  work.wave_done = [&](std::size_t first, std::size_t last) {
    const std::lock_guard<std::mutex> l(mutex);
    for (std::size_t u = first; u < last; ++u) out_of_order += computed[u] == 1 ? 0 : 1;  // the wave is done
    waves.emplace_back(first, last);
  };
  run_units(context, "things", f.units, work);
  CHECK(out_of_order == 0);
  CHECK(computed == std::vector<int>(f.units.size(), 1));
  CHECK(waves == std::vector<std::pair<std::size_t, std::size_t>>{{0, 2}, {2, 5}, {5, 6}});
  for (const auto& r : f.storage.released) CHECK(r == 1);
  CHECK(progress.stage == "things");
  CHECK(progress.units == 6);
  CHECK(progress.bytes == 4 * (1 + 2 + 3 + 4 + 5 + 6));
  CHECK(progress.done_bytes == progress.bytes);
  CHECK(progress.done.size() == 6);
  CHECK(progress.ended == 1);
}

TEST_CASE("run_units: a stop request starts no unit after it, and the run throws StopRequested") {
  Fixture f({0, 0, 1, 1, 2});
  RecordingProgress progress;
  StopRequest stop;
  RunContext context;
  context.progress = &progress;
  context.stop = &stop;
  std::atomic<int> computed{0};
  std::vector<std::size_t> waves_done;
  UnitWork work;
  work.compute = [&](std::size_t, UnitStore*) { ++computed; };
  work.wave_done = [&](std::size_t first, std::size_t) {
    waves_done.push_back(first);
    stop.signal = 15;  // during the run, after the first wave
  };
  CHECK_THROWS_AS(run_units(context, "things", f.units, work), StopRequested);
  CHECK(computed == 2);                                   // the first wave alone
  CHECK(waves_done == std::vector<std::size_t>{0});       // the stopped wave is not done
  CHECK(f.storage.released[2] == 0);                      // nor read
  CHECK(progress.done.size() == 2);
  CHECK(progress.ended == 0);
}

TEST_CASE("load_or_compute: the store's bytes when taken, else computed and saved; each counted") {
  MapStore store;
  int computes = 0;
  std::string got;
  const auto take = [&](std::string_view b) {
    if (b == "damaged") throw DecodeError("damaged");
    if (b == "another layout") return false;
    got = b;
    return true;
  };
  const auto compute = [&] {
    ++computes;
    got = "computed";
    return got;
  };
  load_or_compute(&store, UnitKind::kGemmLayer, "k", take, compute);  // a miss
  CHECK(computes == 1);
  CHECK(store.saves[UnitKind::kGemmLayer] == 1);
  load_or_compute(&store, UnitKind::kGemmLayer, "k", take, compute);  // a hit
  CHECK(computes == 1);
  CHECK(got == "computed");
  CHECK(store.reused[UnitKind::kGemmLayer] == 1);
  CHECK(store.computed[UnitKind::kGemmLayer] == 1);
  for (const char* stale : {"damaged", "another layout"}) {
    store.save(UnitKind::kGemmLayer, "k", stale);
    load_or_compute(&store, UnitKind::kGemmLayer, "k", take, compute);
  }
  CHECK(computes == 3);
  CHECK(store.computed[UnitKind::kGemmLayer] == 3);
  std::optional<std::string> saved = store.load(UnitKind::kGemmLayer, "k");
  CHECK(saved == std::optional<std::string>("computed"));
  load_or_compute(nullptr, UnitKind::kGemmLayer, "k", take, compute);  // no store: computed
  CHECK(computes == 4);
}

TEST_CASE("run_units over 3 in-process ranks: each unit computed by one rank, every rank gets every result") {
  const std::vector<std::int64_t> wave_of = {0, 0, 0, 0, 1, 1, 1, 1, 1, 2};
  Fixture f(wave_of);
  constexpr int kRanks = 3;
  // Runs every rank once over rank 0's store; per rank: the results, and the units it computed.
  const auto run = [&](MapStore* rank0_store, const StopRequest* stop_on_rank1) {
    Exchange x(kRanks);
    std::vector<std::vector<std::string>> results(kRanks, std::vector<std::string>(f.units.size()));
    std::vector<std::atomic<int>> computed_by(kRanks);
    std::vector<int> stopped(kRanks, 0);
    std::atomic<int> without_store{0};
    std::vector<std::thread> ranks;
    for (int r = 0; r < kRanks; ++r)
      ranks.emplace_back([&, r] {
        const auto i = static_cast<std::size_t>(r);
        ThreadCluster cluster(&x, r);
        RunContext context;
        context.cluster = &cluster;
        if (r == 0) context.store = rank0_store;
        if (r == 1) context.stop = stop_on_rank1;
        UnitWork work;
        work.compute = [&](std::size_t u, UnitStore* store) {
          if (store == nullptr) ++without_store;  // never: the exchange's, even without a checkpoint
          load_or_compute(
              store, UnitKind::kGemmLayer, f.units[u].keys[0],
              [&](std::string_view b) {
                results[i][u] = b;
                return true;
              },
              [&] {
                ++computed_by[i];
                return results[i][u] = result_of(u);
              });
        };
        try {
          run_units(context, "things", f.units, work);
        } catch (const StopRequested&) {
          stopped[i] = 1;
        }
      });
    for (auto& t : ranks) t.join();
    CHECK(without_store == 0);
    for (int r = 0; r < kRanks && stop_on_rank1 == nullptr; ++r)
      for (std::size_t u = 0; u < f.units.size(); ++u) CHECK(results[static_cast<std::size_t>(r)][u] == result_of(u));
    std::vector<int> counts;
    for (const auto& c : computed_by) counts.push_back(c);
    counts.push_back(stopped[0] + stopped[1] + stopped[2]);
    return counts;
  };
  MapStore store;
  const std::vector<int> first = run(&store, nullptr);
  CHECK(first[0] + first[1] + first[2] == static_cast<int>(f.units.size()));  // each once
  CHECK(first[0] > 0);
  CHECK(first[1] > 0);
  CHECK(first[2] > 0);
  CHECK(first[3] == 0);
  CHECK(store.size() == f.units.size());  // rank 0's store holds every rank's units
  // Resumed from rank 0's store: it offers the others their shares, nothing is computed.
  CHECK(run(&store, nullptr) == std::vector<int>{0, 0, 0, 0});
  // A stop on rank 1 alone stops every rank, at the first wave's exchange.
  StopRequest stop;
  stop.signal = 15;
  MapStore empty;
  const std::vector<int> stopped = run(&empty, &stop);
  CHECK(stopped[1] == 0);
  CHECK(stopped[3] == kRanks);
}

// Units and the scheduler: how a stage's units of work (a captured tensor's shards, a GEMM layer
// at a step) are run. run_units owns everything about running them that is not numerics: sharing
// them out over the ranks, the checkpoint (offers between ranks, taking finished parts from it and
// saving new ones), stop requests, progress, the exchange of results between ranks and releasing
// the tensors read. The stage only says what its units are and how one is computed (evaluate_captures
// in run.cpp, evaluate_gemm_errors in gemm_error.cpp): the split nccl-tests makes between its driver
// and each collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/progress.hpp"
#include "core/stop.hpp"
#include "core/tensor_view.hpp"
#include "engine/cluster.hpp"
#include "engine/unit_store.hpp"

namespace fp8a {

// What a run is told to report to, keep in, stop on and share with. Null: not used. Not owned.
struct RunContext {
  // Told of each unit done, a stage at a time ("tensors", "GEMM layers").
  ProgressSink* progress = nullptr;
  // Finished parts of units are kept here and taken from here (a checkpoint).
  UnitStore* store = nullptr;
  // Checked before each unit: once requested, no unit is started, those started finish, and the
  // stage throws StopRequested.
  const StopRequest* stop = nullptr;
  // The ranks the units are shared out over; every rank ends with every unit's result, and a
  // rank with a store also saves there the parts the others computed. Null: this process
  // computes every unit.
  Cluster* cluster = nullptr;
};

struct Unit {
  std::string name;                       // told to progress when done (the layer)
  std::vector<const TensorView*> inputs;  // what it reads: progress counts their bytes, released when done
  std::uint64_t cost = 0;                 // its weight when shared out over ranks (assign_balanced)
  // Units of one wave run in parallel; a wave starts once the one before is done on every rank
  // (UnitWork::wave_done). A wave is the run of consecutive units with the same number.
  std::int64_t wave = 0;
  // The keys its finished parts are kept under in the store (the shards' keys, the layer's):
  // what a rank's checkpoint offers the rank that owns the unit.
  UnitKind kind = UnitKind::kShard;
  std::vector<std::string> keys;
};

// The work of a stage, as run_units calls it (from worker threads).
struct UnitWork {
  // Computes unit u into the caller's results, taking its finished parts from `store` and saving
  // there the ones it computes (null: none). Called once per unit on every rank: with the run's
  // store for the units this rank owns, and after each exchange, for the units other ranks own,
  // with a store that holds every part they sent (so nothing is computed again).
  std::function<void(std::size_t u, UnitStore* store)> compute;
  // Optional: units [first, last), one wave, are done on every rank; called before the next wave.
  std::function<void(std::size_t first, std::size_t last)> wave_done;
};

// Runs every unit of a stage once: begins the stage on context.progress, runs the waves in
// order (each wave's units in parallel; over several ranks each unit by the one rank
// assign_balanced gives it by cost, then every rank's results exchanged), and ends the stage.
// The results, and the rank count's effect on them (none), are the work's: run_units only calls
// it. Throws StopRequested after a wave in which a stop was requested (on any rank); what
// finished is in the store.
void run_units(const RunContext& context, std::string_view stage, std::span<const Unit> units,
               const UnitWork& work);

// The load-or-compute of a unit kept whole under one key (a GEMM layer's rows): `take` is given
// the bytes the store holds under the key, if any, and returns whether it took them (false, or
// DecodeError, for another build's layout). If it did not, `compute` runs and returns the unit's
// bytes, which are saved. Counted (UnitStore::count) as one unit reused or computed. Null store:
// compute alone.
void load_or_compute(UnitStore* store, UnitKind kind, const std::string& key,
                     const std::function<bool(std::string_view bytes)>& take,
                     const std::function<std::string()>& compute);

}  // namespace fp8a

// The processes of one run (MPI ranks: cli/mpi_cluster.hpp) as the engine sees them: this
// process's rank, how many there are, and an all-gather of byte strings. evaluate_captures and
// evaluate_gemm_errors split their units of work over the ranks by assign_balanced, each rank
// computes its own, and the finished units (engine/unit_codec.hpp) are all-gathered, so that
// every rank ends with every row, bit for bit those of one process. Null: one process.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/unit_store.hpp"

namespace fp8a {

class Cluster {
 public:
  virtual ~Cluster() = default;
  virtual int rank() const = 0;  // this process, 0 <= rank < size
  virtual int size() const = 0;  // >= 1
  // Every rank's bytes, indexed by rank. Collective: every rank calls it, in the same order, from
  // the thread that drives the run (never from a worker). Throws internal_error on a failed
  // exchange.
  virtual std::vector<std::string> all_gather(std::string_view mine) = 0;
};

// A fixed, balanced owner for each unit, given each unit's cost (bytes read, multiply-adds):
// the costliest unit first (the earlier of equal ones), each to the rank with the least cost so
// far (the lower rank of equal ones). Depends only on the costs and the rank count (not on the
// thread count, not on which rank asks); every unit gets exactly one owner. The most loaded rank
// carries at most the least loaded one's cost plus the cost of one unit.
std::vector<int> assign_balanced(std::span<const std::uint64_t> costs, int ranks);

// The units one rank finished (computed, or found in the inner store), kept for the exchange.
// Passes every load and save through to the inner store (the checkpoint; may be null).
class RecordingStore final : public UnitStore {
 public:
  explicit RecordingStore(UnitStore* inner) : inner_(inner) {}
  std::optional<std::string> load(UnitKind kind, std::string_view key) override;
  void save(UnitKind kind, std::string_view key, std::string_view bytes) override;
  void count(UnitKind kind, std::uint64_t reused, std::uint64_t computed) override {
    if (inner_ != nullptr) inner_->count(kind, reused, computed);
  }
  // Every unit recorded, in key order (not in the order the threads finished them).
  std::string encode() const;
  bool has(UnitKind kind, const std::string& key) const { return units_.count({kind, key}) != 0; }

 private:
  UnitStore* inner_;
  std::mutex mutex_;
  std::map<std::pair<UnitKind, std::string>, std::string> units_;
};

// Every rank's recorded units after an exchange. A unit it lacks is a bug (its owner evaluated
// it): load throws internal_error fp8a.internal.005 rather than letting the backend compute it.
class GatheredUnits final : public UnitStore {
 public:
  std::optional<std::string> load(UnitKind kind, std::string_view key) override;
  void save(UnitKind kind, std::string_view key, std::string_view bytes) override;
  bool stopped() const { return stopped_; }  // a rank stopped on a request before its last unit
  // The unit, or nothing (never throws).
  std::optional<std::string> find(UnitKind kind, const std::string& key) const;
  // Saves in `store` (this rank's checkpoint) the units other ranks computed, so that it holds
  // the whole run: a resumed run finds them whatever its rank count.
  void save_received(UnitStore& store, const RecordingStore& mine) const;

 private:
  friend GatheredUnits exchange_units(Cluster& cluster, const RecordingStore& mine, bool stopped);
  bool stopped_ = false;
  std::map<std::pair<UnitKind, std::string>, std::string> units_;
};

// Collective: every rank gives its recorded units (and whether it stopped on a request) and gets
// every rank's. Throws internal_error fp8a.internal.005 on bytes that do not decode.
GatheredUnits exchange_units(Cluster& cluster, const RecordingStore& mine, bool stopped);

// A rank's store during a resumed run: first the units another rank's checkpoint offered for this
// rank's share, then this rank's own store (may be null), where everything is saved.
class OfferedStore final : public UnitStore {
 public:
  OfferedStore(const GatheredUnits& offered, UnitStore* inner) : offered_(offered), inner_(inner) {}
  std::optional<std::string> load(UnitKind kind, std::string_view key) override;
  void save(UnitKind kind, std::string_view key, std::string_view bytes) override {
    if (inner_ != nullptr) inner_->save(kind, key, bytes);
  }
  void count(UnitKind kind, std::uint64_t reused, std::uint64_t computed) override {
    if (inner_ != nullptr) inner_->count(kind, reused, computed);
  }

 private:
  const GatheredUnits& offered_;
  UnitStore* inner_;
};

// Collective: whether any rank has a store (a checkpoint). When one has, each wave starts with
// the ranks offering each other what their stores hold of the others' shares.
bool any_rank_has_store(Cluster& cluster, const UnitStore* store);

// True when there is more than one rank to share the work with.
inline bool is_distributed(const Cluster* cluster) { return cluster != nullptr && cluster->size() > 1; }

}  // namespace fp8a

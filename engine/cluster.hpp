// The processes of one run (MPI ranks: cli/mpi_cluster.hpp) as the engine sees them: this
// process's rank, how many there are, and an all-gather of byte strings. run_units
// (engine/schedule.hpp) splits a stage's units of work over the ranks by assign_balanced, each
// rank computes its own, and the finished units (engine/unit_codec.hpp) are all-gathered, so that
// every rank ends with every row, bit for bit those of one process. Null: one process.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// True when there is more than one rank to share the work with.
inline bool is_distributed(const Cluster* cluster) { return cluster != nullptr && cluster->size() > 1; }

}  // namespace fp8a

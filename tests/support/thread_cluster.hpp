// N ranks of a run in one process (threads exchanging through memory, the MPI exchange's
// stand-in), for the tests of work shared out over ranks (tests/engine/test_cluster.cpp,
// test_schedule.cpp).
#pragma once

#include <atomic>
#include <barrier>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cluster.hpp"

namespace fp8a::testing {

// The shared slots of N ranks: all_gather writes its slot between two barriers.
struct Exchange {
  explicit Exchange(int n) : slots(static_cast<std::size_t>(n)), barrier(n) {}
  std::vector<std::string> slots;
  std::barrier<> barrier;
  std::atomic<int> gathers{0};  // all_gathers so far (counted by rank 0)
};

class ThreadCluster final : public Cluster {
 public:
  ThreadCluster(Exchange* x, int rank) : x_(x), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(x_->slots.size()); }
  std::vector<std::string> all_gather(std::string_view mine) override {
    x_->slots[static_cast<std::size_t>(rank_)] = std::string(mine);
    x_->barrier.arrive_and_wait();
    std::vector<std::string> all = x_->slots;
    x_->barrier.arrive_and_wait();
    if (rank_ == 0) ++x_->gathers;
    return all;
  }

 private:
  Exchange* x_;
  int rank_;
};

}  // namespace fp8a::testing

// The MPI ranks of a launch (`mpirun -n N fp8-advisor run ...`, `srun --mpi=pmix ...`) as the
// engine's Cluster (engine/cluster.hpp). launched_ranks is always built; MpiCluster only with
// FP8A_WITH_MPI (cli/mpi_cluster.cpp), and used only when a launcher started the process: a plain
// `fp8-advisor run` is one process and never initialises MPI.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cluster.hpp"

namespace fp8a::cli {

// The number of processes the launcher's environment says it started (Open MPI's
// OMPI_COMM_WORLD_SIZE, PMI's PMI_SIZE); 0 when no launcher started this one. Under PMIx alone
// (srun --mpi=pmix) the size is known only after MPI_Init: then 1 when PMIX_RANK is set.
inline int launched_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::max(1, std::atoi(v));
  return std::getenv("PMIX_RANK") != nullptr ? 1 : 0;
}

// run's --rank-timeout default, in seconds.
inline constexpr double kDefaultRankTimeout = 600;

#if FP8A_WITH_MPI
// MPI_COMM_WORLD: initialised (MPI_THREAD_FUNNELED: only the thread that drives the run calls
// MPI) by the constructor, finalised by the destructor. Failed calls throw internal_error
// fp8a.internal.004 naming the call.
class MpiCluster final : public Cluster {
 public:
  MpiCluster(int* argc, char*** argv);
  ~MpiCluster() override;
  MpiCluster(const MpiCluster&) = delete;
  MpiCluster& operator=(const MpiCluster&) = delete;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Point-to-point with every other rank, each waiting at most the rank timeout (from the call)
  // for the others: usage error fp8a.usage.240 naming the ranks it did not hear from (stopped,
  // hung, far behind), so that the job ends (MPI_Abort in main) instead of waiting for ever.
  std::vector<std::string> all_gather(std::string_view mine) override;
  // How long all_gather waits for the other ranks; > 0 (run's --rank-timeout; default 600 s).
  void set_timeout(double seconds) { timeout_s_ = seconds; }
  // The last exchange, before MPI_Finalize (which would wait for a stopped rank without limit):
  // rank 0, which arrives last, waits the timeout (fp8a.usage.240); the others wait for it.
  void finish();
  // Ends every rank of the launch with this exit code (MPI_Abort): a rank that failed must not
  // leave the others waiting in an exchange.
  [[noreturn]] void abort(int exit_code);

 private:
  std::vector<std::string> exchange(std::string_view mine, bool limited);
  int rank_ = 0, size_ = 1;
  double timeout_s_ = kDefaultRankTimeout;
};

// Sets the rank timeout of an MPI cluster; nothing for another (or none).
inline void set_rank_timeout(Cluster* cluster, double seconds) {
  if (auto* mpi = dynamic_cast<MpiCluster*>(cluster)) mpi->set_timeout(seconds);
}

// The MPI library's own version line (MPI_Get_library_version), e.g. "Open MPI v4.1.4, ...".
std::string mpi_library_version();
#else
inline void set_rank_timeout(Cluster*, double) {}
#endif

}  // namespace fp8a::cli

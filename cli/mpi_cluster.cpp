#include "cli/mpi_cluster.hpp"

#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "core/error.hpp"

namespace fp8a::cli {

namespace {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS) n = 0;
  throw internal_error("fp8a.internal.004", std::string(call) + " failed: " + std::string(text, static_cast<std::size_t>(n)));
}

}  // namespace

MpiCluster::MpiCluster(int* argc, char*** argv) {
  int provided = 0;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes (and become internal errors) rather than ending the process unnamed.
  check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
}

MpiCluster::~MpiCluster() { MPI_Finalize(); }

void MpiCluster::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::abort();  // MPI_Abort does not return
}

std::vector<std::string> MpiCluster::all_gather(std::string_view mine) {
  const auto n = static_cast<std::size_t>(size_);
  std::vector<std::uint64_t> sizes(n);
  const std::uint64_t my_size = mine.size();
  check(MPI_Allgather(&my_size, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD), "MPI_Allgather");
  std::vector<std::string> out(n);
  for (std::size_t r = 0; r < n; ++r) out[r].resize(static_cast<std::size_t>(sizes[r]));
  // In rounds of at most INT_MAX / size bytes from each rank: MPI counts and displacements are int.
  const std::uint64_t chunk = static_cast<std::uint64_t>(INT_MAX) / n;
  std::vector<int> counts(n), displs(n);
  std::vector<char> buffer;
  for (std::uint64_t done = 0; std::any_of(sizes.begin(), sizes.end(), [&](std::uint64_t s) { return s > done; });
       done += chunk) {
    std::size_t total = 0;
    for (std::size_t r = 0; r < n; ++r) {
      counts[r] = static_cast<int>(sizes[r] > done ? std::min(chunk, sizes[r] - done) : 0);
      displs[r] = static_cast<int>(total);
      total += static_cast<std::size_t>(counts[r]);
    }
    buffer.resize(total);
    const std::size_t me = static_cast<std::size_t>(rank_);
    check(MPI_Allgatherv(mine.data() + std::min<std::uint64_t>(done, my_size), counts[me], MPI_BYTE, buffer.data(),
                         counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    for (std::size_t r = 0; r < n; ++r)
      std::copy_n(buffer.data() + displs[r], counts[r], out[r].data() + done);
  }
  return out;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int n = 0;
  if (MPI_Get_library_version(text, &n) != MPI_SUCCESS) return "unknown";
  std::string s(text, static_cast<std::size_t>(n));
  s = s.substr(0, s.find_first_of(",\n\r"));  // "Open MPI v4.1.4", "MPICH Version: 4.0"
  return s;
}

}  // namespace fp8a::cli

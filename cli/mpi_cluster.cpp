#include "cli/mpi_cluster.hpp"

#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>

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

namespace {

// Point-to-point tags of all_gather: the sizes, then the bytes (messages between two ranks on one
// tag arrive in the order sent, so successive all_gathers cannot mix).
constexpr int kTagSize = 8101;
constexpr int kTagBytes = 8102;
// The most bytes in one message (MPI counts are int).
constexpr std::uint64_t kMessageBytes = std::uint64_t{1} << 30;

// The rank list of a message: "rank 1", "ranks 1, 3".
std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  return s;
}

// Tests the requests until all complete, or the deadline passes (when limited): then throws
// fp8a.usage.240 naming the ranks still owing a message. peers: the rank each request receives
// from, or -(rank + 1) it sends to.
void wait_all(std::vector<MPI_Request>& requests, const std::vector<int>& peers,
              std::chrono::steady_clock::time_point deadline, bool limited, int rank, double timeout_s) {
  std::vector<int> done(requests.size());
  std::vector<MPI_Status> statuses(requests.size());
  auto pause = std::chrono::microseconds(0);
  for (;;) {
    int count = 0;
    check(MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, done.data(), statuses.data()),
          "MPI_Testsome");
    if (count == MPI_UNDEFINED) return;  // every request complete
    if (count > 0) {
      pause = std::chrono::microseconds(0);
      continue;
    }
    if (limited && std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(std::chrono::microseconds(1000), pause * 2 + std::chrono::microseconds(1));
  }
  // The ranks still owing a message (a receive not complete), else those not taking ours.
  std::vector<int> silent, slow;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    const int peer = peers[i] >= 0 ? peers[i] : -peers[i] - 1;
    auto& list = peers[i] >= 0 ? silent : slow;
    if (std::find(list.begin(), list.end(), peer) == list.end()) list.push_back(peer);
  }
  if (silent.empty()) silent = slow;
  std::sort(silent.begin(), silent.end());
  // The requests stay posted until the process ends (MPI_Abort follows): their buffers are the
  // caller's, which therefore leaks them rather than freeing memory MPI may still write.
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
  throw usage_error("fp8a.usage.240", "MPI " + rank_list(silent) + " did not answer MPI rank " +
                                          std::to_string(rank) + " within --rank-timeout " + seconds +
                                          " s: stopped, hung or far behind the others (raise --rank-timeout "
                                          "when one rank's share takes that much longer than another's)");
}

}  // namespace

std::vector<std::string> MpiCluster::all_gather(std::string_view mine) { return exchange(mine, true); }

void MpiCluster::finish() {
  // Rank 0 comes last (it writes the files alone): it waits the timeout, the others without one.
  (void)exchange({}, rank_ == 0);
}

std::vector<std::string> MpiCluster::exchange(std::string_view mine, bool limited) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(timeout_s_));
  const auto n = static_cast<std::size_t>(size_);
  const auto me = static_cast<std::size_t>(rank_);
  // Heap buffers, released (leaked) when a peer does not answer: see wait_all.
  struct Buffers {
    std::vector<std::uint64_t> sizes;
    std::uint64_t my_size = 0;
    std::vector<std::string> out;
  };
  auto b = std::make_unique<Buffers>();
  b->sizes.assign(n, 0);
  b->my_size = mine.size();
  b->sizes[me] = mine.size();
  std::vector<MPI_Request> requests;
  std::vector<int> peers;  // per request: the rank received from, or -(rank + 1) sent to
  try {
    for (std::size_t r = 0; r < n; ++r) {
      if (r == me) continue;
      const int peer = static_cast<int>(r);
      requests.emplace_back();
      check(MPI_Irecv(&b->sizes[r], 1, MPI_UINT64_T, peer, kTagSize, MPI_COMM_WORLD, &requests.back()), "MPI_Irecv");
      peers.push_back(peer);
      requests.emplace_back();
      check(MPI_Isend(&b->my_size, 1, MPI_UINT64_T, peer, kTagSize, MPI_COMM_WORLD, &requests.back()), "MPI_Isend");
      peers.push_back(-peer - 1);
    }
    wait_all(requests, peers, deadline, limited, rank_, timeout_s_);
    requests.clear();
    peers.clear();
    b->out.resize(n);
    for (std::size_t r = 0; r < n; ++r) b->out[r].resize(static_cast<std::size_t>(b->sizes[r]));
    b->out[me].assign(mine);
    for (std::size_t r = 0; r < n; ++r) {
      if (r == me) continue;
      const int peer = static_cast<int>(r);
      for (std::uint64_t at = 0; at < b->sizes[r]; at += kMessageBytes) {
        requests.emplace_back();
        check(MPI_Irecv(b->out[r].data() + at, static_cast<int>(std::min(kMessageBytes, b->sizes[r] - at)), MPI_BYTE,
                        peer, kTagBytes, MPI_COMM_WORLD, &requests.back()),
              "MPI_Irecv");
        peers.push_back(peer);
      }
      for (std::uint64_t at = 0; at < b->my_size; at += kMessageBytes) {
        requests.emplace_back();
        check(MPI_Isend(mine.data() + at, static_cast<int>(std::min(kMessageBytes, b->my_size - at)), MPI_BYTE, peer,
                        kTagBytes, MPI_COMM_WORLD, &requests.back()),
              "MPI_Isend");
        peers.push_back(-peer - 1);
      }
    }
    wait_all(requests, peers, deadline, limited, rank_, timeout_s_);
  } catch (...) {
    if (std::any_of(requests.begin(), requests.end(), [](MPI_Request q) { return q != MPI_REQUEST_NULL; }))
      (void)b.release();
    throw;
  }
  return std::move(b->out);
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

#include "tools/ranks.h"

#include "tools/video_output.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <vector>

#ifdef STRATA_HAVE_MPI
#include <mpi.h>
#endif

namespace strata {

#ifdef STRATA_HAVE_MPI
namespace {

// mpirun ends the job's other processes with SIGTERM when one fails or dies: say so
// in one line, remove a half-written output, exit. Only async-signal-safe calls.
char g_stopped_line[160];
size_t g_stopped_length = 0;

void on_terminate(int) {
  if (g_stopped_length && ::write(2, g_stopped_line, g_stopped_length) < 0) {
  }
  remove_output_temporary_after_signal();
  ::_exit(143);
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<size_t>(length));
}

}  // namespace

Expected<std::unique_ptr<MpiRanks>> MpiRanks::start(int ranks) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) return error("--ranks {}: MPI_Init failed", ranks);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::unique_ptr<MpiRanks> out(new MpiRanks());
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  out->layout_ = {size, rank};
  const auto line = fmt::format_to_n(g_stopped_line, sizeof g_stopped_line - 1,
                                     "strata: rank {} of {}: stopped: the job was ended (another rank failed or "
                                     "was killed)\n",
                                     rank, size);
  g_stopped_length = line.size < sizeof g_stopped_line ? line.size : 0;
  struct sigaction action = {};
  action.sa_handler = on_terminate;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  if (size != ranks) {
    MPI_Finalize();
    return error("--ranks {}: this job has {} process{}; start it as `mpirun -np {} strata ... --ranks {}`", ranks,
                 size, size == 1 ? "" : "es", ranks, ranks);
  }
  return out;
}

MpiRanks::~MpiRanks() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

Status MpiRanks::alltoall(std::span<const std::byte> send, std::span<const uint64_t> send_counts,
                          std::span<std::byte> recv, std::span<const uint64_t> recv_counts, uint64_t largest) {
  const size_t ranks = send_counts.size();
  if (static_cast<int>(ranks) != layout_.ranks || recv_counts.size() != ranks)
    return error("alltoall: {} send and {} receive counts for {} ranks", ranks, recv_counts.size(), layout_.ranks);
  // MPI counts and displacements are int: a round moves at most kRound bytes between
  // any two ranks, so each rank's bytes of a round stay below 2^31. Every rank passes
  // the same `largest`, so all agree on the rounds.
  const uint64_t kRound = std::max<uint64_t>(4096, (uint64_t{INT_MAX} / std::max<size_t>(ranks, 1)) & ~uint64_t{4095});
  std::vector<uint64_t> send_start(ranks, 0), recv_start(ranks, 0);
  for (size_t r = 1; r < ranks; ++r) {
    send_start[r] = send_start[r - 1] + send_counts[r - 1];
    recv_start[r] = recv_start[r - 1] + recv_counts[r - 1];
  }
  if (send_start.back() + send_counts.back() != send.size() || recv_start.back() + recv_counts.back() != recv.size())
    return error("alltoall: the counts do not add up to the {} bytes sent and {} received", send.size(), recv.size());
  const uint64_t rounds = std::max<uint64_t>(1, (largest + kRound - 1) / kRound);
  std::vector<std::byte> packed_send, packed_recv;
  std::vector<int> sn(ranks), sd(ranks), rn(ranks), rd(ranks);
  for (uint64_t k = 0; k < rounds; ++k) {
    const uint64_t from = k * kRound;
    int send_total = 0, recv_total = 0;
    for (size_t r = 0; r < ranks; ++r) {
      sn[r] = static_cast<int>(std::min(kRound, send_counts[r] > from ? send_counts[r] - from : 0));
      rn[r] = static_cast<int>(std::min(kRound, recv_counts[r] > from ? recv_counts[r] - from : 0));
      sd[r] = send_total;
      rd[r] = recv_total;
      send_total += sn[r];
      recv_total += rn[r];
    }
    packed_send.resize(static_cast<size_t>(send_total));
    packed_recv.resize(static_cast<size_t>(recv_total));
    for (size_t r = 0; r < ranks; ++r)
      if (sn[r] > 0) std::copy_n(send.data() + send_start[r] + from, sn[r], packed_send.data() + sd[r]);
    const int code = MPI_Alltoallv(packed_send.data(), sn.data(), sd.data(), MPI_BYTE, packed_recv.data(), rn.data(),
                                   rd.data(), MPI_BYTE, MPI_COMM_WORLD);
    if (code != MPI_SUCCESS) return error("MPI_Alltoallv: {}", mpi_error_text(code));
    for (size_t r = 0; r < ranks; ++r)
      if (rn[r] > 0) std::copy_n(packed_recv.data() + rd[r], rn[r], recv.data() + recv_start[r] + from);
  }
  return Status::ok();
}

void MpiRanks::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; in case it does
}

#else  // built without MPI

Expected<std::unique_ptr<MpiRanks>> MpiRanks::start(int ranks) {
  return error("--ranks {}: this strata was built without MPI (install libopenmpi-dev and rebuild)", ranks);
}
MpiRanks::~MpiRanks() = default;
Status MpiRanks::alltoall(std::span<const std::byte>, std::span<const uint64_t>, std::span<std::byte>,
                          std::span<const uint64_t>, uint64_t) {
  return error("built without MPI");
}
void MpiRanks::abort(int code) { std::_Exit(code); }

#endif

}  // namespace strata

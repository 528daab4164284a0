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

Status MpiRanks::allgather(std::span<const std::byte> mine, std::span<const uint64_t> counts,
                           std::span<std::byte> all) {
  const size_t ranks = counts.size();
  // MPI counts and displacements are int: a round moves at most kRound bytes per rank,
  // all ranks' together below 2^31.
  const uint64_t kRound = std::max<uint64_t>(4096, (uint64_t{INT_MAX} / std::max<size_t>(ranks, 1)) & ~uint64_t{4095});
  if (static_cast<int>(ranks) != layout_.ranks || mine.size() != counts[static_cast<size_t>(layout_.rank)])
    return error("allgather: {} counts and {} bytes here do not match rank {} of {}", ranks, mine.size(),
                 layout_.rank, layout_.ranks);
  std::vector<uint64_t> start(ranks, 0);
  for (size_t r = 1; r < ranks; ++r) start[r] = start[r - 1] + counts[r - 1];
  // Round k moves bytes [k·kRound, (k+1)·kRound) of every rank's share, into a
  // packed buffer, then to their places in `all`.
  const uint64_t most = *std::max_element(counts.begin(), counts.end());
  const uint64_t rounds = std::max<uint64_t>(1, (most + kRound - 1) / kRound);
  std::vector<std::byte> packed;
  std::vector<int> n(ranks), displacement(ranks);
  for (uint64_t k = 0; k < rounds; ++k) {
    const uint64_t from = k * kRound;
    int total = 0;
    for (size_t r = 0; r < ranks; ++r) {
      n[r] = static_cast<int>(std::min(kRound, counts[r] > from ? counts[r] - from : 0));
      displacement[r] = total;
      total += n[r];
    }
    packed.resize(static_cast<size_t>(total));
    const int here = n[static_cast<size_t>(layout_.rank)];
    const int code = MPI_Allgatherv(here ? mine.data() + from : mine.data(), here, MPI_BYTE, packed.data(), n.data(),
                                    displacement.data(), MPI_BYTE, MPI_COMM_WORLD);
    if (code != MPI_SUCCESS) return error("MPI_Allgatherv: {}", mpi_error_text(code));
    for (size_t r = 0; r < ranks; ++r)
      std::copy_n(packed.data() + displacement[r], n[r], all.data() + start[r] + from);
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
Status MpiRanks::allgather(std::span<const std::byte>, std::span<const uint64_t>, std::span<std::byte>) {
  return error("built without MPI");
}
void MpiRanks::abort(int code) { std::_Exit(code); }

#endif

}  // namespace strata

// --ranks N: the processes `mpirun -np N` started share each decode, one rank each
// (compile/rank_split.h: every rank computes the bands it owns, and after each split
// node the ranks send each other the rows the others read, with MPI_Alltoallv). Open MPI from Debian
// (libopenmpi-dev); a build without it rejects --ranks above 1.
//
//   mpirun -np 2 strata decode --vae DIR --latent z.npy --out image.png --ranks 2
//
// Rank 0 writes the output and the log; the other ranks stay silent but for errors.
// A rank that fails prints one line, "strata: rank R of N: error: ...", and aborts
// the job (MPI_Abort), so no rank waits for it; the output is written only after the
// decode, so nothing partial is left.
#pragma once

#include "compile/rank_split.h"

#include <memory>

namespace strata {

class MpiRanks : public RankExchange {
public:
  // MPI_Init, errors returned rather than fatal (MPI_ERRORS_RETURN). Errors: a build
  // without MPI; an MPI world whose size is not `ranks` (not started by
  // `mpirun -np ranks`).
  static Expected<std::unique_ptr<MpiRanks>> start(int ranks);
  ~MpiRanks() override;  // MPI_Finalize

  RankLayout layout() const { return layout_; }
  // MPI_Alltoallv of the bytes, in rounds that keep every MPI count and displacement
  // within an int (a round moves at most 2 GiB / ranks between any two ranks).
  Status alltoall(std::span<const std::byte> send, std::span<const uint64_t> send_counts, std::span<std::byte> recv,
                  std::span<const uint64_t> recv_counts, uint64_t largest) override;
  // Ends every rank of the job (MPI_Abort with `code`); for after an error here.
  [[noreturn]] void abort(int code);

private:
  MpiRanks() = default;
  RankLayout layout_;
};

}  // namespace strata

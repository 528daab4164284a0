// Splitting a compiled plan's bands across ranks: one process per GPU (or several
// sharing one), each computing the bands it owns (issue 20, docs/RANKS.md).
//
// split_bands already cuts every large conv_gemm and norm_act into bands of rows
// whose results are bit-identical to the unbanded node, and codegen emits one
// dispatch per band, labelled "<node>:band i/n" (conv_gemm), "<node>:apply i/n"
// (the applying pass of norm_act) or "<node>:stats i/n" (a GroupNorm's statistics
// over windows of whole chunks, each chunk's (mean, M2) in its own partial slot). A
// band's dispatch writes one contiguous run of bytes (its rows of the output; the
// rows of a frame are contiguous where a node is banded); a statistics window writes
// its chunks' slots (runtime::BandDesc::stats_*). So the split is static and needs
// nothing from the device:
//   - window or band i of n belongs to rank ⌊i·R/n⌋ (contiguous runs);
//   - a rank keeps the dispatches of its own bands and drops the others';
//   - after the node, each rank receives only the bytes of the other ranks' bands
//     that it reads later: the dispatches it runs (its own bands, with their halos,
//     and everything every rank runs) read them before any dispatch overwrites them
//     (the plan's windows say which bytes each dispatch reads and writes), and so do
//     the outputs and states at the end of the plan. A dispatch every rank runs that
//     reads the whole tensor (attention, an unbanded node) makes that a whole gather;
//     a statistics pass makes it the partial slots, which the reduce (on every rank)
//     merges in the order of one rank.
// Every byte a dispatch reads then holds, on every rank that runs it, what it holds
// in one process, and the output is bit-identical to one rank's, whatever the number
// of ranks.
//
// The rank's plan keeps the weights, buffers, inputs, outputs and states of the
// original; its dispatch list loses the other ranks' bands and each of the original's
// entries (plans of a program) becomes a run of segments, one more than the nodes it
// splits: the entry's inputs are copied in by the first segment, its outputs and state
// write-backs done by the last, and an exchange follows every segment but the last.
// A segment may have no dispatches (a rank that owns none of a node's bands).
#pragma once

#include "runtime/plan.h"

namespace strata::runtime {
class Executor;
}
#include "runtime/status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace strata {

// How many ranks share a run and which one this is.
struct RankLayout {
  int ranks = 1;
  int rank = 0;
  bool operator==(const RankLayout&) const = default;
};

// The bytes one band of a split node writes (a statistics window: one run per
// segment): rank `owner` computes them.
struct BandShare {
  int owner = 0;
  uint32_t buffer = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// How a split conv chooses between its ranks exchanging the halo rows their next
// bands read and each rank recomputing them (running the neighbours' bands that
// write them, so nothing is exchanged): the estimated time of each, per rank, the
// slowest rank deciding. Exchange: per message (one sender, one receiver) a latency
// plus its bytes over the link. Recompute: the recomputed bands' operations
// (BandDesc::flops_per_row) at a rate. Only a node whose rows no dispatch that every
// rank runs reads is a candidate (else the rows cross anyway), and only conv_gemm
// bands, whose operations the plan knows. Recomputing moves the need for rows to the
// node before (the recomputed bands read its rows, with their halos), where the
// choice is made again: the nodes are decided last to first.
struct RankCostModel {
  double link_bytes_per_s = 25e9;     // between two ranks (PCIe 4 x16 class)
  double message_latency_s = 20e-6;   // per message: MPI, staging copies, submits
  double flops_per_s = 50e12;         // one rank's GPU on a conv band
};

// A run of bytes of one of the plan's buffers.
struct ByteRun {
  uint32_t buffer = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool operator==(const ByteRun&) const = default;
};

// What rank `from` sends rank `to` after a split node: runs of its shares, in buffer
// and offset order (the sender reads them from its buffers, the receiver writes them
// to the same places of its own).
struct Transfer {
  int from = 0;
  int to = 0;
  std::vector<ByteRun> runs;
  uint64_t bytes = 0;
};

// A node whose bands the ranks share: the shares in band order, and what the ranks
// send each other after it (every rank's transfers, sorted by (from, to); none with
// zero bytes).
struct SplitNode {
  std::string node;
  std::string kind;  // "band" (conv_gemm), "apply" (norm_act), "stats" (statistics partials)
  int64_t bands = 0;  // its dispatches; each has shares.size() / bands shares
  std::vector<BandShare> shares;
  std::vector<Transfer> transfers;
  // The cost model's choice (RankCostModel): recompute: each rank runs the bands in
  // `recomputed` (rank, band index) too, and no rows cross; the estimates of both,
  // seconds on the slowest rank (0 when the node was not a candidate).
  bool recompute = false;
  std::vector<std::pair<int, int64_t>> recomputed;
  double exchange_s = 0, recompute_s = 0;
  uint64_t share_bytes() const;             // all shares: what a whole gather moves
  uint64_t received(int rank) const;        // bytes `rank` receives after the node
  uint64_t owned(int rank) const;           // bytes of the shares `rank` owns
};

struct RankPlan {
  RankLayout layout;
  runtime::Plan plan;  // this rank's (entries: the segments)
  // The original plan's entries (entry_list order): the name and this plan's segments
  // (indices into plan.entries), in order; segments.size() == splits.size() + 1.
  struct Entry {
    std::string name;
    std::vector<uint32_t> segments;
    std::vector<SplitNode> splits;  // splits[i]: exchanged after segments[i]
  };
  std::vector<Entry> entries;
  int64_t split_nodes = 0;       // nodes whose bands the ranks share
  int64_t kept_dispatches = 0;   // dispatches of this rank's plan
  int64_t shared_dispatches = 0; // band dispatches split among the ranks (all ranks' together)
  // Bytes this rank receives when every entry runs once, and what it would receive if
  // every split node's shares were gathered whole (the shares of the other ranks).
  uint64_t received_bytes = 0;
  uint64_t gathered_bytes = 0;
  // The most bytes this rank sends or receives after one split node: the size of
  // the executor's window staging buffers (ExecutorOptions::window_staging_bytes).
  uint64_t largest_exchange = 0;
};

// This rank's plan. A group of band dispatches that does not look as described above
// (not consecutive 1..n, not exactly one written binding each, band writes not one
// increasing run in one buffer, statistics windows without their BandDesc::stats_*
// or not matching them) is not split: every rank runs it whole. Errors: a layout
// with ranks < 1 or rank outside [0, ranks); an invalid plan.
Expected<RankPlan> split_plan_for_rank(const runtime::Plan& plan, RankLayout layout,
                                       const RankCostModel& costs = {});

// The rank that owns band `band` of `bands` under `ranks` ranks: ⌊band·ranks/bands⌋.
int band_owner(int64_t band, int64_t bands, int ranks);

// One line per split node (its bands, which rank owns which, the bytes each computes,
// the bytes each receives after it against a whole gather), then the dispatches and
// bytes of each rank; for `strata compile --ranks N`. Errors: as split_plan_for_rank.
Expected<std::string> explain_rank_split(const runtime::Plan& plan, int ranks, const RankCostModel& costs = {});

// How the ranks exchange bytes: every rank calls alltoall together. `send` holds the
// bytes for rank 0, 1, ... concatenated (send_counts[r] for rank r, 0 for itself);
// `recv` receives those from rank 0, 1, ... (recv_counts[r] from rank r). `largest`
// is the same on every rank: the largest count between any two ranks (so every rank
// cuts a large exchange into the same rounds). A failure (a rank gone) is an error
// naming it; the caller stops.
class RankExchange {
public:
  virtual ~RankExchange() = default;
  virtual Status alltoall(std::span<const std::byte> send, std::span<const uint64_t> send_counts,
                          std::span<std::byte> recv, std::span<const uint64_t> recv_counts, uint64_t largest) = 0;
};

// After a segment that ends with `split`'s bands: reads the runs this rank sends from
// the executor's buffers, exchanges them and writes the runs it receives in place.
// No call to `exchange` when no rank sends anything.
Status exchange_split(runtime::Executor& executor, const SplitNode& split, RankLayout layout, RankExchange& exchange);

}  // namespace strata

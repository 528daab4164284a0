// Splitting a compiled plan's bands across ranks: one process per GPU (or several
// sharing one), each computing the bands it owns (issue 20, docs/RANKS.md).
//
// split_bands already cuts every large conv_gemm and norm_act into bands of rows
// whose results are bit-identical to the unbanded node, and codegen emits one
// dispatch per band, labelled "<node>:band i/n" (conv_gemm) or "<node>:apply i/n"
// (the applying pass of norm_act). A band's dispatch writes one contiguous run of
// bytes: its rows of the output (the rows of a frame are contiguous where a node is
// banded). So the split is static and needs nothing from the device:
//   - band i of an n-band node belongs to rank ⌊i·R/n⌋ (contiguous runs of bands);
//   - a rank keeps the dispatches of its own bands and drops the others';
//   - after the node, the ranks exchange the rows: each sends the bytes its bands
//     wrote and receives the rest (RankExchange, e.g. MPI_Allgatherv);
//   - every other dispatch (unbanded nodes, GroupNorm statistics, attention) runs on
//     every rank, on the same bytes.
// Every rank then holds, after each exchange, the bytes one rank would hold, and the
// output is bit-identical to one rank's, whatever the number of ranks.
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
#include <vector>

namespace strata {

// How many ranks share a run and which one this is.
struct RankLayout {
  int ranks = 1;
  int rank = 0;
  bool operator==(const RankLayout&) const = default;
};

// The bytes one band of a split node writes: rank `owner` computes them, every
// other rank receives them.
struct BandShare {
  int owner = 0;
  uint32_t buffer = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// A node whose bands the ranks share, and the shares in band order.
struct SplitNode {
  std::string node;
  std::vector<BandShare> shares;
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
};

// This rank's plan. A group of band dispatches that does not look as described above
// (not consecutive 1..n, not exactly one written binding each, writes not one
// increasing run in one buffer) is not split: every rank runs it whole. Errors: a
// layout with ranks < 1 or rank outside [0, ranks); an invalid plan.
Expected<RankPlan> split_plan_for_rank(const runtime::Plan& plan, RankLayout layout);

// The rank that owns band `band` of `bands` under `ranks` ranks: ⌊band·ranks/bands⌋.
int band_owner(int64_t band, int64_t bands, int ranks);

// One line per split node (its bands, which rank owns which, the bytes each sends),
// then the dispatches each rank runs; for `strata compile --ranks N`. Errors: as
// split_plan_for_rank.
Expected<std::string> explain_rank_split(const runtime::Plan& plan, int ranks);

// How the ranks exchange bytes: every rank calls allgather with the same `counts`
// (bytes each rank contributes, in rank order) and its own `mine`
// (mine.size() == counts[rank]); `all` receives every rank's bytes concatenated in
// rank order. A failure (a rank gone) is an error naming it; the caller stops.
class RankExchange {
public:
  virtual ~RankExchange() = default;
  virtual Status allgather(std::span<const std::byte> mine, std::span<const uint64_t> counts,
                           std::span<std::byte> all) = 0;
};

// After a segment that ends with `split`'s bands: reads this rank's rows from the
// executor's buffers, allgathers them and writes the other ranks' rows in place.
Status exchange_split(runtime::Executor& executor, const SplitNode& split, RankLayout layout, RankExchange& exchange);

}  // namespace strata

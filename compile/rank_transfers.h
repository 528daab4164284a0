// What each rank receives after a split node (compile/rank_split.h): the bytes of the
// other ranks' shares that it reads later. Worked out statically from the plan's
// windows, so every rank derives the same transfers without talking to the others.
//
// After node S, rank r receives the bytes of share b (owner o ≠ r) that are read
//   - by a dispatch r runs later in the same plan (its own bands, with their halos,
//     and every dispatch every rank runs), before any later dispatch overwrites them
//     in the order of one process (the writes of a band or statistics window are its
//     shares, exact; any other dispatch's are its written bindings, which lie inside
//     the values it writes: values start at an aligned offset, so a window's aligned
//     start never leaves its value);
//   - at the end of the plan: its outputs (copied out on every rank: a program's host
//     may feed them back), the sources of its state write-backs, and anything in a
//     state buffer (the next plan of a program reads it).
// Reads are the dispatches' read bindings, which may hold a few bytes more than the
// kernel reads (aligned starts): a rank may receive a little more than it needs,
// never less.
#pragma once

#include "compile/rank_split.h"

#include <span>
#include <vector>

namespace strata {

// runner of a dispatch that every rank runs.
inline constexpr int kEveryRank = -1;

// A split node and where its dispatches are: [begin, end) of the original plan's
// dispatch list, in entry `entry` (entry_list order).
struct PlacedSplit {
  size_t entry = 0;
  uint32_t begin = 0, end = 0;
  SplitNode split;
};

// Per dispatch of the original plan: the rank that runs it (kEveryRank: all), the
// ranks that recompute it too, the bytes it reads and the bytes it writes.
struct PlanAccess {
  std::vector<int> runner;
  std::vector<std::vector<int>> extra;  // ranks that recompute it besides its runner
  std::vector<std::vector<ByteRun>> reads, writes;
};
PlanAccess plan_access(const runtime::Plan& plan, std::span<const PlacedSplit> placed, int ranks);

// The transfers after `at` (every rank's, sorted by (from, to), none empty), in the
// plan `entry` (the entry `at` is in). A rank that recomputes a band of `at` holds its
// share and receives none of it. `read_by_every` (if given): whether a dispatch every
// rank runs, or the end of the plan, reads some of `at`'s shares.
std::vector<Transfer> rank_transfers(const runtime::Plan& plan, const runtime::EntryDesc& entry,
                                     const PlacedSplit& at, const PlanAccess& access, int ranks,
                                     bool* read_by_every = nullptr);

}  // namespace strata

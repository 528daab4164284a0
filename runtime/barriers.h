// Where the runtime puts pipeline barriers in a Plan's dispatch list, and which
// buffer ranges they cover. Pure: no Vulkan, so it is tested and printed directly.
//
// Rule: walking the dispatches in order, the runtime tracks the byte ranges written
// and read since the last barrier. A dispatch gets a barrier before it when one of
// its bindings
//   - reads a range written since the last barrier (read after write),
//   - writes a range written since the last barrier (write after write), or
//   - writes a range read since the last barrier (write after read).
// Dispatches that touch disjoint windows, or only read the same data, run with no
// barrier between them. A barrier is a compute->compute execution dependency on
// everything before it (so it settles every pending read) plus buffer memory
// barriers for every range written since the last barrier (so afterwards nothing is
// pending and "since the last barrier" starts empty again).
#pragma once

#include "runtime/plan.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::runtime {

struct ByteRange {
  uint32_t buffer = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  bool operator==(const ByteRange&) const = default;
};

struct BarrierPoint {
  size_t before_dispatch = 0;     // index into plan.dispatches
  std::vector<ByteRange> writes;  // pending written ranges, sorted, merged per buffer
  std::string reason;  // the first hazard found, e.g. "dispatch 2 reads buffer 'a'
                       // [0, 4000) written by dispatch 1"
};

// Requires validate(plan) to have passed (indices in range).
std::vector<BarrierPoint> plan_barriers(const Plan& plan);
// The same rule over dispatches [first, first + count) alone, as if they were the
// whole list: one entry of a program (EntryDesc), whose command buffer starts with a
// global barrier of its own. Indices stay those of plan.dispatches.
std::vector<BarrierPoint> plan_barriers(const Plan& plan, size_t first, size_t count);

}  // namespace strata::runtime

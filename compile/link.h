// Linking: the plans of a program, each compiled from its own graph, become one
// runtime::Plan whose entries (runtime::EntryDesc) are those plans over one set of
// buffers. This is where the program's memory is planned across plans:
//   - weights: one buffer; an upload that two plans both make (the same source
//     tensor, transform and size) is made once and both plans bind it;
//   - activations (device and host) and scratch: one buffer each, as large as the
//     largest plan's, shared by every plan: plans run one at a time, so their
//     temporaries may overlap;
//   - inputs and outputs: each plan's slots side by side, so an output stays
//     readable after another plan runs (an input that reads a state takes no slot);
//   - states: one "state" buffer, each state at its own aligned window for the
//     program's life. A plan's input that reads a state is not a host input: its
//     kernels bind the state's window directly. A plan's output that writes a state
//     the plan does not read is computed in the state's window (no slot, no copy). One
//     that writes a state the plan also reads is computed into its output slot and
//     copied into the window at the end of the run (EntryDesc::state_writes), so the
//     plan's own reads of the state see the value from before the run.
// A state is stored as the passes store the values bound to it (f16 in an f16 plan,
// NHWC when rank 4; plan format 4). Every plan binding a state must store it alike
// (shape, dtype, layout, bytes), else linking fails naming both plans.
#pragma once

#include "ir/graph.h"
#include "runtime/plan.h"
#include "runtime/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct LinkPart {
  std::string name;                  // the plan's name in the program
  runtime::Plan plan;                // compiled from the plan's graph alone
  std::vector<StateBinding> reads;   // Graph::state_reads(): indices into plan.inputs
  std::vector<StateBinding> writes;  // Graph::state_writes(): indices into plan.outputs
};

struct LinkOptions {
  // Every plan's input (and output) slots start at the same offset of the linked input
  // (output) buffer, which is as large as the largest plan's: a run's inputs and
  // outputs last only until the next run. Default: each plan's slots after the earlier
  // plans', so a plan's inputs stay in place for a replay.
  bool shared_io_slots = false;
};

// Links `parts` in order (plan i's dispatches follow plan i-1's). Offsets in the
// merged buffers are multiples of `alignment` (the target's binding alignment).
// Errors: a state whose shape or dtype differs between two plans (naming both), a
// state binding out of range, a binding of a weights or state input buffer that does
// not lie within one upload or slot (naming the dispatch).
Expected<runtime::Plan> link_program(const std::vector<LinkPart>& parts, uint64_t alignment,
                                     const LinkOptions& options = {});

}  // namespace strata

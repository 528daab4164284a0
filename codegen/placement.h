// Value placement for compile_plan: where every value of a graph lives on the device.
//
// Four buffers (each created only when something lives in it), in this order:
//   "input"       every graph input's host slot, each at an aligned offset: the host
//                 copies the inputs here per run, as f32 in the logical layout. An
//                 f32 input in a row-major layout lives in its slot; any other input
//                 (f16, bf16, nhwc, padded) is "staged": it lives in the arena and
//                 compile_plan converts the slot into it before the first node.
//   "output"      every graph output's host slot (f32, logical), each at an aligned
//                 offset (an output listed twice has one slot). An f32 row-major
//                 output that is an intermediate lives in its slot for good: the
//                 node producing it writes there directly and later readers read it
//                 there. Every other output (an input, a constant, an f16 / nhwc /
//                 padded value) lives elsewhere and is copied or converted into its
//                 slot after the last node.
//   "weights"     every constant some node or output reads, each at an aligned
//                 offset, uploaded once (see codegen/weight_transform.h); two constants
//                 naming the same tensor with the same dtype share one upload.
//   "activations" the arena for all other values, laid out by the memory planner
//                 (passes/memory_plan.h), which owns the rules: reshapes that hold
//                 their operand's bytes alias its storage (no copy), norm_act nodes
//                 write in place over an operand that dies there, values alive at
//                 the same time never overlap otherwise. Placement tells it who stores
//                 what: host slots and weights are ours (fixed); staged inputs that
//                 are read and every intermediate not in an output slot are planned.
//                 Staged inputs live from before the first node, values converted
//                 into an output slot to the end.
//   "activations (host)"  values plan_buffers moved out of device memory to meet a
//                 memory budget (arena "host"), at their planned offsets, in memory
//                 the runtime allocates host-visible (BufferUsage::host_activations).
// When the graph carries no buffer assignments (plan_buffers did not run), the
// planner packs the arena here (plan_memory, in place on). When it does (Value::buffer,
// from passes/plan_buffers), the arena follows them: every arena value assigned to
// "act" sits at its planned offset, the rest (staged inputs and outputs, which that
// pass keeps in its own "in" / "out" arenas) after the planned range, one after the
// other. Either way the places are checked, not trusted (check_memory_plan): an offset
// the target cannot bind, or two values alive together that overlap with the bytes
// codegen stores where the planner's rules do not allow it, is an error naming them.
// Offsets and sizes are multiples of max(target alignment, 16) bytes. A value takes
// physical_elements × storage bytes (codegen/storage.h, the planner's buffer_bytes):
// f32 and bf16 values 4 bytes per element, f16 values 2, padded layouts counting
// their padding slots.
// Constants are stored as f32, except f16 constants read only as conv_gemm weights,
// which are uploaded as f16.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering.h"

#include <string>
#include <vector>

namespace strata::codegen {

struct Placement {
  std::vector<Location> locations;         // per ValueId; bytes == 0: not placed (never read)
  std::vector<DType> storage;              // per ValueId: f32 or f16 (codegen/storage.h)
  std::vector<Location> input_locations;   // per graph.inputs() entry: the host slot
  std::vector<Location> output_locations;  // per graph.outputs() entry: the host slot
  std::vector<runtime::BufferDesc> buffers;
  std::vector<runtime::WeightUpload> weights;
  uint64_t arena_bytes_unshared = 0;  // what the arena would take without reuse
};

Expected<Placement> place_values(const Graph& graph, const WeightStore& weights, const Target& target);

// Whether host I/O can use the value's own storage: f32 in a row-major layout.
bool host_compatible(const TensorType& t);

// The alignment every placed offset and size is a multiple of.
uint64_t placement_alignment(const Target& target);

}  // namespace strata::codegen

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
//   "activations" the arena for all other values. Walking the nodes in order, a
//                 node's outputs are allocated first-fit over the freed ranges (the
//                 arena grows when none fits), then every value whose last reader was
//                 this node is freed; a node's outputs therefore never overlap its
//                 inputs. Staged inputs are allocated before the first node; values
//                 converted into an output slot at the end are never freed. A reshape
//                 that is not a graph output and whose operand and result hold the
//                 same bytes (one storage type; both row major, or one layout and
//                 shape) aliases its operand's storage (no copy) and extends that
//                 storage's lifetime to its own readers.
//   "activations (host)"  values plan_buffers moved out of device memory to meet a
//                 memory budget (arena "host"), at their planned offsets, in memory
//                 the runtime allocates host-visible (BufferUsage::host_activations).
// When the graph carries buffer assignments (Value::buffer, from passes/plan_buffers),
// the arena follows them instead: every arena value assigned to "act" sits at its
// planned offset, the rest (staged inputs and outputs, which that pass keeps in its
// own "in" / "out" arenas) after the planned range. The assignments are checked, not
// trusted: an offset the target cannot bind, or two values alive together that
// overlap with the bytes codegen stores, is an error naming them.
// Offsets and sizes are multiples of max(target alignment, 16) bytes. A value takes
// physical_elements × storage bytes (codegen/storage.h): f32 and bf16 values 4 bytes
// per element, f16 values 2, nhwc and padded layouts counting their padding slots.
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

// Value placement for compile_plan: where every value of a graph lives on the device.
//
// Four buffers (each created only when something lives in it), in this order:
//   "input"       every graph input, each at an aligned offset; the host copies the
//                 inputs here per run.
//   "output"      every graph output, each at an aligned offset (an output listed
//                 twice has one place). An output that is an intermediate lives here
//                 for good: the node producing it writes here directly and later
//                 readers read it here. An output that is a graph input or a
//                 constant gets a place here too, filled by a copy dispatch.
//   "weights"     every constant some node or output reads, each at an aligned
//                 offset, uploaded once as f32 (see weight_transform()); two constants
//                 naming the same tensor with the same dtype share one upload.
//   "activations" the arena for all other intermediates. Walking the nodes in order,
//                 a node's outputs are allocated first-fit over the freed ranges (the
//                 arena grows when none fits), then every value whose last reader was
//                 this node is freed; a node's outputs therefore never overlap its
//                 inputs. A reshape that is not a graph output aliases its input's
//                 storage (no copy) and extends that storage's lifetime to its own
//                 readers.
// Offsets and sizes are multiples of max(target alignment, 16) bytes. Values are f32
// (4 bytes per element) in their logical row-major order.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering.h"

#include <string>
#include <vector>

namespace strata::codegen {

struct Placement {
  std::vector<Location> locations;         // per ValueId; bytes == 0: not placed (never read)
  std::vector<Location> output_locations;  // per graph.outputs() entry
  std::vector<runtime::BufferDesc> buffers;
  std::vector<runtime::WeightUpload> weights;
  uint64_t arena_bytes_unshared = 0;  // what the arena would take without reuse
};

Expected<Placement> place_values(const Graph& graph, const WeightStore& weights, const Target& target);

// The weight-table transform of a constant stored as `stored` whose value has dtype
// `value`: "f32", "f16->f32", "bf16->f32", or with a rounding step when the value is
// narrower than the stored tensor, e.g. "f32->f16->f32" (f32 bytes rounded through
// f16, as the interpreter reads such a constant).
std::string weight_transform(DType stored, DType value);

// The alignment every placed offset and size is a multiple of.
uint64_t placement_alignment(const Target& target);

}  // namespace strata::codegen

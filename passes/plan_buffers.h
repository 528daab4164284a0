// What plan_buffers (passes/plan_buffers.cpp) leaves in a graph, for codegen and the
// CLI: every non-constant value carries Value::buffer = {arena, offset}; these helpers
// read the sizes back.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

// Every offset and every value's reserved size is a multiple of this.
inline constexpr uint64_t kBufferAlignment = 256;

// The arenas, in this order: "act" (intermediates, shared between values whose lives
// do not overlap), "in" (graph inputs), "out" (graph outputs; each keeps its place),
// and "host": intermediates moved out of device memory to meet a memory budget
// (CompileOptions::memory_budget), shared the same way, placed by codegen in
// host-visible system memory.
inline constexpr const char* kActivationArena = "act";
inline constexpr const char* kHostArena = "host";
inline constexpr const char* kInputArena = "in";
inline constexpr const char* kOutputArena = "out";

// Bytes a value of type `t` occupies: elements × dtype size, with the channel dim of
// an nhwc layout counted as padded_channels when that is larger; rounded up to
// kBufferAlignment.
uint64_t buffer_bytes(const TensorType& t);

// True when `n` is a reshape that plan_buffers lets share its operand's storage: same
// dtype and layout on both sides (logical, or nhwc of the same shape), the operand not
// a constant and the result not a graph output.
bool is_buffer_alias(const Graph& g, const Node& n);

struct ArenaSize {
  std::string arena;
  uint64_t bytes = 0;  // max(offset + buffer_bytes) over the values placed in it
};

struct BufferSummary {
  std::vector<ArenaSize> arenas;  // the arenas values use, in the order above
  // Sum of buffer_bytes over the intermediates that are not graph outputs and not
  // aliases: what the activations take with one buffer each.
  uint64_t unshared_activation_bytes = 0;
  int64_t activation_values = 0;  // those values
  int64_t aliases = 0;            // reshape results sharing their operand's storage
  uint64_t arena_bytes(const std::string& name) const;
};

// Reads the arenas back from the graph's Value::buffer fields (after plan_buffers).
BufferSummary summarize_buffers(const Graph& g);

}  // namespace strata

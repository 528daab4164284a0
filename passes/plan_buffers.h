// What plan_buffers (passes/plan_buffers.cpp) leaves in a graph, for codegen and the
// CLI: every non-constant value carries Value::buffer = {arena, offset}; these helpers
// read the sizes back.
#pragma once

#include "ir/graph.h"
#include "passes/memory_plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

// The arenas, in this order: "act" (intermediates, shared between values whose lives
// do not overlap), "in" (graph inputs), "out" (graph outputs; each keeps its place),
// and "host": intermediates moved out of device memory to meet a memory budget
// (CompileOptions::memory_budget), shared the same way, placed by codegen in
// host-visible system memory. Every offset and every value's reserved size is a
// multiple of kBufferAlignment; sizes, aliases, lives and in-place writes are the
// memory planner's (passes/memory_plan.h, pass_request).
inline constexpr const char* kActivationArena = "act";
inline constexpr const char* kHostArena = "host";
inline constexpr const char* kInputArena = "in";
inline constexpr const char* kOutputArena = "out";

// The request plan_buffers makes of the planner: constants none; graph inputs pinned
// one after the other in "in" (graph-input order), graph outputs in "out"
// (graph-output order, once each; an output that is an input or a constant keeps that
// home); every other value planned in "act". In place as asked.
MemoryRequest pass_request(const Graph& g, bool in_place);

struct ArenaSize {
  std::string arena;
  uint64_t bytes = 0;  // max(offset + buffer_bytes) over the values placed in it
};

struct BufferSummary {
  std::vector<ArenaSize> arenas;  // the arenas values use, in the order above
  // Sum of buffer_bytes over the intermediates that are not graph outputs and not
  // aliases (is_buffer_alias under pass_request): what the activations take with one
  // buffer each.
  uint64_t unshared_activation_bytes = 0;
  int64_t activation_values = 0;  // those values
  int64_t aliases = 0;            // reshape results sharing their operand's storage
  uint64_t arena_bytes(const std::string& name) const;
};

// Reads the arenas back from the graph's Value::buffer fields (after plan_buffers).
BufferSummary summarize_buffers(const Graph& g);

}  // namespace strata

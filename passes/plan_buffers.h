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

// True when `n` may write its result over its first operand x, at the node where x's
// life ends: a norm_act whose x is an intermediate that is not a graph output and
// whose result y is not one either, x and y of one type (shape, dtype and layout: the
// same bytes, addressed alike). Its kernels may share the bytes
// (codegen/lower_norm_act.cpp): the statistics passes only read x; the apply and rms
// passes, whole or band by band (x and y bound over the same rows), read each element
// of x before writing the same element of y, and touch no other element of y.
// plan_buffers then gives y x's place, where x dies at `n` (and is not read there
// through another operand).
bool may_run_in_place(const Graph& g, const Node& n);

// Where values are stored, as plan_buffers plans it: root[v] is the value whose
// storage v uses — v itself, or, for the result of an alias (is_buffer_alias) or of a
// node run in place, its operand's root; first / last (indexed by root) are the node
// indices that write the root and last read it or a value sharing its storage, both
// inclusive (-1: none). Only intermediates are given in-place storage.
struct BufferLives {
  std::vector<ValueId> root;
  std::vector<int64_t> first, last;
  std::vector<size_t> in_place;  // indices of the nodes that write over their x
};
// With in_place = false, no node writes over its operand.
BufferLives buffer_lives(const Graph& g, bool in_place);

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

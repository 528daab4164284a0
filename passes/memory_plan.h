// The memory planner: the one analysis of where a graph's values are stored. The
// plan_buffers pass (passes/plan_buffers.cpp), the schedule pass and codegen's
// placement (codegen/placement.cpp) all use it; none keeps rules of its own for sizes,
// aliases, lifetimes or legal overlaps.
//
// The caller says who stores each value (a ValueHome): the planner packs `planned`
// values into named arenas; `fixed` values are stored by the caller (graph inputs and
// outputs, host slots, weights), optionally pinned at a given offset of a named arena,
// where planned values alive at the same time keep clear of them (a later Program can
// pin state or another plan's values this way); `none` values take no storage the
// planner knows of. A pinned value blocks its bytes over its life; state that must
// outlive a run is a graph input or output there, alive from before the first node or
// to after the last.
//
// What the planner owns:
//   - Sizes: a value takes buffer_bytes(type, alignment): its stored elements
//     (padding slots included) × its stored element size (f16: 2 bytes; f32 and bf16:
//     4, bf16 held in f32), rounded up to the alignment.
//   - Storage roots: a reshape whose operand and result hold the same bytes (one
//     stored dtype; both row major, or one layout and shape), or a permute that keeps
//     its operand's bytes in place (passes/fold_transposes.cpp makes them), shares its
//     operand's storage when its result is planned and its operand is not `none`
//     (is_buffer_alias). With in place on, a node that may_run_in_place writes its
//     result over its first operand x when x's storage (x and its aliases) is planned
//     and last read there; the result's storage joins x's.
//   - Lives: a root lives from the node that writes it (-1: before the first node, for
//     graph inputs) to the last node that reads it or a value sharing its storage,
//     both inclusive; a graph output is read after the last node (nodes.size()). So a
//     node's results never overlap its operands, except in place.
//   - Packing (plan_memory): per arena, pinned values first, then planned roots
//     largest first (ties: earlier first, then lower id), each at the lowest aligned
//     offset where it overlaps no placed value alive at the same time.
//   - Legal overlaps (may_share_bytes, check_memory_plan): two stored values may
//     share bytes when their lives are disjoint, or when one is written in place over
//     the other at the node where the other dies, at the same offset.
// Deterministic: the same graph and request give the same plan.
#pragma once

#include "ir/graph.h"
#include "ir/status.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace strata {

// The alignment plan_buffers plans with: a multiple of every device's
// minStorageBufferOffsetAlignment, so one plan binds anywhere.
inline constexpr uint64_t kBufferAlignment = 256;

// ---- Sizes ----------------------------------------------------------------------

// The element type a value of dtype `t` is stored as: f16 as half, f32 and bf16 as f32.
DType stored_dtype(DType t);
// Stored elements: the channel dim (dim 1) counts padded_channels slots when that is
// larger, in any layout.
int64_t stored_elements(const TensorType& t);
// Stored bytes (stored_elements × the stored element size), rounded up to `alignment`
// (1: exact).
uint64_t buffer_bytes(const TensorType& t, uint64_t alignment = kBufferAlignment);
inline uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

// ---- Who stores a value ----------------------------------------------------------

enum class Storage : uint8_t {
  none,     // no storage the planner knows (constants: codegen's weight table)
  fixed,    // stored by the caller; others may share it (aliases), it shares no one's
  planned,  // packed by the planner
};

struct ValueHome {
  Storage storage = Storage::planned;
  // planned: the arena to pack it into (offset unused; a value that shares another's
  // storage goes where that storage goes). fixed: the arena and offset it is pinned
  // at; an empty arena: stored outside the planner's arenas.
  BufferAssignment place{"act", 0};
};

struct MemoryRequest {
  std::vector<ValueHome> homes;  // per ValueId
  uint64_t alignment = kBufferAlignment;
  bool in_place = true;  // let may_run_in_place nodes write over their operand
};

// ---- The rules ---------------------------------------------------------------------

// Whether a value of type `x` and one of type `y` hold the same bytes, addressed the
// same way: one stored dtype and either both row major (no padding, logical order),
// one layout and one shape, or both NHWC [N, C, ·, ·] with the same N, C and pixel
// count (a regrouping of the spatial dims: the bytes are (N, H·W, C) either way).
bool same_stored_bytes(const TensorType& x, const TensorType& y);

// Whether permute(x, perm) of type `y` keeps x's bytes where they are: one stored
// dtype, no channel padding, and every output dim with more than one element at the
// physical stride of the input dim it takes (e.g. [1, C, 1, T] NHWC permuted by
// [0, 3, 2, 1] to a row-major [1, T, 1, C]: both store (T, C)).
bool permute_keeps_bytes(const TensorType& x, const TensorType& y, const std::vector<int64_t>& perm);

// True when `n` is a reshape or permute whose result shares its operand's storage under
// `homes`: same_stored_bytes (a reshape) or permute_keeps_bytes (a permute), the operand
// not `none`, the result `planned`.
bool is_buffer_alias(const Graph& g, const Node& n, const std::vector<ValueHome>& homes);

// True when `n` may write its result over its first operand x, at the node where x's
// life ends: a norm_act whose x is an intermediate that is not a graph output and
// whose result y is not one either, x and y of one type (shape, dtype and layout: the
// same bytes, addressed alike). Its kernels may share the bytes
// (codegen/lower_norm_act.cpp): the statistics passes only read x; the apply and rms
// passes, whole or band by band (x and y bound over the same rows), read each element
// of x before writing the same element of y, and touch no other element of y.
// The planner then gives y x's place, where x dies at `n` (and is not read there
// through another operand).
bool may_run_in_place(const Graph& g, const Node& n);

// ---- Lives -------------------------------------------------------------------------

// root[v] is the value whose storage v uses: v itself, or, for an alias or a result
// written in place, its operand's root. first / last (indexed by root) are the node
// indices that write the root and last read it or a value sharing its storage, both
// inclusive: first -1 for values no node writes (graph inputs), last nodes.size() for
// storage a graph output uses, -1 for storage nothing reads.
struct StorageLives {
  std::vector<ValueId> root;
  std::vector<int64_t> first, last;
  std::vector<size_t> in_place;  // indices of the nodes that write over their x
  bool alive_together(ValueId a, ValueId b) const;
};
StorageLives storage_lives(const Graph& g, const std::vector<ValueHome>& homes, bool in_place);

// Whether roots a and b may share bytes: their lives are disjoint, or one is written
// in place over the other (may_run_in_place) at the node where the other's storage is
// last read, `lives` being computed without in place. (Same offset is the caller's
// half of the rule: check_memory_plan.)
bool may_share_bytes(const Graph& g, const StorageLives& lives, ValueId a, ValueId b);

// ---- Plans -------------------------------------------------------------------------

struct MemoryPlan {
  StorageLives lives;
  // Per ValueId: planned roots at their packed place, pinned values at theirs, and
  // values sharing a root's storage at the root's; nullopt for the rest.
  std::vector<std::optional<BufferAssignment>> place;
  std::vector<uint64_t> bytes;  // per ValueId: buffer_bytes(type, alignment)
  std::map<std::string, uint64_t> arenas;  // name -> max(offset + bytes) over what is in it
  uint64_t unshared_bytes = 0;  // planned roots and in-place results, one buffer each
  int64_t planned_roots = 0;
  uint64_t arena_bytes(const std::string& name) const;
};

// Packs the request's planned values (see the header comment).
MemoryPlan plan_memory(const Graph& g, const MemoryRequest& request);

// Checks places made by someone else (or by plan_memory): every place is a multiple of
// `alignment`; a value sharing a placed root's storage has the root's place; and no
// two roots of one arena whose bytes (buffer_bytes at `alignment`) overlap are
// alive together, unless may_share_bytes at one offset. Lives are computed from
// `homes` without in place. Errors name both values.
Status check_memory_plan(const Graph& g, const std::vector<ValueHome>& homes,
                         const std::vector<std::optional<BufferAssignment>>& place, uint64_t alignment);

}  // namespace strata

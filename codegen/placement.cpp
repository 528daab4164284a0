// Value placement: the buffers of a plan and the location of every value. See
// placement.h for the scheme.
#include "codegen/placement.h"
#include "codegen/weight_transform.h"

#include "codegen/storage.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

namespace strata::codegen {
namespace {

constexpr uint32_t kUnassigned = std::numeric_limits<uint32_t>::max();
enum Pool : uint32_t { kInput, kOutput, kWeights, kArena, kHostArena, kPools };
constexpr const char* kPoolNames[kPools] = {"input", "output", "weights", "activations", "activations (host)"};
constexpr runtime::BufferUsage kPoolUsage[kPools] = {runtime::BufferUsage::input, runtime::BufferUsage::output,
                                                     runtime::BufferUsage::weights, runtime::BufferUsage::activations,
                                                     runtime::BufferUsage::host_activations};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// First-fit allocator over one growing range of bytes.
class Arena {
public:
  uint64_t allocate(uint64_t size) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      const uint64_t at = it->first, left = it->second - size;
      free_.erase(it);
      if (left) free_.emplace(at + size, left);
      return at;
    }
    // Nothing fits: extend a free range that ends the arena, or the arena itself.
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == end_) {
        const uint64_t at = last->first;
        free_.erase(last);
        end_ = at + size;
        return at;
      }
    }
    const uint64_t at = end_;
    end_ += size;
    return at;
  }
  void release(uint64_t at, uint64_t size) {
    auto it = free_.emplace(at, size).first;
    if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  uint64_t size() const { return end_; }

private:
  std::map<uint64_t, uint64_t> free_;  // offset -> size, disjoint, merged
  uint64_t end_ = 0;
};

// Whether constant `v` is read only as a conv_gemm weight (operand 1).
bool only_conv_gemm_weight(const Graph& g, ValueId v) {
  bool read = false;
  for (const Node& n : g.nodes())
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] != v) continue;
      if (n.op != Op::conv_gemm || i != 1) return false;
      read = true;
    }
  return read;
}

// An arena value's life: nodes [first, last] (first = -1: a staged input, written
// before the first node; last = node count: converted into an output slot at the end).
struct Life {
  ValueId v;
  int64_t first, last;
  uint64_t bytes;
};

// Whether `b` is written in place over `a` (passes/plan_buffers.h, may_run_in_place):
// the node where a's life ends writes b, it is a norm_act reading a (or an alias of
// it) as x, and b has a's place and bytes. Its kernels read each element of x before
// writing the same element of y and touch no other element of y
// (lower_norm_act.cpp), so the two may share bytes at that node.
bool written_in_place(const Graph& g, const std::vector<ValueId>& root, const std::vector<Location>& locations,
                      const Life& a, const Life& b) {
  if (a.last != b.first || a.last < 0 || a.last >= static_cast<int64_t>(g.nodes().size())) return false;
  const Node& n = g.nodes()[static_cast<size_t>(a.last)];
  if (n.op != Op::norm_act || n.outputs.size() != 1 || n.outputs[0] != b.v ||
      root[static_cast<size_t>(n.inputs[0])] != a.v)
    return false;
  const Location &la = locations[static_cast<size_t>(a.v)], &lb = locations[static_cast<size_t>(b.v)];
  return la.buffer == lb.buffer && la.offset == lb.offset && a.bytes == b.bytes;
}

// The arenas as passes/plan_buffers.cpp planned them (Value::buffer in arena "act",
// or "host" for values moved out of device memory under a memory budget): each value
// at its planned offset. Values the pass placed elsewhere (staged inputs and outputs,
// which it keeps in its "in" / "out" arenas) follow the planned "act" arena, one
// after the other. The plan is checked, not trusted: offsets must be aligned for the
// target, and no two values of one arena alive at the same time may overlap with the
// bytes codegen stores (f16 as 2 bytes, bf16 as 4, padding slots included) — except a
// result written in place over an operand (written_in_place). Returns the sizes of
// the two arenas.
Expected<std::pair<uint64_t, uint64_t>> place_planned(const Graph& g, const std::vector<Life>& lives, uint64_t align,
                                                      const std::vector<ValueId>& root,
                                                      std::vector<Location>& locations) {
  uint64_t end = 0, host_end = 0;
  auto planned_pool = [&](const Value& v) -> std::optional<Pool> {
    if (v.buffer && v.buffer->arena == "act") return kArena;
    if (v.buffer && v.buffer->arena == "host") return kHostArena;
    return std::nullopt;
  };
  for (const Life& life : lives) {
    const Value& v = g.value(life.v);
    const std::optional<Pool> pool = planned_pool(v);
    if (!pool) continue;
    if (v.buffer->offset % align != 0)
      return error("value %{}: planned offset {} is not a multiple of the target's alignment {}", v.name,
                   v.buffer->offset, align);
    locations[static_cast<size_t>(life.v)] = Location{*pool, v.buffer->offset, life.bytes};
    uint64_t& pool_end = *pool == kArena ? end : host_end;
    pool_end = std::max(pool_end, align_up(v.buffer->offset + life.bytes, align));
  }
  for (const Life& life : lives) {
    if (planned_pool(g.value(life.v))) continue;
    locations[static_cast<size_t>(life.v)] = Location{kArena, end, life.bytes};
    end += align_up(life.bytes, align);
  }
  // Sweep in (arena, offset) order: each value against those of its arena starting
  // before its end.
  std::vector<const Life*> by_offset;
  for (const Life& life : lives) by_offset.push_back(&life);
  auto at = [&](const Life* l) { return locations[static_cast<size_t>(l->v)].offset; };
  auto pool_of = [&](const Life* l) { return locations[static_cast<size_t>(l->v)].buffer; };
  std::stable_sort(by_offset.begin(), by_offset.end(), [&](const Life* a, const Life* b) {
    return std::pair(pool_of(a), at(a)) < std::pair(pool_of(b), at(b));
  });
  for (size_t i = 0; i < by_offset.size(); ++i)
    for (size_t j = i + 1; j < by_offset.size() && pool_of(by_offset[j]) == pool_of(by_offset[i]) &&
                           at(by_offset[j]) < at(by_offset[i]) + by_offset[i]->bytes;
         ++j) {
      const Life &a = *by_offset[i], &b = *by_offset[j];
      if (a.first <= b.last && b.first <= a.last && !written_in_place(g, root, locations, a, b) &&
          !written_in_place(g, root, locations, b, a))
        return error("planned buffers overlap: %{} ({} bytes at {}) and %{} ({} bytes at {}) are alive together",
                     g.value(a.v).name, a.bytes, at(&a), g.value(b.v).name, b.bytes, at(&b));
    }
  return std::pair(end, host_end);
}

}  // namespace

uint64_t placement_alignment(const Target& target) {
  return std::max<uint64_t>(16, target.min_storage_buffer_offset_alignment);
}

bool host_compatible(const TensorType& t) { return t.dtype == DType::f32 && is_row_major(t); }

Expected<Placement> place_values(const Graph& g, const WeightStore& weights, const Target& target) {
  const uint64_t align = placement_alignment(target);
  const size_t nv = g.values().size();
  const auto nn = static_cast<int64_t>(g.nodes().size());
  Placement out;
  out.locations.resize(nv);
  out.storage.resize(nv);
  for (const Value& v : g.values())
    out.storage[static_cast<size_t>(v.id)] =
        v.kind == ValueKind::constant
            ? (v.type.dtype == DType::f16 && only_conv_gemm_weight(g, v.id) ? DType::f16 : DType::f32)
            : activation_storage(v.type.dtype);
  auto bytes_of = [&](ValueId v) {
    return static_cast<uint64_t>(physical_elements(g.value(v).type)) * storage_bytes(out.storage[static_cast<size_t>(v)]);
  };
  auto host_bytes = [&](ValueId v) { return static_cast<uint64_t>(g.value(v).type.elements()) * 4; };
  uint64_t pool_end[kPools] = {0, 0, 0, 0};
  auto put = [&](Pool p, uint64_t bytes) {
    const uint64_t at = pool_end[p];
    pool_end[p] += align_up(bytes, align);
    return Location{p, at, bytes};
  };

  std::vector<bool> read(nv, false), staged_input(nv, false), in_output_slot(nv, false), converted_out(nv, false);
  for (ValueId v : g.outputs()) read[static_cast<size_t>(v)] = true;
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs)
      if (v != kNoValue) read[static_cast<size_t>(v)] = true;

  // Host slots: inputs, then outputs (f32 row-major intermediates live in theirs).
  for (ValueId v : g.inputs()) {
    const Location slot = put(kInput, host_bytes(v));
    out.input_locations.push_back(slot);
    if (host_compatible(g.value(v).type)) out.locations[static_cast<size_t>(v)] = slot;
    else staged_input[static_cast<size_t>(v)] = true;
  }
  std::map<ValueId, Location> output_slot;
  for (ValueId v : g.outputs()) {
    auto [it, fresh] = output_slot.try_emplace(v);
    if (fresh) it->second = put(kOutput, host_bytes(v));
    if (g.value(v).kind == ValueKind::intermediate && host_compatible(g.value(v).type)) {
      out.locations[static_cast<size_t>(v)] = it->second;
      in_output_slot[static_cast<size_t>(v)] = true;
    } else {
      converted_out[static_cast<size_t>(v)] = true;
    }
    out.output_locations.push_back(it->second);
  }

  // Constants: one upload per (tensor, dtype, storage).
  std::map<std::tuple<std::string, DType, DType>, Location> uploads;
  for (ValueId v : g.constants()) {
    const Value& c = g.value(v);
    if (!read[static_cast<size_t>(v)]) continue;
    STRATA_ASSIGN_OR_RETURN(TensorView view, weights.get(c.weight));
    if (num_elements(view.shape) != c.type.elements())
      return error("constant %{}: weight '{}' has shape {}, the value needs {} elements ({})", c.name, c.weight,
                   shape_str(view.shape), c.type.elements(), type_str(c.type));
    if (!is_row_major(c.type))
      return error("constant %{} has layout {}; constants are stored in the logical layout", c.name,
                   layout_str(c.type.layout));
    const DType storage = out.storage[static_cast<size_t>(v)];
    auto [it, fresh] = uploads.try_emplace({c.weight, c.type.dtype, storage});
    if (fresh) {
      it->second = put(kWeights, bytes_of(v));
      out.weights.push_back(runtime::WeightUpload{c.weight, weight_transform(view.dtype, c.type.dtype, storage),
                                                  kWeights, it->second.offset, it->second.bytes});
    }
    out.locations[static_cast<size_t>(v)] = it->second;
  }

  // Reshapes that are not host outputs alias the storage of their input (`root`)
  // when both hold the same bytes: one storage type, and both row major or of one
  // layout and shape.
  std::vector<ValueId> root(nv);
  for (size_t v = 0; v < nv; ++v) root[v] = static_cast<ValueId>(v);
  for (const Node& n : g.nodes()) {
    if (n.op != Op::reshape) continue;
    const auto x = static_cast<size_t>(n.inputs[0]), y = static_cast<size_t>(n.outputs[0]);
    const TensorType &tx = g.value(n.inputs[0]).type, &ty = g.value(n.outputs[0]).type;
    const bool same_bytes = (is_row_major(tx) && is_row_major(ty)) || (tx.layout == ty.layout && tx.shape == ty.shape);
    if (!in_output_slot[y] && out.storage[x] == out.storage[y] && same_bytes) root[y] = root[x];
  }
  auto in_arena = [&](ValueId v) {
    const auto i = static_cast<size_t>(v);
    return root[i] == v && (staged_input[i] || (g.value(v).kind == ValueKind::intermediate && !in_output_slot[i]));
  };

  // Lifetimes of arena values: from the producing node (staged inputs: from before
  // the first) to the last node reading the value or any alias of it; values
  // converted into an output slot live to the end (nn).
  std::vector<int64_t> last_use(nv, -1);
  auto use = [&](ValueId v, int64_t at) {
    int64_t& u = last_use[static_cast<size_t>(root[static_cast<size_t>(v)])];
    u = std::max(u, at);
  };
  for (int64_t i = 0; i < nn; ++i) {
    for (ValueId v : g.nodes()[static_cast<size_t>(i)].outputs) use(v, i);
    for (ValueId v : g.nodes()[static_cast<size_t>(i)].inputs)
      if (v != kNoValue) use(v, i);
  }
  for (ValueId v : g.outputs())
    if (converted_out[static_cast<size_t>(v)]) use(v, nn);
  std::vector<std::vector<ValueId>> frees(static_cast<size_t>(nn));
  for (size_t v = 0; v < nv; ++v)
    if (in_arena(static_cast<ValueId>(v)) && last_use[v] >= 0 && last_use[v] < nn)
      frees[static_cast<size_t>(last_use[v])].push_back(static_cast<ValueId>(v));

  // Arena values in allocation order (staged inputs first), with their lives.
  std::vector<Life> lives;
  for (ValueId v : g.inputs())
    if (in_arena(v) && read[static_cast<size_t>(v)]) lives.push_back({v, -1, last_use[static_cast<size_t>(v)], bytes_of(v)});
  for (int64_t i = 0; i < nn; ++i)
    for (ValueId v : g.nodes()[static_cast<size_t>(i)].outputs)
      if (in_arena(v)) lives.push_back({v, i, last_use[static_cast<size_t>(v)], bytes_of(v)});
  for (const Life& life : lives) out.arena_bytes_unshared += align_up(life.bytes, align);

  if (std::any_of(g.values().begin(), g.values().end(), [](const Value& v) { return v.buffer.has_value(); })) {
    STRATA_ASSIGN_OR_RETURN(auto ends, place_planned(g, lives, align, root, out.locations));
    pool_end[kArena] = ends.first;
    pool_end[kHostArena] = ends.second;
  } else {
    Arena arena;
    size_t next = 0;
    auto allocate_born_before = [&](int64_t at) {
      for (; next < lives.size() && lives[next].first <= at; ++next) {
        const Life& life = lives[next];
        out.locations[static_cast<size_t>(life.v)] = Location{kArena, arena.allocate(align_up(life.bytes, align)), life.bytes};
      }
    };
    allocate_born_before(-1);
    for (int64_t i = 0; i < nn; ++i) {
      allocate_born_before(i);
      for (ValueId v : frees[static_cast<size_t>(i)]) {
        const Location& loc = out.locations[static_cast<size_t>(v)];
        arena.release(loc.offset, align_up(loc.bytes, align));
      }
    }
    pool_end[kArena] = arena.size();
  }
  for (size_t v = 0; v < nv; ++v)
    if (root[v] != static_cast<ValueId>(v)) {
      out.locations[v] = out.locations[static_cast<size_t>(root[v])];
      out.locations[v].bytes = bytes_of(static_cast<ValueId>(v));
    }

  // Pools become buffers; empty pools are left out, so renumber.
  uint32_t index_of[kPools];
  for (uint32_t p = 0; p < kPools; ++p) {
    index_of[p] = kUnassigned;
    if (pool_end[p] == 0) continue;
    index_of[p] = static_cast<uint32_t>(out.buffers.size());
    out.buffers.push_back(runtime::BufferDesc{kPoolNames[p], pool_end[p], kPoolUsage[p]});
  }
  for (Location& loc : out.locations)
    if (loc.bytes) loc.buffer = index_of[loc.buffer];
  for (Location& loc : out.input_locations) loc.buffer = index_of[loc.buffer];
  for (Location& loc : out.output_locations) loc.buffer = index_of[loc.buffer];
  for (runtime::WeightUpload& w : out.weights) w.buffer = index_of[kWeights];
  return out;
}

}  // namespace strata::codegen

// Value placement: the buffers of a plan and the location of every value. See
// placement.h for the scheme.
#include "codegen/placement.h"

#include <algorithm>
#include <limits>
#include <map>

namespace strata::codegen {
namespace {

constexpr uint32_t kUnassigned = std::numeric_limits<uint32_t>::max();
enum Pool : uint32_t { kInput, kOutput, kWeights, kArena, kPools };
constexpr const char* kPoolNames[kPools] = {"input", "output", "weights", "activations"};
constexpr runtime::BufferUsage kPoolUsage[kPools] = {runtime::BufferUsage::input, runtime::BufferUsage::output,
                                                     runtime::BufferUsage::weights,
                                                     runtime::BufferUsage::activations};

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

uint64_t value_bytes(const Value& v) { return static_cast<uint64_t>(v.type.elements()) * 4; }

}  // namespace

uint64_t placement_alignment(const Target& target) {
  return std::max<uint64_t>(16, target.min_storage_buffer_offset_alignment);
}

std::string weight_transform(DType stored, DType value) {
  std::string s(dtype_name(stored));
  if (value != DType::f32 && value != stored) s += "->" + std::string(dtype_name(value));
  if (s != "f32") s += "->f32";
  return s;
}

Expected<Placement> place_values(const Graph& g, const WeightStore& weights, const Target& target) {
  const uint64_t align = placement_alignment(target);
  const size_t nv = g.values().size();
  Placement out;
  out.locations.resize(nv);
  uint64_t pool_end[kPools] = {0, 0, 0, 0};
  auto put = [&](Pool p, uint64_t bytes) {
    const uint64_t at = pool_end[p];
    pool_end[p] += align_up(bytes, align);
    return Location{p, at, bytes};
  };

  std::vector<bool> is_output(nv, false), read(nv, false);
  for (ValueId v : g.outputs()) is_output[static_cast<size_t>(v)] = read[static_cast<size_t>(v)] = true;
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs)
      if (v != kNoValue) read[static_cast<size_t>(v)] = true;

  // Inputs, then outputs (intermediates in place; inputs and constants get a copy slot).
  for (ValueId v : g.inputs()) out.locations[static_cast<size_t>(v)] = put(kInput, value_bytes(g.value(v)));
  std::map<ValueId, Location> output_slot;
  for (ValueId v : g.outputs()) {
    auto [it, fresh] = output_slot.try_emplace(v);
    if (fresh) it->second = put(kOutput, value_bytes(g.value(v)));
    if (g.value(v).kind == ValueKind::intermediate) out.locations[static_cast<size_t>(v)] = it->second;
    out.output_locations.push_back(it->second);
  }

  // Constants: one upload per (tensor, dtype).
  std::map<std::pair<std::string, DType>, Location> uploads;
  for (ValueId v : g.constants()) {
    const Value& c = g.value(v);
    if (!read[static_cast<size_t>(v)]) continue;
    STRATA_ASSIGN_OR_RETURN(TensorView view, weights.get(c.weight));
    if (num_elements(view.shape) != c.type.elements())
      return error("constant %{}: weight '{}' has shape {}, the value needs {} elements ({})", c.name, c.weight,
                   shape_str(view.shape), c.type.elements(), type_str(c.type));
    auto [it, fresh] = uploads.try_emplace({c.weight, c.type.dtype});
    if (fresh) {
      it->second = put(kWeights, value_bytes(c));
      out.weights.push_back(runtime::WeightUpload{c.weight, weight_transform(view.dtype, c.type.dtype), kWeights,
                                                  it->second.offset, it->second.bytes});
    }
    out.locations[static_cast<size_t>(v)] = it->second;
  }

  // Reshapes that are not graph outputs alias the storage of their input (`root`).
  std::vector<ValueId> root(nv);
  for (size_t v = 0; v < nv; ++v) root[v] = static_cast<ValueId>(v);
  for (const Node& n : g.nodes())
    if (n.op == Op::reshape && !is_output[static_cast<size_t>(n.outputs[0])])
      root[static_cast<size_t>(n.outputs[0])] = root[static_cast<size_t>(n.inputs[0])];
  auto in_arena = [&](ValueId v) {
    const Value& val = g.value(v);
    return val.kind == ValueKind::intermediate && !is_output[static_cast<size_t>(v)] && root[static_cast<size_t>(v)] == v;
  };

  // Lifetimes of arena values: from the producing node to the last node reading the
  // value or any alias of it.
  std::vector<int64_t> last_use(nv, -1);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    for (ValueId v : g.nodes()[i].outputs) last_use[static_cast<size_t>(root[static_cast<size_t>(v)])] =
        std::max<int64_t>(last_use[static_cast<size_t>(root[static_cast<size_t>(v)])], static_cast<int64_t>(i));
    for (ValueId v : g.nodes()[i].inputs)
      if (v != kNoValue) last_use[static_cast<size_t>(root[static_cast<size_t>(v)])] = static_cast<int64_t>(i);
  }
  std::vector<std::vector<ValueId>> frees(g.nodes().size());
  for (size_t v = 0; v < nv; ++v)
    if (in_arena(static_cast<ValueId>(v)) && last_use[v] >= 0) frees[static_cast<size_t>(last_use[v])].push_back(static_cast<ValueId>(v));

  Arena arena;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    for (ValueId v : g.nodes()[i].outputs) {
      if (!in_arena(v)) continue;
      const uint64_t bytes = value_bytes(g.value(v)), size = align_up(bytes, align);
      out.locations[static_cast<size_t>(v)] = Location{kArena, arena.allocate(size), bytes};
      out.arena_bytes_unshared += size;
    }
    for (ValueId v : frees[i]) {
      const Location& loc = out.locations[static_cast<size_t>(v)];
      arena.release(loc.offset, align_up(loc.bytes, align));
    }
  }
  pool_end[kArena] = arena.size();
  for (size_t v = 0; v < nv; ++v)
    if (root[v] != static_cast<ValueId>(v)) out.locations[v] = out.locations[static_cast<size_t>(root[v])];

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
  for (Location& loc : out.output_locations) loc.buffer = index_of[loc.buffer];
  for (runtime::WeightUpload& w : out.weights) w.buffer = index_of[kWeights];
  return out;
}

}  // namespace strata::codegen

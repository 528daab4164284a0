// The memory planner (see memory_plan.h for the rules).
#include "passes/memory_plan.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace strata {
namespace {

size_t at(ValueId v) { return static_cast<size_t>(v); }

bool is_graph_output(const Graph& g, ValueId v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

// A stored value's claim on an arena: bytes from `offset`, alive over [first, last].
struct Block {
  ValueId v;
  uint64_t bytes;
  int64_t first, last;
  uint64_t offset = 0;
};

bool overlap_in_time(const Block& a, const Block& b) { return a.first <= b.last && b.first <= a.last; }

// Places `todo` (largest first; ties by first, then id) around `placed` (pinned, at
// their offsets), each at the lowest multiple of `alignment` where it overlaps no
// placed block alive at the same time.
void pack(std::vector<Block>& placed, std::vector<Block> todo, uint64_t alignment) {
  std::stable_sort(todo.begin(), todo.end(), [](const Block& x, const Block& y) {
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    if (x.first != y.first) return x.first < y.first;
    return x.v < y.v;
  });
  for (Block& b : todo) {
    std::vector<const Block*> live;
    for (const Block& o : placed)
      if (overlap_in_time(b, o)) live.push_back(&o);
    std::sort(live.begin(), live.end(), [](const Block* x, const Block* y) {
      return x->offset != y->offset ? x->offset < y->offset : x->v < y->v;
    });
    uint64_t offset = 0;
    for (const Block* o : live) {
      if (offset + b.bytes <= o->offset) break;
      offset = std::max(offset, align_up(o->offset + o->bytes, alignment));
    }
    b.offset = offset;
    placed.push_back(b);
  }
}

}  // namespace

// ---- Sizes ----------------------------------------------------------------------

DType stored_dtype(DType t) { return t == DType::f16 ? DType::f16 : DType::f32; }

int64_t stored_elements(const TensorType& t) {
  if (t.rank() < 2 || t.shape[1] == 0) return t.elements();
  const int64_t c = t.shape[1];
  return t.elements() / c * std::max(c, t.layout.padded_channels);
}

uint64_t buffer_bytes(const TensorType& t, uint64_t alignment) {
  const uint64_t bytes = static_cast<uint64_t>(stored_elements(t)) * (stored_dtype(t.dtype) == DType::f16 ? 2 : 4);
  return align_up(bytes, alignment);
}

// ---- The rules ---------------------------------------------------------------------

bool same_stored_bytes(const TensorType& x, const TensorType& y) {
  if (stored_dtype(x.dtype) != stored_dtype(y.dtype)) return false;
  // Row major: elements in the logical order with no padding slots. nhwc moves the
  // channel dim (dim 1) innermost, which keeps that order when it or every dim after
  // it has one element.
  auto row_major = [](const TensorType& t) {
    if (t.rank() < 2) return true;
    if (t.layout.padded_channels > t.shape[1]) return false;
    if (t.layout.kind == LayoutKind::logical) return true;
    int64_t after = 1;
    for (size_t d = 2; d < t.shape.size(); ++d) after *= t.shape[d];
    return after == 1 || t.shape[1] == 1;
  };
  // NHWC [N, C, H, W] and [N, C, H', W'] with H·W = H'·W' both store (N, H·W, C).
  auto spatial_regroup = [&] {
    return x.layout.kind == LayoutKind::nhwc && x.layout == y.layout && x.rank() == 4 && y.rank() == 4 &&
           x.shape[0] == y.shape[0] && x.shape[1] == y.shape[1] && x.shape[2] * x.shape[3] == y.shape[2] * y.shape[3];
  };
  return (row_major(x) && row_major(y)) || (x.layout == y.layout && x.shape == y.shape) || spatial_regroup();
}

// Element strides of every logical dim in the physical layout (codegen/storage.h's
// physical_strides for unpadded types: row major, or NHWC's dim 0, dims 2.., dim 1).
std::vector<int64_t> unpadded_strides(const TensorType& t) {
  const size_t r = t.shape.size();
  std::vector<int64_t> s(r, 1);
  if (r < 2) return s;
  if (t.layout.kind != LayoutKind::nhwc) {
    for (size_t i = r; i-- > 1;) s[i - 1] = s[i] * t.shape[i];
    return s;
  }
  int64_t step = t.shape[1];
  for (size_t i = r; i-- > 2;) {
    s[i] = step;
    step *= t.shape[i];
  }
  s[0] = step;
  return s;
}

bool permute_keeps_bytes(const TensorType& x, const TensorType& y, const std::vector<int64_t>& perm) {
  if (stored_dtype(x.dtype) != stored_dtype(y.dtype) || perm.size() != y.shape.size() ||
      x.shape.size() != y.shape.size() || x.elements() != y.elements())
    return false;
  for (const TensorType* t : {&x, &y})
    if (t->rank() >= 2 && t->layout.padded_channels > t->shape[1]) return false;
  const std::vector<int64_t> sx = unpadded_strides(x), sy = unpadded_strides(y);
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || static_cast<size_t>(perm[d]) >= sx.size()) return false;
    if (y.shape[d] > 1 && sy[d] != sx[static_cast<size_t>(perm[d])]) return false;
  }
  return true;
}

bool is_buffer_alias(const Graph& g, const Node& n, const std::vector<ValueHome>& homes) {
  if ((n.op != Op::reshape && n.op != Op::permute) || n.inputs.empty() || n.outputs.size() != 1 ||
      n.inputs[0] == kNoValue)
    return false;
  const ValueId x = n.inputs[0], y = n.outputs[0];
  if (homes[at(x)].storage == Storage::none || homes[at(y)].storage != Storage::planned) return false;
  const TensorType &tx = g.value(x).type, &ty = g.value(y).type;
  return n.op == Op::reshape ? same_stored_bytes(tx, ty) : permute_keeps_bytes(tx, ty, n.attrs.get_ints("perm"));
}

bool may_run_in_place(const Graph& g, const Node& n) {
  if (n.op != Op::norm_act || n.inputs.empty() || n.outputs.size() != 1) return false;
  const Value& x = g.value(n.inputs[0]);
  const Value& y = g.value(n.outputs[0]);
  if (x.kind != ValueKind::intermediate || x.type != y.type) return false;
  if (is_graph_output(g, x.id) || is_graph_output(g, y.id)) return false;
  return std::count(n.inputs.begin(), n.inputs.end(), x.id) == 1;  // x not also read as γ, β or bias
}

// ---- Lives -------------------------------------------------------------------------

bool StorageLives::alive_together(ValueId a, ValueId b) const {
  return first[at(a)] <= last[at(b)] && first[at(b)] <= last[at(a)];
}

StorageLives storage_lives(const Graph& g, const std::vector<ValueHome>& homes, bool in_place) {
  const size_t nv = g.values().size();
  const auto end = static_cast<int64_t>(g.nodes().size());
  StorageLives b;
  b.root.resize(nv);
  b.first.assign(nv, -1);
  b.last.assign(nv, -1);
  for (size_t v = 0; v < nv; ++v) b.root[v] = static_cast<ValueId>(v);
  for (int64_t i = 0; i < end; ++i) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    for (ValueId in : n.inputs)
      if (in != kNoValue) b.last[at(b.root[at(in)])] = i;
    const bool alias = is_buffer_alias(g, n, homes);
    for (ValueId out : n.outputs) {
      if (alias) b.root[at(out)] = b.root[at(n.inputs[0])];
      const ValueId r = b.root[at(out)];
      if (r == out) b.first[at(out)] = i;
      b.last[at(r)] = std::max(b.last[at(r)], i);
    }
  }
  for (ValueId v : g.outputs()) b.last[at(b.root[at(v)])] = end;  // read after the last node
  if (!in_place) return b;
  // A node writes over x when x's storage (x and its aliases) is planned and last read
  // there; y's storage (y and its aliases) then joins x's. In node order, so a chain
  // of such nodes shares one place.
  for (int64_t i = 0; i < end; ++i) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    if (!may_run_in_place(g, n)) continue;
    const ValueId r = b.root[at(n.inputs[0])], y = n.outputs[0];
    if (homes[at(r)].storage != Storage::planned || homes[at(y)].storage != Storage::planned || b.last[at(r)] != i ||
        b.root[at(y)] != y)
      continue;
    for (ValueId& root : b.root)
      if (root == y) root = r;
    b.last[at(r)] = std::max(b.last[at(r)], b.last[at(y)]);
    b.first[at(y)] = b.last[at(y)] = -1;
    b.in_place.push_back(static_cast<size_t>(i));
  }
  return b;
}

bool may_share_bytes(const Graph& g, const StorageLives& lives, ValueId a, ValueId b) {
  if (!lives.alive_together(a, b)) return true;
  for (auto [x, y] : {std::pair(a, b), std::pair(b, a)}) {
    const int64_t i = lives.last[at(x)];
    if (i < 0 || i >= static_cast<int64_t>(g.nodes().size()) || lives.first[at(y)] != i) continue;
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    if (may_run_in_place(g, n) && n.outputs[0] == y && lives.root[at(n.inputs[0])] == x) return true;
  }
  return false;
}

// ---- Plans -------------------------------------------------------------------------

uint64_t MemoryPlan::arena_bytes(const std::string& name) const {
  auto it = arenas.find(name);
  return it == arenas.end() ? 0 : it->second;
}

MemoryPlan plan_memory(const Graph& g, const MemoryRequest& request) {
  const size_t nv = g.values().size();
  const std::vector<ValueHome>& homes = request.homes;
  MemoryPlan p;
  p.lives = storage_lives(g, homes, request.in_place);
  p.place.resize(nv);
  p.bytes.resize(nv);
  for (const Value& v : g.values()) p.bytes[at(v.id)] = buffer_bytes(v.type, request.alignment);

  // Per arena: the pinned blocks, then the planned roots.
  std::map<std::string, std::pair<std::vector<Block>, std::vector<Block>>> arenas;
  for (const Value& v : g.values()) {
    const size_t i = at(v.id);
    const ValueHome& h = homes[i];
    const Block block{v.id, p.bytes[i], p.lives.first[i], p.lives.last[i], h.place.offset};
    if (h.storage == Storage::fixed && !h.place.arena.empty()) {
      arenas[h.place.arena].first.push_back(block);
    } else if (h.storage == Storage::planned && p.lives.root[i] == v.id) {
      arenas[h.place.arena].second.push_back(block);
      p.unshared_bytes += block.bytes;
      ++p.planned_roots;
    }
  }
  for (size_t n : p.lives.in_place) p.unshared_bytes += p.bytes[at(g.nodes()[n].outputs[0])];
  for (auto& [name, blocks] : arenas) {
    std::vector<Block>& placed = blocks.first;
    pack(placed, std::move(blocks.second), request.alignment);
    uint64_t& size = p.arenas[name];
    for (const Block& b : placed) {
      p.place[at(b.v)] = BufferAssignment{name, b.offset};
      size = std::max(size, b.offset + b.bytes);
    }
  }
  for (size_t v = 0; v < nv; ++v)  // aliases and results written in place: their root's place
    if (p.lives.root[v] != static_cast<ValueId>(v)) p.place[v] = p.place[at(p.lives.root[v])];
  return p;
}

Status check_memory_plan(const Graph& g, const std::vector<ValueHome>& homes,
                         const std::vector<std::optional<BufferAssignment>>& place, uint64_t alignment) {
  const StorageLives lives = storage_lives(g, homes, false);
  std::vector<Block> blocks;
  for (const Value& v : g.values()) {
    const size_t i = at(v.id);
    if (!place[i]) continue;
    if (place[i]->offset % alignment != 0)
      return error("value %{}: offset {} in arena {} is not a multiple of the alignment {}", v.name, place[i]->offset,
                   place[i]->arena, alignment);
    const ValueId r = lives.root[i];
    if (r != v.id) {
      if (place[at(r)] && place[at(r)] != place[i])
        return error("value %{} shares the storage of %{} but is placed at {}+{}, not at {}+{}", v.name,
                     g.value(r).name, place[i]->arena, place[i]->offset, place[at(r)]->arena, place[at(r)]->offset);
      continue;
    }
    blocks.push_back(Block{v.id, buffer_bytes(v.type, alignment), lives.first[i], lives.last[i], place[i]->offset});
  }
  // Sweep in (arena, offset) order: each value against those of its arena starting
  // before its end.
  auto arena = [&](const Block& b) -> const std::string& { return place[at(b.v)]->arena; };
  std::stable_sort(blocks.begin(), blocks.end(), [&](const Block& a, const Block& b) {
    return std::tie(arena(a), a.offset) < std::tie(arena(b), b.offset);
  });
  auto starts_inside = [&](const Block& b, const Block& a) {
    return arena(b) == arena(a) && b.offset < a.offset + a.bytes;
  };
  for (size_t i = 0; i < blocks.size(); ++i)
    for (size_t j = i + 1; j < blocks.size() && starts_inside(blocks[j], blocks[i]); ++j) {
      const Block &a = blocks[i], &b = blocks[j];
      if (may_share_bytes(g, lives, a.v, b.v) && (!lives.alive_together(a.v, b.v) || a.offset == b.offset)) continue;
      return error("planned buffers overlap: %{} ({} bytes at {}+{}) and %{} ({} bytes at {}+{}) are alive together",
                   g.value(a.v).name, a.bytes, arena(a), a.offset, g.value(b.v).name, b.bytes, arena(b), b.offset);
    }
  return Status::ok();
}

}  // namespace strata

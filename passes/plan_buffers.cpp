// plan_buffers: value lifetimes → offsets in a few arenas.
//
// Rewrites: sets Value::buffer = {arena, offset} on every non-constant value (and
// clears it on constants: weights live in the Plan's weight table):
//   - "in": each graph input at its own offset, in graph-input order.
//   - "out": each graph output at its own offset, in graph-output order (a value listed
//     twice has one place); an output lives for the whole run.
//   - "act": every other intermediate. A value lives from the node that writes it to
//     the last node that reads it (or its aliases), both inclusive, so a node's results
//     never overlap its operands — except in place, below. Values are placed greedily
//     by size (largest first; ties by definition order, then id), each at the lowest
//     256-byte-aligned offset where it overlaps no placed value that is alive at the
//     same time.
//   - Aliases (is_buffer_alias: a reshape whose operand and result have the same
//     layout and dtype) take their operand's place; its life extends to theirs.
//   - In place (CompileOptions::write_in_place): a node that may_run_in_place (a
//     norm_act, x and y of one type) where x's storage is last read takes x's place
//     for its result, and x's life extends to the result's (buffer_lives).
// Sizes are buffer_bytes(type): NHWC padding and f16 storage count as stored.
// Logs bytes before (one buffer per activation) and after (the arenas), the aliases
// and the nodes run in place.
//
// Memory budget (CompileOptions::memory_budget, bytes; 0 = none): the weights every
// node reads (4 bytes per element, as codegen uploads them, 2 for f16 constants), the
// "in" and "out" arenas and the "act" arena must fit it. While "act" is larger than
// what is left, one value alive at the point of the schedule with the most live
// bytes moves to the "host" arena — the smallest whose bytes cover the excess, else
// the largest (ties: the longer life, then the lower id) — and both arenas are
// planned again. An error names the budget and what the fixed
// parts take when even an empty "act" does not fit. Moving values changes where they
// live, never what is computed: results are bit-identical.
//
// Requires: final shapes, dtypes and layouts (runs last).
// Preserves: everything else; deterministic (the same graph gives the same offsets).
#include "passes/plan_buffers.h"

#include "passes/passes.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

namespace strata {

uint64_t buffer_bytes(const TensorType& t) {
  uint64_t elements = static_cast<uint64_t>(t.elements());
  if (t.layout.kind == LayoutKind::nhwc && t.rank() >= 2 && t.shape[1] > 0 && t.layout.padded_channels > t.shape[1])
    elements = elements / static_cast<uint64_t>(t.shape[1]) * static_cast<uint64_t>(t.layout.padded_channels);
  uint64_t bytes = elements * dtype_size(t.dtype);
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

bool is_buffer_alias(const Graph& g, const Node& n) {
  if (n.op != Op::reshape || n.inputs.empty() || n.outputs.size() != 1) return false;
  const Value& in = g.value(n.inputs[0]);
  const Value& out = g.value(n.outputs[0]);
  if (in.kind == ValueKind::constant) return false;
  if (std::find(g.outputs().begin(), g.outputs().end(), out.id) != g.outputs().end()) return false;
  if (in.type.dtype != out.type.dtype || in.type.layout != out.type.layout) return false;
  return in.type.layout.kind == LayoutKind::logical || in.type.shape == out.type.shape;
}

bool may_run_in_place(const Graph& g, const Node& n) {
  if (n.op != Op::norm_act || n.inputs.empty() || n.outputs.size() != 1) return false;
  const Value& x = g.value(n.inputs[0]);
  const Value& y = g.value(n.outputs[0]);
  if (x.kind != ValueKind::intermediate || x.type != y.type) return false;
  const auto& outs = g.outputs();
  if (std::find(outs.begin(), outs.end(), x.id) != outs.end() || std::find(outs.begin(), outs.end(), y.id) != outs.end())
    return false;
  return std::count(n.inputs.begin(), n.inputs.end(), x.id) == 1;  // x not also read as γ, β or bias
}

BufferLives buffer_lives(const Graph& g, bool in_place) {
  const size_t nv = g.values().size();
  const auto end = static_cast<int64_t>(g.nodes().size());
  BufferLives b;
  b.root.resize(nv);
  b.first.assign(nv, -1);
  b.last.assign(nv, -1);
  auto at = [](ValueId v) { return static_cast<size_t>(v); };
  for (size_t v = 0; v < nv; ++v) b.root[v] = static_cast<ValueId>(v);
  for (int64_t i = 0; i < end; ++i) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    for (ValueId in : n.inputs)
      if (in != kNoValue) b.last[at(b.root[at(in)])] = i;
    for (ValueId out : n.outputs) {
      if (is_buffer_alias(g, n)) b.root[at(out)] = b.root[at(n.inputs[0])];
      const ValueId r = b.root[at(out)];
      if (r == out) b.first[at(out)] = i;
      b.last[at(r)] = std::max(b.last[at(r)], i);
    }
  }
  if (!in_place) return b;
  // A node writes over x when x's storage (x and its aliases) is last read there; y's
  // storage (y and its aliases) then joins x's. In node order, so a chain of such
  // nodes shares one place.
  for (int64_t i = 0; i < end; ++i) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    if (!may_run_in_place(g, n)) continue;
    const ValueId r = b.root[at(n.inputs[0])], y = n.outputs[0];
    const auto& outs = g.outputs();
    if (g.value(r).kind != ValueKind::intermediate || std::find(outs.begin(), outs.end(), r) != outs.end() ||
        b.last[at(r)] != i || b.root[at(y)] != y)
      continue;
    for (ValueId& root : b.root)
      if (root == y) root = r;
    b.last[at(r)] = std::max(b.last[at(r)], b.last[at(y)]);
    b.first[at(y)] = b.last[at(y)] = -1;
    b.in_place.push_back(static_cast<size_t>(i));
  }
  return b;
}

uint64_t BufferSummary::arena_bytes(const std::string& name) const {
  for (const ArenaSize& a : arenas)
    if (a.arena == name) return a.bytes;
  return 0;
}

BufferSummary summarize_buffers(const Graph& g) {
  BufferSummary s;
  std::vector<bool> alias(g.values().size(), false);
  for (const Node& n : g.nodes())
    if (is_buffer_alias(g, n)) alias[static_cast<size_t>(n.outputs[0])] = true;
  std::set<ValueId> outputs(g.outputs().begin(), g.outputs().end());
  for (const char* name : {kActivationArena, kInputArena, kOutputArena}) s.arenas.push_back({name, 0});
  for (const Value& v : g.values()) {
    if (v.kind == ValueKind::intermediate && !outputs.count(v.id)) {
      if (alias[static_cast<size_t>(v.id)]) {
        ++s.aliases;
      } else {
        ++s.activation_values;
        s.unshared_activation_bytes += buffer_bytes(v.type);
      }
    }
    if (!v.buffer) continue;
    auto it = std::find_if(s.arenas.begin(), s.arenas.end(), [&](const ArenaSize& a) { return a.arena == v.buffer->arena; });
    if (it == s.arenas.end()) it = s.arenas.insert(s.arenas.end(), ArenaSize{v.buffer->arena, 0});
    it->bytes = std::max(it->bytes, v.buffer->offset + buffer_bytes(v.type));
  }
  std::erase_if(s.arenas, [](const ArenaSize& a) { return a.bytes == 0; });
  return s;
}

namespace {

struct Block {
  ValueId root;
  uint64_t bytes;
  int64_t first, last;  // node indices, inclusive
  uint64_t offset = 0;
};

bool overlap(const Block& a, const Block& b) { return a.first <= b.last && b.first <= a.last; }

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }
std::string gib(uint64_t bytes) {
  return bytes >= (1ull << 30) ? fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30)) : mib(bytes);
}

// Places the blocks with spilled[i] == host (largest first; ties by definition order,
// then id), each at the lowest offset where it overlaps no placed block alive at the
// same time. Returns the arena's size.
uint64_t pack(std::vector<Block>& blocks, const std::vector<bool>& spilled, bool host) {
  std::vector<size_t> order;
  for (size_t i = 0; i < blocks.size(); ++i)
    if (spilled[i] == host) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Block &x = blocks[a], &y = blocks[b];
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    if (x.first != y.first) return x.first < y.first;
    return x.root < y.root;
  });
  std::vector<size_t> placed;
  uint64_t arena = 0;
  for (size_t i : order) {
    Block& b = blocks[i];
    std::vector<const Block*> live;
    for (size_t j : placed)
      if (overlap(b, blocks[j])) live.push_back(&blocks[j]);
    std::sort(live.begin(), live.end(), [](const Block* x, const Block* y) {
      return x->offset != y->offset ? x->offset < y->offset : x->root < y->root;
    });
    uint64_t offset = 0;
    for (const Block* o : live) {
      if (offset + b.bytes <= o->offset) break;
      offset = std::max(offset, o->offset + o->bytes);
    }
    b.offset = offset;
    arena = std::max(arena, offset + b.bytes);
    placed.push_back(i);
  }
  return arena;
}

// The device-resident block to move next, among those alive at the node where the
// device-resident blocks' live bytes peak: the smallest of at least `excess` bytes,
// else the largest (ties: longer life, then lower id).
std::optional<size_t> victim_at_peak(const std::vector<Block>& blocks, const std::vector<bool>& spilled,
                                     int64_t nodes, uint64_t excess) {
  std::vector<uint64_t> live(static_cast<size_t>(std::max<int64_t>(nodes, 1)), 0);
  for (size_t i = 0; i < blocks.size(); ++i)
    if (!spilled[i])
      for (int64_t t = std::max<int64_t>(blocks[i].first, 0); t <= blocks[i].last && t < nodes; ++t)
        live[static_cast<size_t>(t)] += blocks[i].bytes;
  const auto peak = static_cast<int64_t>(std::max_element(live.begin(), live.end()) - live.begin());
  auto rank = [&](size_t i) {
    const Block& b = blocks[i];
    return std::tuple(b.bytes, b.last - b.first, -static_cast<int64_t>(b.root));
  };
  std::optional<size_t> largest, covering;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks[i];
    if (spilled[i] || b.first > peak || b.last < peak) continue;
    if (!largest || rank(i) > rank(*largest)) largest = i;
    if (b.bytes >= excess && (!covering || b.bytes < blocks[*covering].bytes ||
                              (b.bytes == blocks[*covering].bytes && rank(i) > rank(*covering))))
      covering = i;
  }
  return covering ? covering : largest;
}

// Bytes of the weights the nodes read, as codegen uploads them (f32, f16 kept).
uint64_t weight_bytes(const Graph& g) {
  std::set<std::string> seen;
  uint64_t total = 0;
  for (ValueId v : g.constants()) {
    const Value& c = g.value(v);
    if (!seen.insert(c.weight + "/" + std::string(dtype_name(c.type.dtype))).second) continue;
    total += static_cast<uint64_t>(c.type.elements()) * (c.type.dtype == DType::f16 ? 2 : 4);
  }
  return total;
}

}  // namespace

Status run_plan_buffers(Graph& g, PassContext& ctx) {
  const size_t nv = g.values().size();
  const int64_t end = static_cast<int64_t>(g.nodes().size());
  std::set<ValueId> outputs(g.outputs().begin(), g.outputs().end());

  // root[v]: the value whose storage v uses; first/last: the root's life.
  const BufferLives lives = buffer_lives(g, ctx.options.write_in_place);
  const std::vector<ValueId>& root = lives.root;
  const std::vector<int64_t>& first = lives.first;
  const std::vector<int64_t>& last = lives.last;

  std::vector<Block> blocks;
  uint64_t unshared = 0;
  for (size_t i : lives.in_place) unshared += buffer_bytes(g.value(g.nodes()[i].outputs[0]).type);
  for (const Value& v : g.values()) {
    if (v.kind != ValueKind::intermediate || outputs.count(v.id) || root[static_cast<size_t>(v.id)] != v.id) continue;
    blocks.push_back(Block{v.id, buffer_bytes(v.type), first[static_cast<size_t>(v.id)], last[static_cast<size_t>(v.id)]});
    unshared += blocks.back().bytes;
  }
  uint64_t in_bytes = 0, out_bytes = 0;
  for (ValueId v : g.inputs()) in_bytes += buffer_bytes(g.value(v).type);
  std::set<ValueId> listed;
  for (ValueId v : g.outputs())
    if (g.value(v).kind != ValueKind::constant && g.value(v).kind != ValueKind::input && listed.insert(v).second)
      out_bytes += buffer_bytes(g.value(v).type);

  std::vector<bool> spilled(blocks.size(), false);
  uint64_t arena = pack(blocks, spilled, false);
  uint64_t host_arena = 0;
  if (const uint64_t budget = ctx.options.memory_budget) {
    const uint64_t fixed = weight_bytes(g) + in_bytes + out_bytes;
    if (fixed > budget)
      return error("memory budget {} bytes ({}): the weights, inputs and outputs alone take {} bytes ({})", budget,
                   gib(budget), fixed, gib(fixed));
    while (arena > budget - fixed) {
      const std::optional<size_t> victim = victim_at_peak(blocks, spilled, end, arena - (budget - fixed));
      if (!victim) break;
      spilled[*victim] = true;
      arena = pack(blocks, spilled, false);
    }
    host_arena = pack(blocks, spilled, true);
    if (arena > budget - fixed)
      return error("memory budget {} bytes ({}): the activations need {} bytes of device memory beside {} bytes of "
                   "weights, inputs and outputs", budget, gib(budget), arena, fixed);
  }

  for (size_t v = 0; v < nv; ++v) g.value(static_cast<ValueId>(v)).buffer.reset();
  for (size_t i = 0; i < blocks.size(); ++i)
    g.value(blocks[i].root).buffer = BufferAssignment{spilled[i] ? kHostArena : kActivationArena, blocks[i].offset};
  in_bytes = out_bytes = 0;
  for (ValueId v : g.inputs()) {
    g.value(v).buffer = BufferAssignment{kInputArena, in_bytes};
    in_bytes += buffer_bytes(g.value(v).type);
  }
  for (ValueId v : g.outputs()) {
    if (g.value(v).buffer || g.value(v).kind == ValueKind::constant) continue;  // listed twice, or an input
    g.value(v).buffer = BufferAssignment{kOutputArena, out_bytes};
    out_bytes += buffer_bytes(g.value(v).type);
  }
  int64_t shared = 0;
  for (size_t v = 0; v < nv; ++v) {  // aliases and in-place results: their root's place
    ValueId r = root[v];
    if (r == static_cast<ValueId>(v)) continue;
    g.value(static_cast<ValueId>(v)).buffer = g.value(r).buffer;
    ++shared;
  }
  const auto in_place = static_cast<int64_t>(lives.in_place.size());
  ctx.log.push_back(fmt::format(
      "plan_buffers: activations {} ({} bytes) in {} buffers unshared -> arena act {} ({} bytes), {} aliases, "
      "{} in place; in {} bytes, out {} bytes",
      mib(unshared), unshared, blocks.size() + lives.in_place.size(), mib(arena), arena, shared - in_place, in_place,
      in_bytes, out_bytes));
  if (host_arena > 0) {
    int64_t moved = 0;
    for (bool s : spilled) moved += s;
    ctx.log.push_back(fmt::format("plan_buffers: memory budget {}: {} values moved to arena host {} ({} bytes)",
                                  gib(ctx.options.memory_budget), moved, mib(host_arena), host_arena));
  }
  return Status::ok();
}

}  // namespace strata

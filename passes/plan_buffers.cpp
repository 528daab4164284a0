// plan_buffers: value lifetimes → offsets in a few arenas.
//
// Rewrites: sets Value::buffer = {arena, offset} on every non-constant value (and
// clears it on constants: weights live in the Plan's weight table):
//   - "in": each graph input at its own offset, in graph-input order.
//   - "out": each graph output at its own offset, in graph-output order (a value listed
//     twice has one place); an output lives for the whole run.
//   - "act": every other intermediate, packed by the memory planner
//     (passes/memory_plan.h, plan_memory with pass_request): a value lives from the
//     node that writes it to the last node that reads it (or its aliases), both
//     inclusive; values are placed largest first, each at the lowest 256-byte-aligned
//     offset where it overlaps no placed value alive at the same time.
//   - Aliases (is_buffer_alias: a reshape whose operand and result hold the same
//     bytes) take their operand's place; its life extends to theirs.
//   - In place (CompileOptions::write_in_place): a node that may_run_in_place (a
//     norm_act, x and y of one type) where x's storage is last read takes x's place
//     for its result, and x's life extends to the result's.
// Sizes are buffer_bytes(type): padding slots and the stored element type count.
// Logs bytes before (one buffer per activation) and after (the arenas), the aliases
// and the nodes run in place.
//
// Memory budget (CompileOptions::memory_budget, bytes; 0 = none): the weights every
// node reads (4 bytes per element, as codegen uploads them, 2 for f16 constants), the
// "in" and "out" arenas and the "act" arena must fit it. While "act" is larger than
// what is left, one value alive at the point of the schedule with the most live
// bytes moves to the "host" arena — the smallest whose bytes cover the excess, else
// the largest (ties: the longer life, then the lower id) — and both arenas are
// planned again. With memory_budget_activations_only the "act" arena alone must fit
// (the caller counts the rest). An error names the budget and what the fixed
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

MemoryRequest pass_request(const Graph& g, bool in_place) {
  MemoryRequest r;
  r.in_place = in_place;
  r.homes.resize(g.values().size());
  for (const Value& v : g.values())
    if (v.kind == ValueKind::constant) r.homes[static_cast<size_t>(v.id)] = ValueHome{Storage::none, {}};
  uint64_t in = 0, out = 0;
  for (ValueId v : g.inputs()) {
    r.homes[static_cast<size_t>(v)] = ValueHome{Storage::fixed, {kInputArena, in}};
    in += buffer_bytes(g.value(v).type, r.alignment);
  }
  for (ValueId v : g.outputs()) {
    // Listed twice, an input or a constant: it keeps that home.
    if (r.homes[static_cast<size_t>(v)].storage != Storage::planned) continue;
    r.homes[static_cast<size_t>(v)] = ValueHome{Storage::fixed, {kOutputArena, out}};
    out += buffer_bytes(g.value(v).type, r.alignment);
  }
  return r;
}

uint64_t BufferSummary::arena_bytes(const std::string& name) const {
  for (const ArenaSize& a : arenas)
    if (a.arena == name) return a.bytes;
  return 0;
}

BufferSummary summarize_buffers(const Graph& g) {
  BufferSummary s;
  std::vector<bool> alias(g.values().size(), false);
  const std::vector<ValueHome> homes = pass_request(g, false).homes;
  for (const Node& n : g.nodes())
    if (is_buffer_alias(g, n, homes)) alias[static_cast<size_t>(n.outputs[0])] = true;
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

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }
std::string gib(uint64_t bytes) {
  return bytes >= (1ull << 30) ? fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30)) : mib(bytes);
}

// The "act" root to move to "host" next, among those alive at the node where the
// "act" roots' live bytes peak: the smallest of at least `excess` bytes, else the
// largest (ties: longer life, then lower id).
std::optional<ValueId> victim_at_peak(const Graph& g, const MemoryRequest& request, const MemoryPlan& plan,
                                      uint64_t excess) {
  const StorageLives& lives = plan.lives;
  const auto nodes = static_cast<int64_t>(g.nodes().size());
  std::vector<ValueId> act;
  for (const Value& v : g.values()) {
    const auto i = static_cast<size_t>(v.id);
    if (request.homes[i].storage == Storage::planned && request.homes[i].place.arena == kActivationArena &&
        lives.root[i] == v.id)
      act.push_back(v.id);
  }
  std::vector<uint64_t> live(static_cast<size_t>(std::max<int64_t>(nodes, 1)), 0);
  for (ValueId v : act) {
    const auto i = static_cast<size_t>(v);
    for (int64_t t = std::max<int64_t>(lives.first[i], 0); t <= lives.last[i] && t < nodes; ++t)
      live[static_cast<size_t>(t)] += plan.bytes[i];
  }
  const auto peak = static_cast<int64_t>(std::max_element(live.begin(), live.end()) - live.begin());
  auto rank = [&](ValueId v) {
    const auto i = static_cast<size_t>(v);
    return std::tuple(plan.bytes[i], lives.last[i] - lives.first[i], -static_cast<int64_t>(v));
  };
  std::optional<ValueId> largest, covering;
  for (ValueId v : act) {
    const auto i = static_cast<size_t>(v);
    const uint64_t bytes = plan.bytes[i];
    if (lives.first[i] > peak || lives.last[i] < peak) continue;
    if (!largest || rank(v) > rank(*largest)) largest = v;
    if (bytes >= excess && (!covering || bytes < plan.bytes[static_cast<size_t>(*covering)] ||
                            (bytes == plan.bytes[static_cast<size_t>(*covering)] && rank(v) > rank(*covering))))
      covering = v;
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
  MemoryRequest request = pass_request(g, ctx.options.write_in_place);
  MemoryPlan plan = plan_memory(g, request);
  const uint64_t in_bytes = plan.arena_bytes(kInputArena), out_bytes = plan.arena_bytes(kOutputArena);

  int64_t moved = 0;
  if (const uint64_t budget = ctx.options.memory_budget) {
    const uint64_t fixed =
        ctx.options.memory_budget_activations_only ? 0 : weight_bytes(g) + in_bytes + out_bytes;
    if (fixed > budget)
      return error("memory budget {} bytes ({}): the weights, inputs and outputs alone take {} bytes ({})", budget,
                   gib(budget), fixed, gib(fixed));
    while (plan.arena_bytes(kActivationArena) > budget - fixed) {
      const std::optional<ValueId> victim =
          victim_at_peak(g, request, plan, plan.arena_bytes(kActivationArena) - (budget - fixed));
      if (!victim) break;
      request.homes[static_cast<size_t>(*victim)].place.arena = kHostArena;
      ++moved;
      plan = plan_memory(g, request);
    }
    if (plan.arena_bytes(kActivationArena) > budget - fixed)
      return error("memory budget {} bytes ({}): the activations need {} bytes of device memory beside {} bytes of "
                   "weights, inputs and outputs", budget, gib(budget), plan.arena_bytes(kActivationArena), fixed);
  }

  for (const Value& v : g.values()) g.value(v.id).buffer = plan.place[static_cast<size_t>(v.id)];
  int64_t shared = 0;
  for (size_t v = 0; v < g.values().size(); ++v) shared += plan.lives.root[v] != static_cast<ValueId>(v);
  const auto in_place = static_cast<int64_t>(plan.lives.in_place.size());
  const uint64_t arena = plan.arena_bytes(kActivationArena), host_arena = plan.arena_bytes(kHostArena);
  ctx.log.push_back(fmt::format(
      "plan_buffers: activations {} ({} bytes) in {} buffers unshared -> arena act {} ({} bytes), {} aliases, "
      "{} in place; in {} bytes, out {} bytes",
      mib(plan.unshared_bytes), plan.unshared_bytes, plan.planned_roots + in_place, mib(arena), arena,
      shared - in_place, in_place, in_bytes, out_bytes));
  if (host_arena > 0)
    ctx.log.push_back(fmt::format("plan_buffers: memory budget {}: {} values moved to arena host {} ({} bytes)",
                                  gib(ctx.options.memory_budget), moved, mib(host_arena), host_arena));
  return Status::ok();
}

}  // namespace strata

// schedule: a memory-aware order of the nodes, so that fewer activation bytes are alive
// at once (plan_buffers packs the values alive at each node into one arena).
//
// Rewrites: the order of the graph's nodes, nothing else. A list scheduler builds a
// candidate order: among the nodes whose operands are all computed, it takes the one
// that adds the fewest live bytes — the bytes of its results that need storage of
// their own (not aliases: is_buffer_alias, passes/memory_plan.h) minus the bytes of the operands whose
// storage it reads last — on a tie, the one earlier in the current order. The
// candidate replaces the current order only when its peak of live activation bytes is
// lower (so an order that gains nothing is left alone): the most, over the nodes, of
// the bytes of the "act" values alive there, with the lives plan_buffers gives them
// (the memory planner's storage_lives under pass_request, in place when
// CompileOptions::write_in_place). Logs the peak before
// and after.
//
// Nodes that read constants only (winograd_weights) become candidates only once every
// other operand of one of their readers is computed: by bytes alone the list scheduler
// would run them first and keep their results alive across the graph (Flux 1024² with
// Winograd on its 128² convs: 1024 → 1106 MiB).
//
// What it is for: in a resnet whose 1×1 shortcut reads more channels than the block
// writes (Flux's up blocks; fuse_residual lets conv2 take the shortcut's result), the
// shortcut runs right after the block input is written instead of after conv2, so
// norm1 is the input's last reader and writes its result over it; the block then
// holds the shortcut's result across conv1 instead of the larger input. At 1024² in
// f16 that is Flux's peak, 1280 → 1024 MiB; without writing in place the moved order
// holds as much (the input, the shortcut's result and norm1's) and is not taken.
//
// A second candidate, for graphs where memory is not what matters: the level order.
// Each node's level is one more than the deepest level among its producers (graph
// inputs and constants: 0); nodes run level by level, in the current order within a
// level. The runtime puts a pipeline barrier before a dispatch that reads what was
// written since the last one (runtime/barriers.h), so a graph of many short independent
// chains (Z-Image's per-step modulation: per layer a linear, four slices, two scales,
// two tanh) pays about one barrier per node in chain order and one per level in level
// order (per_t at 1024²: 167 barriers against 7, and 4.3 ms on the H200 in chain order).
// It is taken when
// it saves at least CompileOptions::schedule_levels_min_saving of the barriers (counted
// by that rule over the nodes' values, aliases ignored: a graph of long chains, a
// decoder, keeps its memory-aware order; a transformer layer's q, k and v chains run
// side by side, 100 → 76 barriers in zimage_small's per-step plan, and its independent
// GEMMs fill each other's last wave: taken with a fifth, the default,
// not with a half) and
// its peak of live activations is at most CompileOptions::schedule_levels_max_bytes or
// at most the other order's.
//
// Requires: final types and layouts (after lower_precision; runs after split_bands,
// right before plan_buffers). Preserves: every node with its operands, results, name
// and attributes, and every value; each node computes what it did from the same
// operands, so results are bit-identical. Deterministic.
#include "passes/passes.h"
#include "passes/plan_buffers.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace strata {
namespace {

std::string mib(uint64_t bytes) {
  return fmt::format("{:.1f} MiB ({} bytes)", static_cast<double>(bytes) / (1 << 20), bytes);
}

// The bytes of each value's storage that count against the "act" arena: a planned
// value (an intermediate that is not a graph output) that is its own root.
std::vector<uint64_t> act_bytes(const Graph& g, const std::vector<ValueHome>& homes, const std::vector<ValueId>& root) {
  std::vector<uint64_t> bytes(g.values().size(), 0);
  for (const Value& v : g.values())
    if (homes[static_cast<size_t>(v.id)].storage == Storage::planned && root[static_cast<size_t>(v.id)] == v.id)
      bytes[static_cast<size_t>(v.id)] = buffer_bytes(v.type);
  return bytes;
}

// The most bytes of "act" storage alive at one node, with plan_buffers' lives.
uint64_t peak_live_bytes(const Graph& g, bool in_place) {
  const MemoryRequest request = pass_request(g, in_place);
  const StorageLives lives = storage_lives(g, request.homes, in_place);
  const std::vector<uint64_t> bytes = act_bytes(g, request.homes, lives.root);
  std::vector<int64_t> delta(g.nodes().size() + 2, 0);  // last may be nodes.size(): read by an output
  for (size_t v = 0; v < bytes.size(); ++v) {
    if (bytes[v] == 0 || lives.first[v] < 0) continue;
    delta[static_cast<size_t>(lives.first[v])] += static_cast<int64_t>(bytes[v]);
    delta[static_cast<size_t>(std::max(lives.last[v], lives.first[v])) + 1] -= static_cast<int64_t>(bytes[v]);
  }
  int64_t live = 0, peak = 0;
  for (int64_t d : delta) peak = std::max(peak, live += d);
  return static_cast<uint64_t>(peak);
}

// The list scheduler's order (indices into g.nodes()).
std::vector<size_t> memory_order(const Graph& g) {
  const size_t nn = g.nodes().size(), nv = g.values().size();
  // Storage groups: a value and the aliases of it (is_buffer_alias), whatever the order.
  const MemoryRequest request = pass_request(g, false);
  const StorageLives lives = storage_lives(g, request.homes, false);
  const std::vector<ValueId>& root = lives.root;
  const std::vector<uint64_t> bytes = act_bytes(g, request.homes, root);
  auto group = [&](ValueId v) { return static_cast<size_t>(root[static_cast<size_t>(v)]); };

  const std::vector<int64_t> producers = g.producers();
  std::vector<int64_t> reads(nv, 0);  // reads of each group not yet scheduled
  std::vector<int64_t> waiting(nn, 0);  // operands of each node not yet computed
  std::vector<std::vector<size_t>> consumers(nn), lazy_deps(nn);
  // Lazy nodes read constants only (winograd_weights: a conv's U made at each run). They
  // are ready from the start, and the smallest addition of bytes would run them all
  // first, their results alive across the whole graph; instead each becomes ready
  // once every other operand of one of its readers is computed.
  std::vector<bool> lazy(nn, false);
  const std::vector<ValueId>& graph_inputs = g.inputs();
  for (size_t i = 0; i < nn; ++i) {
    bool only_constants = !g.nodes()[i].inputs.empty();
    for (ValueId in : g.nodes()[i].inputs)
      if (in != kNoValue && (g.value(in).kind != ValueKind::constant ||
                             std::find(graph_inputs.begin(), graph_inputs.end(), in) != graph_inputs.end()))
        only_constants = false;
    lazy[i] = only_constants;
  }
  std::vector<int64_t> eager_waiting(nn, 0);  // the operands not made by lazy nodes, not yet computed
  for (size_t i = 0; i < nn; ++i) {
    const Node& n = g.nodes()[i];
    std::set<int64_t> deps;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      ++reads[group(in)];
      const int64_t p = producers[static_cast<size_t>(in)];
      if (p >= 0) deps.insert(p);
    }
    waiting[i] = static_cast<int64_t>(deps.size());
    for (int64_t p : deps) {
      consumers[static_cast<size_t>(p)].push_back(i);
      if (lazy[static_cast<size_t>(p)]) lazy_deps[i].push_back(static_cast<size_t>(p));
      else ++eager_waiting[i];
    }
  }

  // Live bytes node n adds: its own storage minus the groups it reads last.
  auto added = [&](size_t i) {
    const Node& n = g.nodes()[i];
    int64_t delta = 0;
    for (ValueId out : n.outputs) delta += static_cast<int64_t>(bytes[static_cast<size_t>(out)]);
    std::vector<size_t> groups;
    for (ValueId in : n.inputs)
      if (in != kNoValue) groups.push_back(group(in));
    std::sort(groups.begin(), groups.end());
    for (size_t k = 0; k < groups.size();) {
      size_t e = k;
      while (e < groups.size() && groups[e] == groups[k]) ++e;
      if (reads[groups[k]] == static_cast<int64_t>(e - k)) delta -= static_cast<int64_t>(bytes[groups[k]]);
      k = e;
    }
    return delta;
  };

  std::set<size_t> ready;
  std::vector<bool> released(nn, false);  // lazy nodes put in `ready`
  auto release_lazy_deps = [&](size_t c) {
    for (size_t p : lazy_deps[c])
      if (!released[p]) released[p] = true, ready.insert(p);
  };
  for (size_t i = 0; i < nn; ++i) {
    if (waiting[i] == 0 && (!lazy[i] || consumers[i].empty())) ready.insert(i), released[i] = true;
    if (eager_waiting[i] == 0) release_lazy_deps(i);
  }
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t best = *ready.begin();
    int64_t best_added = added(best);
    for (size_t i : ready) {
      const int64_t a = added(i);
      if (a < best_added) best = i, best_added = a;
    }
    ready.erase(best);
    order.push_back(best);
    for (ValueId in : g.nodes()[best].inputs)
      if (in != kNoValue) --reads[group(in)];
    for (size_t c : consumers[best]) {
      if (--waiting[c] == 0) ready.insert(c);
      if (!lazy[best] && --eager_waiting[c] == 0) release_lazy_deps(c);
    }
  }
  return order;
}

// The level order (indices into g.nodes()): stable by level.
std::vector<size_t> level_order(const Graph& g) {
  const size_t nn = g.nodes().size();
  const std::vector<int64_t> producers = g.producers();
  std::vector<int64_t> level(nn, 0);
  for (size_t i = 0; i < nn; ++i)  // producers come first in a verified graph
    for (ValueId in : g.nodes()[i].inputs) {
      if (in == kNoValue) continue;
      const int64_t p = producers[static_cast<size_t>(in)];
      if (p >= 0) level[i] = std::max(level[i], level[static_cast<size_t>(p)] + 1);
    }
  std::vector<size_t> order(nn);
  for (size_t i = 0; i < nn; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return level[a] < level[b]; });
  return order;
}

// Barriers the runtime's rule would put in `g`'s node order, by values: a node that
// reads a value written since the last barrier gets one (aliases and write hazards are
// not modelled; this only compares two orders of the same graph).
size_t barrier_estimate(const Graph& g) {
  std::vector<bool> pending(g.values().size(), false);
  std::vector<ValueId> written;
  size_t barriers = 0;
  for (const Node& n : g.nodes()) {
    bool hazard = false;
    for (ValueId in : n.inputs) hazard = hazard || (in != kNoValue && pending[static_cast<size_t>(in)]);
    if (hazard) {
      ++barriers;
      for (ValueId v : written) pending[static_cast<size_t>(v)] = false;
      written.clear();
    }
    for (ValueId out : n.outputs) pending[static_cast<size_t>(out)] = true, written.push_back(out);
  }
  return barriers;
}

Graph reordered(const Graph& g, const std::vector<size_t>& order) {
  Graph candidate = g;
  for (size_t k = 0; k < order.size(); ++k) candidate.nodes()[k] = g.nodes()[order[k]];
  return candidate;
}

// The level order in place of g's order where it halves the barriers and
// CompileOptions::schedule_levels_max_bytes allows its peak; logs when it is taken, and
// when it would halve them but its peak is too high.
void maybe_take_levels(Graph& g, PassContext& ctx, uint64_t peak) {
  const uint64_t limit = ctx.options.schedule_levels_max_bytes;
  if (limit == 0) return;
  const std::vector<size_t> order = level_order(g);
  if (std::is_sorted(order.begin(), order.end())) return;
  Graph candidate = reordered(g, order);
  const size_t before = barrier_estimate(g), after = barrier_estimate(candidate);
  // Chains gain little (a decoder: a few shortcuts); keep the memory-aware order.
  const double saved = static_cast<double>(before - std::min(after, before));
  if (saved < ctx.options.schedule_levels_min_saving * static_cast<double>(before)) {
    if (after < before)
      ctx.log.push_back(fmt::format("schedule: level order not taken ({} barriers -> {}: under {:.0f} % fewer)", before,
                                    after, 100.0 * ctx.options.schedule_levels_min_saving));
    return;
  }
  const uint64_t level_peak = peak_live_bytes(candidate, ctx.options.write_in_place);
  if (level_peak > std::max(limit, peak)) {
    ctx.log.push_back(fmt::format("schedule: level order not taken ({} barriers -> {}, peak live activations {} "
                                  "over {})",
                                  before, after, mib(level_peak), mib(std::max(limit, peak))));
    return;
  }
  g.nodes() = std::move(candidate.nodes());
  ctx.log.push_back(fmt::format("schedule: level order, barriers {} -> {} (by values), peak live activations {} -> {}",
                                before, after, mib(peak), mib(level_peak)));
}

}  // namespace

Status run_schedule(Graph& g, PassContext& ctx) {
  const bool in_place = ctx.options.write_in_place;
  const std::vector<size_t> order = memory_order(g);
  if (order.size() != g.nodes().size())
    return error("schedule: {} of {} nodes could be ordered (a cycle?)", order.size(), g.nodes().size());
  size_t earlier = 0;  // nodes that move to an earlier position
  for (size_t k = 0; k < order.size(); ++k) earlier += order[k] > k;
  const uint64_t before = peak_live_bytes(g, in_place);
  if (std::is_sorted(order.begin(), order.end())) {
    ctx.log.push_back(fmt::format("schedule: order kept (peak live activations {})", mib(before)));
    maybe_take_levels(g, ctx, before);
    return Status::ok();
  }
  Graph candidate = reordered(g, order);
  const uint64_t after = peak_live_bytes(candidate, in_place);
  if (after >= before) {
    ctx.log.push_back(fmt::format("schedule: order kept (peak live activations {}; the memory-aware order's {})",
                                  mib(before), mib(after)));
    maybe_take_levels(g, ctx, before);
    return Status::ok();
  }
  g.nodes() = std::move(candidate.nodes());
  ctx.log.push_back(fmt::format("schedule: {} nodes run earlier, peak live activations {} -> {}", earlier,
                                mib(before), mib(after)));
  maybe_take_levels(g, ctx, after);
  return Status::ok();
}

}  // namespace strata

// Value placement: the buffers of a plan and the location of every value. See
// placement.h for the scheme.
#include "codegen/placement.h"
#include "codegen/w8a8.h"
#include "codegen/weight_transform.h"

#include "codegen/storage.h"
#include "passes/memory_plan.h"
#include "passes/plan_buffers.h"

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

// Whether constant `v` is read only as a conv_gemm or linear weight (operand 1), as
// winograd_gemm's weights (its last operand) or by winograd_weights: the kernels that
// read f16 weights (conv_gemm*.comp, gemm.comp's B_T, winograd_gemm.comp,
// winograd_weights.comp).
bool only_conv_gemm_weight(const Graph& g, ValueId v) {
  bool read = false;
  for (const Node& n : g.nodes())
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] != v) continue;
      const bool weight = ((n.op == Op::conv_gemm || n.op == Op::linear) && i == 1) ||
                          (n.op == Op::winograd_gemm && i + 1 == n.inputs.size()) || n.op == Op::winograd_weights;
      if (!weight) return false;
      read = true;
    }
  return read;
}

}  // namespace

uint64_t placement_alignment(const Target& target) {
  return std::max<uint64_t>(16, target.min_storage_buffer_offset_alignment);
}

bool host_compatible(const TensorType& t) { return t.dtype == DType::f32 && is_row_major(t); }

Expected<Placement> place_values(const Graph& g, const WeightStore& weights, const Target& target) {
  const uint64_t align = placement_alignment(target);
  const size_t nv = g.values().size();
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
  // A state's slot holds the value as stored (its dtype and layout): the value lives
  // there and the link binds the state's window in its place (compile/link.h).
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const ValueId v = g.inputs()[i];
    const bool state = g.input_state(i) != nullptr;
    const Location slot = put(kInput, state ? bytes_of(v) : host_bytes(v));
    out.input_locations.push_back(slot);
    if (state || host_compatible(g.value(v).type)) out.locations[static_cast<size_t>(v)] = slot;
    else staged_input[static_cast<size_t>(v)] = true;
  }
  std::map<ValueId, Location> output_slot;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const ValueId v = g.outputs()[i];
    const bool state = g.output_state(i) != nullptr;
    auto [it, fresh] = output_slot.try_emplace(v);
    if (fresh) it->second = put(kOutput, state ? bytes_of(v) : host_bytes(v));
    if (g.value(v).kind == ValueKind::intermediate && (state || host_compatible(g.value(v).type))) {
      out.locations[static_cast<size_t>(v)] = it->second;
      in_output_slot[static_cast<size_t>(v)] = true;
    } else {
      converted_out[static_cast<size_t>(v)] = true;
    }
    out.output_locations.push_back(it->second);
  }

  // Constants: one upload per (tensor, dtype, storage, quantized). A constant read only
  // as the weight of W8A8 linears is uploaded as their int8 rows and scales
  // (codegen/w8a8.h), quantized by the weight source at load.
  std::map<std::tuple<std::string, DType, DType, bool>, Location> uploads;
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
    const bool quantized = only_w8a8_weight(g, v);
    auto [it, fresh] = uploads.try_emplace({c.weight, c.type.dtype, storage, quantized});
    if (fresh && quantized) {
      const Shape& s = c.type.shape;
      it->second = put(kWeights, w8a8_rows_bytes(s[0], c.type.elements() / s[0]));
      out.weights.push_back(runtime::WeightUpload{c.weight, w8a8_weight_transform(view.dtype, c.type.dtype), kWeights,
                                                  it->second.offset, it->second.bytes});
    } else if (fresh) {
      it->second = put(kWeights, bytes_of(v));
      out.weights.push_back(runtime::WeightUpload{c.weight, weight_transform(view.dtype, c.type.dtype, storage),
                                                  kWeights, it->second.offset, it->second.bytes});
    }
    out.locations[static_cast<size_t>(v)] = it->second;
  }

  // The arena, by the memory planner (passes/memory_plan.h): who stores what. Host
  // slots and weights are ours (fixed, outside the planner's arenas); every other
  // value (staged inputs that are read, intermediates not in an output slot) is
  // planned, so reshapes alias and norm_act nodes write in place by the planner's
  // rules.
  const bool planned = std::any_of(g.values().begin(), g.values().end(),
                                   [](const Value& v) { return v.buffer.has_value(); });
  auto planned_pool = [&](const Value& v) -> std::optional<Pool> {
    if (v.buffer && v.buffer->arena == kActivationArena) return kArena;
    if (v.buffer && v.buffer->arena == strata::kHostArena) return kHostArena;
    return std::nullopt;
  };
  // Ours in the arena: staged inputs that are read, and intermediates that do not live
  // in an output slot.
  std::vector<bool> arena_value(nv, false);
  for (const Value& v : g.values()) {
    const auto i = static_cast<size_t>(v.id);
    arena_value[i] = (staged_input[i] && read[i]) || (v.kind == ValueKind::intermediate && !in_output_slot[i]);
  }
  std::vector<ValueHome> homes(nv);
  for (const Value& v : g.values()) {
    const auto i = static_cast<size_t>(v.id);
    if (v.kind == ValueKind::constant || (staged_input[i] && !read[i])) homes[i] = ValueHome{Storage::none, {}};
    else if (!arena_value[i]) homes[i] = ValueHome{Storage::fixed, {}};  // a host slot
    // With assignments, what plan_buffers kept in its "in" / "out" arenas (staged
    // inputs and outputs) is ours: placed after the planned range, below.
    else if (planned && (staged_input[i] || converted_out[i])) homes[i] = ValueHome{Storage::fixed, {}};
  }

  // Where each value with storage of its own lives (arena, offset): without
  // assignments, where the planner packs it; with them, at its planned offset in
  // "act" or "host", the rest one after the other past the planned "act" range.
  std::vector<std::optional<BufferAssignment>> place(nv);
  std::vector<ValueId> root;  // the value whose storage each value uses
  if (!planned) {
    MemoryPlan plan = plan_memory(g, MemoryRequest{homes, align, true});
    place = std::move(plan.place);
    root = std::move(plan.lives.root);
  } else {
    // Results written in place have their own planned place (their operand's), so
    // each is its own root here; check_memory_plan allows the overlap.
    const StorageLives lives = storage_lives(g, homes, false);
    root = lives.root;
    uint64_t end = 0;
    for (const Value& v : g.values())
      if (planned_pool(v) && arena_value[static_cast<size_t>(v.id)]) {
        place[static_cast<size_t>(v.id)] = v.buffer;
        end = std::max(end, align_up(v.buffer->offset + bytes_of(v.id), align));
      }
    auto append = [&](ValueId v) {
      const auto i = static_cast<size_t>(v);
      if (!arena_value[i] || lives.root[i] != v || place[i]) return;
      place[i] = BufferAssignment{kActivationArena, end};
      end += align_up(bytes_of(v), align);
    };
    for (ValueId v : g.inputs()) append(v);
    for (const Node& n : g.nodes())
      for (ValueId v : n.outputs) append(v);
    // Values sharing planned storage: checked against their root's place.
    for (const Value& v : g.values())
      if (lives.root[static_cast<size_t>(v.id)] != v.id && planned_pool(v)) place[static_cast<size_t>(v.id)] = v.buffer;
  }
  // The planned offsets are checked, not trusted: aligned for the target, and no two
  // values alive together overlapping with the bytes codegen stores, except where the
  // planner's rules allow it (may_share_bytes: a result written in place).
  STRATA_RETURN_IF_ERROR(check_memory_plan(g, homes, place, align));

  // Locations: each root at its place; a value sharing storage at its root's.
  for (const Value& v : g.values()) {
    const auto i = static_cast<size_t>(v.id);
    const ValueId r = root[i];
    if (r == v.id && !place[i]) continue;  // a host slot, a weight, or not stored
    const std::optional<BufferAssignment>& at = place[static_cast<size_t>(r)];
    if (r != v.id && !at) {  // an alias of a value in a host slot or the weights
      out.locations[i] = out.locations[static_cast<size_t>(r)];
      out.locations[i].bytes = bytes_of(v.id);
      continue;
    }
    const Pool pool = at->arena == strata::kHostArena ? kHostArena : kArena;
    out.locations[i] = Location{pool, at->offset, bytes_of(v.id)};
    pool_end[pool] = std::max(pool_end[pool], align_up(at->offset + bytes_of(r), align));
    if (r == v.id) out.arena_bytes_unshared += align_up(bytes_of(v.id), align);
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

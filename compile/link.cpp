#include "compile/link.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace strata {
namespace {

using runtime::BufferUsage;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

std::string type_text(runtime::DType dtype, const std::vector<int64_t>& shape, const std::string& layout,
                      uint64_t bytes) {
  std::string dims;
  for (int64_t d : shape) dims += (dims.empty() ? "" : ",") + std::to_string(d);
  return fmt::format("{}[{}]{} ({} bytes)", runtime::dtype_name(dtype), dims, layout.empty() ? "" : " " + layout,
                     bytes);
}

// Where a window of one part's buffer lands in the linked plan. Buffers whose
// windows move piece by piece (weights, inputs that read a state) list those pieces.
struct Piece {
  uint64_t offset = 0, bytes = 0;  // in the part's buffer
  uint32_t to_buffer = 0;
  uint64_t to_offset = 0;
};
struct BufferMap {
  uint32_t to_buffer = 0;
  uint64_t shift = 0;           // whole-buffer moves: new offset = offset + shift
  std::vector<Piece> pieces;    // checked first
};

std::optional<std::pair<uint32_t, uint64_t>> map_window(const BufferMap& m, uint64_t offset, uint64_t bytes,
                                                        bool whole_allowed) {
  for (const Piece& p : m.pieces) {
    if (offset >= p.offset && offset + bytes <= p.offset + p.bytes) return std::pair{p.to_buffer, p.to_offset + offset - p.offset};
    if (offset < p.offset + p.bytes && p.offset < offset + bytes) return std::nullopt;  // straddles a piece
  }
  if (!whole_allowed) return std::nullopt;
  return std::pair{m.to_buffer, offset + m.shift};
}

void merge_requirements(runtime::DeviceRequirements& to, const runtime::DeviceRequirements& r) {
  to.shader_float16 |= r.shader_float16;
  to.storage_buffer_16bit_access |= r.storage_buffer_16bit_access;
  to.vulkan_memory_model |= r.vulkan_memory_model;
  to.f16_rounding_rte |= r.f16_rounding_rte;
  to.f16_denorm_preserve |= r.f16_denorm_preserve;
  to.cooperative_matrix_nv |= r.cooperative_matrix_nv;
  to.cooperative_matrix_flexible |= r.cooperative_matrix_flexible;
  for (const runtime::CoopMatShape& s : r.cooperative_matrix_shapes)
    if (std::find(to.cooperative_matrix_shapes.begin(), to.cooperative_matrix_shapes.end(), s) ==
        to.cooperative_matrix_shapes.end())
      to.cooperative_matrix_shapes.push_back(s);
  to.min_subgroup_size = std::max(to.min_subgroup_size, r.min_subgroup_size);
  if (r.max_subgroup_size)
    to.max_subgroup_size = to.max_subgroup_size ? std::min(to.max_subgroup_size, r.max_subgroup_size) : r.max_subgroup_size;
  to.subgroup_operations |= r.subgroup_operations;
  to.min_storage_buffer_range = std::max(to.min_storage_buffer_range, r.min_storage_buffer_range);
  to.min_shared_memory_bytes = std::max(to.min_shared_memory_bytes, r.min_shared_memory_bytes);
}

bool same_pipeline(const runtime::PipelineDesc& a, const runtime::PipelineDesc& b) {
  auto spec = [](const runtime::PipelineDesc& p) {
    std::vector<std::pair<uint32_t, uint32_t>> v;
    for (const runtime::SpecConstant& c : p.spec_constants) v.emplace_back(c.id, c.value);
    return v;
  };
  return a.name == b.name && a.spirv == b.spirv && a.entry_point == b.entry_point && spec(a) == spec(b) &&
         a.push_constant_bytes == b.push_constant_bytes && a.binding_count == b.binding_count &&
         a.workgroup_size == b.workgroup_size;
}

}  // namespace

Expected<runtime::Plan> link_program(const std::vector<LinkPart>& parts, uint64_t alignment,
                                     const LinkOptions& options) {
  runtime::Plan out;
  if (parts.empty()) return error("linking a program with no plans");
  out.compiler_version = parts[0].plan.compiler_version;
  alignment = std::max<uint64_t>(alignment, 16);

  // The states, in order of first mention, with one shape, dtype and layout each (as
  // the plans store them: every plan that binds a state must store it alike).
  std::map<std::string, uint32_t> state_index;
  std::vector<std::string> state_first_plan;
  auto declare = [&](const LinkPart& part, const StateBinding& b, const runtime::TensorIO& io) -> Status {
    auto [it, fresh] = state_index.emplace(b.state, static_cast<uint32_t>(out.states.size()));
    if (fresh) {
      out.states.push_back(runtime::StateDesc{b.state, io.shape, io.dtype, io.layout, 0, 0, io.bytes});
      state_first_plan.push_back(part.name);
      return Status::ok();
    }
    const runtime::StateDesc& s = out.states[it->second];
    if (s.shape != io.shape || s.dtype != io.dtype || s.layout != io.layout || s.bytes != io.bytes)
      return error("state '{}': plan '{}' stores it as {}, plan '{}' as {}", b.state, state_first_plan[it->second],
                   type_text(s.dtype, s.shape, s.layout, s.bytes), part.name,
                   type_text(io.dtype, io.shape, io.layout, io.bytes));
    return Status::ok();
  };
  for (const LinkPart& part : parts) {
    for (const StateBinding& b : part.reads) {
      if (b.index >= part.plan.inputs.size())
        return error("plan '{}': state '{}' reads input {}, the plan has {}", part.name, b.state, b.index,
                     part.plan.inputs.size());
      STRATA_RETURN_IF_ERROR(declare(part, b, part.plan.inputs[b.index]));
    }
    for (const StateBinding& b : part.writes) {
      if (b.index >= part.plan.outputs.size())
        return error("plan '{}': state '{}' writes output {}, the plan has {}", part.name, b.state, b.index,
                     part.plan.outputs.size());
      STRATA_RETURN_IF_ERROR(declare(part, b, part.plan.outputs[b.index]));
    }
  }

  // The linked buffers: one per usage, created on first need.
  std::map<BufferUsage, uint32_t> buffer_of;
  auto buffer = [&](BufferUsage u, const std::string& name) {
    auto [it, fresh] = buffer_of.emplace(u, static_cast<uint32_t>(out.buffers.size()));
    if (fresh) out.buffers.push_back(runtime::BufferDesc{name, 0, u});
    return it->second;
  };
  auto grow = [&](uint32_t b, uint64_t end) {
    out.buffers[b].size_bytes = std::max(out.buffers[b].size_bytes, align_up(end, alignment));
  };
  if (!out.states.empty()) {
    const uint32_t sb = buffer(BufferUsage::state, "state");
    uint64_t at = 0;
    for (runtime::StateDesc& s : out.states) {
      s.buffer = sb;
      s.offset = at;
      at = align_up(at + s.bytes, alignment);
    }
    grow(sb, at);
  }

  std::map<std::tuple<std::string, std::string, uint64_t>, uint64_t> upload_at;  // (source, transform, bytes)
  for (const LinkPart& part : parts) {
    const runtime::Plan& p = part.plan;
    runtime::EntryDesc entry;
    entry.name = part.name;
    entry.first_dispatch = static_cast<uint32_t>(out.dispatches.size());
    entry.dispatch_count = static_cast<uint32_t>(p.dispatches.size());
    merge_requirements(out.requirements, p.requirements);

    std::vector<BufferMap> maps(p.buffers.size());
    for (size_t b = 0; b < p.buffers.size(); ++b) {
      const runtime::BufferDesc& d = p.buffers[b];
      BufferMap& m = maps[b];
      switch (d.usage) {
        case BufferUsage::weights:
          m.to_buffer = buffer(BufferUsage::weights, d.name);
          break;
        case BufferUsage::input:
        case BufferUsage::output:
          // Slot by slot, below, after the earlier parts' slots; a slot that is a
          // state's window takes no space here.
          m.to_buffer = buffer(d.usage, d.name);
          break;
        case BufferUsage::state:
          return error("plan '{}' has a state buffer of its own; plans are linked from single graphs", part.name);
        default:  // activations, host activations, scratch: shared, as large as the largest
          m.to_buffer = buffer(d.usage, d.name);
          grow(m.to_buffer, d.size_bytes);
          break;
      }
    }
    // Weights: each upload once in the program.
    for (const runtime::WeightUpload& w : p.weights) {
      const uint32_t wb = maps[w.buffer].to_buffer;
      auto key = std::make_tuple(w.source, runtime::describe(w.transform), w.bytes);
      auto it = upload_at.find(key);
      if (it == upload_at.end()) {
        const uint64_t at = out.buffers[wb].size_bytes;
        it = upload_at.emplace(key, at).first;
        runtime::WeightUpload moved = w;
        moved.buffer = wb;
        moved.offset = at;
        out.weights.push_back(moved);
        grow(wb, at + w.bytes);
      }
      maps[w.buffer].pieces.push_back(Piece{w.offset, w.bytes, wb, it->second});
    }
    // Inputs that read a state bind the state's window.
    std::vector<bool> input_is_state(p.inputs.size()), output_is_state(p.outputs.size());
    for (const StateBinding& b : part.reads) {
      const runtime::TensorIO& io = p.inputs[b.index];
      const runtime::StateDesc& s = out.states[state_index.at(b.state)];
      maps[io.buffer].pieces.push_back(Piece{io.offset, io.bytes, s.buffer, s.offset});
      input_is_state[b.index] = true;
    }
    // A state this plan writes but does not read is computed in its window: no slot,
    // no copy (a program alternating two sets of states, as the Wan decoder does,
    // writes every state in place). Unless the slot is also a host output's.
    std::set<std::string> read_states;
    for (const StateBinding& b : part.reads) read_states.insert(b.state);
    std::vector<bool> writes_state(p.outputs.size(), false);
    for (const StateBinding& b : part.writes)
      if (b.index < writes_state.size()) writes_state[b.index] = true;
    std::set<uint64_t> host_output_slots;
    for (size_t i = 0; i < p.outputs.size(); ++i)
      if (!writes_state[i]) host_output_slots.insert(p.outputs[i].offset);
    std::vector<bool> written_in_place(p.outputs.size(), false);
    for (const StateBinding& b : part.writes) {
      const runtime::TensorIO& io = p.outputs[b.index];
      if (read_states.count(b.state) || host_output_slots.count(io.offset)) continue;
      const runtime::StateDesc& s = out.states[state_index.at(b.state)];
      maps[io.buffer].pieces.push_back(Piece{io.offset, io.bytes, s.buffer, s.offset});
      written_in_place[b.index] = true;
    }
    // The other slots: each after the earlier ones in the linked input or output buffer
    // (an output listed twice has one slot); with shared_io_slots, after this plan's
    // earlier ones only.
    std::map<uint32_t, uint64_t> plan_end;  // linked buffer -> end of this plan's slots in it
    auto place_slot = [&](const runtime::TensorIO& io, BufferUsage usage) {
      if (p.buffers[io.buffer].usage != usage) return;
      BufferMap& m = maps[io.buffer];
      for (const Piece& q : m.pieces)
        if (q.offset == io.offset) return;
      uint64_t& end = plan_end[m.to_buffer];
      const uint64_t at = options.shared_io_slots ? end : out.buffers[m.to_buffer].size_bytes;
      m.pieces.push_back(Piece{io.offset, io.bytes, m.to_buffer, at});
      end = (at + io.bytes + alignment - 1) / alignment * alignment;
      grow(m.to_buffer, at + io.bytes);
    };
    for (size_t i = 0; i < p.inputs.size(); ++i)
      if (!input_is_state[i]) place_slot(p.inputs[i], BufferUsage::input);
    for (size_t i = 0; i < p.outputs.size(); ++i)
      if (!written_in_place[i]) place_slot(p.outputs[i], BufferUsage::output);

    for (size_t i = 0; i < p.dispatches.size(); ++i) {
      runtime::DispatchDesc d = p.dispatches[i];
      const runtime::PipelineDesc& pipe = p.pipelines[d.pipeline];
      auto same = std::find_if(out.pipelines.begin(), out.pipelines.end(),
                               [&](const runtime::PipelineDesc& q) { return same_pipeline(q, pipe); });
      d.pipeline = static_cast<uint32_t>(same - out.pipelines.begin());
      if (same == out.pipelines.end()) out.pipelines.push_back(pipe);
      for (size_t k = 0; k < d.bindings.size(); ++k) {
        runtime::BindingDesc& bd = d.bindings[k];
        const runtime::BufferDesc& from = p.buffers[bd.buffer];
        const bool by_pieces = from.usage == BufferUsage::weights || from.usage == BufferUsage::input ||
                               from.usage == BufferUsage::output;
        auto to = map_window(maps[bd.buffer], bd.offset, bd.range, !by_pieces);
        if (!to)
          return error("plan '{}', dispatch {} '{}' binding {}: window [{}, {}) of buffer '{}' is not within one "
                       "weight upload, input slot or state slot",
                       part.name, i, d.label, k, bd.offset, bd.offset + bd.range, from.name);
        std::tie(bd.buffer, bd.offset) = *to;
      }
      out.dispatches.push_back(std::move(d));
    }
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      if (input_is_state[i]) continue;
      runtime::TensorIO io = p.inputs[i];
      auto to = map_window(maps[io.buffer], io.offset, io.bytes, false);
      if (!to) return error("plan '{}': input '{}' shares bytes with a state's slot", part.name, io.name);
      std::tie(io.buffer, io.offset) = *to;
      entry.inputs.push_back(static_cast<uint32_t>(out.inputs.size()));
      out.inputs.push_back(std::move(io));
    }
    for (const StateBinding& b : part.writes) {
      output_is_state[b.index] = true;
      if (written_in_place[b.index]) continue;
      const runtime::TensorIO& io = p.outputs[b.index];
      auto [buf, off] = *map_window(maps[io.buffer], io.offset, io.bytes, false);
      entry.state_writes.push_back(runtime::StateWrite{state_index.at(b.state), buf, off});
    }
    for (size_t i = 0; i < p.outputs.size(); ++i) {
      if (output_is_state[i]) continue;
      runtime::TensorIO io = p.outputs[i];
      std::tie(io.buffer, io.offset) = *map_window(maps[io.buffer], io.offset, io.bytes, false);
      entry.outputs.push_back(static_cast<uint32_t>(out.outputs.size()));
      out.outputs.push_back(std::move(io));
    }
    for (const runtime::BandDesc& band : p.bands) out.bands.push_back(band);
    out.entries.push_back(std::move(entry));
  }
  // Buffers no plan needed space in (an empty input list) are left out by validate's
  // rule that every buffer has a size; give them the minimum instead.
  for (runtime::BufferDesc& b : out.buffers) b.size_bytes = std::max(b.size_bytes, alignment);
  STRATA_RETURN_IF_ERROR(runtime::validate(out).with_context("linking the program"));
  return out;
}

}  // namespace strata

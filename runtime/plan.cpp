#include "runtime/plan.h"

#include "runtime/barriers.h"

#include <fmt/format.h>

namespace strata::runtime {

const char* coop_type_name(CoopType t) {
  switch (t) {
    case CoopType::f16: return "f16";
    case CoopType::f32: return "f32";
    case CoopType::f64: return "f64";
    case CoopType::s8: return "s8";
    case CoopType::s16: return "s16";
    case CoopType::s32: return "s32";
    case CoopType::s64: return "s64";
    case CoopType::u8: return "u8";
    case CoopType::u16: return "u16";
    case CoopType::u32: return "u32";
    case CoopType::u64: return "u64";
    case CoopType::bf16: return "bf16";
  }
  return "?";
}

std::string describe(const CoopMatShape& s) {
  // Types this enum does not name (fp8 of newer drivers) print as their number.
  auto name = [](CoopType t) {
    const std::string n = coop_type_name(t);
    return n == "?" ? fmt::format("type{}", static_cast<uint32_t>(t)) : n;
  };
  return fmt::format("{}x{}x{} {}*{}+{}->{}", s.m, s.n, s.k, name(s.a), name(s.b), name(s.c), name(s.d));
}

std::string describe_subgroup_ops(uint32_t bits) {
  static const char* const kNames[] = {"basic",   "vote",    "arithmetic",       "ballot",
                                       "shuffle", "shuffle_relative", "clustered", "quad"};
  std::string out;
  for (int i = 0; i < 8; ++i) {
    if (bits & (1u << i)) out += (out.empty() ? "" : "|") + std::string(kNames[i]);
  }
  return out.empty() ? "none" : out;
}

const char* usage_name(BufferUsage u) {
  switch (u) {
    case BufferUsage::weights: return "weights";
    case BufferUsage::activations: return "activations";
    case BufferUsage::input: return "input";
    case BufferUsage::output: return "output";
    case BufferUsage::scratch: return "scratch";
    case BufferUsage::host_activations: return "host_activations";
    case BufferUsage::state: return "state";
  }
  return "?";
}

const char* access_name(Access a) {
  switch (a) {
    case Access::read: return "r";
    case Access::write: return "w";
    case Access::read_write: return "rw";
  }
  return "?";
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::u32: return "u32";
    case DType::u8: return "u8";
  }
  return "?";
}

std::string describe(const WeightTransform& t) {
  std::string s = dtype_name(t.stored);
  if (t.rounded_through) s += std::string("->") + dtype_name(*t.rounded_through);
  if (!t.is_copy()) s += std::string("->") + dtype_name(t.upload);
  return s;
}

namespace {

bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// The conversions a WeightSource knows: float tensors uploaded as f32 or f16, rounded
// through f16 or bf16 only on the way to f32; or quantized to int8 rows (upload u8:
// codegen/w8a8.h's W8A8 weights), rounded through f16 or bf16 first.
Status check_transform(const WeightUpload& w) {
  const WeightTransform& t = w.transform;
  const bool narrow = !t.rounded_through || *t.rounded_through == DType::f16 || *t.rounded_through == DType::bf16;
  const bool ok = is_float(t.stored) && narrow &&
                  (t.upload == DType::u8 || ((t.upload == DType::f32 || t.upload == DType::f16) &&
                                             (!t.rounded_through || t.upload == DType::f32)));
  if (!ok) return error("weight '{}': transform {} is not a conversion a weight source makes", w.source, describe(t));
  return Status::ok();
}

// A window [offset, offset+bytes) must lie inside buffer `buffer` of the plan.
Status check_window(const Plan& plan, uint32_t buffer, uint64_t offset, uint64_t bytes,
                    const std::string& what) {
  if (buffer >= plan.buffers.size()) {
    return error("{}: buffer index {} out of range ({} buffers)", what, buffer,
                 plan.buffers.size());
  }
  const BufferDesc& b = plan.buffers[buffer];
  if (bytes == 0) return error("{}: empty window of buffer '{}'", what, b.name);
  if (offset > b.size_bytes || bytes > b.size_bytes - offset) {
    return error("{}: window [{}, {}) exceeds buffer '{}' of {} bytes", what, offset,
                 offset + bytes, b.name, b.size_bytes);
  }
  return Status::ok();
}

Status validate_pipeline(const PipelineDesc& p, size_t i) {
  std::string what = fmt::format("pipeline {} '{}'", i, p.name);
  if (p.spirv.size() < 5 || p.spirv[0] != 0x07230203u) {
    return error("{}: no SPIR-V module (missing or wrong magic number)", what);
  }
  if (p.entry_point.empty()) return error("{}: empty entry point", what);
  if (p.push_constant_bytes % 4 != 0) {
    return error("{}: push-constant size {} is not a multiple of 4", what,
                 p.push_constant_bytes);
  }
  for (size_t a = 0; a < p.spec_constants.size(); ++a)
    for (size_t b = a + 1; b < p.spec_constants.size(); ++b)
      if (p.spec_constants[a].id == p.spec_constants[b].id)
        return error("{}: specialisation constant id {} given twice", what,
                     p.spec_constants[a].id);
  return Status::ok();
}

Status validate_dispatch(const Plan& plan, const DispatchDesc& d, size_t i) {
  std::string what = d.label.empty() ? fmt::format("dispatch {}", i)
                                     : fmt::format("dispatch {} '{}'", i, d.label);
  if (d.pipeline >= plan.pipelines.size()) {
    return error("{}: pipeline index {} out of range ({} pipelines)", what, d.pipeline,
                 plan.pipelines.size());
  }
  const PipelineDesc& p = plan.pipelines[d.pipeline];
  if (d.bindings.size() != p.binding_count) {
    return error("{}: {} bindings, pipeline '{}' has {}", what, d.bindings.size(), p.name,
                 p.binding_count);
  }
  if (d.push_constants.size() != p.push_constant_bytes) {
    return error("{}: {} push-constant bytes, pipeline '{}' takes {}", what,
                 d.push_constants.size(), p.name, p.push_constant_bytes);
  }
  if (d.grid[0] == 0 || d.grid[1] == 0 || d.grid[2] == 0) {
    return error("{}: empty grid {}x{}x{}", what, d.grid[0], d.grid[1], d.grid[2]);
  }
  for (size_t b = 0; b < d.bindings.size(); ++b) {
    const BindingDesc& bd = d.bindings[b];
    STRATA_RETURN_IF_ERROR(check_window(plan, bd.buffer, bd.offset, bd.range,
                                        fmt::format("{} binding {}", what, b)));
  }
  return Status::ok();
}

// States sit in state buffers; entries tile the dispatch list in order, and name
// inputs, outputs and states that exist.
Status validate_program(const Plan& plan) {
  for (size_t i = 0; i < plan.states.size(); ++i) {
    const StateDesc& s = plan.states[i];
    const std::string what = fmt::format("state '{}'", s.name);
    STRATA_RETURN_IF_ERROR(check_window(plan, s.buffer, s.offset, s.bytes, what));
    if (plan.buffers[s.buffer].usage != BufferUsage::state)
      return error("{}: buffer '{}' is not a state buffer", what, plan.buffers[s.buffer].name);
    for (size_t j = 0; j < i; ++j)
      if (plan.states[j].name == s.name) return error("{} is declared twice", what);
  }
  if (plan.entries.empty()) return Status::ok();
  uint64_t next = 0;
  for (size_t e = 0; e < plan.entries.size(); ++e) {
    const EntryDesc& entry = plan.entries[e];
    const std::string what = fmt::format("plan {} '{}'", e, entry.name);
    if (entry.name.empty()) return error("plan {} has no name", e);
    for (size_t j = 0; j < e; ++j)
      if (plan.entries[j].name == entry.name) return error("{}: the name is taken by plan {}", what, j);
    if (entry.first_dispatch != next)
      return error("{}: starts at dispatch {}, the previous plan ends at {}", what, entry.first_dispatch, next);
    next = uint64_t{entry.first_dispatch} + entry.dispatch_count;
    if (next > plan.dispatches.size())
      return error("{}: dispatches [{}, {}) beyond the {} of the program", what, entry.first_dispatch, next,
                   plan.dispatches.size());
    for (uint32_t i : entry.inputs)
      if (i >= plan.inputs.size()) return error("{}: input index {} out of range", what, i);
    for (uint32_t i : entry.outputs)
      if (i >= plan.outputs.size()) return error("{}: output index {} out of range", what, i);
    for (const StateWrite& w : entry.state_writes) {
      if (w.state >= plan.states.size()) return error("{}: state index {} out of range", what, w.state);
      const StateDesc& s = plan.states[w.state];
      STRATA_RETURN_IF_ERROR(check_window(plan, w.buffer, w.offset, s.bytes,
                                          fmt::format("{}: the write-back of state '{}'", what, s.name)));
    }
  }
  if (next != plan.dispatches.size())
    return error("the program's plans cover {} of its {} dispatches", next, plan.dispatches.size());
  return Status::ok();
}

}  // namespace

Status validate(const Plan& plan) {
  if (plan.format_version != kPlanFormatVersion) {
    return error("plan format version {}, this runtime reads version {}",
                 plan.format_version, kPlanFormatVersion);
  }
  for (size_t i = 0; i < plan.pipelines.size(); ++i)
    STRATA_RETURN_IF_ERROR(validate_pipeline(plan.pipelines[i], i));
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].size_bytes == 0)
      return error("buffer {} '{}' has size 0", i, plan.buffers[i].name);
  for (size_t i = 0; i < plan.weights.size(); ++i) {
    const WeightUpload& w = plan.weights[i];
    STRATA_RETURN_IF_ERROR(
        check_window(plan, w.buffer, w.offset, w.bytes, fmt::format("weight '{}'", w.source)));
    STRATA_RETURN_IF_ERROR(check_transform(w));
  }
  for (size_t i = 0; i < plan.dispatches.size(); ++i)
    STRATA_RETURN_IF_ERROR(validate_dispatch(plan, plan.dispatches[i], i));
  for (const TensorIO& io : plan.inputs)
    STRATA_RETURN_IF_ERROR(
        check_window(plan, io.buffer, io.offset, io.bytes, fmt::format("input '{}'", io.name)));
  for (const TensorIO& io : plan.outputs)
    STRATA_RETURN_IF_ERROR(check_window(plan, io.buffer, io.offset, io.bytes,
                                        fmt::format("output '{}'", io.name)));
  return validate_program(plan);
}

std::vector<EntryDesc> entry_list(const Plan& plan) {
  if (!plan.entries.empty()) return plan.entries;
  EntryDesc all{"main", 0, static_cast<uint32_t>(plan.dispatches.size()), {}, {}, {}};
  for (uint32_t i = 0; i < plan.inputs.size(); ++i) all.inputs.push_back(i);
  for (uint32_t i = 0; i < plan.outputs.size(); ++i) all.outputs.push_back(i);
  return {all};
}

std::string describe(const DeviceRequirements& r) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  if (r.shader_float16) add("shaderFloat16");
  if (r.storage_buffer_16bit_access) add("storageBuffer16BitAccess");
  if (r.vulkan_memory_model) add("vulkanMemoryModel");
  if (r.f16_rounding_rte) add("shaderRoundingModeRTEFloat16");
  if (r.f16_denorm_preserve) add("shaderDenormPreserveFloat16");
  if (r.cooperative_matrix_nv) add("VK_NV_cooperative_matrix");
  if (r.cooperative_matrix_flexible) add("VK_KHR_cooperative_matrix + VK_NV_cooperative_matrix2 flexible dimensions");
  for (const CoopMatShape& s : r.cooperative_matrix_shapes) add("coopmat " + describe(s));
  if (r.min_subgroup_size) add(fmt::format("subgroup >= {}", r.min_subgroup_size));
  if (r.max_subgroup_size) add(fmt::format("subgroup <= {}", r.max_subgroup_size));
  if (r.subgroup_operations) add("subgroup ops " + describe_subgroup_ops(r.subgroup_operations));
  if (r.min_storage_buffer_range)
    add(fmt::format("maxStorageBufferRange >= {}", r.min_storage_buffer_range));
  if (r.min_shared_memory_bytes)
    add(fmt::format("shared memory >= {}", r.min_shared_memory_bytes));
  return out.empty() ? "none" : out;
}

namespace {

std::string io_line(const char* kind, const Plan& plan, const TensorIO& io) {
  std::string shape;
  for (int64_t d : io.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  return fmt::format("  {} '{}': {}[{}]{} in '{}' @{} ({} bytes)\n", kind, io.name,
                     dtype_name(io.dtype), shape, io.layout.empty() ? "" : " " + io.layout,
                     io.buffer < plan.buffers.size() ? plan.buffers[io.buffer].name : "?",
                     io.offset, io.bytes);
}

}  // namespace

std::string describe(const Plan& plan) {
  std::string out = fmt::format("plan v{} (compiler {}{})\n", plan.format_version,
                                plan.compiler_version.empty() ? "?" : plan.compiler_version,
                                plan.cache_key.empty() ? "" : ", key " + plan.cache_key);
  out += "requires: " + describe(plan.requirements) + "\n";
  for (size_t i = 0; i < plan.pipelines.size(); ++i) {
    const PipelineDesc& p = plan.pipelines[i];
    std::string spec;
    for (const SpecConstant& c : p.spec_constants)
      spec += fmt::format(" c{}={}", c.id, c.value);
    out += fmt::format("pipeline {} '{}': {} words, entry {}, {} bindings, {} push bytes{}\n", i,
                       p.name, p.spirv.size(), p.entry_point, p.binding_count,
                       p.push_constant_bytes, spec);
  }
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const BufferDesc& b = plan.buffers[i];
    out += fmt::format("buffer {} '{}': {} bytes, {}\n", i, b.name, b.size_bytes,
                       usage_name(b.usage));
  }
  for (const WeightUpload& w : plan.weights) {
    out += fmt::format("weight '{}' [{}] -> buffer {} @{} ({} bytes)\n", w.source, describe(w.transform), w.buffer,
                       w.offset, w.bytes);
  }
  for (const TensorIO& io : plan.inputs) out += io_line("input", plan, io);
  for (const TensorIO& io : plan.outputs) out += io_line("output", plan, io);
  for (const StateDesc& s : plan.states) {
    std::string shape;
    for (int64_t d : s.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    out += fmt::format("state '{}': {}[{}]{} in '{}' @{} ({} bytes)\n", s.name, dtype_name(s.dtype), shape,
                       s.layout.empty() ? "" : " " + s.layout,
                       s.buffer < plan.buffers.size() ? plan.buffers[s.buffer].name : "?", s.offset, s.bytes);
  }
  // Barriers are derived, so the printout only shows them for a consistent plan.
  std::vector<BarrierPoint> barriers;
  if (validate(plan).is_ok())
    for (const EntryDesc& e : entry_list(plan)) {
      auto part = plan_barriers(plan, e.first_dispatch, e.dispatch_count);
      barriers.insert(barriers.end(), part.begin(), part.end());
    }
  for (const EntryDesc& e : plan.entries) {
    std::string ins, outs, writes;
    for (uint32_t k : e.inputs) ins += (ins.empty() ? "" : ", ") + (k < plan.inputs.size() ? plan.inputs[k].name : "?");
    for (uint32_t k : e.outputs)
      outs += (outs.empty() ? "" : ", ") + (k < plan.outputs.size() ? plan.outputs[k].name : "?");
    for (const StateWrite& w : e.state_writes)
      writes += fmt::format("{}{} <- {}@{}", writes.empty() ? "" : ", ",
                            w.state < plan.states.size() ? plan.states[w.state].name : "?", w.buffer, w.offset);
    out += fmt::format("plan '{}': dispatches [{}, {}); inputs ({}) outputs ({}){}\n", e.name, e.first_dispatch,
                       e.first_dispatch + e.dispatch_count, ins, outs, writes.empty() ? "" : "; writes back " + writes);
  }
  size_t next = 0;
  for (size_t i = 0; i < plan.dispatches.size(); ++i) {
    if (next < barriers.size() && barriers[next].before_dispatch == i) {
      out += fmt::format("  -- barrier: {}\n", barriers[next].reason);
      ++next;
    }
    const DispatchDesc& d = plan.dispatches[i];
    std::string binds;
    for (const BindingDesc& b : d.bindings)
      binds += fmt::format(" {}:{}@{}+{}", access_name(b.access), b.buffer, b.offset, b.range);
    out += fmt::format("dispatch {}{}: pipeline {} grid {}x{}x{}{}{}\n", i,
                       d.label.empty() ? "" : " '" + d.label + "'", d.pipeline, d.grid[0],
                       d.grid[1], d.grid[2], binds,
                       d.push_constants.empty()
                           ? ""
                           : fmt::format(" push {} bytes", d.push_constants.size()));
  }
  return out;
}

}  // namespace strata::runtime

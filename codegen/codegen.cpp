// compile_plan: checks what this codegen supports, places every value
// (codegen/placement.h), converts staged inputs from their host slots, lowers each
// node through its family function (codegen/lowering.h), copies or converts the
// outputs that do not live in their host slots, and fills in the plan's inputs,
// outputs and requirements.
#include "codegen/codegen.h"

#include "codegen/copy.h"
#include "codegen/lowering.h"
#include "codegen/placement.h"
#include "codegen/storage.h"
#include "ir/verifier.h"

#include <algorithm>
#include <limits>

namespace strata::codegen {
namespace {

bool is_elementwise(Op op) {
  switch (op) {
    case Op::silu: case Op::gelu: case Op::tanh: case Op::add: case Op::mul: case Op::silu_mul:
    case Op::scale: case Op::clamp: case Op::cast: return true;
    default: return false;
  }
}

bool is_shuffle(Op op) {
  switch (op) {
    case Op::upsample_nearest: case Op::permute: case Op::slice:
    case Op::concat: case Op::reshape: return true;
    default: return false;
  }
}

// What this codegen stores: any dtype (f16 as half, f32 and bf16 as f32 holding
// numbers of their type; codegen/storage.h) in the logical layout or nhwc, with or
// without padded channel slots. Every value must be non-empty. A value may hold more
// than 2^32 elements: kernels index within their bindings, each at most the target's
// storage-buffer range (checked per dispatch below), so 32-bit indices suffice.
Status check_supported(const Graph& g) {
  for (const Value& v : g.values()) {
    if (v.type.elements() == 0) return error("value %{} of type {} is empty", v.name, type_str(v.type));
    const Layout& layout = v.type.layout;
    if (!layout.is_default() && v.type.rank() < 2)
      return error("value %{} has layout {} but rank {}; channel layouts need [N, C, ...]", v.name,
                   layout_str(layout), v.type.rank());
    if (layout.padded_channels > 0 && layout.padded_channels < v.type.shape[1])
      return error("value %{} of type {} pads its {} channels to {}", v.name, type_str(v.type), v.type.shape[1],
                   layout.padded_channels);
  }
  return Status::ok();
}

Status lower_node(Lowering& l, const Node& node) {
  if (l.absorbed(node)) return Status::ok();
  Status s;
  Expected<bool> rows_written = lower_w8a8_rows(l, node);
  if (!rows_written) s = rows_written.status();
  else if (*rows_written) return Status::ok();
  else switch (node.op) {
    case Op::conv2d: case Op::conv3d: s = lower_conv(l, node); break;
    case Op::linear: case Op::matmul: s = lower_gemm(l, node); break;
    case Op::group_norm: case Op::rms_norm: case Op::layer_norm: case Op::token_rms_norm:
      s = lower_norm(l, node);
      break;
    case Op::rope: case Op::sinusoidal: s = lower_rope(l, node); break;
    case Op::attention: case Op::softmax: case Op::block_softmax: s = lower_attention(l, node); break;
    case Op::conv_gemm: s = lower_conv_gemm(l, node); break;
    case Op::norm_act: s = lower_norm_act(l, node); break;
    case Op::group_moments: s = lower_group_moments(l, node); break;
    case Op::winograd_input: case Op::winograd_gemm: case Op::winograd_output: case Op::winograd_weights:
      s = lower_winograd(l, node);
      break;
    default:
      if (is_elementwise(node.op)) s = lower_elementwise(l, node);
      else if (is_shuffle(node.op)) s = lower_shuffle(l, node);
      else s = l.fail(node, "no lowering for this op");
  }
  // Family errors name the node already; kernel-compiler errors get it here.
  if (!s.is_ok() && s.message().rfind("node '", 0) != 0) return l.fail(node, s.message());
  return s;
}

std::string io_layout(const Shape& s) { return s.size() == 4 ? "nchw" : s.size() == 5 ? "ncfhw" : "logical"; }

runtime::TensorIO tensor_io(const Value& v, const Location& loc) {
  return runtime::TensorIO{v.name, v.type.shape, runtime::DType::f32, io_layout(v.type.shape),
                           loc.buffer, loc.offset, loc.bytes};
}

// A state's slot: the value as stored (placement.cpp puts it there).
runtime::TensorIO state_io(const Lowering& l, const Value& v, const Location& loc) {
  const DType s = l.storage(v.id);
  return runtime::TensorIO{v.name, v.type.shape, s == DType::f16 ? runtime::DType::f16 : runtime::DType::f32,
                           layout_str(v.type.layout), loc.buffer, loc.offset, loc.bytes};
}

// A host slot as a tensor: f32, logical row major.
TensorRef host_ref(const Value& v, const Location& slot, runtime::Access access) {
  return TensorRef{runtime::BindingDesc{slot.buffer, slot.offset, slot.bytes, access}, v.type.shape,
                   physical_strides(TensorType{v.type.shape, DType::f32, Layout{}}), DType::f32};
}

TensorRef value_ref(const Lowering& l, ValueId v, runtime::Access access) {
  return TensorRef{l.bind(v, access), l.shape(v), l.strides(v), l.storage(v)};
}

// A label for dispatches that belong to no node (staging of inputs and outputs).
Node io_label(const std::string& name) {
  Node label;
  label.op = Op::reshape;
  label.name = name;
  return label;
}

// Staged inputs (placement.h): the host slot converted into the value, rounded
// through its dtype.
Status stage_inputs(Lowering& l, const Graph& graph, const Placement& pl) {
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value& v = graph.value(graph.inputs()[i]);
    const Location& loc = l.location(v.id);
    if (graph.input_state(i) || host_compatible(v.type) || loc.bytes == 0) continue;  // a state is stored as is
    STRATA_RETURN_IF_ERROR(emit_convert(l, io_label("input." + v.name),
                                        host_ref(v, pl.input_locations[i], runtime::Access::read),
                                        value_ref(l, v.id, runtime::Access::write), v.type.dtype, "stage"));
  }
  return Status::ok();
}

// Outputs that do not live in their host slot (graph inputs, constants, f16 or
// nhwc values) are copied or converted into it.
Status stage_outputs(Lowering& l, const Graph& graph, const Placement& pl) {
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const Value& v = graph.value(graph.outputs()[i]);
    const Location& dst = pl.output_locations[i];
    const bool state = graph.output_state(i) != nullptr;
    if (v.kind == ValueKind::intermediate && (state || host_compatible(v.type))) continue;  // written in place
    if (state)
      return error("state output %{} ({}) is not computed by the plan; write back a copy of it", v.name,
                   graph.value(v.id).kind == ValueKind::input ? "a graph input" : "a constant");
    if (std::find(graph.outputs().begin(), graph.outputs().begin() + static_cast<std::ptrdiff_t>(i), v.id) !=
        graph.outputs().begin() + static_cast<std::ptrdiff_t>(i))
      continue;  // listed before: copied already
    const Node label = io_label("output." + v.name);
    const Location& src = l.location(v.id);
    if (l.storage(v.id) == DType::f32 && is_row_major(v.type)) {
      STRATA_RETURN_IF_ERROR(emit_copy(l, label, runtime::BindingDesc{src.buffer, src.offset, src.bytes, runtime::Access::read},
                                       runtime::BindingDesc{dst.buffer, dst.offset, dst.bytes, runtime::Access::write},
                                       static_cast<uint64_t>(v.type.elements()), "copy"));
    } else {
      STRATA_RETURN_IF_ERROR(emit_convert(l, label, value_ref(l, v.id, runtime::Access::read),
                                          host_ref(v, dst, runtime::Access::write), DType::f32, "stage"));
    }
  }
  return Status::ok();
}

}  // namespace

Target target_for(const runtime::DeviceInfo& d) {
  Target t;
  t.subgroup_size = d.subgroup_size;
  t.max_storage_buffer_range = d.max_storage_buffer_range;
  t.min_storage_buffer_offset_alignment = d.min_storage_buffer_offset_alignment;
  t.max_shared_memory_bytes = d.max_compute_shared_memory_size;
  t.max_workgroup_count_x = d.max_compute_workgroup_count[0];
  t.max_push_constants_bytes = d.max_push_constants_size;
  t.f16_rounding_rte = d.f16_rounding_rte;
  t.f16_denorm_preserve = d.f16_denorm_preserve;
  const auto& shapes = d.cooperative_matrix_shapes;
  if (d.cooperative_matrix_nv && d.vulkan_memory_model &&
      std::find(shapes.begin(), shapes.end(), kCoopShape16) != shapes.end())
    t.tensor_cores = TensorCores::nv_coopmat;
  t.coopmat_flexible = t.tensor_cores == TensorCores::nv_coopmat && d.cooperative_matrix_flexible;
  t.int8_coopmat = t.tensor_cores == TensorCores::nv_coopmat &&
                   std::find(shapes.begin(), shapes.end(), kCoopShapeS8) != shapes.end();
  return t;
}

const char* tensor_cores_name(TensorCores t) {
  switch (t) {
    case TensorCores::none: return "none";
    case TensorCores::nv_coopmat: return "nv_coopmat";
    case TensorCores::emulated: return "emulated";
  }
  return "?";
}

Expected<runtime::Plan> compile_plan(const Graph& graph, const WeightStore& weights, const Target& target,
                                     const CodegenOptions& options) {
  STRATA_RETURN_IF_ERROR(verify(graph).with_context("compile_plan"));
  STRATA_RETURN_IF_ERROR(check_supported(graph).with_context("compile_plan"));
  auto placed = place_values(graph, weights, target);
  if (!placed) return placed.status().with_context("compile_plan");
  const Placement& pl = *placed;

  runtime::Plan plan;
  plan.compiler_version = STRATA_VERSION;
  plan.buffers = pl.buffers;
  plan.weights = pl.weights;
  Lowering l(graph, target, options, plan);
  for (const Value& v : graph.values()) {
    l.set_storage(v.id, pl.storage[static_cast<size_t>(v.id)]);
    if (pl.locations[static_cast<size_t>(v.id)].bytes) l.set_location(v.id, pl.locations[static_cast<size_t>(v.id)]);
  }

  STRATA_RETURN_IF_ERROR(stage_inputs(l, graph, pl));
  for (const Node& node : graph.nodes()) STRATA_RETURN_IF_ERROR(lower_node(l, node));
  STRATA_RETURN_IF_ERROR(stage_outputs(l, graph, pl));
  STRATA_RETURN_IF_ERROR(l.compile_pipelines());

  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value& v = graph.value(graph.inputs()[i]);
    plan.inputs.push_back(graph.input_state(i) ? state_io(l, v, pl.input_locations[i]) : tensor_io(v, pl.input_locations[i]));
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const Value& v = graph.value(graph.outputs()[i]);
    plan.outputs.push_back(graph.output_state(i) ? state_io(l, v, pl.output_locations[i])
                                                 : tensor_io(v, pl.output_locations[i]));
  }

  // 16-bit storage was required by the pipelines that use it (Lowering::pipeline);
  // the one limit that matters here is the largest binding range.
  for (const runtime::DispatchDesc& d : plan.dispatches)
    for (const runtime::BindingDesc& b : d.bindings) {
      if (b.range > target.max_storage_buffer_range)
        return error("compile_plan: dispatch '{}' binds {} bytes, above the target's maxStorageBufferRange {}",
                     d.label, b.range, target.max_storage_buffer_range);
      plan.requirements.min_storage_buffer_range = std::max(plan.requirements.min_storage_buffer_range, b.range);
    }
  STRATA_RETURN_IF_ERROR(runtime::validate(plan).with_context("compile_plan: internal error: invalid plan"));
  return plan;
}

}  // namespace strata::codegen

// compile_plan: checks what this codegen supports, places every value
// (codegen/placement.h), lowers each node through its family function
// (codegen/lowering.h), and fills in the plan's inputs, outputs and requirements.
#include "codegen/codegen.h"

#include "codegen/copy.h"
#include "codegen/lowering.h"
#include "codegen/placement.h"
#include "ir/verifier.h"

#include <algorithm>
#include <limits>

namespace strata::codegen {
namespace {

bool is_elementwise(Op op) {
  switch (op) {
    case Op::silu: case Op::gelu: case Op::add: case Op::mul:
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

// What this codegen stores: f32 values in the logical layout. A value of dtype f16 or
// bf16 is stored as f32 holding numbers of that type, which constants (rounded on
// upload), pointwise ops (rounded on store) and data movement (exact) produce; other
// kernels compute in f32 and do not round, so their outputs must be f32.
Status check_supported(const Graph& g) {
  std::vector<int64_t> producer = g.producers();
  for (const Value& v : g.values()) {
    if (!v.type.layout.is_default())
      return error("value %{} has layout {}; codegen takes logical layouts only (for now)", v.name,
                   layout_str(v.type.layout));
    if (v.type.elements() == 0) return error("value %{} of type {} is empty", v.name, type_str(v.type));
    if (v.type.elements() > std::numeric_limits<uint32_t>::max())
      return error("value %{} has {} elements, more than 32-bit indexing covers", v.name, v.type.elements());
    if (v.type.dtype == DType::f32 || v.kind == ValueKind::constant) continue;
    if (v.kind == ValueKind::input)
      return error("graph input %{} is {}; codegen takes f32 inputs only (for now)", v.name, dtype_name(v.type.dtype));
    const int64_t p = producer[static_cast<size_t>(v.id)];
    const Node& n = g.nodes()[static_cast<size_t>(p)];
    if (!is_elementwise(n.op) && !is_shuffle(n.op))
      return error("value %{} is {}, produced by node '{}' ({}); codegen stores f32 only (for now)", v.name,
                   dtype_name(v.type.dtype), n.name, op_name(n.op));
  }
  return Status::ok();
}

Status lower_node(Lowering& l, const Node& node) {
  Status s;
  switch (node.op) {
    case Op::conv2d: case Op::conv3d: s = lower_conv(l, node); break;
    case Op::linear: case Op::matmul: s = lower_gemm(l, node); break;
    case Op::group_norm: case Op::rms_norm: case Op::layer_norm: s = lower_norm(l, node); break;
    case Op::attention: case Op::softmax: s = lower_attention(l, node); break;
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

}  // namespace

Target target_for(const runtime::DeviceInfo& d) {
  Target t;
  t.subgroup_size = d.subgroup_size;
  t.max_storage_buffer_range = d.max_storage_buffer_range;
  t.min_storage_buffer_offset_alignment = d.min_storage_buffer_offset_alignment;
  t.max_shared_memory_bytes = d.max_compute_shared_memory_size;
  t.max_workgroup_count_x = d.max_compute_workgroup_count[0];
  t.max_push_constants_bytes = d.max_push_constants_size;
  return t;
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
  for (const Value& v : graph.values())
    if (pl.locations[static_cast<size_t>(v.id)].bytes) l.set_location(v.id, pl.locations[static_cast<size_t>(v.id)]);

  for (const Node& node : graph.nodes()) STRATA_RETURN_IF_ERROR(lower_node(l, node));

  // Outputs that no node produces (graph inputs, constants) are copied into place.
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const Value& v = graph.value(graph.outputs()[i]);
    const Location& dst = pl.output_locations[i];
    if (v.kind == ValueKind::intermediate) continue;
    if (std::find(graph.outputs().begin(), graph.outputs().begin() + static_cast<std::ptrdiff_t>(i), v.id) !=
        graph.outputs().begin() + static_cast<std::ptrdiff_t>(i))
      continue;  // listed before: copied already
    Node label;
    label.op = Op::reshape;
    label.name = "output." + v.name;
    const Location& src = l.location(v.id);
    STRATA_RETURN_IF_ERROR(emit_copy(l, label, runtime::BindingDesc{src.buffer, src.offset, src.bytes, runtime::Access::read},
                                     runtime::BindingDesc{dst.buffer, dst.offset, dst.bytes, runtime::Access::write},
                                     static_cast<uint64_t>(v.type.elements()), "copy"));
  }

  for (ValueId v : graph.inputs()) plan.inputs.push_back(tensor_io(graph.value(v), l.location(v)));
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    plan.outputs.push_back(tensor_io(graph.value(graph.outputs()[i]), pl.output_locations[i]));

  // Pure f32 kernels: no 16-bit storage; the one limit that matters is the largest
  // binding range.
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

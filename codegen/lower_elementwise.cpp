// Pointwise ops: silu, gelu, scale, clamp, cast (kernels/unary.comp) and add, mul with
// numpy broadcasting (kernels/binary.comp). Results are rounded through the output's
// dtype (the ROUND define), as the interpreter rounds every node output, so `cast`
// to f16 or bf16 is a copy with rounding.
//
// Values larger than one binding (the target's maxStorageBufferRange) are processed
// in windows, one dispatch each, when every operand is read element for element (or
// is a single broadcast scalar); other broadcasts bind whole operands.
#include "codegen/lowering.h"
#include "codegen/placement.h"
#include "codegen/strided.h"

#include <algorithm>

namespace strata::codegen {
namespace {

constexpr uint32_t kLocal = 64;
constexpr int kMaxRank = 6;

const char* round_define(DType t) {
  switch (t) {
    case DType::f16: return "ROUND_F16";
    case DType::bf16: return "ROUND_BF16";
    default: return "ROUND_NONE";
  }
}

// Elements per window so that a window's byte size fits one binding and keeps
// window offsets aligned.
uint64_t window_elements(const Lowering& l) {
  const uint64_t align = placement_alignment(l.target());
  return std::max<uint64_t>(align, l.target().max_storage_buffer_range / align * align) / 4;
}

Status lower_unary(Lowering& l, const Node& node, const char* op, float p0, float p1) {
  const ValueId x = node.inputs[0], y = node.outputs[0];
  KernelKey key{"unary.comp", {{"OP", op}, {"ROUND", round_define(l.type(y).dtype)}}, 2, 12, {kLocal, 1, 1}};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  const auto n = static_cast<uint64_t>(l.type(y).elements());
  const uint64_t step = window_elements(l);
  for (uint64_t at = 0; at < n; at += step) {
    const uint64_t count = std::min(step, n - at);
    PushConstants push;
    push.u32(static_cast<uint32_t>(count)).f32(p0).f32(p1);
    l.dispatch(pipe,
               {l.bind_window(x, at * 4, count * 4, runtime::Access::read),
                l.bind_window(y, at * 4, count * 4, runtime::Access::write)},
               push, l.grid_1d(count, kLocal), node, n > step ? "w" + std::to_string(at / step) : "");
  }
  return Status::ok();
}

Status lower_binary(Lowering& l, const Node& node, const char* op) {
  const ValueId a = node.inputs[0], b = node.inputs[1], z = node.outputs[0];
  const Shape& out = l.shape(z);
  const StridedLoop loop = collapse(StridedLoop{
      out, {row_major_strides(out), broadcast_strides(l.shape(a), out), broadcast_strides(l.shape(b), out)}});
  const int rank = static_cast<int>(loop.shape.size());
  if (rank > kMaxRank)
    return l.fail(node, fmt::format("broadcast of {} and {} needs {} dims after merging, the kernel takes {}",
                                    shape_str(l.shape(a)), shape_str(l.shape(b)), rank, kMaxRank));
  KernelKey key{"binary.comp",
                {{"OP", op}, {"RANK", std::to_string(rank)}, {"ROUND", round_define(l.type(z).dtype)}},
                3, static_cast<uint32_t>(4 * (1 + 3 * rank)), {kLocal, 1, 1}};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  const auto n = static_cast<uint64_t>(l.type(z).elements());

  // Element-for-element (stride 1) or scalar (stride 0) operands: windows of all.
  const bool flat = rank == 1 && loop.strides[1][0] <= 1 && loop.strides[2][0] <= 1;
  const uint64_t step = flat ? window_elements(l) : n;
  auto operand = [&](ValueId v, int64_t stride, uint64_t at, uint64_t count) {
    return stride == 1 && step < n ? l.bind_window(v, at * 4, count * 4, runtime::Access::read)
                                   : l.bind(v, runtime::Access::read);
  };
  for (uint64_t at = 0; at < n; at += step) {
    const uint64_t count = std::min(step, n - at);
    PushConstants push;
    push.u32(static_cast<uint32_t>(count));
    for (int d = 0; d < rank; ++d) push.u32(static_cast<uint32_t>(d == 0 && flat ? count : loop.shape[d]));
    for (int k = 1; k <= 2; ++k)
      for (int d = 0; d < rank; ++d) push.u32(static_cast<uint32_t>(loop.strides[k][d]));
    l.dispatch(pipe,
               {operand(a, loop.strides[1][0], at, count), operand(b, loop.strides[2][0], at, count),
                l.bind_window(z, at * 4, count * 4, runtime::Access::write)},
               push, l.grid_1d(count, kLocal), node, step < n ? "w" + std::to_string(at / step) : "");
  }
  return Status::ok();
}

}  // namespace

Status lower_elementwise(Lowering& l, const Node& node) {
  const Attrs& a = node.attrs;
  switch (node.op) {
    case Op::silu: return lower_unary(l, node, "SILU", 0, 0);
    case Op::gelu: return lower_unary(l, node, "GELU", 0, 0);
    case Op::scale:
      return lower_unary(l, node, "SCALE", static_cast<float>(a.get_float("mul", 1.0)),
                         static_cast<float>(a.get_float("add", 0.0)));
    case Op::clamp:
      return lower_unary(l, node, "CLAMP", static_cast<float>(a.get_float("min")),
                         static_cast<float>(a.get_float("max")));
    case Op::cast: return lower_unary(l, node, "COPY", 0, 0);
    case Op::add: return lower_binary(l, node, "ADD");
    case Op::mul: return lower_binary(l, node, "MUL");
    default: return l.fail(node, "not a pointwise op");
  }
}

}  // namespace strata::codegen

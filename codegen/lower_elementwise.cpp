// Pointwise ops: silu, gelu, tanh, scale, clamp, cast (kernels/unary.comp) and add, mul with
// numpy broadcasting (kernels/binary.comp). Results are rounded through the output's
// dtype (the ROUND define), as the interpreter rounds every node output, so `cast`
// to f16 or bf16 is a copy with rounding. Every operand may be stored in any layout
// and as f32 or f16 (codegen/storage.h): the kernels index each operand through its
// own physical strides and read / write it through a type define.
//
// Also emit_convert (codegen/copy.h): unary.comp's COPY between any two tensor views
// of the same logical elements, for reshapes between layouts and for the staging of
// graph inputs and outputs.
//
// A unary op between layouts that transpose (the dim contiguous in x is not the one
// contiguous in y, each at least 8 long: a reshape or cast between NHWC and logical
// maps) runs in 32 × 32 tiles through shared memory (unary.comp TILED), reading and
// writing along each side's contiguous dim; the same arithmetic per element.
//
// Values larger than one binding (the target's maxStorageBufferRange) are processed
// in windows, one dispatch each, when every operand is read element for element (or
// is a single broadcast scalar) in row-major order. Otherwise the op runs in boxes
// (strided.h: split_boxes) of its loop ordered by the output's memory, each binding
// windows that fit: a unary op or conversion between two views of one shape in other
// layouts (nhwc, padded, nhwc -> logical), a reshape between layouts through the
// loop that refines both shapes (strided.h: reshape_loop), and add / mul with
// broadcasting or mixed layouts (binary.comp with BASES). Every element is computed
// by the same arithmetic from the same inputs, so the result is the unsplit one. A
// loop of which not one element fits, or a reshape whose views have no common
// refinement, is an error naming the node, the bytes and the limit.
#include "codegen/copy.h"
#include "codegen/lowering.h"
#include "codegen/placement.h"
#include "codegen/storage.h"
#include "codegen/strided.h"

#include <algorithm>
#include <optional>

namespace strata::codegen {
namespace {

constexpr uint32_t kLocal = 64;
constexpr int kMaxRank = 6;

// Elements per window: a window's byte size fits one binding for the widest
// operand, and every window offset stays aligned for the narrowest.
uint64_t window_elements(const Lowering& l, uint32_t min_bytes, uint32_t max_bytes) {
  const uint64_t unit = placement_alignment(l.target()) / min_bytes;
  return std::max<uint64_t>(unit, l.target().max_storage_buffer_range / (max_bytes * unit) * unit);
}

// `ref` collapsed to the fewest dims that still step through it in logical order.
StridedLoop collapse_one(const TensorRef& ref) { return collapse(StridedLoop{ref.shape, {ref.strides}}); }

bool contiguous(const StridedLoop& s) { return s.shape.size() == 1 && s.strides[0][0] == 1; }

bool aligned16(const runtime::BindingDesc& b) { return b.offset % 16 == 0; }

runtime::BindingDesc sub_window(runtime::BindingDesc b, uint64_t at, uint64_t count, uint32_t bytes) {
  b.offset += at * bytes;
  b.range = count * bytes;
  return b;
}

// The window of `b` from element `first` spanning `span` elements of `bytes` bytes,
// its start aligned down; and `first`'s element index in it.
std::pair<runtime::BindingDesc, uint32_t> window_in(runtime::BindingDesc b, uint64_t first, uint64_t span,
                                                    uint32_t bytes, uint64_t align) {
  const uint64_t begin = first * bytes, start = begin / align * align;
  b.offset += start;
  b.range = begin + span * bytes - start;
  return {b, static_cast<uint32_t>((begin - start) / bytes)};
}

// unary() for x and y of one shape whose whole bindings exceed the range: one
// dispatch per box of the joint loop.
Status unary_boxes(Lowering& l, const Node& node, const char* op, float p0, float p1, const TensorRef& x,
                   const TensorRef& y, DType out_dtype, const std::string& step) {
  const std::optional<StridedLoop> joint =
      x.shape == y.shape ? std::optional(collapse(StridedLoop{y.shape, {x.strides, y.strides}}))
                         : reshape_loop(x.shape, x.strides, y.shape, y.strides);
  if (!joint)
    return l.fail(node, fmt::format("{} and {} in these layouts have no common loop to split into windows of the "
                                    "storage-buffer range {}",
                                    shape_str(x.shape), shape_str(y.shape), l.target().max_storage_buffer_range));
  const StridedLoop loop = physical_order(*joint, 1);
  const uint32_t xb = storage_bytes(x.storage), yb = storage_bytes(y.storage);
  const uint64_t align = placement_alignment(l.target()), range = l.target().max_storage_buffer_range;
  const uint64_t room = range > align ? range - align : 0;
  const std::vector<LoopBox> boxes = split_boxes(loop, {room / xb, room / yb});
  if (boxes.empty())
    return l.fail(node, fmt::format("one element needs {} bytes with alignment slack, above the storage-buffer "
                                    "range {}",
                                    std::max(xb, yb) + align, range));
  if (loop.shape.size() > kMaxRank)
    return l.fail(node, fmt::format("needs {} dims after merging, the kernel takes {}", loop.shape.size(), kMaxRank));
  const std::string rank = std::to_string(loop.shape.size());
  KernelKey key{"unary.comp",
                {{"OP", op}, {"ROUND", round_define(out_dtype)}, {"XRANK", rank}, {"YRANK", rank}},
                2, static_cast<uint32_t>(4 * (5 + 4 * loop.shape.size())), {kLocal, 1, 1}};
  add_type_define(key.defines, "X_T", x.storage);
  add_type_define(key.defines, "Y_T", y.storage);
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  for (size_t i = 0; i < boxes.size(); ++i) {
    const LoopBox& box = boxes[i];
    const auto [xw, x_base] = window_in(x.binding, loop_offset(loop.strides[0], box.origin),
                                        box_span(loop.strides[0], box.shape), xb, align);
    const auto [yw, y_base] = window_in(y.binding, loop_offset(loop.strides[1], box.origin),
                                        box_span(loop.strides[1], box.shape), yb, align);
    const auto n = static_cast<uint64_t>(num_elements(box.shape));
    PushConstants push;
    push.u32(static_cast<uint32_t>(n)).f32(p0).f32(p1).u32(x_base).u32(y_base);
    for (size_t k = 0; k < 2; ++k) {
      for (int64_t v : box.shape) push.u32(static_cast<uint32_t>(v));
      for (int64_t v : loop.strides[k]) push.u32(static_cast<uint32_t>(v));
    }
    l.dispatch(pipe, {xw, yw}, push, l.grid_1d(n, kLocal), node, step + "b" + std::to_string(i));
  }
  return Status::ok();
}

// The loop of a unary op between layouts that transpose, in unary.comp's TILED order:
// the outer dims, then A (stride 1 in x), then B (stride 1 in y); nullopt unless x and
// y have such distinct dims of at least kTileMin elements (a shorter one fills too
// little of a 32 × 32 tile) and the loop takes at most kMaxRank dims.
constexpr int64_t kTileMin = 8;
std::optional<StridedLoop> transpose_loop(const TensorRef& x, const TensorRef& y) {
  const std::optional<StridedLoop> joint =
      x.shape == y.shape ? std::optional(collapse(StridedLoop{y.shape, {x.strides, y.strides}}))
                         : reshape_loop(x.shape, x.strides, y.shape, y.strides);
  if (!joint || joint->shape.size() < 2 || joint->shape.size() > static_cast<size_t>(kMaxRank)) return std::nullopt;
  std::optional<size_t> a, b;
  for (size_t d = 0; d < joint->shape.size(); ++d) {
    if (joint->strides[0][d] == 1 && joint->shape[d] >= kTileMin) a = d;
    if (joint->strides[1][d] == 1 && joint->shape[d] >= kTileMin) b = d;
  }
  if (!a || !b || *a == *b) return std::nullopt;
  StridedLoop t{{}, {{}, {}}};
  auto take = [&](size_t d) {
    t.shape.push_back(joint->shape[d]);
    for (size_t k = 0; k < 2; ++k) t.strides[k].push_back(joint->strides[k][d]);
  };
  for (size_t d = 0; d < joint->shape.size(); ++d)
    if (d != *a && d != *b) take(d);
  take(*a);
  take(*b);
  return t;
}

// unary() as 32 × 32 tiles through shared memory (unary.comp TILED): one dispatch over
// the whole bindings.
Status unary_tiled(Lowering& l, const Node& node, const char* op, float p0, float p1, const TensorRef& x,
                   const TensorRef& y, DType out_dtype, const StridedLoop& loop, const std::string& step) {
  const size_t rank = loop.shape.size();
  KernelKey key{"unary.comp",
                {{"OP", op},
                 {"ROUND", round_define(out_dtype)},
                 {"TILED", "1"},
                 {"XRANK", std::to_string(rank)},
                 {"YRANK", std::to_string(rank)}},
                2, static_cast<uint32_t>(4 * (5 + 4 * rank)), {32, 8, 1}};
  add_type_define(key.defines, "X_T", x.storage);
  add_type_define(key.defines, "Y_T", y.storage);
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  const auto tiles_of = [](int64_t n) { return static_cast<uint64_t>((n + 31) / 32); };
  uint64_t tiles = tiles_of(loop.shape[rank - 2]) * tiles_of(loop.shape[rank - 1]);
  for (size_t d = 0; d + 2 < rank; ++d) tiles *= static_cast<uint64_t>(loop.shape[d]);
  PushConstants push;
  push.u32(static_cast<uint32_t>(tiles)).f32(p0).f32(p1).u32(0).u32(0);
  for (size_t k = 0; k < 2; ++k) {
    for (int64_t v : loop.shape) push.u32(static_cast<uint32_t>(v));
    for (int64_t v : loop.strides[k]) push.u32(static_cast<uint32_t>(v));
  }
  l.dispatch(pipe, {x.binding, y.binding}, push, l.grid_1d(tiles * 256, 256), node, step);
  return Status::ok();
}

Status unary(Lowering& l, const Node& node, const char* op, float p0, float p1, const TensorRef& x,
             const TensorRef& y, DType out_dtype, const std::string& step) {
  const uint64_t range = l.target().max_storage_buffer_range;
  StridedLoop xs = collapse_one(x), ys = collapse_one(y);
  if (!(contiguous(xs) && contiguous(ys)) && x.binding.range <= range && y.binding.range <= range)
    if (const std::optional<StridedLoop> t = transpose_loop(x, y))
      return unary_tiled(l, node, op, p0, p1, x, y, out_dtype, *t, step);
  if (!(contiguous(xs) && contiguous(ys)) && (x.binding.range > range || y.binding.range > range))
    return unary_boxes(l, node, op, p0, p1, x, y, out_dtype, step);
  if (xs.shape.size() > kMaxRank || ys.shape.size() > kMaxRank)
    return l.fail(node, fmt::format("needs {} / {} dims after merging, the kernel takes {}", xs.shape.size(),
                                    ys.shape.size(), kMaxRank));
  const uint32_t xb = storage_bytes(x.storage), yb = storage_bytes(y.storage);
  const auto n = static_cast<uint64_t>(num_elements(y.shape));
  const bool flat = contiguous(xs) && contiguous(ys);
  const uint64_t step_elems = flat ? window_elements(l, std::min(xb, yb), std::max(xb, yb)) : n;
  // 4 elements per invocation (unary.comp VEC): flat operands, whole vectors in every
  // window (windows start at multiples of step_elems, a multiple of 4), bindings at
  // 16-byte offsets.
  const bool vec = flat && n % 4 == 0 && step_elems % 4 == 0 && aligned16(x.binding) && aligned16(y.binding);
  KernelKey key{"unary.comp",
                {{"OP", op},
                 {"ROUND", round_define(out_dtype)},
                 {"XRANK", std::to_string(xs.shape.size())},
                 {"YRANK", std::to_string(ys.shape.size())}},
                2, static_cast<uint32_t>(4 * (5 + 2 * (xs.shape.size() + ys.shape.size()))), {kLocal, 1, 1}};
  add_type_define(key.defines, "X_T", x.storage);
  add_type_define(key.defines, "Y_T", y.storage);
  if (vec) {
    key.defines["VEC"] = "4";
    add_vec4_type_define(key.defines, "X_V", x.storage);
    add_vec4_type_define(key.defines, "Y_V", y.storage);
  }
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  for (uint64_t at = 0; at < n; at += step_elems) {
    const uint64_t count = std::min(step_elems, n - at);
    PushConstants push;
    push.u32(static_cast<uint32_t>(count)).f32(p0).f32(p1).u32(0).u32(0);
    for (const StridedLoop* s : {&xs, &ys}) {
      for (int64_t v : s->shape) push.u32(static_cast<uint32_t>(flat ? count : v));
      for (int64_t v : s->strides[0]) push.u32(static_cast<uint32_t>(v));
    }
    const bool windowed = n > step_elems;
    l.dispatch(pipe,
               {windowed ? sub_window(x.binding, at, count, xb) : x.binding,
                windowed ? sub_window(y.binding, at, count, yb) : y.binding},
               push, l.grid_1d(vec ? count / 4 : count, kLocal), node,
               windowed ? step + "w" + std::to_string(at / step_elems) : step);
  }
  return Status::ok();
}

TensorRef value_ref(const Lowering& l, ValueId v, runtime::Access access) {
  return TensorRef{l.bind(v, access), l.shape(v), l.strides(v), l.storage(v)};
}

Status lower_unary(Lowering& l, const Node& node, const char* op, float p0, float p1) {
  const ValueId x = node.inputs[0], y = node.outputs[0];
  return unary(l, node, op, p0, p1, value_ref(l, x, runtime::Access::read), value_ref(l, y, runtime::Access::write),
               l.type(y).dtype, "");
}

// lower_binary's loop (strides: z, a, b) when an operand exceeds one binding and the
// operands are not flat: one dispatch per box (binary.comp with BASES: each operand's
// window starts at an aligned offset at or before the box's first element).
Status binary_boxes(Lowering& l, const Node& node, const char* op, const StridedLoop& joint) {
  const ValueId a = node.inputs[0], b = node.inputs[1], z = node.outputs[0];
  const StridedLoop loop = physical_order(joint, 0);
  const uint64_t align = placement_alignment(l.target()), range = l.target().max_storage_buffer_range;
  const uint64_t room = range > align ? range - align : 0;
  const ValueId operand[3] = {z, a, b};
  std::vector<uint64_t> spans;
  for (ValueId v : operand) spans.push_back(room / l.elem_bytes(v));
  const std::vector<LoopBox> boxes = split_boxes(loop, spans);
  if (boxes.empty())
    return l.fail(node, fmt::format("one element needs {} bytes with alignment slack, above the storage-buffer "
                                    "range {}",
                                    std::max({l.elem_bytes(a), l.elem_bytes(b), l.elem_bytes(z)}) + align, range));
  const int rank = static_cast<int>(loop.shape.size());
  if (rank > kMaxRank) return l.fail(node, fmt::format("needs {} dims after merging, the kernel takes {}", rank, kMaxRank));
  KernelKey key{"binary.comp",
                {{"OP", op}, {"RANK", std::to_string(rank)}, {"ROUND", round_define(l.type(z).dtype)}, {"BASES", "1"}},
                3, static_cast<uint32_t>(4 * (4 + 4 * rank)), {kLocal, 1, 1}};
  add_type_define(key.defines, "A_T", l.storage(a));
  add_type_define(key.defines, "B_T", l.storage(b));
  add_type_define(key.defines, "Z_T", l.storage(z));
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  for (size_t i = 0; i < boxes.size(); ++i) {
    const LoopBox& box = boxes[i];
    std::vector<runtime::BindingDesc> bindings(3);
    uint32_t base[3] = {};
    for (size_t k = 0; k < 3; ++k) {
      const runtime::Access access = k == 0 ? runtime::Access::write : runtime::Access::read;
      const auto [w, at] = window_in(l.bind(operand[k], access), loop_offset(loop.strides[k], box.origin),
                                     box_span(loop.strides[k], box.shape), l.elem_bytes(operand[k]), align);
      bindings[(k + 2) % 3] = w;  // binding order: a, b, z
      base[k] = at;
    }
    const auto n = static_cast<uint64_t>(num_elements(box.shape));
    PushConstants push;
    push.u32(static_cast<uint32_t>(n)).u32(base[1]).u32(base[2]).u32(base[0]);
    for (int64_t v : box.shape) push.u32(static_cast<uint32_t>(v));
    for (int k : {1, 2, 0})
      for (int64_t v : loop.strides[static_cast<size_t>(k)]) push.u32(static_cast<uint32_t>(v));
    l.dispatch(pipe, std::move(bindings), push, l.grid_1d(n, kLocal), node, "b" + std::to_string(i));
  }
  return Status::ok();
}

Status lower_binary(Lowering& l, const Node& node, const char* op) {
  const ValueId a = node.inputs[0], b = node.inputs[1], z = node.outputs[0];
  const Shape& out = l.shape(z);
  const StridedLoop loop = collapse(StridedLoop{out,
                                                {l.strides(z), broadcast_strides(l.shape(a), out, l.strides(a)),
                                                 broadcast_strides(l.shape(b), out, l.strides(b))}});
  const int rank = static_cast<int>(loop.shape.size());
  if (rank > kMaxRank)
    return l.fail(node, fmt::format("broadcast of {} and {} needs {} dims after merging, the kernel takes {}",
                                    shape_str(l.shape(a)), shape_str(l.shape(b)), rank, kMaxRank));
  const auto n = static_cast<uint64_t>(l.type(z).elements());

  // Element-for-element (stride 1) or scalar (stride 0) operands: windows of all.
  const bool flat = rank == 1 && loop.strides[0][0] == 1 && loop.strides[1][0] <= 1 && loop.strides[2][0] <= 1;
  const uint64_t range = l.target().max_storage_buffer_range;
  if (!flat && (l.bind(a, runtime::Access::read).range > range || l.bind(b, runtime::Access::read).range > range ||
                l.bind(z, runtime::Access::write).range > range))
    return binary_boxes(l, node, op, loop);
  const uint32_t min_b = std::min({l.elem_bytes(a), l.elem_bytes(b), l.elem_bytes(z)});
  const uint32_t max_b = std::max({l.elem_bytes(a), l.elem_bytes(b), l.elem_bytes(z)});
  const uint64_t step = flat ? window_elements(l, min_b, max_b) : n;
  // 4 elements per invocation (binary.comp VEC): every 4 consecutive elements of the
  // loop are one run of the innermost dim in every operand (its size and the outer
  // strides multiples of 4, innermost strides 1: no operand broadcast along it), whole
  // vectors in every window, bindings at 16-byte offsets. Z-Image's residual adds,
  // SwiGLU products and modulation (x[T, dim] · s[1, dim]) qualify.
  bool vec = rank >= 1 && n % 4 == 0 && step % 4 == 0 && loop.shape[static_cast<size_t>(rank - 1)] % 4 == 0;
  for (size_t k = 0; k < 3 && vec; ++k)
    for (int d = 0; d < rank; ++d)
      vec = vec && (d == rank - 1 ? loop.strides[k][static_cast<size_t>(d)] == 1
                                  : loop.strides[k][static_cast<size_t>(d)] % 4 == 0);
  vec = vec && aligned16(l.bind(a, runtime::Access::read)) && aligned16(l.bind(b, runtime::Access::read)) &&
        aligned16(l.bind(z, runtime::Access::write));
  KernelKey key{"binary.comp",
                {{"OP", op}, {"RANK", std::to_string(rank)}, {"ROUND", round_define(l.type(z).dtype)}},
                3, static_cast<uint32_t>(4 * (1 + 4 * rank)), {kLocal, 1, 1}};
  add_type_define(key.defines, "A_T", l.storage(a));
  add_type_define(key.defines, "B_T", l.storage(b));
  add_type_define(key.defines, "Z_T", l.storage(z));
  if (vec) {
    key.defines["VEC"] = "4";
    add_vec4_type_define(key.defines, "A_V", l.storage(a));
    add_vec4_type_define(key.defines, "B_V", l.storage(b));
    add_vec4_type_define(key.defines, "Z_V", l.storage(z));
  }
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  auto operand = [&](ValueId v, int64_t stride, uint64_t at, uint64_t count) {
    return stride == 1 && step < n ? l.bind_window(v, at * l.elem_bytes(v), count * l.elem_bytes(v), runtime::Access::read)
                                   : l.bind(v, runtime::Access::read);
  };
  for (uint64_t at = 0; at < n; at += step) {
    const uint64_t count = std::min(step, n - at);
    PushConstants push;
    push.u32(static_cast<uint32_t>(count));
    for (int d = 0; d < rank; ++d) push.u32(static_cast<uint32_t>(d == 0 && flat ? count : loop.shape[d]));
    for (int k : {1, 2, 0})
      for (int d = 0; d < rank; ++d) push.u32(static_cast<uint32_t>(loop.strides[k][d]));
    l.dispatch(pipe,
               {operand(a, loop.strides[1][0], at, count), operand(b, loop.strides[2][0], at, count),
                step < n ? l.bind_window(z, at * l.elem_bytes(z), count * l.elem_bytes(z), runtime::Access::write)
                         : l.bind(z, runtime::Access::write)},
               push, l.grid_1d(vec ? count / 4 : count, kLocal), node, step < n ? "w" + std::to_string(at / step) : "");
  }
  return Status::ok();
}

}  // namespace

Status emit_convert(Lowering& l, const Node& node, const TensorRef& src, const TensorRef& dst, DType out_dtype,
                    const std::string& step) {
  if (num_elements(src.shape) != num_elements(dst.shape))
    return l.fail(node, fmt::format("cannot convert {} elements into {}", num_elements(src.shape),
                                    num_elements(dst.shape)));
  return unary(l, node, "COPY", 0, 0, src, dst, out_dtype, step);
}

Status lower_elementwise(Lowering& l, const Node& node) {
  const Attrs& a = node.attrs;
  switch (node.op) {
    case Op::silu: return lower_unary(l, node, "SILU", 0, 0);
    case Op::gelu: return lower_unary(l, node, "GELU", 0, 0);
    case Op::tanh: return lower_unary(l, node, "TANH", 0, 0);
    case Op::scale:
      return lower_unary(l, node, "SCALE", static_cast<float>(a.get_float("mul", 1.0)),
                         static_cast<float>(a.get_float("add", 0.0)));
    case Op::clamp:
      return lower_unary(l, node, "CLAMP", static_cast<float>(a.get_float("min")),
                         static_cast<float>(a.get_float("max")));
    case Op::cast: return lower_unary(l, node, "COPY", 0, 0);
    case Op::add: return lower_binary(l, node, "ADD");
    case Op::mul: return lower_binary(l, node, "MUL");
    case Op::silu_mul: return lower_binary(l, node, "SILU_MUL");
    default: return l.fail(node, "not a pointwise op");
  }
}

}  // namespace strata::codegen

// Data movement: reshape (aliased: no dispatch, unless it must land elsewhere),
// permute, slice, concat (one dispatch per operand, into its window of the output)
// through kernels/strided_copy.comp, and upsample_nearest (kernels/upsample_nearest.comp,
// or strided_copy in 16-byte units where the innermost run allows).
// Every operand is indexed through its physical strides (any layout, codegen/storage.h),
// and elements of one storage type are copied bit for bit (4-byte words for f32
// storage, halves for f16), so results equal the interpreter's bit for bit. A reshape
// that cannot alias (between layouts, or into an output slot) is a conversion copy.
//
// Each dispatch binds only the window of a value it touches (from the first to the
// last element, start aligned down to the binding alignment): concat's dispatches
// write disjoint windows where the layout allows, so the runtime puts no barrier
// between them, and a slice of a large tensor binds only what it reads.
//
// Under any binding limit (the target's storage-buffer range): a permute, slice,
// concat operand or upsample whose windows do not fit one binding runs as a copy
// loop (an upsample as one with stride-0 dims, strided.h: upsample_loop) in boxes
// (strided.h: split_boxes, over the loop in the output's memory order), one
// strided_copy dispatch per box, each binding windows that fit. Copies move bits, so
// the result is the unsplit one. Only a loop of which not even one element fits is
// an error naming the node, the bytes and the limit.
#include "codegen/copy.h"
#include "codegen/lowering.h"
#include "codegen/placement.h"
#include "codegen/storage.h"
#include "codegen/strided.h"

#include <algorithm>

namespace strata::codegen {
namespace {

constexpr uint32_t kLocal = 64;
constexpr int kMaxRank = 6;

// A window of value `v` covering elements [first, last], and the element index of
// `first` inside it.
struct Window {
  runtime::BindingDesc binding;
  uint64_t base = 0;
};

Window window(const Lowering& l, ValueId v, uint64_t first, uint64_t last, runtime::Access access) {
  const uint32_t eb = l.elem_bytes(v);
  const uint64_t start = first * eb / placement_alignment(l.target()) * placement_alignment(l.target());
  return Window{l.bind_window(v, start, (last + 1) * eb - start, access), first - start / eb};
}

// The last stored element of `v`.
uint64_t last_element(const Lowering& l, ValueId v) {
  return static_cast<uint64_t>(physical_elements(l.type(v))) - 1;
}

// The last element a loop with these strides reaches from element 0.
uint64_t reach(const StridedLoop& loop, size_t operand) {
  uint64_t r = 0;
  for (size_t d = 0; d < loop.shape.size(); ++d)
    r += static_cast<uint64_t>((loop.shape[d] - 1) * loop.strides[operand][d]);
  return r;
}

// One strided_copy dispatch: loop.strides[0] are source strides, [1] destination;
// `src_storage` and `dst_storage` the element types (f32 words are copied as uint).
Status strided_copy(Lowering& l, const Node& node, const StridedLoop& loop, const Window& src, const Window& dst,
                    const std::string& step, DType src_storage = DType::f32, DType dst_storage = DType::f32) {
  const int rank = static_cast<int>(loop.shape.size());
  if (rank > kMaxRank) return l.fail(node, fmt::format("needs {} dims after merging, the kernel takes {}", rank, kMaxRank));
  KernelKey key{"strided_copy.comp", {{"RANK", std::to_string(rank)}}, 2,
                static_cast<uint32_t>(4 * (3 + 3 * rank)), {kLocal, 1, 1}};
  // 16 bytes per invocation (VEC): a copy of one storage type whose every V = 16 /
  // element bytes consecutive elements are one innermost run on both sides, at 16-byte
  // aligned element indices (the transformers' head permutes: [T, H, D] <-> [H, T, D]).
  const uint32_t v = src_storage == dst_storage ? 16 / storage_bytes(src_storage) : 1;
  bool vec = v > 1 && rank >= 1 && loop.shape[static_cast<size_t>(rank - 1)] % v == 0 && src.base % v == 0 &&
             dst.base % v == 0 && src.binding.offset % 16 == 0 && dst.binding.offset % 16 == 0;
  for (size_t k = 0; k < 2 && vec; ++k)
    for (int d = 0; d < rank; ++d)
      vec = vec && (d == rank - 1 ? loop.strides[k][static_cast<size_t>(d)] == 1
                                  : loop.strides[k][static_cast<size_t>(d)] % v == 0);
  if (vec) key.defines["VEC"] = std::to_string(v);
  if (src_storage != dst_storage) {
    key.defines["CONVERT"] = "1";
    key.defines["ROUND"] = round_define(l.type(node.outputs[0]).dtype);
    add_type_define(key.defines, "SRC_T", src_storage);
    add_type_define(key.defines, "DST_T", dst_storage);
  } else if (src_storage == DType::f16) {
    add_type_define(key.defines, "SRC_T", DType::f16);
    add_type_define(key.defines, "DST_T", DType::f16);
  }
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  const auto n = static_cast<uint64_t>(num_elements(loop.shape));
  PushConstants push;
  push.u32(static_cast<uint32_t>(n)).u32(static_cast<uint32_t>(src.base)).u32(static_cast<uint32_t>(dst.base));
  for (int64_t s : loop.shape) push.u32(static_cast<uint32_t>(s));
  for (int k = 0; k < 2; ++k)
    for (int64_t s : loop.strides[static_cast<size_t>(k)]) push.u32(static_cast<uint32_t>(s));
  l.dispatch(pipe, {src.binding, dst.binding}, push, l.grid_1d(vec ? n / v : n, kLocal), node, step);
  return Status::ok();
}

// `loop` (strides[0] into x from element x_first, strides[1] into y from y_first)
// as one strided_copy dispatch over the windows `whole_x`, `whole_y` when both fit
// one binding, else in boxes whose windows fit.
Status copy_loop(Lowering& l, const Node& node, const StridedLoop& loop, ValueId x, uint64_t x_first,
                 const Window& whole_x, ValueId y, uint64_t y_first, const Window& whole_y, const std::string& step) {
  // In y's memory order, collapsed there: an NHWC image sliced or upsampled along H
  // copies whole runs of pixels, not one element per channel stride (a copy visits
  // distinct elements, so the order changes no result).
  const StridedLoop ordered = physical_order(loop, 1);
  const uint64_t range = l.target().max_storage_buffer_range;
  if (whole_x.binding.range <= range && whole_y.binding.range <= range)
    return strided_copy(l, node, ordered, whole_x, whole_y, step, l.storage(x), l.storage(y));
  const uint64_t align = placement_alignment(l.target());
  const uint64_t room = range > align ? range - align : 0;
  const std::vector<LoopBox> boxes = split_boxes(ordered, {room / l.elem_bytes(x), room / l.elem_bytes(y)});
  if (boxes.empty())
    return l.fail(node, fmt::format("one element of each operand needs {} bytes with alignment slack, above the "
                                    "storage-buffer range {}",
                                    std::max(l.elem_bytes(x), l.elem_bytes(y)) + align, range));
  const std::string prefix = step.empty() ? "b" : step + "b";
  for (size_t i = 0; i < boxes.size(); ++i) {
    const LoopBox& box = boxes[i];
    const uint64_t xf = x_first + loop_offset(ordered.strides[0], box.origin);
    const uint64_t yf = y_first + loop_offset(ordered.strides[1], box.origin);
    STRATA_RETURN_IF_ERROR(strided_copy(
        l, node, StridedLoop{box.shape, ordered.strides},
        window(l, x, xf, xf + box_span(ordered.strides[0], box.shape) - 1, runtime::Access::read),
        window(l, y, yf, yf + box_span(ordered.strides[1], box.shape) - 1, runtime::Access::write),
        prefix + std::to_string(i), l.storage(x), l.storage(y)));
  }
  return Status::ok();
}

Status lower_reshape(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], y = node.outputs[0];
  const Location &in = l.location(x), &out = l.location(y);
  if (in.buffer == out.buffer && in.offset == out.offset) return Status::ok();  // aliased
  if (l.storage(x) == DType::f32 && l.storage(y) == DType::f32 && is_row_major(l.type(x)) && is_row_major(l.type(y)))
    return emit_copy(l, node, l.bind(x, runtime::Access::read), l.bind(y, runtime::Access::write),
                     static_cast<uint64_t>(l.type(y).elements()), "copy");
  return emit_convert(l, node, TensorRef{l.bind(x, runtime::Access::read), l.shape(x), l.strides(x), l.storage(x)},
                      TensorRef{l.bind(y, runtime::Access::write), l.shape(y), l.strides(y), l.storage(y)},
                      l.type(y).dtype, "copy");
}

Status lower_permute(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], y = node.outputs[0];
  // A permute that keeps its operand's bytes in place shares its storage
  // (passes/memory_plan.h, permute_keeps_bytes): nothing to move.
  const Location &in = l.location(x), &out = l.location(y);
  if (in.buffer == out.buffer && in.offset == out.offset) return Status::ok();
  const std::vector<int64_t> perm = node.attrs.get_ints("perm"), sx = l.strides(x);
  std::vector<int64_t> src(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) src[d] = sx[static_cast<size_t>(perm[d])];
  const StridedLoop loop = collapse(StridedLoop{l.shape(y), {src, l.strides(y)}});
  return copy_loop(l, node, loop, x, 0, window(l, x, 0, last_element(l, x), runtime::Access::read), y, 0,
                   window(l, y, 0, last_element(l, y), runtime::Access::write), "");
}

Status lower_slice(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], y = node.outputs[0];
  const auto axis = static_cast<size_t>(node.attrs.get_int("axis"));
  const std::vector<int64_t> sx = l.strides(x);
  const StridedLoop loop = collapse(StridedLoop{l.shape(y), {sx, l.strides(y)}});
  const auto first = static_cast<uint64_t>(node.attrs.get_int("start") * sx[axis]);
  return copy_loop(l, node, loop, x, first,
                   window(l, x, first, first + box_span(loop.strides[0], loop.shape) - 1, runtime::Access::read), y, 0,
                   window(l, y, 0, box_span(loop.strides[1], loop.shape) - 1, runtime::Access::write), "");
}

Status lower_concat(Lowering& l, const Node& node) {
  const ValueId y = node.outputs[0];
  const auto axis = static_cast<size_t>(node.attrs.get_int("axis"));
  const std::vector<int64_t> sy = l.strides(y);
  int64_t along = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ValueId x = node.inputs[i];
    const StridedLoop loop = collapse(StridedLoop{l.shape(x), {l.strides(x), sy}});
    const auto first = static_cast<uint64_t>(along * sy[axis]);
    along += l.shape(x)[axis];
    STRATA_RETURN_IF_ERROR(copy_loop(l, node, loop, x, 0, window(l, x, 0, last_element(l, x), runtime::Access::read),
                                     y, first, window(l, y, first, first + reach(loop, 1), runtime::Access::write),
                                     std::to_string(i)));
  }
  return Status::ok();
}

Status lower_upsample(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], y = node.outputs[0];
  if (l.storage(x) != l.storage(y))
    return l.fail(node, fmt::format("input stored as {} but output as {}", dtype_name(l.storage(x)),
                                    dtype_name(l.storage(y))));
  const Shape& out = l.shape(y);
  const std::vector<int64_t> factors = node.attrs.get_ints("factors");
  std::vector<int64_t> f(out.size(), 1);
  std::copy(factors.begin(), factors.end(), f.end() - static_cast<std::ptrdiff_t>(factors.size()));
  const std::vector<int64_t> sx = l.strides(x), sy = l.strides(y);
  const uint64_t range = l.target().max_storage_buffer_range;
  if (l.bind(x, runtime::Access::read).range > range || l.bind(y, runtime::Access::write).range > range) {
    // Too large for one binding: the same copy as a loop with stride-0 dims, in boxes.
    const Window wx = window(l, x, 0, last_element(l, x), runtime::Access::read);
    const Window wy = window(l, y, 0, last_element(l, y), runtime::Access::write);
    return copy_loop(l, node, upsample_loop(out, f, sx, sy), x, 0, wx, y, 0, wy, "");
  }
  // An upsample whose innermost run (in y's memory order) is unscaled and contiguous on
  // both sides, such as an NHWC map's channels, in 16-byte units: the same copy as a
  // loop with stride-0 dims through strided_copy (VEC), one index computation per 16
  // bytes instead of one per element (Wan's DupUp3D shortcuts ran at ~0.3 TB/s on the
  // H200 one element at a time). The same bits.
  {
    const StridedLoop loop = physical_order(upsample_loop(out, f, sx, sy), 1);
    const uint32_t v = 16 / l.elem_bytes(x);
    const size_t rank = loop.shape.size();
    bool units = rank >= 1 && rank <= static_cast<size_t>(kMaxRank) && loop.shape[rank - 1] % v == 0;
    for (size_t k = 0; k < 2 && units; ++k)
      for (size_t d = 0; d < rank; ++d)
        units = units && (d + 1 == rank ? loop.strides[k][d] == 1 : loop.strides[k][d] % v == 0);
    const Window wx = window(l, x, 0, last_element(l, x), runtime::Access::read);
    const Window wy = window(l, y, 0, last_element(l, y), runtime::Access::write);
    if (units && wx.base % v == 0 && wy.base % v == 0 && wx.binding.offset % 16 == 0 && wy.binding.offset % 16 == 0)
      return copy_loop(l, node, loop, x, 0, wx, y, 0, wy, "");
  }
  // In y's memory order (as strided.h physical_order), merge dims of size 1 away, and
  // neighbours that are both unscaled and contiguous in x and in y.
  std::vector<size_t> order(out.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sy[a] > sy[b]; });
  Shape shape;
  std::vector<int64_t> fac, xstride, ystride;
  for (size_t d : order) {
    if (out[d] == 1) continue;
    if (!shape.empty() && fac.back() == 1 && f[d] == 1 && xstride.back() == sx[d] * out[d] &&
        ystride.back() == sy[d] * out[d]) {
      shape.back() *= out[d];
      xstride.back() = sx[d];
      ystride.back() = sy[d];
      continue;
    }
    shape.push_back(out[d]);
    fac.push_back(f[d]);
    xstride.push_back(sx[d]);
    ystride.push_back(sy[d]);
  }
  if (shape.empty()) shape = {1}, fac = {1}, xstride = {0}, ystride = {0};
  const int rank = static_cast<int>(shape.size());
  if (rank > kMaxRank) return l.fail(node, fmt::format("needs {} dims after merging, the kernel takes {}", rank, kMaxRank));
  KernelKey key{"upsample_nearest.comp", {{"RANK", std::to_string(rank)}}, 2,
                static_cast<uint32_t>(4 * (1 + 4 * rank)), {kLocal, 1, 1}};
  if (l.storage(x) == DType::f16) add_type_define(key.defines, "ELEM", DType::f16);
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  const auto n = static_cast<uint64_t>(l.type(y).elements());
  PushConstants push;
  push.u32(static_cast<uint32_t>(n));
  for (const auto* v : {&shape, &fac, &xstride, &ystride})
    for (int64_t e : *v) push.u32(static_cast<uint32_t>(e));
  l.dispatch(pipe, {l.bind(x, runtime::Access::read), l.bind(y, runtime::Access::write)}, push, l.grid_1d(n, kLocal),
             node);
  return Status::ok();
}

}  // namespace

Status emit_copy(Lowering& l, const Node& node, runtime::BindingDesc src, runtime::BindingDesc dst, uint64_t elements,
                 const std::string& step) {
  const uint64_t align = placement_alignment(l.target());
  const uint64_t chunk = std::max<uint64_t>(align, l.target().max_storage_buffer_range / align * align) / 4;
  for (uint64_t at = 0; at < elements; at += chunk) {
    const uint64_t count = std::min(chunk, elements - at);
    runtime::BindingDesc s = src, d = dst;
    s.offset += at * 4, d.offset += at * 4;
    s.range = d.range = count * 4;
    StridedLoop loop{{static_cast<int64_t>(count)}, {{1}, {1}}};
    STRATA_RETURN_IF_ERROR(strided_copy(l, node, loop, Window{s, 0}, Window{d, 0},
                                        elements > chunk ? step + std::to_string(at / chunk) : step));
  }
  return Status::ok();
}

Status lower_shuffle(Lowering& l, const Node& node) {
  switch (node.op) {
    case Op::reshape: return lower_reshape(l, node);
    case Op::permute: return lower_permute(l, node);
    case Op::slice: return lower_slice(l, node);
    case Op::concat: return lower_concat(l, node);
    case Op::upsample_nearest: return lower_upsample(l, node);
    default: return l.fail(node, "not a data-movement op");
  }
}

}  // namespace strata::codegen

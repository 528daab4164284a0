// Data movement: reshape (aliased: no dispatch, unless it must land elsewhere),
// permute, slice, concat (one dispatch per operand, into its window of the output)
// through kernels/strided_copy.comp, and upsample_nearest (kernels/upsample_nearest.comp).
// Every kernel copies 4-byte words, so results equal the interpreter's bit for bit.
//
// Each dispatch binds only the window of a value it touches (from the first to the
// last element, start aligned down to the binding alignment): concat's dispatches
// write disjoint windows where the layout allows, so the runtime puts no barrier
// between them, and a slice of a large tensor binds only what it reads.
#include "codegen/copy.h"
#include "codegen/lowering.h"
#include "codegen/placement.h"
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
  const uint64_t start = first * 4 / placement_alignment(l.target()) * placement_alignment(l.target());
  return Window{l.bind_window(v, start, (last + 1) * 4 - start, access), first - start / 4};
}

// The last element a loop with these strides reaches from element 0.
uint64_t reach(const StridedLoop& loop, size_t operand) {
  uint64_t r = 0;
  for (size_t d = 0; d < loop.shape.size(); ++d)
    r += static_cast<uint64_t>((loop.shape[d] - 1) * loop.strides[operand][d]);
  return r;
}

// One strided_copy dispatch: loop.strides[0] are source strides, [1] destination.
Status strided_copy(Lowering& l, const Node& node, const StridedLoop& loop, const Window& src, const Window& dst,
                    const std::string& step) {
  const int rank = static_cast<int>(loop.shape.size());
  if (rank > kMaxRank) return l.fail(node, fmt::format("needs {} dims after merging, the kernel takes {}", rank, kMaxRank));
  KernelKey key{"strided_copy.comp", {{"RANK", std::to_string(rank)}}, 2,
                static_cast<uint32_t>(4 * (3 + 3 * rank)), {kLocal, 1, 1}};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  const auto n = static_cast<uint64_t>(num_elements(loop.shape));
  PushConstants push;
  push.u32(static_cast<uint32_t>(n)).u32(static_cast<uint32_t>(src.base)).u32(static_cast<uint32_t>(dst.base));
  for (int64_t s : loop.shape) push.u32(static_cast<uint32_t>(s));
  for (int k = 0; k < 2; ++k)
    for (int64_t s : loop.strides[static_cast<size_t>(k)]) push.u32(static_cast<uint32_t>(s));
  l.dispatch(pipe, {src.binding, dst.binding}, push, l.grid_1d(n, kLocal), node, step);
  return Status::ok();
}

Status lower_reshape(Lowering& l, const Node& node) {
  const Location &in = l.location(node.inputs[0]), &out = l.location(node.outputs[0]);
  if (in.buffer == out.buffer && in.offset == out.offset) return Status::ok();  // aliased
  return emit_copy(l, node, l.bind(node.inputs[0], runtime::Access::read),
                   l.bind(node.outputs[0], runtime::Access::write),
                   static_cast<uint64_t>(l.type(node.outputs[0]).elements()), "copy");
}

Status lower_permute(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], y = node.outputs[0];
  const std::vector<int64_t> perm = node.attrs.get_ints("perm"), sx = row_major_strides(l.shape(x));
  std::vector<int64_t> src(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) src[d] = sx[static_cast<size_t>(perm[d])];
  const StridedLoop loop = collapse(StridedLoop{l.shape(y), {src, row_major_strides(l.shape(y))}});
  return strided_copy(l, node, loop, window(l, x, 0, static_cast<uint64_t>(l.type(x).elements()) - 1, runtime::Access::read),
                      window(l, y, 0, static_cast<uint64_t>(l.type(y).elements()) - 1, runtime::Access::write), "");
}

Status lower_slice(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], y = node.outputs[0];
  const auto axis = static_cast<size_t>(node.attrs.get_int("axis"));
  const std::vector<int64_t> sx = row_major_strides(l.shape(x));
  const StridedLoop loop = collapse(StridedLoop{l.shape(y), {sx, row_major_strides(l.shape(y))}});
  const auto first = static_cast<uint64_t>(node.attrs.get_int("start") * sx[axis]);
  return strided_copy(l, node, loop, window(l, x, first, first + reach(loop, 0), runtime::Access::read),
                      window(l, y, 0, static_cast<uint64_t>(l.type(y).elements()) - 1, runtime::Access::write), "");
}

Status lower_concat(Lowering& l, const Node& node) {
  const ValueId y = node.outputs[0];
  const auto axis = static_cast<size_t>(node.attrs.get_int("axis"));
  const std::vector<int64_t> sy = row_major_strides(l.shape(y));
  int64_t along = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ValueId x = node.inputs[i];
    const StridedLoop loop = collapse(StridedLoop{l.shape(x), {row_major_strides(l.shape(x)), sy}});
    const auto first = static_cast<uint64_t>(along * sy[axis]);
    along += l.shape(x)[axis];
    STRATA_RETURN_IF_ERROR(strided_copy(
        l, node, loop, window(l, x, 0, static_cast<uint64_t>(l.type(x).elements()) - 1, runtime::Access::read),
        window(l, y, first, first + reach(loop, 1), runtime::Access::write), std::to_string(i)));
  }
  return Status::ok();
}

Status lower_upsample(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], y = node.outputs[0];
  const Shape& out = l.shape(y);
  const std::vector<int64_t> factors = node.attrs.get_ints("factors");
  std::vector<int64_t> f(out.size(), 1);
  std::copy(factors.begin(), factors.end(), f.end() - static_cast<std::ptrdiff_t>(factors.size()));
  const std::vector<int64_t> sx = row_major_strides(l.shape(x));
  // Merge dims of size 1 away, and neighbours that are both unscaled (contiguous in x and y).
  Shape shape;
  std::vector<int64_t> fac, stride;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    if (!shape.empty() && fac.back() == 1 && f[d] == 1 && stride.back() == sx[d] * out[d]) {
      shape.back() *= out[d];
      stride.back() = sx[d];
      continue;
    }
    shape.push_back(out[d]);
    fac.push_back(f[d]);
    stride.push_back(sx[d]);
  }
  if (shape.empty()) shape = {1}, fac = {1}, stride = {0};
  const int rank = static_cast<int>(shape.size());
  if (rank > kMaxRank) return l.fail(node, fmt::format("needs {} dims after merging, the kernel takes {}", rank, kMaxRank));
  KernelKey key{"upsample_nearest.comp", {{"RANK", std::to_string(rank)}}, 2,
                static_cast<uint32_t>(4 * (1 + 3 * rank)), {kLocal, 1, 1}};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  const auto n = static_cast<uint64_t>(l.type(y).elements());
  PushConstants push;
  push.u32(static_cast<uint32_t>(n));
  for (int64_t v : shape) push.u32(static_cast<uint32_t>(v));
  for (int64_t v : fac) push.u32(static_cast<uint32_t>(v));
  for (int64_t v : stride) push.u32(static_cast<uint32_t>(v));
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

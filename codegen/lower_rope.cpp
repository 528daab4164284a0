// lower_rope: the diffusion transformer's position and timestep features.
//
//   rope        kernels/rope.comp, an invocation per pair (per two pairs as 4-vectors
//               where D and the windows allow). x and y are bound in
//               windows of whole rows (one token of one head: D elements) that fit
//               the storage-buffer range, one dispatch each, the kernel told the
//               first row (for its token's table row) and where its first element
//               is; the tables [T, D/2] are bound whole. Each pair is the same
//               arithmetic in every split, so a split run equals the unsplit one.
//   sinusoidal  kernels/sinusoidal.comp, an invocation per output element, all bound
//               whole ([N], [F] and [N, 2F] are a timestep's few hundred values).
//
// Operands must be row major (these ops' values are token matrices, which no layout
// pass rewrites); errors name the node.
#include "codegen/lowering.h"
#include "codegen/storage.h"

#include <algorithm>

namespace strata::codegen {
namespace {

using runtime::Access;

constexpr uint32_t kLocal = 64;

Status lower_rope_op(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], cos = node.inputs[1], sin = node.inputs[2], y = node.outputs[0];
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {x, cos, sin, y}));
  const Shape& xs = l.shape(x);
  const uint64_t d = static_cast<uint64_t>(xs.back()), tokens = static_cast<uint64_t>(xs[xs.size() - 2]);
  const uint64_t rows = static_cast<uint64_t>(num_elements(xs)) / d;
  // Rows per dispatch: a window of that many rows, plus the alignment slack of its
  // start, fits the range for the wider of x and y.
  const uint64_t bytes = std::max(l.elem_bytes(x), l.elem_bytes(y));
  const uint64_t range = l.target().max_storage_buffer_range, slack = l.offset_alignment();
  const uint64_t per = range > slack ? (range - slack) / (d * bytes) : 0;
  if (per == 0)
    return l.fail(node, fmt::format("one row of {} bytes does not fit the storage-buffer range {}", d * bytes, range));
  for (ValueId t : {cos, sin})
    if (static_cast<uint64_t>(num_elements(l.shape(t))) * l.elem_bytes(t) > range)
      return l.fail(node, fmt::format("the table '{}' exceeds the storage-buffer range {}", l.graph().value(t).name,
                                      range));

  // Two pairs per invocation (rope.comp VEC 4): D a multiple of 4, every window's
  // base a whole vector at a 16-byte offset, the tables at 16-byte offsets.
  bool vec = d % 4 == 0;
  for (uint64_t r0 = 0; r0 < rows && vec; r0 += per) {
    const uint64_t count = std::min(per, rows - r0);
    for (ValueId v : {x, y}) {
      const Lowering::ElementWindow w = l.element_window(v, r0 * d, count * d, Access::read);
      vec = vec && w.base % 4 == 0 && w.binding.offset % 16 == 0;
    }
  }
  for (ValueId t : {cos, sin}) vec = vec && l.bind(t, Access::read).offset % 16 == 0;
  KernelKey key;
  key.file = "rope.comp";
  if (vec) {
    key.defines["VEC"] = "4";
    add_vec4_type_define(key.defines, "X_V", l.storage(x));
    add_vec4_type_define(key.defines, "Y_V", l.storage(y));
    key.defines["T_V2"] = l.storage(cos) == DType::f16 ? "f16vec2" : "vec2";
  }
  add_type_define(key.defines, "X_T", l.storage(x));
  add_type_define(key.defines, "T_T", l.storage(cos));
  add_type_define(key.defines, "Y_T", l.storage(y));
  key.defines["ROUND"] = round_define(l.type(y).dtype);
  if (l.storage(sin) != l.storage(cos)) return l.fail(node, "the cos and sin tables must be stored alike");
  key.bindings = 4;
  key.push_constant_bytes = 5 * 4;
  key.workgroup_size = {kLocal, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));

  size_t part = 0;
  for (uint64_t r0 = 0; r0 < rows; r0 += per) {
    const uint64_t count = std::min(per, rows - r0);
    const Lowering::ElementWindow xw = l.element_window(x, r0 * d, count * d, Access::read);
    const Lowering::ElementWindow yw = l.element_window(y, r0 * d, count * d, Access::write);
    if (xw.base != yw.base)
      return l.fail(node, fmt::format("input and output windows are misaligned ({} vs {} elements past the offset)",
                                      xw.base, yw.base));
    PushConstants push;
    push.u32(static_cast<uint32_t>(d / 2)).u32(static_cast<uint32_t>(tokens)).u32(static_cast<uint32_t>(count));
    push.u32(static_cast<uint32_t>(r0)).u32(xw.base);
    l.dispatch(pipe, {xw.binding, l.bind(cos, Access::read), l.bind(sin, Access::read), yw.binding}, push,
               l.grid_1d(count * d / (vec ? 4 : 2), kLocal), node, rows > per ? "w" + std::to_string(part++) : "");
  }
  return Status::ok();
}

Status lower_sinusoidal(Lowering& l, const Node& node) {
  const ValueId t = node.inputs[0], f = node.inputs[1], y = node.outputs[0];
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {t, f, y}));
  const uint64_t n = static_cast<uint64_t>(l.shape(t)[0]), freqs = static_cast<uint64_t>(l.shape(f)[0]);
  KernelKey key;
  key.file = "sinusoidal.comp";
  add_type_define(key.defines, "T_T", l.storage(t));
  add_type_define(key.defines, "F_T", l.storage(f));
  add_type_define(key.defines, "Y_T", l.storage(y));
  key.defines["ROUND"] = round_define(l.type(y).dtype);
  key.bindings = 3;
  key.push_constant_bytes = 2 * 4;
  key.workgroup_size = {kLocal, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  PushConstants push;
  push.u32(static_cast<uint32_t>(n)).u32(static_cast<uint32_t>(freqs));
  l.dispatch(pipe, {l.bind(t, Access::read), l.bind(f, Access::read), l.bind(y, Access::write)}, push,
             l.grid_1d(n * 2 * freqs, kLocal), node);
  return Status::ok();
}

}  // namespace

Status lower_rope(Lowering& l, const Node& node) {
  switch (node.op) {
    case Op::rope: return lower_rope_op(l, node);
    case Op::sinusoidal: return lower_sinusoidal(l, node);
    default: return l.fail(node, "lower_rope handles rope and sinusoidal only");
  }
}

}  // namespace strata::codegen

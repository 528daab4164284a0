// lower_w8a8_rows: producers whose result only W8A8 linears read (through an aliasing
// reshape at most) write those linears' int8 rows (codegen/w8a8.h's form) with
// kernels/quantize_rows.comp's input stages, held in scratch memory until the last
// linear (Lowering::hold_scratch), which binds them (lower_gemm_int8.cpp). The
// producer's f16 result is never written, and its dispatch and the linears' quantizer
// are one:
//   silu_mul(a, b) → linear                       SILU_MUL: Z-Image's w2 after the SwiGLU gate
//   permute {1, 0, 2} of o[H, T, D] → reshape [T, H·D] → linear
//                                                 HEADS: to_out after the attention
// The codes are those quantize_rows gives on the f16 values the producer would store
// (tests/codegen/test_w8a8_norm_rows.cpp checks it bit for bit).
//
// Where: CodegenOptions::w8a8_producer_rows; every operand and the linears' x f16 and
// row-major, K a multiple of 8 (and D), at most 16 vectors an invocation, operands at
// 16-byte offsets, each within one binding; the reshape aliasing the permute's result.
// Anything else is lowered by its family, and the linears quantize.
#include "codegen/lowering.h"
#include "codegen/storage.h"
#include "codegen/w8a8.h"

#include <algorithm>
#include <optional>

namespace strata::codegen {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

struct Producer {
  std::vector<ValueId> reads;  // bound in this order, before the rows
  ValueId x = kNoValue;        // the linears' x
  int64_t head_dim = 0;        // HEADS: D; 0 for SILU_MUL
  const Node* last = nullptr;  // the last linear reading x
};

std::optional<Producer> match(const Lowering& l, const Node& node) {
  const Graph& g = l.graph();
  const ValueId y = node.outputs[0];
  if (node.op == Op::silu_mul) {
    const W8A8RowReaders readers = w8a8_row_readers(g, y);
    if (!readers.last || readers.others) return std::nullopt;
    for (ValueId v : node.inputs)
      if (l.shape(v) != l.shape(y)) return std::nullopt;
    return Producer{node.inputs, y, 0, readers.last};
  }
  if (node.op == Op::permute && node.attrs.get_ints("perm") == std::vector<int64_t>{1, 0, 2}) {
    const Node* reshape = l.sole_reader(y);
    if (!reshape || reshape->op != Op::reshape) return std::nullopt;
    const ValueId x = reshape->outputs[0];
    const Shape &ys = l.shape(y), &xs = l.shape(x);
    if (xs != Shape{ys[0], ys[1] * ys[2]}) return std::nullopt;
    const Location &at = l.location(y), &alias = l.location(x);
    if (at.buffer != alias.buffer || at.offset != alias.offset) return std::nullopt;  // a copy would read y
    const W8A8RowReaders readers = w8a8_row_readers(g, x);
    if (!readers.last || readers.others) return std::nullopt;
    return Producer{{node.inputs[0]}, x, ys[2], readers.last};
  }
  return std::nullopt;
}

}  // namespace

Expected<bool> lower_w8a8_rows(Lowering& l, const Node& node) {
  if (!l.options().w8a8_producer_rows || (node.op != Op::silu_mul && node.op != Op::permute)) return false;
  const std::optional<Producer> p = match(l, node);
  if (!p) return false;
  const Shape& xs = l.shape(p->x);
  const int64_t k = xs.back(), kp = w8a8_padded_k(k);
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < xs.size(); ++i) rows *= xs[i];
  // The quantizer's shape, as lower_gemm_int8.cpp's: a workgroup per row, 256
  // invocations for rows of more than 4096 codes.
  const uint32_t invocations = kp > 4096 ? 256 : 128;
  const uint64_t vpt = ceil_div(static_cast<uint64_t>(kp / 8), invocations);
  const uint64_t range = l.target().max_storage_buffer_range, rows_bytes = w8a8_rows_bytes(rows, k);
  bool fits = k % 8 == 0 && p->head_dim % 8 == 0 && vpt <= 16 && l.offset_alignment() % 16 == 0 &&
              l.storage(p->x) == DType::f16 && l.type(p->x).dtype == DType::f16 && is_row_major(l.type(p->x)) &&
              rows_bytes <= range;
  for (ValueId v : p->reads)
    fits = fits && l.storage(v) == DType::f16 && is_row_major(l.type(v)) && l.location(v).offset % 16 == 0 &&
           l.location(v).bytes <= range;
  const uint64_t qx = std::min<uint64_t>(static_cast<uint64_t>(rows), l.target().max_workgroup_count_x);
  const uint64_t qy = ceil_div(static_cast<uint64_t>(rows), qx);
  if (!fits || qy > 65535) return false;

  KernelKey key;
  key.file = "quantize_rows.comp";
  key.defines = {{"WG", std::to_string(invocations)}, {"W8A8_CODES", "1"}, {"VEC", "1"},
                 {"VPT", std::to_string(vpt)}};
  add_type_define(key.defines, "X_T", DType::f16);
  if (node.op == Op::silu_mul) {
    key.defines["SILU_MUL"] = "1";
    key.defines["ROUND"] = round_define(l.type(p->x).dtype);
  } else {
    key.defines["HEADS"] = "1";
  }
  key.subgroup_ops = runtime::subgroup_ops::basic | runtime::subgroup_ops::arithmetic;
  key.bindings = static_cast<uint32_t>(p->reads.size()) + 1;
  key.workgroup_size = {invocations, 1, 1};
  PushConstants push;
  push.u32(static_cast<uint32_t>(rows)).u32(static_cast<uint32_t>(k)).u32(static_cast<uint32_t>(kp));
  if (p->head_dim > 0) push.u32(static_cast<uint32_t>(p->head_dim));
  key.push_constant_bytes = static_cast<uint32_t>(push.bytes().size());
  STRATA_ASSIGN_OR_RETURN(const uint32_t pipe, l.pipeline(key));
  const Location held = l.hold_scratch(node, rows_bytes, w8a8_rows_name(p->x), *p->last);
  std::vector<runtime::BindingDesc> bindings;
  for (ValueId v : p->reads) bindings.push_back(l.bind(v, runtime::Access::read));
  bindings.push_back(Lowering::bind_scratch(held, runtime::Access::write));
  l.dispatch(pipe, std::move(bindings), push, {static_cast<uint32_t>(qx), static_cast<uint32_t>(qy), 1}, node,
             "quantize");
  return true;
}

}  // namespace strata::codegen

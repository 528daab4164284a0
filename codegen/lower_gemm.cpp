// lower_gemm: linear and matmul -> kernels/gemm.comp, one tiled GEMM dispatch.
//
//   linear(x[..., K], w[M, K], bias[M]?)  one GEMM: rows = Π leading dims of x, B = wᵀ
//                                         read as [N, K] (B_NK = 1), bias per column
//   matmul(a[..., M, K], b[..., K, N])    batched over the (equal) leading dims, B read
//                                         as [batch, K, N] (B_NK = 0)
//
// Every operand is bound whole: a tensor larger than the target's storage-buffer range
// is an error naming the node (banding is a later pass).
#include "codegen/lowering.h"
#include "codegen/storage.h"

#include <algorithm>
#include <string>

namespace strata::codegen {
namespace {

// Workgroup tile: BM rows × BN columns of C, K steps of BK, a TM × TN accumulator
// block per invocation (WG = BM/TM · BN/TN = 256 invocations).
struct GemmTile {
  uint32_t bm = 64, bn = 64, bk = 16, tm = 4, tn = 4;
  uint32_t invocations() const { return (bm / tm) * (bn / tn); }
  uint32_t shared_bytes() const { return (bk * (bm + 1) + bk * (bn + 1)) * 4; }
};

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

}  // namespace

Status lower_gemm(Lowering& l, const Node& node) {
  if (node.op != Op::linear && node.op != Op::matmul)
    return l.fail(node, "lower_gemm handles linear and matmul only");
  const bool linear = node.op == Op::linear;
  const ValueId a = node.inputs[0], b = node.inputs[1], c = node.outputs[0];
  const ValueId bias = linear && node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
  const Shape& as = l.shape(a);
  const Shape& bs = l.shape(b);
  const size_t r = as.size();

  // C[batch, m, n] = A[batch, m, k] · B(batch)[k, n]
  int64_t batch, m, n, k;
  if (linear) {
    batch = 1, m = product(as, 0, r - 1), k = as[r - 1], n = bs[0];
  } else {
    batch = product(as, 0, r - 2), m = as[r - 2], k = as[r - 1], n = bs[r - 1];
  }

  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {a, b, bias, c}));
  for (ValueId v : {a, b, bias, c}) {
    if (v == kNoValue) continue;
    const uint64_t bytes = static_cast<uint64_t>(num_elements(l.shape(v))) * l.elem_bytes(v);
    if (bytes > l.target().max_storage_buffer_range)
      return l.fail(node, fmt::format("operand '{}' ({} bytes) exceeds the storage-buffer range {} (needs banding)",
                                      l.graph().value(v).name, bytes, l.target().max_storage_buffer_range));
  }

  const GemmTile tile;
  if (tile.shared_bytes() > l.target().max_shared_memory_bytes)
    return l.fail(node, fmt::format("gemm tile needs {} bytes of shared memory, the target has {}",
                                    tile.shared_bytes(), l.target().max_shared_memory_bytes));

  // Row tiles along x, folded into z when there are more than x allows; column
  // tiles along y.
  constexpr uint64_t kMaxGroups = 65535;  // Vulkan's guaranteed minimum for y and z
  const uint64_t row_tiles = ceil_div(static_cast<uint64_t>(m), tile.bm);
  const uint64_t gx = std::min<uint64_t>(row_tiles, l.target().max_workgroup_count_x);
  const uint64_t split = ceil_div(row_tiles, gx);
  const uint64_t gy = ceil_div(static_cast<uint64_t>(n), tile.bn);
  const uint64_t gz = static_cast<uint64_t>(batch) * split;
  if (gy > kMaxGroups || gz > kMaxGroups)
    return l.fail(node, fmt::format("dispatch grid {}x{}x{} exceeds the workgroup-count limit", gx, gy, gz));

  KernelKey key;
  key.file = "gemm.comp";
  key.defines = {{"BM", std::to_string(tile.bm)}, {"BN", std::to_string(tile.bn)},
                 {"BK", std::to_string(tile.bk)}, {"TM", std::to_string(tile.tm)},
                 {"TN", std::to_string(tile.tn)}, {"B_NK", linear ? "1" : "0"},
                 {"HAS_BIAS", bias == kNoValue ? "0" : "1"}, {"ROUND", round_define(l.type(c).dtype)}};
  add_type_define(key.defines, "A_T", l.storage(a));
  add_type_define(key.defines, "B_T", l.storage(b));
  if (bias != kNoValue) add_type_define(key.defines, "BIAS_T", l.storage(bias));
  add_type_define(key.defines, "C_T", l.storage(c));
  key.bindings = bias == kNoValue ? 3 : 4;
  key.workgroup_size = {tile.invocations(), 1, 1};

  PushConstants push;
  push.u32(static_cast<uint32_t>(m)).u32(static_cast<uint32_t>(n)).u32(static_cast<uint32_t>(k));
  push.u32(static_cast<uint32_t>(split));
  key.push_constant_bytes = static_cast<uint32_t>(push.bytes().size());

  STRATA_ASSIGN_OR_RETURN(uint32_t pipeline, l.pipeline(key));
  std::vector<runtime::BindingDesc> bindings = {l.bind(a, runtime::Access::read), l.bind(b, runtime::Access::read)};
  if (bias != kNoValue) bindings.push_back(l.bind(bias, runtime::Access::read));
  bindings.push_back(l.bind(c, runtime::Access::write));
  l.dispatch(pipeline, std::move(bindings), push,
             {static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), static_cast<uint32_t>(gz)}, node);
  return Status::ok();
}

}  // namespace strata::codegen

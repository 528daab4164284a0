// lower_gemm: linear and matmul -> kernels/gemm.comp, one tiled GEMM dispatch.
//
//   linear(x[..., K], w[M, K], bias[M]?)  one GEMM: rows = Π leading dims of x, B = wᵀ
//                                         read as [N, K] (B_NK = 1), bias per column
//   matmul(a[..., M, K], b[..., K, N])    batched over the (equal) leading dims, B read
//                                         as [batch, K, N] (B_NK = 0)
//
// Operands are bound whole when they fit the target's storage-buffer range. Otherwise
// the GEMM runs one dispatch per batch and run of rows of A and C (gemm.comp with
// BASES: windows starting at aligned offsets, the kernel told where its first element
// is), B (one batch of it) and the bias bound whole. Each element of C is the same sum
// over k in the same order whichever dispatch computes it, so the result is the
// unsplit one. A B (one batch of a matmul's) or bias above the range, or a row of A or
// C that does not fit, is an error naming the node, the bytes and the limit.
#include "codegen/lowering.h"
#include "codegen/storage.h"

#include <algorithm>
#include <array>
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
  const uint64_t range = l.target().max_storage_buffer_range;
  bool windows = false;
  for (ValueId v : {a, b, bias, c})
    if (v != kNoValue && static_cast<uint64_t>(num_elements(l.shape(v))) * l.elem_bytes(v) > range) windows = true;
  // Windows: one batch of b (all of it for linear) and the bias whole; runs of rows of
  // a and c that fit, with the alignment slack.
  const uint64_t slack = l.offset_alignment();
  const uint64_t room = range > slack ? range - slack : 0;
  uint64_t rows_per = static_cast<uint64_t>(m);
  if (windows) {
    const uint64_t b_bytes = static_cast<uint64_t>(linear ? n * k : k * n) * l.elem_bytes(b);
    if (b_bytes + (linear ? 0 : slack) > range)
      return l.fail(node, fmt::format("{} '{}' needs {} bytes{}, above the storage-buffer range {}",
                                      linear ? "the weight" : "one batch of", l.graph().value(b).name, b_bytes,
                                      linear ? "" : " with alignment slack", range));
    if (bias != kNoValue && static_cast<uint64_t>(n) * l.elem_bytes(bias) > range)
      return l.fail(node, fmt::format("the bias '{}' needs {} bytes, above the storage-buffer range {}",
                                      l.graph().value(bias).name, n * l.elem_bytes(bias), range));
    rows_per = std::min({rows_per, room / (static_cast<uint64_t>(k) * l.elem_bytes(a)),
                         room / (static_cast<uint64_t>(n) * l.elem_bytes(c))});
    if (rows_per == 0)
      return l.fail(node, fmt::format("one row of a ({} bytes) and of c ({} bytes) with alignment slack {} must fit "
                                      "the storage-buffer range {}",
                                      k * l.elem_bytes(a), n * l.elem_bytes(c), slack, range));
  }

  const GemmTile tile;
  if (tile.shared_bytes() > l.target().max_shared_memory_bytes)
    return l.fail(node, fmt::format("gemm tile needs {} bytes of shared memory, the target has {}",
                                    tile.shared_bytes(), l.target().max_shared_memory_bytes));

  // Row tiles along x, folded into z when there are more than x allows; column
  // tiles along y.
  constexpr uint64_t kMaxGroups = 65535;  // Vulkan's guaranteed minimum for y and z
  auto grid_for = [&](uint64_t rows, uint64_t batches, uint64_t& split) -> Expected<std::array<uint32_t, 3>> {
    const uint64_t row_tiles = ceil_div(rows, tile.bm);
    const uint64_t gx = std::min<uint64_t>(row_tiles, l.target().max_workgroup_count_x);
    split = ceil_div(row_tiles, gx);
    const uint64_t gy = ceil_div(static_cast<uint64_t>(n), tile.bn);
    const uint64_t gz = batches * split;
    if (gy > kMaxGroups || gz > kMaxGroups)
      return l.fail(node, fmt::format("dispatch grid {}x{}x{} exceeds the workgroup-count limit", gx, gy, gz));
    return std::array<uint32_t, 3>{static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), static_cast<uint32_t>(gz)};
  };

  KernelKey key;
  key.file = "gemm.comp";
  key.defines = {{"BM", std::to_string(tile.bm)}, {"BN", std::to_string(tile.bn)},
                 {"BK", std::to_string(tile.bk)}, {"TM", std::to_string(tile.tm)},
                 {"TN", std::to_string(tile.tn)}, {"B_NK", linear ? "1" : "0"},
                 {"HAS_BIAS", bias == kNoValue ? "0" : "1"}, {"ROUND", round_define(l.type(c).dtype)}};
  if (windows) key.defines["BASES"] = "1";
  add_type_define(key.defines, "A_T", l.storage(a));
  add_type_define(key.defines, "B_T", l.storage(b));
  if (bias != kNoValue) add_type_define(key.defines, "BIAS_T", l.storage(bias));
  add_type_define(key.defines, "C_T", l.storage(c));
  key.bindings = bias == kNoValue ? 3 : 4;
  key.workgroup_size = {tile.invocations(), 1, 1};
  key.push_constant_bytes = (windows ? 7 : 4) * 4;
  STRATA_ASSIGN_OR_RETURN(uint32_t pipeline, l.pipeline(key));

  if (!windows) {
    uint64_t split = 1;
    STRATA_ASSIGN_OR_RETURN(auto grid, grid_for(static_cast<uint64_t>(m), static_cast<uint64_t>(batch), split));
    PushConstants push;
    push.u32(static_cast<uint32_t>(m)).u32(static_cast<uint32_t>(n)).u32(static_cast<uint32_t>(k));
    push.u32(static_cast<uint32_t>(split));
    std::vector<runtime::BindingDesc> bindings = {l.bind(a, runtime::Access::read), l.bind(b, runtime::Access::read)};
    if (bias != kNoValue) bindings.push_back(l.bind(bias, runtime::Access::read));
    bindings.push_back(l.bind(c, runtime::Access::write));
    l.dispatch(pipeline, std::move(bindings), push, grid, node);
    return Status::ok();
  }
  const auto M = static_cast<uint64_t>(m), N = static_cast<uint64_t>(n), K = static_cast<uint64_t>(k);
  size_t part = 0;
  for (uint64_t g = 0; g < static_cast<uint64_t>(batch); ++g) {
    const Lowering::ElementWindow bw =
        linear ? Lowering::ElementWindow{l.bind(b, runtime::Access::read), 0}
               : l.element_window(b, g * K * N, K * N, runtime::Access::read);
    for (uint64_t r0 = 0; r0 < M; r0 += rows_per) {
      const uint64_t rows = std::min(rows_per, M - r0);
      const Lowering::ElementWindow aw = l.element_window(a, (g * M + r0) * K, rows * K, runtime::Access::read);
      const Lowering::ElementWindow cw = l.element_window(c, (g * M + r0) * N, rows * N, runtime::Access::write);
      uint64_t split = 1;
      STRATA_ASSIGN_OR_RETURN(auto grid, grid_for(rows, 1, split));
      PushConstants push;
      push.u32(static_cast<uint32_t>(rows)).u32(static_cast<uint32_t>(n)).u32(static_cast<uint32_t>(k));
      push.u32(static_cast<uint32_t>(split)).u32(aw.base).u32(bw.base).u32(cw.base);
      std::vector<runtime::BindingDesc> bindings = {aw.binding, bw.binding};
      if (bias != kNoValue) bindings.push_back(l.bind(bias, runtime::Access::read));
      bindings.push_back(cw.binding);
      l.dispatch(pipeline, std::move(bindings), push, grid, node, "w" + std::to_string(part++));
    }
  }
  return Status::ok();
}

}  // namespace strata::codegen

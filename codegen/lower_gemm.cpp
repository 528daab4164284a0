// lower_gemm: linear and matmul -> kernels/gemm.comp, one tiled GEMM dispatch.
//
//   linear(x[..., K], w[M, K], bias[M]?)  one GEMM: rows = Π leading dims of x, B = wᵀ
//                                         read as [N, K] (B_NK = 1), bias per column
//   matmul(a[..., M, K], b[..., K, N])    batched over the (equal) leading dims, B read
//                                         as [batch, K, N] (B_NK = 0)
//
// Tensor cores: on a target with them (Target::tensor_cores) a linear whose x and w
// are stored f16, row major, with K % 8 == 0, 16-byte aligned, and bound whole runs
// kernels/conv_gemm_coop.comp as the 1×1 convolution it is: the N rows of x are N
// pixels of one image row ([1, K, 1, N] NHWC is x's row-major memory), w[M, K] is the
// o_hwi weight of a 1×1 conv (the same bytes), y[N, M] the NHWC output, the bias the
// conv's bias. The kernel, its push constants and its tiles are lower_conv_gemm's
// (read that file's header); the result is the one a conv_gemm over that map gives,
// bit for bit (tests/codegen/test_gemm_coop.cpp). Anything else (f32 operands,
// matmul, windows) takes gemm.comp below, unchanged.
//
// The softmax folded into its GEMMs (ir/ops.h: linear {exp_blocks} and {scale_blocks},
// from passes/attention_gemms.cpp) runs on conv_gemm_coop.comp only (EXP_BLOCKS, A_SCALE:
// the emulation on devices without cooperative matrices); the scores (exp_blocks) with
// 32 × 32 fragments, whose 32 columns are the blocks, the output GEMM (scale_blocks)
// with steps of whole blocks; operands bound whole.
//
// Operands are bound whole when they fit the target's storage-buffer range. Otherwise
// the GEMM runs one dispatch per batch and run of rows of A and C (gemm.comp with
// BASES: windows starting at aligned offsets, the kernel told where its first element
// is), B (one batch of it) and the bias bound whole. Each element of C is the same sum
// over k in the same order whichever dispatch computes it, so the result is the
// unsplit one. A B (one batch of a matmul's) or bias above the range, or a row of A or
// C that does not fit, is an error naming the node, the bytes and the limit.
#include "codegen/coop_tile.h"
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

// Fewer tiles than this take half-height tiles (lower_linear_coop); reductions this
// long take 64 input features per step.
constexpr uint64_t kFewTiles = 128;
constexpr int64_t kLongReduction = 8192;
constexpr uint32_t kFoldFragment = 32;  // the folded softmax's block: one fragment's columns

// conv_gemm_coop.comp's tile for a linear: 128 rows × 128 columns (the conv's default
// 128 × 128 tile, without its narrow and 96-channel variants); with flexible fragments
// (the H200) 2 × 2 fragments of 32 × 32 per subgroup; the emulation one fragment per
// subgroup (lavapipe's coroutine stacks, see tests/codegen/test_conv_gemm_coop.cpp).
// CodegenOptions::conv_tile (`--conv-tile`) names another, as for the convs.
Expected<CoopTile> coop_gemm_tile(const Lowering& l) {
  const Target& target = l.target();
  CoopTile t;
  if (target.tensor_cores == TensorCores::emulated) {
    t.fp = t.fc = 1;
  } else if (target.tensor_cores == TensorCores::nv_coopmat && target.coopmat_flexible) {
    t.fp = t.fc = 2;
    t.frag = 32;
  }
  STRATA_ASSIGN_OR_RETURN(t, asked_coop_tile(t, l.options().conv_tile));
  if (t.frag != 16 && target.tensor_cores == TensorCores::nv_coopmat && !target.coopmat_flexible)
    return error("fragments of {}x{}: the device takes 16x16 cooperative matrices only", t.frag, t.frag);
  return t;
}

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// linear(x[rows, K], w[M, K], bias) on conv_gemm_coop.comp as a 1×1 conv over one
// image row of `rows` pixels (see the file header). The push constants are the
// conv's (kernels/conv_gemm.comp's block, in its order).
// exp_blocks / scale_blocks: the folded softmax's forms (ir/ops.h), 0 for a plain linear.
Status lower_linear_coop(Lowering& l, const Node& node, int64_t rows, int64_t m, int64_t k, int64_t exp_blocks = 0,
                         int64_t scale_blocks = 0) {
  const ValueId x = node.inputs[0], w = node.inputs[1], y = node.outputs[0];
  const ValueId scales = scale_blocks ? node.inputs[2] : kNoValue;
  const ValueId bias = node.inputs.size() > 2 && !scale_blocks ? node.inputs[2] : kNoValue;
  const Target& target = l.target();
  const Expected<CoopTile> asked = coop_gemm_tile(l);
  if (!asked) return l.fail(node, fmt::format("linear on conv_gemm_coop: {}", asked.status().message()));
  CoopTile tile = *asked;
  if (exp_blocks) {
    // The blocks are the 32 columns of a fragment. (The emulation's default is 16 × 16;
    // 32 × 32 ones need lavapipe's coroutine stack for a short K loop only, which the
    // scores' head dims are: tests/codegen/test_conv_gemm_coop.cpp.)
    if (tile.frag != kFoldFragment && target.tensor_cores == TensorCores::emulated && l.options().conv_tile.empty())
      tile.frag = kFoldFragment;
    if (tile.frag != kFoldFragment || exp_blocks != kFoldFragment)
      return l.fail(node, fmt::format("exp_blocks {} needs {}x{} fragments (its blocks are their columns); the tile "
                                      "has {}x{}",
                                      exp_blocks, kFoldFragment, kFoldFragment, tile.frag, tile.frag));
  }
  // Unless a tile is asked for, a GEMM of few tiles, which leaves most of the device
  // idle, takes longer steps or shorter tiles (each element's sum runs in the same k
  // order either way). A long reduction (the attention output of
  // passes/attention_gemms.cpp: K = every token, Qwen-Image's 4096 rows × 384 columns
  // are 96 tiles) steps through 64 input features at a time on 32 × 32 fragments,
  // 128-byte row segments per load (H200: 2.10 → 1.48 ms for Qwen-Image 1024²'s four;
  // at Flux's 256 tiles 64 was slower, 1.08 → 1.45 ms). A shorter one takes
  // half-height tiles: twice the workgroups.
  const bool few_tiles =
      ceil_div(static_cast<uint64_t>(rows), tile.pixels()) * ceil_div(static_cast<uint64_t>(m), tile.channels()) <
      kFewTiles;
  if (l.options().conv_tile.empty() && few_tiles) {
    if (k >= kLongReduction && tile.frag == 32) tile.bk = 64;
    else if (tile.fp > 1 && !exp_blocks) tile.fp /= 2;
  }
  // A staged step of the scaled GEMM takes whole blocks, 8 halfs per load.
  if (scale_blocks && (tile.bk % scale_blocks != 0 || scale_blocks % 8 != 0))
    return l.fail(node, fmt::format("scale_blocks {} needs steps of whole blocks of whole 16-byte loads; the tile "
                                    "steps {}",
                                    scale_blocks, tile.bk));
  const uint32_t invocations = tile.wp * tile.wc * target.subgroup_size;
  const uint32_t shared = tile.shared_bytes(target.tensor_cores == TensorCores::nv_coopmat);
  if (invocations % (tile.bk / 8) != 0 || shared > target.max_shared_memory_bytes)
    return l.fail(node, fmt::format("linear on conv_gemm_coop: tile {}x{}x{}x{} of {}x{} fragments needs {} "
                                    "invocations in rows of {} and {} bytes of shared memory; the target has {}",
                                    tile.wp, tile.wc, tile.fp, tile.fc, tile.frag, tile.frag, invocations, tile.bk / 8,
                                    shared, target.max_shared_memory_bytes));
  KernelKey key;
  key.file = "conv_gemm_coop.comp";
  key.defines = {{"COOPMAT", target.tensor_cores == TensorCores::nv_coopmat ? "1" : "2"},
                 {"CM_SG", std::to_string(target.subgroup_size)},
                 {"WP", std::to_string(tile.wp)},
                 {"WC", std::to_string(tile.wc)},
                 {"FP", std::to_string(tile.fp)},
                 {"FC", std::to_string(tile.fc)},
                 {"BK", std::to_string(tile.bk)},
                 {"STAGES", std::to_string(tile.stages)},
                 {"KH", "1"},
                 {"KW", "1"},
                 {"U", "0"},
                 {"HAS_BIAS", bias == kNoValue ? "0" : "1"},
                 {"HAS_RES", "0"},
                 {"ROUND", round_define(l.type(y).dtype)},
                 {"F16", "1"}};
  if (tile.frag != 16) {
    key.defines["CM_M"] = key.defines["CM_N"] = std::to_string(tile.frag);
    if (target.tensor_cores == TensorCores::nv_coopmat) key.defines["COOPMAT_KHR"] = "1";
  }
  key.workgroup_size = {invocations, 1, 1};
  // 16-byte stores of 8 output features where y is f16 with aligned rows, of 4 where
  // it is f32 (VEC_F32).
  const bool f32_out = l.storage(y) == DType::f32;
  const bool vec_out = tile.vec_out && m % (f32_out ? 4 : 8) == 0 && l.location(y).offset % 16 == 0;
  key.defines["VEC_OUT"] = vec_out ? "1" : "0";
  if (vec_out && f32_out) key.defines["VEC_F32"] = "1";
  if (exp_blocks) {
    if (!vec_out || f32_out) return l.fail(node, "exp_blocks needs f16 scores stored 8 to a 16-byte store");
    key.defines["EXP_BLOCKS"] = "1";
  }
  if (scale_blocks) key.defines["A_SCALE"] = std::to_string(scale_blocks);
  if (bias != kNoValue) add_type_define(key.defines, "BIAS_T", l.storage(bias));
  add_type_define(key.defines, "Y_T", l.storage(y));
  key.bindings = 3 + (bias != kNoValue) + (scales != kNoValue);

  const auto R = static_cast<uint64_t>(rows), M = static_cast<uint64_t>(m);
  const uint64_t row_tiles = ceil_div(R, tile.pixels());
  const uint64_t gx = std::min<uint64_t>(row_tiles, target.max_workgroup_count_x);
  const uint64_t split = ceil_div(row_tiles, gx);
  const uint64_t gy = ceil_div(M, tile.channels());
  constexpr uint64_t kMaxGroups = 65535;  // Vulkan's guaranteed minimum for y and z
  if (gy > kMaxGroups || split > kMaxGroups)
    return l.fail(node, fmt::format("dispatch grid {}x{}x{} exceeds the workgroup-count limit", gx, gy, split));

  PushConstants push;
  const auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  push.u32(u(k)).u32(u(m)).u32(u(m));             // ci, co, co_store
  push.u32(1).u32(u(rows)).u32(u(rows));          // h_in, w_in, w_out: one row of pixels
  push.i32(0).i32(0).u32(1).u32(1);               // pad, stride
  push.u32(static_cast<uint32_t>(split));
  // Row strides: the exp_blocks rows hold 2 statistics per block after their features.
  const int64_t x_row = scale_blocks ? k + 2 * (k / scale_blocks) : k;
  const int64_t y_row = exp_blocks ? m + 2 * (m / exp_blocks) : m;
  push.u32(u(rows * x_row)).u32(1).u32(u(rows * x_row)).u32(u(x_row));  // x strides (n, c, y, x)
  push.u32(u(rows * y_row)).u32(1).u32(u(rows * y_row)).u32(u(y_row));  // y strides
  push.u32(0).u32(0).u32(0).u32(0);               // no residual
  push.f32(1.0f).f32(1.0f).f32(1.0f);             // acc_scale, residual_scale, out_scale
  push.u32(0).u32(1);                             // row0, rows: the one band
  push.u32(0).u32(0).u32(0);                      // x_off, y_base, r_base: bound whole
  key.push_constant_bytes = static_cast<uint32_t>(push.bytes().size());
  STRATA_ASSIGN_OR_RETURN(uint32_t pipeline, l.pipeline(key));

  std::vector<runtime::BindingDesc> bindings = {l.bind(x, runtime::Access::read), l.bind(w, runtime::Access::read)};
  if (bias != kNoValue) bindings.push_back(l.bind(bias, runtime::Access::read));
  bindings.push_back(l.bind(y, runtime::Access::write));
  if (scales != kNoValue) bindings.push_back(l.bind(scales, runtime::Access::read));
  l.dispatch(pipeline, std::move(bindings), push, {static_cast<uint32_t>(gx), static_cast<uint32_t>(gy),
                                                   static_cast<uint32_t>(split)},
             node);
  return Status::ok();
}

}  // namespace

Status lower_gemm(Lowering& l, const Node& node) {
  if (node.op != Op::linear && node.op != Op::matmul)
    return l.fail(node, "lower_gemm handles linear and matmul only");
  const bool linear = node.op == Op::linear;
  if (linear && node.attrs.has("quant")) return lower_linear_w8a8(l, node);
  const int64_t exp_blocks = linear ? node.attrs.get_int("exp_blocks", 0) : 0;
  const int64_t scale_blocks = linear ? node.attrs.get_int("scale_blocks", 0) : 0;
  if (exp_blocks || scale_blocks) {
    const ValueId x = node.inputs[0], w = node.inputs[1];
    STRATA_RETURN_IF_ERROR(l.require_row_major(node, {x, w, node.inputs.size() > 2 ? node.inputs[2] : kNoValue,
                                                      node.outputs[0]}));
    const uint64_t range = l.target().max_storage_buffer_range;
    std::vector<ValueId> operands = node.inputs;
    operands.push_back(node.outputs[0]);
    for (ValueId v : operands)
      if (static_cast<uint64_t>(num_elements(l.shape(v))) * l.elem_bytes(v) > range)
        return l.fail(node, fmt::format("the folded softmax binds '{}' whole, above the storage-buffer range {}",
                                        l.graph().value(v).name, range));
    if (l.target().tensor_cores == TensorCores::none || l.storage(x) != DType::f16 || l.storage(w) != DType::f16 ||
        l.offset_alignment() % 16 != 0 || l.location(x).offset % 16 != 0 || l.location(w).offset % 16 != 0)
      return l.fail(node, "the folded softmax (exp_blocks, scale_blocks) runs on the tensor-core GEMM only: f16 "
                          "operands at 16-byte offsets on a target with (or emulating) cooperative matrices");
    return lower_linear_coop(l, node, l.shape(x)[0], l.shape(w)[0], l.shape(w)[1], exp_blocks, scale_blocks);
  }
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

  if (linear && !windows && l.target().tensor_cores != TensorCores::none && l.storage(a) == DType::f16 &&
      l.storage(b) == DType::f16 && k % 8 == 0 && l.offset_alignment() % 16 == 0 &&
      l.location(a).offset % 16 == 0 && l.location(b).offset % 16 == 0)
    return lower_linear_coop(l, node, m, n, k);

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

// lower_conv: conv2d and conv3d -> kernels/conv.comp, one tiled implicit-GEMM dispatch.
//
// conv2d is lowered as the conv3d case of one frame and a one-tap temporal kernel, so
// both ops share one kernel family (see conv.comp for the tiling). The output-channel
// tile (8, 16, 32 or 64 rows) follows the channel count, so a 3-channel conv_out does
// not pay for 64 rows of zero weights. Every operand is bound whole: a tensor larger
// than the target's storage-buffer range is an error naming the node (banding is a
// later pass).
#include "codegen/lowering.h"
#include "codegen/storage.h"

#include <algorithm>
#include <string>

namespace strata::codegen {
namespace {

// Workgroup tile: BM output channels × BN output pixels, K steps of BK, a TM × TN
// accumulator block per invocation (WG = BM/TM · BN/TN = 256 invocations).
struct ConvTile {
  uint32_t bm, bn, bk, tm, tn;
  uint32_t invocations() const { return (bm / tm) * (bn / tn); }
  uint32_t shared_bytes() const { return (bk * (bm + 1) + bk * bn) * 4; }
};

ConvTile choose_tile(int64_t co) {
  if (co <= 8) return {8, 128, 16, 1, 4};
  if (co <= 16) return {16, 128, 16, 1, 8};
  if (co <= 32) return {32, 128, 16, 2, 8};
  return {64, 128, 16, 4, 8};
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// The extents of a conv, viewed as 3-d (a conv2d is one frame, one temporal tap).
struct ConvDims {
  int64_t n, ci, t_in, h_in, w_in;
  int64_t co, kt, kh, kw;
  int64_t t_out, h_out, w_out;
  int64_t pad_t, pad_h, pad_w, stride_h, stride_w;
};

ConvDims conv_dims(const Lowering& l, const Node& node) {
  const Shape& x = l.shape(node.inputs[0]);
  const Shape& w = l.shape(node.inputs[1]);
  const Shape& y = l.shape(node.outputs[0]);
  ConvDims d{};
  d.n = x[0];
  d.ci = x[1];
  d.co = w[0];
  if (node.op == Op::conv3d) {
    const auto pad = node.attrs.get_ints("pad", {0, 0, 0, 0});
    d.t_in = x[2], d.h_in = x[3], d.w_in = x[4];
    d.kt = w[2], d.kh = w[3], d.kw = w[4];
    d.t_out = y[2], d.h_out = y[3], d.w_out = y[4];
    d.pad_t = pad[0], d.pad_h = pad[2], d.pad_w = pad[3];
    d.stride_h = d.stride_w = 1;
  } else {
    const auto pad = node.attrs.get_ints("pad", {0, 0});
    const auto stride = node.attrs.get_ints("stride", {1, 1});
    d.t_in = 1, d.h_in = x[2], d.w_in = x[3];
    d.kt = 1, d.kh = w[2], d.kw = w[3];
    d.t_out = 1, d.h_out = y[2], d.w_out = y[3];
    d.pad_t = 0, d.pad_h = pad[0], d.pad_w = pad[1];
    d.stride_h = stride[0], d.stride_w = stride[1];
  }
  return d;
}

}  // namespace

Status lower_conv(Lowering& l, const Node& node) {
  if (node.op != Op::conv2d && node.op != Op::conv3d)
    return l.fail(node, "lower_conv handles conv2d and conv3d only");
  const ValueId x = node.inputs[0], w = node.inputs[1], y = node.outputs[0];
  const ValueId bias = node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
  const ConvDims d = conv_dims(l, node);
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {x, w, bias, y}));

  for (ValueId v : {x, w, bias, y}) {
    if (v == kNoValue) continue;
    const uint64_t bytes = static_cast<uint64_t>(num_elements(l.shape(v))) * l.elem_bytes(v);
    if (bytes > l.target().max_storage_buffer_range)
      return l.fail(node, fmt::format("operand '{}' ({} bytes) exceeds the storage-buffer range {} (needs banding)",
                                      l.graph().value(v).name, bytes, l.target().max_storage_buffer_range));
  }

  const ConvTile tile = choose_tile(d.co);
  if (tile.shared_bytes() > l.target().max_shared_memory_bytes)
    return l.fail(node, fmt::format("conv tile needs {} bytes of shared memory, the target has {}",
                                    tile.shared_bytes(), l.target().max_shared_memory_bytes));

  // Pixel tiles run along x, folded into z when there are more than x allows.
  const uint64_t pixel_tiles = ceil_div(static_cast<uint64_t>(d.h_out * d.w_out), tile.bn);
  const uint64_t gx = std::min<uint64_t>(pixel_tiles, l.target().max_workgroup_count_x);
  const uint64_t split = ceil_div(pixel_tiles, gx);
  const uint64_t gy = ceil_div(static_cast<uint64_t>(d.co), tile.bm);
  const uint64_t gz = static_cast<uint64_t>(d.n * d.t_out) * split;
  constexpr uint64_t kMaxGroups = 65535;  // Vulkan's guaranteed minimum for y and z
  if (gy > kMaxGroups || gz > kMaxGroups)
    return l.fail(node, fmt::format("dispatch grid {}x{}x{} exceeds the workgroup-count limit", gx, gy, gz));

  KernelKey key;
  key.file = "conv.comp";
  key.defines = {{"BM", std::to_string(tile.bm)}, {"BN", std::to_string(tile.bn)},
                 {"BK", std::to_string(tile.bk)}, {"TM", std::to_string(tile.tm)},
                 {"TN", std::to_string(tile.tn)}, {"KT", std::to_string(d.kt)},
                 {"KH", std::to_string(d.kh)},    {"KW", std::to_string(d.kw)},
                 {"HAS_BIAS", bias == kNoValue ? "0" : "1"}, {"ROUND", round_define(l.type(y).dtype)}};
  add_type_define(key.defines, "X_T", l.storage(x));
  add_type_define(key.defines, "W_T", l.storage(w));
  if (bias != kNoValue) add_type_define(key.defines, "B_T", l.storage(bias));
  add_type_define(key.defines, "Y_T", l.storage(y));
  key.bindings = bias == kNoValue ? 3 : 4;
  key.workgroup_size = {tile.invocations(), 1, 1};

  PushConstants push;
  push.u32(static_cast<uint32_t>(d.ci)).u32(static_cast<uint32_t>(d.co));
  push.u32(static_cast<uint32_t>(d.t_in)).u32(static_cast<uint32_t>(d.h_in)).u32(static_cast<uint32_t>(d.w_in));
  push.u32(static_cast<uint32_t>(d.t_out)).u32(static_cast<uint32_t>(d.h_out)).u32(static_cast<uint32_t>(d.w_out));
  push.i32(static_cast<int32_t>(d.pad_t)).i32(static_cast<int32_t>(d.pad_h)).i32(static_cast<int32_t>(d.pad_w));
  push.u32(static_cast<uint32_t>(d.stride_h)).u32(static_cast<uint32_t>(d.stride_w));
  push.u32(static_cast<uint32_t>(split));
  key.push_constant_bytes = static_cast<uint32_t>(push.bytes().size());

  STRATA_ASSIGN_OR_RETURN(uint32_t pipeline, l.pipeline(key));
  std::vector<runtime::BindingDesc> bindings = {l.bind(x, runtime::Access::read), l.bind(w, runtime::Access::read)};
  if (bias != kNoValue) bindings.push_back(l.bind(bias, runtime::Access::read));
  bindings.push_back(l.bind(y, runtime::Access::write));
  l.dispatch(pipeline, std::move(bindings), push,
             {static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), static_cast<uint32_t>(gz)}, node);
  return Status::ok();
}

}  // namespace strata::codegen

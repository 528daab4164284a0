// lower_conv_gemm: conv_gemm -> kernels/conv_gemm.comp, one tiled implicit-GEMM
// dispatch with the epilogue (acc_scale, bias, residual · residual_scale,
// out_scale, the store in the output's dtype).
//
// Any layout of x, residual and y (logical NCHW or NHWC, padded or not) and either
// weight layout ("oihw" before assign_layout, "o_hwi" after) reach the one kernel as
// element strides in the push constants; the storage types (f32 / f16) as type
// defines. Output channel slots past Co (an output's padding) are written as zeros.
//
// Tiles (conv.comp's, whose main loop the kernel shares): BM output channels × BN =
// 128 output pixels, BM following the channels written (8, 16, 32 or 64, so a
// 3-channel conv_out does not pay for 64 rows of zero weights), BK = 16 input
// channels per step, 256 invocations. Every operand is
// bound whole: one larger than the target's storage-buffer range is an error naming
// the node (banding is a later pass).
#include "codegen/lowering.h"
#include "codegen/storage.h"

#include <algorithm>
#include <string>

namespace strata::codegen {
namespace {

struct GemmTile {
  uint32_t bm, bn, bk, tm, tn;
  uint32_t invocations() const { return (bm / tm) * (bn / tn); }
  // The kernel pads the input tile's rows by 16 when x is channels-fastest.
  uint32_t shared_bytes(bool x_cfast) const { return (bk * (bm + 1) + bk * (bn + (x_cfast ? 16 : 0))) * 4; }
};

// bm = output channels, bn = output pixels.
GemmTile choose_tile(int64_t channels) {
  if (channels <= 8) return {8, 128, 16, 1, 4};
  if (channels <= 16) return {16, 128, 16, 1, 8};
  if (channels <= 32) return {32, 128, 16, 2, 8};
  return {64, 128, 16, 4, 8};
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Pushes the (n, c, y, x) element strides of a rank-4 value.
void push_strides(PushConstants& push, const std::vector<int64_t>& s) {
  for (int64_t v : s) push.u32(static_cast<uint32_t>(v));
}

}  // namespace

Status lower_conv_gemm(Lowering& l, const Node& node) {
  if (node.op != Op::conv_gemm) return l.fail(node, "lower_conv_gemm handles conv_gemm only");
  const ValueId x = node.inputs[0], w = node.inputs[1], y = node.outputs[0];
  const ValueId bias = node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
  const ValueId res = node.inputs.size() > 3 ? node.inputs[3] : kNoValue;
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {w, bias}));
  const Attrs& a = node.attrs;
  const std::vector<int64_t> k = a.get_ints("kernel"), pad = a.get_ints("pad", {0, 0}),
                             stride = a.get_ints("stride", {1, 1});
  const std::string layout = a.get_string("weight_layout"), gather = a.get_string("gather", "plain");
  if (gather != "plain" && gather != "upsample2x") return l.fail(node, "gather '" + gather + "' has no kernel");
  const Shape &xs = l.shape(x), &ys = l.shape(y);
  const int64_t ci = xs[1], co = ys[1], co_store = stored_channels(l.type(y));

  for (ValueId v : {x, w, bias, res, y}) {
    if (v == kNoValue) continue;
    const uint64_t bytes = l.location(v).bytes;
    if (bytes > l.target().max_storage_buffer_range)
      return l.fail(node, fmt::format("operand '{}' ({} bytes) exceeds the storage-buffer range {} (needs banding)",
                                      l.graph().value(v).name, bytes, l.target().max_storage_buffer_range));
  }

  const std::vector<int64_t> sx = l.strides(x), sy = l.strides(y);
  const bool x_cfast = sx[1] == 1;
  const GemmTile tile = choose_tile(co_store);
  if (tile.shared_bytes(x_cfast) > l.target().max_shared_memory_bytes)
    return l.fail(node, fmt::format("conv_gemm tile needs {} bytes of shared memory, the target has {}",
                                    tile.shared_bytes(x_cfast), l.target().max_shared_memory_bytes));

  // Pixel tiles run along x, folded into z when there are more than x allows.
  const uint64_t pixel_tiles = ceil_div(static_cast<uint64_t>(ys[2] * ys[3]), tile.bn);
  const uint64_t gx = std::min<uint64_t>(pixel_tiles, l.target().max_workgroup_count_x);
  const uint64_t split = ceil_div(pixel_tiles, gx);
  const uint64_t gy = ceil_div(static_cast<uint64_t>(co_store), tile.bm);
  const uint64_t gz = static_cast<uint64_t>(xs[0]) * split;
  constexpr uint64_t kMaxGroups = 65535;  // Vulkan's guaranteed minimum for y and z
  if (gy > kMaxGroups || gz > kMaxGroups)
    return l.fail(node, fmt::format("dispatch grid {}x{}x{} exceeds the workgroup-count limit", gx, gy, gz));

  KernelKey key;
  key.file = "conv_gemm.comp";
  key.defines = {{"BM", std::to_string(tile.bm)},     {"BN", std::to_string(tile.bn)},
                 {"BK", std::to_string(tile.bk)},     {"TM", std::to_string(tile.tm)},
                 {"TN", std::to_string(tile.tn)},     {"KH", std::to_string(k[0])},
                 {"KW", std::to_string(k[1])},        {"U", gather == "upsample2x" ? "1" : "0"},
                 {"X_CFAST", x_cfast ? "1" : "0"}, {"HAS_BIAS", bias == kNoValue ? "0" : "1"},
                 {"HAS_RES", res == kNoValue ? "0" : "1"}, {"ROUND", round_define(l.type(y).dtype)}};
  add_type_define(key.defines, "X_T", l.storage(x));
  add_type_define(key.defines, "W_T", l.storage(w));
  if (bias != kNoValue) add_type_define(key.defines, "BIAS_T", l.storage(bias));
  if (res != kNoValue) add_type_define(key.defines, "R_T", l.storage(res));
  add_type_define(key.defines, "Y_T", l.storage(y));
  key.bindings = 3 + (bias != kNoValue) + (res != kNoValue);
  key.workgroup_size = {tile.invocations(), 1, 1};

  PushConstants push;
  push.u32(static_cast<uint32_t>(ci)).u32(static_cast<uint32_t>(co)).u32(static_cast<uint32_t>(co_store));
  push.u32(static_cast<uint32_t>(xs[2])).u32(static_cast<uint32_t>(xs[3]));
  push.u32(static_cast<uint32_t>(ys[2])).u32(static_cast<uint32_t>(ys[3]));
  push.i32(static_cast<int32_t>(pad[0])).i32(static_cast<int32_t>(pad[1]));
  push.u32(static_cast<uint32_t>(stride[0])).u32(static_cast<uint32_t>(stride[1]));
  push.u32(static_cast<uint32_t>(split));
  push_strides(push, sx);
  const int64_t taps = k[0] * k[1];
  if (layout == "o_hwi") push.u32(static_cast<uint32_t>(taps * ci)).u32(1).u32(static_cast<uint32_t>(ci));
  else push.u32(static_cast<uint32_t>(ci * taps)).u32(static_cast<uint32_t>(taps)).u32(1);
  push_strides(push, sy);
  push_strides(push, res == kNoValue ? std::vector<int64_t>{0, 0, 0, 0} : l.strides(res));
  push.f32(static_cast<float>(a.get_float("acc_scale", 1.0)));
  push.f32(static_cast<float>(a.get_float("residual_scale", 1.0)));
  push.f32(static_cast<float>(a.get_float("out_scale", 1.0)));
  key.push_constant_bytes = static_cast<uint32_t>(push.bytes().size());

  STRATA_ASSIGN_OR_RETURN(uint32_t pipeline, l.pipeline(key));
  std::vector<runtime::BindingDesc> bindings = {l.bind(x, runtime::Access::read), l.bind(w, runtime::Access::read)};
  if (bias != kNoValue) bindings.push_back(l.bind(bias, runtime::Access::read));
  if (res != kNoValue) bindings.push_back(l.bind(res, runtime::Access::read));
  bindings.push_back(l.bind(y, runtime::Access::write));
  l.dispatch(pipeline, std::move(bindings), push,
             {static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), static_cast<uint32_t>(gz)}, node);
  return Status::ok();
}

}  // namespace strata::codegen

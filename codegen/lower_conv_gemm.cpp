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
// channels per step, 256 invocations.
//
// Tensor cores: on a target with them (Target::tensor_cores) an f16 conv_gemm whose
// x is NHWC with 16-byte aligned pixels, Ci % 8 == 0 and o_hwi weights runs
// kernels/conv_gemm_coop.comp instead (same push constants,
// bindings, grid shape and bands); its tile (subgroups WP × WC, fragments FP × FC per
// subgroup, BK input channels per step, one shared buffer) is
// default_coop_tile() (codegen/coop_tile.h; one fragment per subgroup for the emulation) unless
// CodegenOptions::conv_tile names another.
//
// Upsample convs as phases (CodegenOptions::phase_convs, the default; `--no-phase-convs`
// keeps the 3×3 gather): a tensor-core conv over the upsample2x gather with a 3×3
// kernel, pad 1 and stride 1
// (every Upsample2D / WanResample conv after fold_upsample) runs the kernel's PHASES
// variant: four 2×2 convs over the half-size map, one per output parity, with the 3×3
// weights that land on the same input pixel summed (4/9 of the multiply-adds;
// kernels/conv_gemm_coop.comp's header). Its pixel tiles are phase-major: per band,
// two phases of ⌈even rows · w_in / BP⌉ tiles and two of ⌈odd rows · w_in / BP⌉. The
// sums round each summed weight to f16 once, so results differ from the 3×3 kernel's
// by that rounding (tests/codegen/test_conv_gemm_coop.cpp checks the phases against a
// reference with those weights); bands stay bit-identical. The kernel sums the
// weights as it fetches them (up to four 16-byte loads per staged B load): on the H200
// the upsample convs take 11-31 % less time, not the 4/9 of their multiply-adds.
// Weights summed once, at compile time
// (passes/phase_weights.cpp: weight_layout "phases", w[4·Co, 4·Ci]), run the same
// variant with PHASE_W = 1: one 16-byte weight load per staged load, the phase's rows.
// Such a node has no portable kernel: lowering it elsewhere is an error.
//
// Bands: with attr band_rows (passes/split_bands.cpp) the node becomes one dispatch
// per band of output rows [a, b), binding rows [a, b) of y and the residual and the
// rows of x those read (ir/band_math.h: needed_rows through the upsample gather and
// the conv), so no binding exceeds the storage-buffer range; the kernel keeps frame
// coordinates for the padding, so banded output is bit-identical to one dispatch.
// Bands need N = 1 and row-contiguous (nhwc) x, residual and y. Weights and bias are
// bound whole. A binding above the target's range is an error naming the node.
#include "codegen/coop_tile.h"
#include "codegen/lowering.h"
#include "codegen/storage.h"
#include "ir/band_math.h"

#include <algorithm>
#include <cstring>
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
  const Expected<WeightLayout> layout = conv_weight_layout(a);
  if (!layout) return l.fail(node, layout.message());
  const Expected<GatherKind> gather = conv_gather(a);
  if (!gather) return l.fail(node, gather.message());
  // The kernels' gather define: U = 1 reads x at half the virtual input's size.
  std::string gather_define;
  switch (*gather) {
    case GatherKind::plain: gather_define = "0"; break;
    case GatherKind::upsample2x: gather_define = "1"; break;
  }
  // A frame stack (ir/ops.h): rows per frame of the virtual input and the temporal
  // shift packed in the last push-constant word (define FRAMES), the temporal taps in
  // the kernel's rows (define FRAME_TAPS); replicate padding.
  const Expected<FrameGather> frames = conv_frames(a);
  if (!frames) return l.fail(node, frames.message());
  if (frames->rows >= (int64_t{1} << 24) || frames->shift >= 256)
    return l.fail(node, fmt::format("frame_rows {} or frame_shift {} too large for the kernel", frames->rows,
                                    frames->shift));
  const Shape &xs = l.shape(x), &ys = l.shape(y);
  const int64_t ci = xs[1], co = ys[1], co_store = stored_channels(l.type(y));

  const int64_t band = Lowering::band_rows(node, ys[2]);
  if (band < ys[2]) {
    for (ValueId v : {x, res, y})
      if (v != kNoValue && !l.rows_contiguous(v))
        return l.fail(node, fmt::format("band_rows needs N = 1 and row-contiguous operands; %{} is {} {}",
                                        l.graph().value(v).name, shape_str(l.shape(v)),
                                        layout_str(l.type(v).layout)));
  }

  const std::vector<int64_t> sx = l.strides(x), sy = l.strides(y);
  const bool x_cfast = sx[1] == 1;
  const Target& target = l.target();

  // The tensor-core kernel reads 8 channels of a pixel (or a weight row) as one
  // 16-byte load: every such group must start 16-byte aligned in its binding.
  const bool phase_weights = *layout == WeightLayout::phases;
  const bool coop = target.tensor_cores != TensorCores::none && l.storage(x) == DType::f16 &&
                    l.storage(w) == DType::f16 && (*layout == WeightLayout::o_hwi || phase_weights) && x_cfast &&
                    ci % 8 == 0 && sx[0] % 8 == 0 && sx[2] % 8 == 0 && sx[3] % 8 == 0 &&
                    l.offset_alignment() % 16 == 0 && l.location(x).offset % 16 == 0 &&
                    l.location(w).offset % 16 == 0;
  if (phase_weights && !coop)
    return l.fail(node, "phases weights (passes/phase_weights.cpp) run on the tensor-core kernel only: it needs "
                        "f16 x and weights, NHWC x with 16-byte aligned pixels and Ci % 8 == 0");
  KernelKey key;
  uint32_t tile_pixels = 0, tile_channels = 0;
  bool phases = false;     // the PHASES variant (above): phase-major pixel tiles
  if (coop) {
    // The emulation keeps whole fragments per lane: few of them (see
    // tests/codegen/test_conv_gemm_coop.cpp on lavapipe's coroutine stacks).
    const bool flexible = target.tensor_cores == TensorCores::nv_coopmat && target.coopmat_flexible;
    CoopTile tile = default_coop_tile(co_store, flexible);
    if (target.tensor_cores == TensorCores::emulated) tile.fp = tile.fc = 1;
    auto asked = asked_coop_tile(tile, l.options().conv_tile);
    if (!asked) return l.fail(node, asked.status().message());
    tile = *asked;
    const uint32_t invocations = tile.wp * tile.wc * target.subgroup_size;
    if (tile.frag != 16 && target.tensor_cores == TensorCores::nv_coopmat && !target.coopmat_flexible)
      return l.fail(node, fmt::format("conv_gemm_coop fragments of {}x{}: the device takes 16x16 cooperative "
                                      "matrices only (no VK_NV_cooperative_matrix2 flexible dimensions)",
                                      tile.frag, tile.frag));
    if (invocations % (tile.bk / 8) != 0)
      return l.fail(node, fmt::format("conv_gemm_coop tile {}x{}x{}x{}x{}: {} invocations do not cover whole rows of "
                                      "{} input channels",
                                      tile.wp, tile.wc, tile.fp, tile.fc, tile.bk, invocations, tile.bk));
    const uint32_t shared = tile.shared_bytes(target.tensor_cores == TensorCores::nv_coopmat);
    if (shared > target.max_shared_memory_bytes)
      return l.fail(node, fmt::format("conv_gemm_coop tile {}x{}x{}x{}x{}x{} needs {} bytes of shared memory, the "
                                      "target has {}",
                                      tile.wp, tile.wc, tile.fp, tile.fc, tile.bk, tile.stages, shared,
                                      target.max_shared_memory_bytes));
    tile_pixels = tile.pixels();
    tile_channels = tile.channels();
    key.file = "conv_gemm_coop.comp";
    key.defines = {{"COOPMAT", target.tensor_cores == TensorCores::nv_coopmat ? "1" : "2"},
                   {"CM_SG", std::to_string(target.subgroup_size)},
                   {"WP", std::to_string(tile.wp)},  {"WC", std::to_string(tile.wc)},
                   {"FP", std::to_string(tile.fp)},  {"FC", std::to_string(tile.fc)},
                   {"BK", std::to_string(tile.bk)},  {"STAGES", std::to_string(tile.stages)},
                   {"KH", std::to_string(k[0])},
                   {"KW", std::to_string(k[1])},     {"U", gather_define},
                   {"HAS_BIAS", bias == kNoValue ? "0" : "1"}, {"HAS_RES", res == kNoValue ? "0" : "1"},
                   {"ROUND", round_define(l.type(y).dtype)}, {"F16", "1"}};
    if (tile.frag != 16) {  // absent: 16×16 fragments, as before
      key.defines["CM_M"] = key.defines["CM_N"] = std::to_string(tile.frag);
      if (target.tensor_cores == TensorCores::nv_coopmat) key.defines["COOPMAT_KHR"] = "1";
    }
    // Phases weights (infer checked the gather, kernel, pad and stride) take the
    // phases tiles whatever the option says.
    phases = phase_weights || (l.options().phase_convs && *gather == GatherKind::upsample2x && k[0] == 3 &&
                               k[1] == 3 && pad[0] == 1 && pad[1] == 1 && stride[0] == 1 && stride[1] == 1 &&
                               !frames->on());
    if (phases) key.defines["PHASES"] = "1";
    if (phase_weights) key.defines["PHASE_W"] = "1";
    if (frames->on()) key.defines["FRAMES"] = "1";
    if (frames->taps > 1) key.defines["FRAME_TAPS"] = std::to_string(frames->taps);
    key.workgroup_size = {invocations, 1, 1};
    // 16-byte stores of 8 channels (and residual loads) where y and the residual are
    // f16 NHWC with aligned pixels.
    auto vector_rows = [&](ValueId v) {
      const std::vector<int64_t> sv = l.strides(v);
      return l.storage(v) == DType::f16 && sv[1] == 1 && sv[0] % 8 == 0 && sv[2] % 8 == 0 && sv[3] % 8 == 0 &&
             l.location(v).offset % 16 == 0;
    };
    const bool vec_out =
        tile.vec_out && co_store % 8 == 0 && vector_rows(y) && (res == kNoValue || vector_rows(res));
    key.defines["VEC_OUT"] = vec_out ? "1" : "0";
  } else {
    const GemmTile tile = choose_tile(co_store);
    if (tile.shared_bytes(x_cfast) > target.max_shared_memory_bytes)
      return l.fail(node, fmt::format("conv_gemm tile needs {} bytes of shared memory, the target has {}",
                                      tile.shared_bytes(x_cfast), target.max_shared_memory_bytes));
    tile_pixels = tile.bn;
    tile_channels = tile.bm;
    key.file = "conv_gemm.comp";
    key.defines = {{"BM", std::to_string(tile.bm)},     {"BN", std::to_string(tile.bn)},
                   {"BK", std::to_string(tile.bk)},     {"TM", std::to_string(tile.tm)},
                   {"TN", std::to_string(tile.tn)},     {"KH", std::to_string(k[0])},
                   {"KW", std::to_string(k[1])},        {"U", gather_define},
                   {"X_CFAST", x_cfast ? "1" : "0"}, {"W_OHWI", *layout == WeightLayout::o_hwi ? "1" : "0"}, {"HAS_BIAS", bias == kNoValue ? "0" : "1"},
                   {"HAS_RES", res == kNoValue ? "0" : "1"}, {"ROUND", round_define(l.type(y).dtype)}};
    add_type_define(key.defines, "X_T", l.storage(x));
    add_type_define(key.defines, "W_T", l.storage(w));
    if (frames->on()) key.defines["FRAMES"] = "1";
    if (frames->taps > 1) key.defines["FRAME_TAPS"] = std::to_string(frames->taps);
    key.workgroup_size = {tile.invocations(), 1, 1};
  }
  if (bias != kNoValue) add_type_define(key.defines, "BIAS_T", l.storage(bias));
  if (res != kNoValue) add_type_define(key.defines, "R_T", l.storage(res));
  add_type_define(key.defines, "Y_T", l.storage(y));
  key.bindings = 3 + (bias != kNoValue) + (res != kNoValue);

  PushConstants common;
  common.u32(static_cast<uint32_t>(ci)).u32(static_cast<uint32_t>(co)).u32(static_cast<uint32_t>(co_store));
  common.u32(static_cast<uint32_t>(xs[2])).u32(static_cast<uint32_t>(xs[3]));
  common.u32(static_cast<uint32_t>(ys[3]));
  common.i32(static_cast<int32_t>(pad[0])).i32(static_cast<int32_t>(pad[1]));
  common.u32(static_cast<uint32_t>(stride[0])).u32(static_cast<uint32_t>(stride[1]));
  const size_t split_at = common.bytes().size();
  common.u32(0);  // split: per band, patched below
  push_strides(common, sx);
  push_strides(common, sy);
  push_strides(common, res == kNoValue ? std::vector<int64_t>{0, 0, 0, 0} : l.strides(res));
  common.f32(static_cast<float>(a.get_float("acc_scale", 1.0)));
  common.f32(static_cast<float>(a.get_float("residual_scale", 1.0)));
  common.f32(static_cast<float>(a.get_float("out_scale", 1.0)));
  // + the band's words, and the frame word of a frame stack
  key.push_constant_bytes = static_cast<uint32_t>(common.bytes().size()) + (frames->on() ? 6 : 5) * 4;

  STRATA_ASSIGN_OR_RETURN(uint32_t pipeline, l.pipeline(key));
  const std::vector<RowOp> row_ops =
      conv_row_ops(gather_upsample(*gather), k[0], pad[0], stride[0], frames->rows, frames->shift, frames->taps);
  const int64_t bands = (ys[2] + band - 1) / band;
  if (bands > 1) l.record_bands(node, ys[2], band);
  for (int64_t b = 0; b < bands; ++b) {
    const int64_t row0 = b * band, rows = std::min(band, ys[2] - row0);
    // Pixel tiles run along x, folded into z when there are more than x allows.
    // Phases: the band's output rows of each parity (kernel's main()), two phases each.
    const uint64_t even_rows = static_cast<uint64_t>((row0 + rows + 1) / 2 - (row0 + 1) / 2),
                   odd_rows = static_cast<uint64_t>((row0 + rows) / 2 - row0 / 2);
    const uint64_t pixel_tiles = phases ? 2 * ceil_div(even_rows * static_cast<uint64_t>(xs[3]), tile_pixels) +
                                              2 * ceil_div(odd_rows * static_cast<uint64_t>(xs[3]), tile_pixels)
                                        : ceil_div(static_cast<uint64_t>(rows * ys[3]), tile_pixels);
    const uint64_t gx = std::min<uint64_t>(pixel_tiles, target.max_workgroup_count_x);
    const uint64_t split = ceil_div(pixel_tiles, gx);
    const uint64_t gy = ceil_div(static_cast<uint64_t>(co_store), tile_channels);
    const uint64_t gz = static_cast<uint64_t>(xs[0]) * split;
    constexpr uint64_t kMaxGroups = 65535;  // Vulkan's guaranteed minimum for y and z
    if (gy > kMaxGroups || gz > kMaxGroups)
      return l.fail(node, fmt::format("dispatch grid {}x{}x{} exceeds the workgroup-count limit", gx, gy, gz));

    std::vector<runtime::BindingDesc> bindings;
    uint32_t x_off = 0, y_base = 0, r_base = 0;
    // One band still binds only the rows of x it reads when they are fewer than all
    // (a frame-stack tap that reads only early frames: split_bands counted that window).
    RowRange in = needed_rows(row_ops, xs[2], RowRange{row0, row0 + rows});
    if (in.empty()) in = RowRange{0, 1};  // every tap in the padding: bind a row, read none
    const bool narrower = in.begin > 0 || in.end < xs[2];
    const bool windowed = bands > 1 || (narrower && xs[0] == 1 && l.rows_contiguous(x) && l.rows_contiguous(y) &&
                                        (res == kNoValue || l.rows_contiguous(res)));
    if (!windowed) {
      bindings = {l.bind(x, runtime::Access::read), l.bind(w, runtime::Access::read)};
      if (bias != kNoValue) bindings.push_back(l.bind(bias, runtime::Access::read));
      if (res != kNoValue) bindings.push_back(l.bind(res, runtime::Access::read));
      bindings.push_back(l.bind(y, runtime::Access::write));
    } else {
      const Lowering::ElementWindow xw = l.row_window(x, in.begin, in.end, runtime::Access::read);
      const Lowering::ElementWindow yw = l.row_window(y, row0, row0 + rows, runtime::Access::write);
      // Wraps modulo 2^32 on purpose (see the kernel).
      x_off = xw.base - static_cast<uint32_t>(static_cast<uint64_t>(in.begin) * static_cast<uint64_t>(sx[2]));
      y_base = yw.base;
      bindings = {xw.binding, l.bind(w, runtime::Access::read)};
      if (bias != kNoValue) bindings.push_back(l.bind(bias, runtime::Access::read));
      if (res != kNoValue) {
        const Lowering::ElementWindow rw = l.row_window(res, row0, row0 + rows, runtime::Access::read);
        r_base = rw.base;
        bindings.push_back(rw.binding);
      }
      bindings.push_back(yw.binding);
    }
    const std::string step = bands == 1 ? "" : fmt::format("band {}/{}", b + 1, bands);
    STRATA_RETURN_IF_ERROR(l.check_ranges(node, bindings, step));
    PushConstants push = common;
    push.u32(static_cast<uint32_t>(row0)).u32(static_cast<uint32_t>(rows));
    push.u32(x_off).u32(y_base).u32(r_base);
    if (frames->on()) push.u32(static_cast<uint32_t>(frames->rows | frames->shift << 24));
    std::vector<uint8_t> bytes = push.bytes();
    const uint32_t split32 = static_cast<uint32_t>(split);
    std::memcpy(bytes.data() + split_at, &split32, 4);
    l.dispatch(pipeline, std::move(bindings), PushConstants::from_bytes(std::move(bytes)),
               {static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), static_cast<uint32_t>(gz)}, node, step);
  }
  return Status::ok();
}

}  // namespace strata::codegen

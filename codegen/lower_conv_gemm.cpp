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
// default_coop_tile() below (one fragment per subgroup for the emulation) unless
// CodegenOptions::conv_tile names another. A tile with halo rows (TH; an option, not
// a default) stages each channel chunk's input halo once for all taps of a stride-1
// conv; its pixel tiles are TH rows of the band by pixels / TH columns.
//
// Bands: with attr band_rows (passes/split_bands.cpp) the node becomes one dispatch
// per band of output rows [a, b), binding rows [a, b) of y and the residual and the
// rows of x those read (ir/band_math.h: needed_rows through the upsample gather and
// the conv), so no binding exceeds the storage-buffer range; the kernel keeps frame
// coordinates for the padding, so banded output is bit-identical to one dispatch.
// Bands need N = 1 and row-contiguous (nhwc) x, residual and y. Weights and bias are
// bound whole. A binding above the target's range is an error naming the node.
#include "codegen/lowering.h"
#include "codegen/storage.h"
#include "ir/band_math.h"

#include <algorithm>
#include <cstdio>
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

// The tensor-core kernel's tile: WP × WC subgroups of FP × FC 16×16 fragments,
// BK input channels per step.
struct CoopTile {
  uint32_t wp = 2, wc = 2, fp = 4, fc = 4, bk = 32;
  // Shared-memory buffers. One: two buffers (44 KiB at the default tile) measured
  // slower on the H200 (91.3 vs 76.7 ms of Flux 1024² conv), so they are an option.
  uint32_t stages = 1;
  uint32_t vec_out = 1;  // 16-byte epilogue stores where the output allows (0: never)
  // The halo tile (the kernel's TH): stride-1 convs with a kernel larger than 1×1 take
  // their pixels as th output rows × pixels() / th columns and stage each channel
  // chunk's input halo once for all taps; 0 = pixels in band order, an im2col tile
  // per tap (1×1 and strided convs always). One B buffer only (two A buffers).
  uint32_t th = 0;
  // The fragment side (coopmat.glsl's CM_M = CM_N): 16, or 32 / 64 on devices with
  // flexible dimensions (Target::coopmat_flexible), rewritten to KHR.
  uint32_t frag = 16;
  uint32_t pixels() const { return wp * fp * frag; }
  uint32_t channels() const { return wc * fc * frag; }
  // The staged A rows: the pixels, or the halo of a kh × kw conv.
  uint32_t a_rows(int64_t kh, int64_t kw) const {
    return th == 0 ? pixels() : (th + uint32_t(kh) - 1) * (pixels() / th + uint32_t(kw) - 1);
  }
  // A halo tile has two A buffers (the next chunk's halo is staged during this one).
  // Native im2col kernels keep the epilogue's patches in the staging memory
  // (conv_gemm_coop.comp SH_ALIAS): the larger of the two, else their sum.
  uint32_t shared_bytes(int64_t kh, int64_t kw, bool native = false) const {
    const uint32_t staging = ((th == 0 ? stages : 2) * a_rows(kh, kw) + stages * channels()) * (bk + 8) * 2;
    const uint32_t patches = wp * wc * frag * frag * 4;
    return native && th == 0 ? std::max(staging, patches) : staging + patches;
  }
};

// "WPxWCxFPxFC[xBK[xSTAGES[xVEC_OUT[xTH[xFRAG]]]]]" (e.g. "2x2x4x4" or "2x2x2x2x32x1x1x0x32"), or
// an error. (lower_conv_gemm also takes "thN": the default tiles with N halo rows, and
// "fN": the default tiles with N×N fragments.)
Expected<CoopTile> parse_coop_tile(const std::string& text) {
  CoopTile t;
  char end = 0;
  const int n = std::sscanf(text.c_str(), "%ux%ux%ux%ux%ux%ux%ux%ux%u%c", &t.wp, &t.wc, &t.fp, &t.fc, &t.bk,
                            &t.stages, &t.vec_out, &t.th, &t.frag, &end);
  if ((n < 4 || n > 9) || t.wp == 0 || t.wc == 0 || t.fp == 0 || t.fc == 0 || t.wp * t.wc > 16 ||
      t.fp * t.fc * t.frag * t.frag > 32 * 256 || (t.frag != 16 && t.frag != 32 && t.frag != 64) ||
      (t.bk != 16 && t.bk != 32 && t.bk != 64) || t.stages < 1 || t.stages > 2 || t.vec_out > 1 ||
      (t.th > 0 && (t.stages != 1 || t.pixels() % t.th != 0 || t.pixels() / t.th % t.frag != 0)))
    return error("conv tile '{}' is not WPxWCxFPxFC[xBK[xSTAGES[xVEC_OUT[xTH[xFRAG]]]]] (subgroups and fragments "
                 "per subgroup, input channels per step 16, 32 or 64, 1 or 2 shared buffers, 16-byte output stores "
                 "0 or 1, halo tile rows 0 or a divisor of the pixels leaving rows of whole fragments with one "
                 "buffer, fragments of 16, 32 or 64 (at most 32 16x16 fragments' worth per subgroup); e.g. "
                 "2x2x4x4)",
                 text);
  return t;
}

// The default tile: 128 pixels × 128 channels (measured best on the H200 among
// 2x2x4x4, 4x2x2x4, 2x4x4x2, 2x2x2x4, 4x2x4x2, 2x2x4x2: docs/PERFORMANCE.md); narrower
// channel tiles for convs with few output channels (conv_out's 3), so the fragments
// are not mostly zero rows.
// No default tile is a halo tile (th 0): the halo tile gave the same bytes but
// measured slower on the H200 (Flux 1024² conv 72.3 ms im2col, 87.4 at 4 or 8 halo
// rows, 82.8 at 4 with TAP_UNROLL: docs/PERFORMANCE.md, issue 15); `--conv-tile thN`
// measures it.
//
// With flexible fragments (Target::coopmat_flexible) the 128 × 128 tile is 2 × 2
// fragments of 32 × 32 per subgroup instead of 4 × 4 of 16 × 16: the same tile, the
// same staging and the same sums in the same order, fewer and larger cooperative
// matrices (a staged GEMM ran 1.58× faster so on the H200: docs/PERFORMANCE.md, issue 15,
// session 8). The narrow and 96-channel tiles keep 16 × 16.
CoopTile default_coop_tile(int64_t channels, bool flexible) {
  if (channels <= 16) return {4, 1, 2, 1};
  if (channels <= 32) return {4, 1, 2, 2};
  // 96-channel tiles where they cover the channels with less padding than 128 (96,
  // 192: Qwen-Image's up blocks), so the fragments are not a quarter zero columns.
  auto covered = [&](int64_t tile) { return (channels + tile - 1) / tile * tile; };
  // On flexible devices: 2 × 3 subgroups of 2 × 1 fragments of 32 × 32 (Qwen-Image
  // 1024² conv 29.6 -> 24.6 ms on the H200 against the 16 × 16 tile; docs/PERFORMANCE.md,
  // issue 15, session 9).
  if (covered(96) < covered(128)) {
    if (!flexible) return {2, 2, 4, 3};
    CoopTile t;
    t.wp = 2, t.wc = 3, t.fp = 2, t.fc = 1, t.frag = 32;
    return t;
  }
  if (flexible) {
    CoopTile t;
    t.fp = t.fc = 2;
    t.frag = 32;
    return t;
  }
  return {};
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
  const bool coop = target.tensor_cores != TensorCores::none && l.storage(x) == DType::f16 &&
                    l.storage(w) == DType::f16 && *layout == WeightLayout::o_hwi && x_cfast && ci % 8 == 0 &&
                    sx[0] % 8 == 0 && sx[2] % 8 == 0 && sx[3] % 8 == 0 &&
                    l.offset_alignment() % 16 == 0 && l.location(x).offset % 16 == 0 &&
                    l.location(w).offset % 16 == 0;
  KernelKey key;
  uint32_t tile_pixels = 0, tile_channels = 0;
  uint32_t tile_rows = 0;  // > 0: pixel tiles of tile_rows rows × tile_pixels / tile_rows columns
  if (coop) {
    // The emulation keeps whole fragments per lane: few of them (see
    // tests/codegen/test_conv_gemm_coop.cpp on lavapipe's coroutine stacks).
    const bool flexible = target.tensor_cores == TensorCores::nv_coopmat && target.coopmat_flexible;
    CoopTile tile = default_coop_tile(co_store, flexible);
    if (target.tensor_cores == TensorCores::emulated) tile.fp = tile.fc = 1;
    const std::string& asked = l.options().conv_tile;
    uint32_t th = 0, frag = 0;
    char end = 0;
    if (std::sscanf(asked.c_str(), "th%u%c", &th, &end) == 1) {
      // "thN": the default tiles with N halo rows (0: the im2col tile), for measuring.
      if (th > 0 && (tile.pixels() % th != 0 || tile.pixels() / th % tile.frag != 0))
        return l.fail(node, fmt::format("conv tile '{}': {} pixels do not split into {} rows of {}k", asked,
                                        tile.pixels(), th, tile.frag));
      tile.th = th;
    } else if (std::sscanf(asked.c_str(), "f%u%c", &frag, &end) == 1) {
      // "fN": the default tiles' pixels and channels in N×N fragments (16: today's
      // fragments on any device; 32, 64: flexible ones), for measuring.
      if (frag != 16 && frag != 32 && frag != 64)
        return l.fail(node, fmt::format("conv tile '{}': fragments of 16, 32 or 64", asked));
      const uint32_t pixels = tile.pixels(), channels = tile.channels();
      if (pixels % (tile.wp * frag) == 0 && channels % (tile.wc * frag) == 0) {
        tile.fp = pixels / (tile.wp * frag);
        tile.fc = channels / (tile.wc * frag);
        tile.frag = frag;
      }  // else (narrow or 96-channel tiles): keep the tile's own fragments
    } else if (!asked.empty()) {
      auto parsed = parse_coop_tile(asked);
      if (!parsed) return l.fail(node, parsed.status().message());
      tile = *parsed;
    }
    // The halo only pays where taps overlap: stride 1, more than one tap. Frame stacks
    // clamp their taps per frame: the im2col tile.
    if (stride[0] != 1 || stride[1] != 1 || k[0] * k[1] == 1 || frames->on()) tile.th = 0;
    const uint32_t invocations = tile.wp * tile.wc * target.subgroup_size;
    if (tile.frag != 16 && target.tensor_cores == TensorCores::nv_coopmat && !target.coopmat_flexible)
      return l.fail(node, fmt::format("conv_gemm_coop fragments of {}x{}: the device takes 16x16 cooperative "
                                      "matrices only (no VK_NV_cooperative_matrix2 flexible dimensions)",
                                      tile.frag, tile.frag));
    if (invocations % (tile.bk / 8) != 0)
      return l.fail(node, fmt::format("conv_gemm_coop tile {}x{}x{}x{}x{}: {} invocations do not cover whole rows of "
                                      "{} input channels",
                                      tile.wp, tile.wc, tile.fp, tile.fc, tile.bk, invocations, tile.bk));
    if (tile.shared_bytes(k[0], k[1], target.tensor_cores == TensorCores::nv_coopmat) > target.max_shared_memory_bytes)
      return l.fail(node, fmt::format("conv_gemm_coop tile {}x{}x{}x{}x{}x{} (halo rows {}) needs {} bytes of shared "
                                      "memory, the target has {}",
                                      tile.wp, tile.wc, tile.fp, tile.fc, tile.bk, tile.stages, tile.th,
                                      tile.shared_bytes(k[0], k[1], target.tensor_cores == TensorCores::nv_coopmat), target.max_shared_memory_bytes));
    tile_pixels = tile.pixels();
    tile_rows = tile.th;
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
    if (tile.th > 0) key.defines["TH"] = std::to_string(tile.th);  // absent: the im2col tile, as before
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
    // Pixel tiles run along x, folded into z when there are more than x allows; halo
    // tiles row-major over the band's rows and columns.
    const uint64_t pixel_tiles =
        tile_rows == 0 ? ceil_div(static_cast<uint64_t>(rows * ys[3]), tile_pixels)
                       : ceil_div(static_cast<uint64_t>(rows), tile_rows) *
                             ceil_div(static_cast<uint64_t>(ys[3]), tile_pixels / tile_rows);
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

// lower_winograd: the three ops of a Winograd F(m×m, 3×3) conv, m = 2 or 4 (ir/ops.h;
// passes/winograd_convs.cpp) -> one dispatch each.
//
//   winograd_input   kernels/winograd_input.comp: x f16 NHWC -> V f16 [α², TP, C]
//   winograd_gemm    kernels/winograd_gemm.comp: the α² GEMMs over up to three frames'
//                    V, on cooperative matrices (or coopmat.glsl's emulation where the
//                    device has none: tests), with the conv kernel's default tile
//   winograd_output  kernels/winograd_output.comp: M f32 or f16 -> y f16 NHWC, with bias,
//                    residual and range-guard scales
//   winograd_weights kernels/winograd_weights.comp: o_hwi f16 weights -> U f16, one
//                    dispatch per frame
//
// Every operand is bound whole: the pass only rewrites convs whose V and M fit the
// binding limit, and each op checks it again. What the kernels need of the layouts is
// checked here, with an error naming the node: 16-byte rows (C a multiple of 8, Co of
// the fragment side), NHWC pixels of a multiple of 8 (4) halfs, row-major V and M.
#include "codegen/coop_tile.h"
#include "codegen/lowering.h"
#include "codegen/storage.h"

#include <fmt/format.h>

#include <algorithm>

namespace strata::codegen {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Halfs per pixel of an f16 NHWC value, or an error.
Expected<uint64_t> nhwc_pixel(Lowering& l, const Node& node, ValueId v, uint64_t multiple) {
  const std::vector<int64_t> s = l.strides(v);
  if (l.storage(v) != DType::f16 || s.size() != 4 || s[1] != 1 || s[3] % static_cast<int64_t>(multiple) != 0 ||
      l.location(v).offset % (2 * multiple) != 0)
    return l.fail(node, fmt::format("{} must be f16 NHWC with pixels of a multiple of {} halfs",
                                    l.graph().value(v).name, multiple));
  return static_cast<uint64_t>(s[3]);
}

Status check_whole(Lowering& l, const Node& node, const std::vector<runtime::BindingDesc>& b) {
  return l.check_ranges(node, b, "the whole operands");
}

Status lower_input(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], v = node.outputs[0];
  const Shape& xs = l.shape(x);
  const uint64_t c = static_cast<uint64_t>(xs[1]), h = static_cast<uint64_t>(xs[2]), w = static_cast<uint64_t>(xs[3]);
  const uint64_t m = static_cast<uint64_t>(node.attrs.get_int("tile", 2));
  const uint64_t rows = static_cast<uint64_t>(l.shape(v)[1]), tiles = ((h + m - 1) / m) * ((w + m - 1) / m);
  // m = 4 takes 4 channels per invocation (8-byte loads), m = 2 eight (16-byte).
  const uint64_t per_invocation = m == 4 ? 4 : 8;
  STRATA_ASSIGN_OR_RETURN(uint64_t x_pix, nhwc_pixel(l, node, x, 8));
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {v}));
  if (c % 8 != 0 || l.storage(v) != DType::f16 || l.location(v).offset % 16 != 0)
    return l.fail(node, "winograd_input writes f16 rows of a multiple of 8 channels, 16-byte aligned");
  KernelKey key;
  key.file = "winograd_input.comp";
  key.defines = {{"F16", "1"}, {"TILE", std::to_string(m)}};
  key.bindings = 2;
  key.push_constant_bytes = 6 * 4;
  key.workgroup_size = {64, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  PushConstants push;
  push.u32(static_cast<uint32_t>(h)).u32(static_cast<uint32_t>(w)).u32(static_cast<uint32_t>(c));
  push.u32(static_cast<uint32_t>(x_pix)).u32(static_cast<uint32_t>(tiles)).u32(static_cast<uint32_t>(rows));
  std::vector<runtime::BindingDesc> b{l.bind(x, runtime::Access::read), l.bind(v, runtime::Access::write)};
  STRATA_RETURN_IF_ERROR(check_whole(l, node, b));
  l.dispatch(pipe, std::move(b), push, l.grid_1d(rows * (c / per_invocation), 64), node);
  return Status::ok();
}

Status lower_gemm_node(Lowering& l, const Node& node) {
  const Target& target = l.target();
  if (target.tensor_cores == TensorCores::none)
    return l.fail(node, "winograd_gemm runs on cooperative matrices (or their emulation): the target has neither");
  const size_t frames = node.inputs.size() - 1;
  const ValueId m = node.outputs[0];
  if (frames < 1 || frames > 3) return l.fail(node, fmt::format("winograd_gemm takes 1 to 3 frames, got {}", frames));
  const Shape& vs = l.shape(node.inputs[0]);
  const uint64_t positions = static_cast<uint64_t>(vs[0]), rows = static_cast<uint64_t>(vs[1]),
                 c = static_cast<uint64_t>(vs[2]);
  const uint64_t co = static_cast<uint64_t>(l.shape(m)[2]), k = frames * c;
  const bool flexible = target.tensor_cores == TensorCores::nv_coopmat && target.coopmat_flexible;
  CoopTile tile = default_coop_tile(static_cast<int64_t>(co), flexible);
  if (target.tensor_cores == TensorCores::emulated) tile.fp = tile.fc = 1;
  if (!l.options().winograd_gemm_tile.empty()) {  // CodegenOptions::winograd_gemm_tile, for measuring
    auto asked = asked_coop_tile(tile, l.options().winograd_gemm_tile);
    if (!asked) return l.fail(node, fmt::format("winograd_gemm: {}", asked.message()));
    tile = *asked;
    if (tile.stages != 1)
      return l.fail(node, fmt::format("winograd_gemm tile '{}': one stage only",
                                      l.options().winograd_gemm_tile));
    if (tile.frag != 16 && !flexible)
      return l.fail(node, fmt::format("winograd_gemm tile '{}': fragments of {} need flexible dimensions",
                                      l.options().winograd_gemm_tile, tile.frag));
  }
  std::vector<ValueId> checked(node.inputs.begin(), node.inputs.end());
  checked.push_back(m);
  for (ValueId v : checked) {
    STRATA_RETURN_IF_ERROR(l.require_row_major(node, {v}));
    if (l.location(v).offset % 16 != 0) return l.fail(node, fmt::format("{} is not 16-byte aligned", l.graph().value(v).name));
  }
  for (size_t f = 0; f <= frames; ++f)
    if (l.storage(node.inputs[f]) != DType::f16)
      return l.fail(node, fmt::format("winograd_gemm multiplies f16 operands; {} is stored as f32",
                                      l.graph().value(node.inputs[f]).name));
  const bool m_f16 = l.storage(m) == DType::f16;
  if (!m_f16 && l.storage(m) != DType::f32) return l.fail(node, "winograd_gemm writes M in f32 or f16");
  if (c % tile.bk != 0 || co % tile.frag != 0 || rows % tile.frag != 0)
    return l.fail(node, fmt::format("winograd_gemm needs C a multiple of {} and Co and the tile rows of {}, got C {}, "
                                    "Co {}, {} rows",
                                    tile.bk, tile.frag, c, co, rows));
  KernelKey key;
  key.file = "winograd_gemm.comp";
  key.defines = {{"COOPMAT", target.tensor_cores == TensorCores::nv_coopmat ? "1" : "2"},
                 {"CM_SG", std::to_string(target.subgroup_size)},
                 {"WP", std::to_string(tile.wp)},
                 {"WC", std::to_string(tile.wc)},
                 {"FP", std::to_string(tile.fp)},
                 {"FC", std::to_string(tile.fc)},
                 {"BK", std::to_string(tile.bk)},
                 {"FRAMES", std::to_string(frames)},
                 {"M_F16", m_f16 ? "1" : "0"},
                 {"F16", "1"}};
  if (tile.frag != 16) {
    key.defines["CM_M"] = key.defines["CM_N"] = std::to_string(tile.frag);
    if (target.tensor_cores == TensorCores::nv_coopmat) key.defines["COOPMAT_KHR"] = "1";
  }
  const uint32_t invocations = tile.wp * tile.wc * target.subgroup_size;
  key.bindings = static_cast<uint32_t>(frames) + 2;
  key.push_constant_bytes = 4 * 4;
  key.workgroup_size = {invocations, 1, 1};
  // With f16 M the epilogue's patches share the staging memory natively, and come on
  // top of it in the emulation (winograd_gemm.comp).
  const uint64_t staging = (uint64_t(tile.pixels()) + tile.channels()) * (tile.bk + 8) * 2;
  const uint64_t patches = m_f16 ? uint64_t(tile.wp) * tile.wc * tile.frag * tile.frag * 4 : 0;
  const uint64_t shared =
      target.tensor_cores == TensorCores::nv_coopmat ? std::max(staging, patches) : staging + patches;
  if (shared > target.max_shared_memory_bytes)
    return l.fail(node, fmt::format("winograd_gemm's tile needs {} bytes of shared memory, the target has {}", shared,
                                    target.max_shared_memory_bytes));
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  PushConstants push;
  push.u32(static_cast<uint32_t>(rows)).u32(static_cast<uint32_t>(co)).u32(static_cast<uint32_t>(c));
  push.u32(static_cast<uint32_t>(k));
  std::vector<runtime::BindingDesc> b;
  for (size_t f = 0; f <= frames; ++f) b.push_back(l.bind(node.inputs[f], runtime::Access::read));
  b.push_back(l.bind(m, runtime::Access::write));
  STRATA_RETURN_IF_ERROR(check_whole(l, node, b));
  const uint64_t gx = ceil_div(rows, tile.pixels()), gy = ceil_div(co, tile.channels());
  if (gx > target.max_workgroup_count_x)
    return l.fail(node, fmt::format("winograd_gemm needs {} row tiles, above the workgroup-count limit", gx));
  l.dispatch(pipe, std::move(b), push,
             {static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), static_cast<uint32_t>(positions)}, node);
  return Status::ok();
}

Status lower_output(Lowering& l, const Node& node) {
  const ValueId m = node.inputs[0], y = node.outputs[0];
  const ValueId bias = node.inputs.size() > 1 ? node.inputs[1] : kNoValue;
  const ValueId res = node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
  const Shape& ys = l.shape(y);
  const uint64_t co = static_cast<uint64_t>(ys[1]), h = static_cast<uint64_t>(ys[2]), w = static_cast<uint64_t>(ys[3]);
  const uint64_t tile = static_cast<uint64_t>(node.attrs.get_int("tile", 2));
  const uint64_t rows = static_cast<uint64_t>(l.shape(m)[1]), tiles = ((h + tile - 1) / tile) * ((w + tile - 1) / tile);
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {m, bias}));
  const bool m_f16 = l.storage(m) == DType::f16;
  if (co % 4 != 0 || (!m_f16 && l.storage(m) != DType::f32) || (bias != kNoValue && l.storage(bias) != DType::f32))
    return l.fail(node, "winograd_output reads f32 or f16 M and f32 bias in groups of 4 channels");
  STRATA_ASSIGN_OR_RETURN(uint64_t y_pix, nhwc_pixel(l, node, y, 4));
  uint64_t res_pix = 0;
  if (res != kNoValue) {
    STRATA_ASSIGN_OR_RETURN(res_pix, nhwc_pixel(l, node, res, 4));
  }
  KernelKey key;
  key.file = "winograd_output.comp";
  key.defines = {{"F16", "1"},
                 {"TILE", std::to_string(tile)},
                 {"HAS_BIAS", bias == kNoValue ? "0" : "1"},
                 {"HAS_RES", res == kNoValue ? "0" : "1"},
                 {"M_F16", m_f16 ? "1" : "0"}};
  key.bindings = 2 + (bias != kNoValue) + (res != kNoValue);
  key.push_constant_bytes = 10 * 4;
  key.workgroup_size = {64, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  const Attrs& a = node.attrs;
  PushConstants push;
  push.u32(static_cast<uint32_t>(h)).u32(static_cast<uint32_t>(w)).u32(static_cast<uint32_t>(co));
  push.u32(static_cast<uint32_t>(rows)).u32(static_cast<uint32_t>(tiles));
  push.u32(static_cast<uint32_t>(y_pix)).u32(static_cast<uint32_t>(res_pix));
  push.f32(static_cast<float>(a.get_float("acc_scale", 1.0)))
      .f32(static_cast<float>(a.get_float("residual_scale", 1.0)))
      .f32(static_cast<float>(a.get_float("out_scale", 1.0)));
  std::vector<runtime::BindingDesc> b{l.bind(m, runtime::Access::read)};
  if (bias != kNoValue) b.push_back(l.bind(bias, runtime::Access::read));
  if (res != kNoValue) b.push_back(l.bind(res, runtime::Access::read));
  b.push_back(l.bind(y, runtime::Access::write));
  STRATA_RETURN_IF_ERROR(check_whole(l, node, b));
  l.dispatch(pipe, std::move(b), push, l.grid_1d(tiles * (co / 4), 64), node);
  return Status::ok();
}

// One dispatch per frame: U's columns [f·C, (f + 1)·C) from w_f.
Status lower_weights(Lowering& l, const Node& node) {
  const ValueId u = node.outputs[0];
  const Shape& us = l.shape(u);
  const uint64_t co = static_cast<uint64_t>(us[1]), k = static_cast<uint64_t>(us[2]);
  const uint64_t c = static_cast<uint64_t>(l.shape(node.inputs[0])[1]) / 9;
  const uint64_t tile = static_cast<uint64_t>(node.attrs.get_int("tile", 2));
  std::vector<ValueId> checked(node.inputs.begin(), node.inputs.end());
  checked.push_back(u);
  for (ValueId v : checked) STRATA_RETURN_IF_ERROR(l.require_row_major(node, {v}));
  for (ValueId v : checked)
    if (l.storage(v) != DType::f16 || l.location(v).offset % 4 != 0)
      return l.fail(node, fmt::format("winograd_weights reads and writes f16 pairs, 4-byte aligned; {} is not",
                                      l.graph().value(v).name));
  if (c % 2 != 0) return l.fail(node, fmt::format("winograd_weights takes an even channel count, got {}", c));
  KernelKey key;
  key.file = "winograd_weights.comp";
  key.defines = {{"F16", "1"}, {"TILE", std::to_string(tile)}};
  key.bindings = 2;
  key.push_constant_bytes = 5 * 4;
  key.workgroup_size = {64, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
  for (size_t f = 0; f < node.inputs.size(); ++f) {
    PushConstants push;
    push.u32(static_cast<uint32_t>(co)).u32(static_cast<uint32_t>(c)).u32(static_cast<uint32_t>(k));
    push.u32(static_cast<uint32_t>(f * c)).u32(static_cast<uint32_t>(9 * c));
    std::vector<runtime::BindingDesc> b{l.bind(node.inputs[f], runtime::Access::read),
                                        l.bind(u, runtime::Access::write)};
    STRATA_RETURN_IF_ERROR(check_whole(l, node, b));
    l.dispatch(pipe, std::move(b), push, l.grid_1d(co * (c / 2), 64), node);
  }
  return Status::ok();
}

}  // namespace

Status lower_winograd(Lowering& l, const Node& node) {
  switch (node.op) {
    case Op::winograd_input: return lower_input(l, node);
    case Op::winograd_gemm: return lower_gemm_node(l, node);
    case Op::winograd_output: return lower_output(l, node);
    case Op::winograd_weights: return lower_weights(l, node);
    default:
      return l.fail(node,
                    "lower_winograd handles winograd_input, winograd_gemm, winograd_output and winograd_weights only");
  }
}

}  // namespace strata::codegen

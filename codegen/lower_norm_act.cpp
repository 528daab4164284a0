// lower_norm_act: norm_act -> kernels/norm_act_*.comp.
//
//   norm = "group"  three passes with exact statistics, like group_norm:
//                   norm_act_stats (Welford per chunk of one (image, group): P
//                   positions × the group's cg channels, ≈ 4096 values, (mean, M2) to
//                   scratch), group_norm_reduce (Chan merge per (image, group),
//                   (mean, rstd) to scratch), norm_act_apply (one invocation per stored
//                   output element: normalise, γ, β, SiLU, zeros in padding slots).
//   norm = "rms"    norm_act_rms, one invocation per position (Kahan sum of t² over the
//                   real channels, then every channel slot stored).
//
// t = x · in_scale + bias[c] is formed on read in every pass. Statistics use the
// first `channels` (R) channels only; output slots c >= R (the padding channels of
// the logical shape and the nhwc padding slots) are written as exact zeros. x and y
// may be logical NCHW or nhwc (padded or not), f32 or f16, independently: kernels
// address them as (image, channel, position) with the strides of each.
//
// Bands: with attr band_rows (passes/split_bands.cpp) on an image with N = 1 and
// row-contiguous (nhwc) x and y, every pass runs over windows instead of whole
// tensors: the statistics over windows of whole chunks (about band_rows rows each;
// chunk boundaries do not move, so the partial sums and their merge are those of one
// dispatch), the apply and rms passes over windows of band_rows rows. Results are
// bit-identical to the unbanded node. γ, β and bias are bound whole. A binding above
// the target's storage-buffer range is an error naming the node.
#include "codegen/lowering.h"
#include "codegen/storage.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace strata::codegen {
namespace {

using runtime::Access;

constexpr uint32_t kStatsWg = 256;    // norm_act_stats / group_norm_reduce invocations
constexpr uint32_t kChunkValues = 4096;  // values per statistics chunk (about)
constexpr uint32_t kApplyWg = 64;     // norm_act_apply / norm_act_rms invocations

// (image, channel, position) element strides of a value x[N, C, spatial...] whose
// spatial dims are contiguous among themselves (true of the logical and nhwc layouts).
struct ImageStrides {
  uint32_t n = 0, c = 0, s = 0;
};

Expected<ImageStrides> image_strides(const Lowering& l, const Node& node, ValueId v) {
  const std::vector<int64_t> st = l.strides(v);
  const Shape& sh = l.shape(v);
  for (size_t d = 2; d + 1 < sh.size(); ++d)
    if (st[d] != st[d + 1] * sh[d + 1])
      return l.fail(node, fmt::format("operand %{}: spatial dims are not contiguous in layout {}",
                                      l.graph().value(v).name, layout_str(l.type(v).layout)));
  return ImageStrides{static_cast<uint32_t>(st[0]), static_cast<uint32_t>(st[1]),
                      static_cast<uint32_t>(sh.size() > 2 ? st.back() : 0)};
}

void push(PushConstants& p, const ImageStrides& s) { p.u32(s.n).u32(s.c).u32(s.s); }

}  // namespace

Status lower_norm_act(Lowering& l, const Node& node) {
  if (node.op != Op::norm_act) return l.fail(node, "lower_norm_act handles norm_act only");
  auto operand = [&](size_t i) { return node.inputs.size() > i ? node.inputs[i] : kNoValue; };
  const ValueId x = node.inputs[0], gamma = node.inputs[1], beta = operand(2), bias = operand(3);
  const ValueId y = node.outputs[0];
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {gamma, beta, bias}));
  const Attrs& a = node.attrs;
  const Shape& xs = l.shape(x);
  const int64_t c = xs[1], real = a.get_int("channels", c);
  const int64_t spatial = l.type(x).elements() / (xs[0] * c), slots = stored_channels(l.type(y));
  const std::string norm = a.get_string("norm");
  const float in_scale = static_cast<float>(a.get_float("in_scale", 1.0));
  const bool silu = a.get_int("silu", 0) != 0;
  // Windows of positions: one per band of rows (a single window covering everything
  // when the node is not banded).
  const int64_t frame_rows = xs.size() == 4 ? xs[2] : 1;
  const int64_t band = Lowering::band_rows(node, frame_rows);
  const bool banded = band < frame_rows;
  if (banded && !(l.rows_contiguous(x) && l.rows_contiguous(y)))
    return l.fail(node, fmt::format("band_rows needs N = 1 and row-contiguous x and y; x is {} {}, y {} {}",
                                    shape_str(xs), layout_str(l.type(x).layout), shape_str(l.shape(y)),
                                    layout_str(l.type(y).layout)));
  const int64_t band_positions = banded ? band * xs[3] : spatial;
  if (banded) l.record_bands(node, frame_rows, band);
  struct PositionWindow {
    int64_t first, count;
  };
  std::vector<PositionWindow> windows;
  for (int64_t s0 = 0; s0 < spatial; s0 += band_positions)
    windows.push_back({s0, std::min(band_positions, spatial - s0)});
  // Bindings of x and y for positions [first, first + count) of a banded node.
  auto position_window = [&](ValueId v, const PositionWindow& w, Access access) {
    const uint64_t ps = static_cast<uint64_t>(l.strides(v).back());
    return l.element_window(v, static_cast<uint64_t>(w.first) * ps, static_cast<uint64_t>(w.count) * ps, access);
  };
  auto step_name = [&](const char* what, size_t i) {
    return windows.size() == 1 ? std::string(what) : fmt::format("{} {}/{}", what, i + 1, windows.size());
  };
  STRATA_ASSIGN_OR_RETURN(ImageStrides sx, image_strides(l, node, x));
  STRATA_ASSIGN_OR_RETURN(ImageStrides sy, image_strides(l, node, y));

  Defines types = {{"HAS_BETA", beta == kNoValue ? "0" : "1"}, {"HAS_BIAS", bias == kNoValue ? "0" : "1"}};
  add_type_define(types, "X_T", l.storage(x));
  add_type_define(types, "G_T", l.storage(gamma));
  if (beta != kNoValue) add_type_define(types, "BE_T", l.storage(beta));
  if (bias != kNoValue) add_type_define(types, "BI_T", l.storage(bias));
  auto key_for = [&](const char* file, uint32_t wg, uint32_t bindings, uint32_t push_words, Defines extra) {
    KernelKey key;
    key.file = file;
    key.defines = std::move(extra);
    key.defines["WG"] = std::to_string(wg);
    key.bindings = bindings;
    key.push_constant_bytes = push_words * 4;
    key.workgroup_size = {wg, 1, 1};
    return key;
  };
  Defines out_defines = types;
  out_defines["SILU"] = silu ? "1" : "0";
  out_defines["ROUND"] = round_define(l.type(y).dtype);
  add_type_define(out_defines, "Y_T", l.storage(y));
  const uint32_t optional = (beta != kNoValue) + (bias != kNoValue);

  if (norm == "rms") {
    STRATA_ASSIGN_OR_RETURN(uint32_t pipe,
                            l.pipeline(key_for("norm_act_rms.comp", kApplyWg, 3 + optional, 15, out_defines)));
    for (size_t i = 0; i < windows.size(); ++i) {
      const uint64_t positions = banded ? static_cast<uint64_t>(windows[i].count) : static_cast<uint64_t>(xs[0] * spatial);
      const uint64_t per_image = banded ? positions : static_cast<uint64_t>(spatial);
      Lowering::ElementWindow xw{l.bind(x, Access::read), 0}, yw{l.bind(y, Access::write), 0};
      if (banded) {
        xw = position_window(x, windows[i], Access::read);
        yw = position_window(y, windows[i], Access::write);
      }
      PushConstants p;
      p.u32(static_cast<uint32_t>(positions)).u32(static_cast<uint32_t>(per_image));
      p.u32(static_cast<uint32_t>(slots)).u32(static_cast<uint32_t>(real));
      push(p, sx);
      push(p, sy);
      p.f32(in_scale).f32(static_cast<float>(a.get_float("eps", 1e-12)));
      p.f32(static_cast<float>(std::sqrt(static_cast<double>(real))));
      p.u32(xw.base).u32(yw.base);
      std::vector<runtime::BindingDesc> b = {xw.binding, l.bind(gamma, Access::read)};
      if (beta != kNoValue) b.push_back(l.bind(beta, Access::read));
      if (bias != kNoValue) b.push_back(l.bind(bias, Access::read));
      b.push_back(yw.binding);
      const std::string step = windows.size() == 1 ? "" : step_name("band", i);
      STRATA_RETURN_IF_ERROR(l.check_ranges(node, b, step));
      l.dispatch(pipe, std::move(b), p, l.grid_1d(positions, kApplyWg), node, step);
    }
    return Status::ok();
  }
  if (norm != "group") return l.fail(node, "norm '" + norm + "' has no kernel");

  // Chunks of P positions × cg channels per (image, group) segment.
  const int64_t groups = a.get_int("groups"), cg = real / groups;
  const int64_t per_chunk = std::max<int64_t>(1, kChunkValues / cg);
  const int64_t per_seg = (spatial + per_chunk - 1) / per_chunk, segments = xs[0] * groups;
  const int64_t chunks = segments * per_seg;
  if (static_cast<uint64_t>(spatial * cg) > UINT32_MAX)
    return l.fail(node, fmt::format("{} values per group exceed the kernels' 32-bit indexing", spatial * cg));
  const Location partial = l.scratch(node, static_cast<uint64_t>(chunks) * 8);  // (mean, M2) per chunk
  const Location stats = l.scratch(node, static_cast<uint64_t>(segments) * 8);  // (mean, rstd) per segment
  const bool ch_fast_x = sx.c == 1, ch_fast_y = sy.c == 1;

  Defines stats_defines = {{"CH_FAST", ch_fast_x ? "1" : "0"}, {"HAS_BIAS", bias == kNoValue ? "0" : "1"}};
  add_type_define(stats_defines, "X_T", l.storage(x));
  if (bias != kNoValue) add_type_define(stats_defines, "BI_T", l.storage(bias));
  out_defines["CH_FAST"] = ch_fast_y ? "1" : "0";
  STRATA_ASSIGN_OR_RETURN(uint32_t stats_pipe, l.pipeline(key_for("norm_act_stats.comp", kStatsWg,
                                                                   2 + (bias != kNoValue), 13, stats_defines)));
  STRATA_ASSIGN_OR_RETURN(uint32_t reduce_pipe,
                          l.pipeline(key_for("group_norm_reduce.comp", kStatsWg, 2, 4,
                                             {{"CHUNK", std::to_string(per_chunk * cg)}})));
  STRATA_ASSIGN_OR_RETURN(uint32_t apply_pipe,
                          l.pipeline(key_for("norm_act_apply.comp", kApplyWg, 4 + optional, 15, out_defines)));

  // Statistics windows: whole chunks, about one band of positions each (at least one
  // chunk), so a window never splits a chunk.
  const int64_t parts_per_window = banded ? std::max<int64_t>(1, band_positions / per_chunk) : per_seg;
  for (int64_t part0 = 0, i = 0, n = (per_seg + parts_per_window - 1) / parts_per_window; part0 < per_seg;
       part0 += parts_per_window, ++i) {
    const int64_t parts = std::min(parts_per_window, per_seg - part0);
    const int64_t window_chunks = banded ? groups * parts : chunks;
    Lowering::ElementWindow xw{l.bind(x, Access::read), 0};
    if (banded) {
      const int64_t first = part0 * per_chunk, last = std::min(spatial, (part0 + parts) * per_chunk);
      xw = position_window(x, PositionWindow{first, last - first}, Access::read);
    }
    PushConstants sp;
    sp.u32(static_cast<uint32_t>(spatial)).u32(static_cast<uint32_t>(cg)).u32(static_cast<uint32_t>(per_chunk));
    sp.u32(static_cast<uint32_t>(per_seg)).u32(static_cast<uint32_t>(window_chunks)).u32(static_cast<uint32_t>(groups));
    push(sp, sx);
    sp.f32(in_scale);
    sp.u32(static_cast<uint32_t>(part0)).u32(static_cast<uint32_t>(banded ? parts : per_seg)).u32(xw.base);
    std::vector<runtime::BindingDesc> sb = {xw.binding};
    if (bias != kNoValue) sb.push_back(l.bind(bias, Access::read));
    sb.push_back(Lowering::bind_scratch(partial, Access::write));
    const std::string step = n == 1 ? std::string("stats") : fmt::format("stats {}/{}", i + 1, n);
    STRATA_RETURN_IF_ERROR(l.check_ranges(node, sb, step));
    l.dispatch(stats_pipe, std::move(sb), sp, l.grid_1d(static_cast<uint64_t>(window_chunks) * kStatsWg, kStatsWg),
               node, step);
  }

  PushConstants rp;
  rp.u32(static_cast<uint32_t>(segments)).u32(static_cast<uint32_t>(spatial * cg));
  rp.u32(static_cast<uint32_t>(per_seg)).f32(static_cast<float>(a.get_float("eps")));
  l.dispatch(reduce_pipe, {Lowering::bind_scratch(partial, Access::read), Lowering::bind_scratch(stats, Access::write)},
             rp, l.grid_1d(static_cast<uint64_t>(segments) * kStatsWg, kStatsWg), node, "reduce");

  for (size_t i = 0; i < windows.size(); ++i) {
    const int64_t per_image = banded ? windows[i].count : spatial;
    const uint64_t total = static_cast<uint64_t>((banded ? 1 : xs[0]) * per_image * slots);
    Lowering::ElementWindow xw{l.bind(x, Access::read), 0}, yw{l.bind(y, Access::write), 0};
    if (banded) {
      xw = position_window(x, windows[i], Access::read);
      yw = position_window(y, windows[i], Access::write);
    }
    PushConstants ap;
    ap.u32(static_cast<uint32_t>(total)).u32(static_cast<uint32_t>(per_image)).u32(static_cast<uint32_t>(slots));
    ap.u32(static_cast<uint32_t>(real)).u32(static_cast<uint32_t>(cg)).u32(static_cast<uint32_t>(groups));
    push(ap, sx);
    push(ap, sy);
    ap.f32(in_scale);
    ap.u32(xw.base).u32(yw.base);
    std::vector<runtime::BindingDesc> ab = {xw.binding, Lowering::bind_scratch(stats, Access::read),
                                            l.bind(gamma, Access::read)};
    if (beta != kNoValue) ab.push_back(l.bind(beta, Access::read));
    if (bias != kNoValue) ab.push_back(l.bind(bias, Access::read));
    ab.push_back(yw.binding);
    const std::string step = step_name("apply", i);
    STRATA_RETURN_IF_ERROR(l.check_ranges(node, ab, step));
    l.dispatch(apply_pipe, std::move(ab), ap, l.grid_1d(total, kApplyWg), node, step);
  }
  return Status::ok();
}

}  // namespace strata::codegen

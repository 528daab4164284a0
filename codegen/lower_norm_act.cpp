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
// Every operand is bound whole: one larger than the target's storage-buffer range is
// an error naming the node (banding is a later pass).
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
  for (ValueId v : {x, gamma, beta, bias, y}) {
    if (v == kNoValue) continue;
    if (l.location(v).bytes > l.target().max_storage_buffer_range)
      return l.fail(node, fmt::format("operand '{}' ({} bytes) exceeds the storage-buffer range {} (needs banding)",
                                      l.graph().value(v).name, l.location(v).bytes,
                                      l.target().max_storage_buffer_range));
  }
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
                            l.pipeline(key_for("norm_act_rms.comp", kApplyWg, 3 + optional, 13, out_defines)));
    const uint64_t positions = static_cast<uint64_t>(xs[0] * spatial);
    PushConstants p;
    p.u32(static_cast<uint32_t>(positions)).u32(static_cast<uint32_t>(spatial));
    p.u32(static_cast<uint32_t>(slots)).u32(static_cast<uint32_t>(real));
    push(p, sx);
    push(p, sy);
    p.f32(in_scale).f32(static_cast<float>(a.get_float("eps", 1e-12)));
    p.f32(static_cast<float>(std::sqrt(static_cast<double>(real))));
    std::vector<runtime::BindingDesc> b = {l.bind(x, Access::read), l.bind(gamma, Access::read)};
    if (beta != kNoValue) b.push_back(l.bind(beta, Access::read));
    if (bias != kNoValue) b.push_back(l.bind(bias, Access::read));
    b.push_back(l.bind(y, Access::write));
    l.dispatch(pipe, std::move(b), p, l.grid_1d(positions, kApplyWg), node);
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
                                                                   2 + (bias != kNoValue), 10, stats_defines)));
  STRATA_ASSIGN_OR_RETURN(uint32_t reduce_pipe,
                          l.pipeline(key_for("group_norm_reduce.comp", kStatsWg, 2, 4,
                                             {{"CHUNK", std::to_string(per_chunk * cg)}})));
  STRATA_ASSIGN_OR_RETURN(uint32_t apply_pipe,
                          l.pipeline(key_for("norm_act_apply.comp", kApplyWg, 4 + optional, 13, out_defines)));

  PushConstants sp;
  sp.u32(static_cast<uint32_t>(spatial)).u32(static_cast<uint32_t>(cg)).u32(static_cast<uint32_t>(per_chunk));
  sp.u32(static_cast<uint32_t>(per_seg)).u32(static_cast<uint32_t>(chunks)).u32(static_cast<uint32_t>(groups));
  push(sp, sx);
  sp.f32(in_scale);
  std::vector<runtime::BindingDesc> sb = {l.bind(x, Access::read)};
  if (bias != kNoValue) sb.push_back(l.bind(bias, Access::read));
  sb.push_back(Lowering::bind_scratch(partial, Access::write));
  l.dispatch(stats_pipe, std::move(sb), sp, l.grid_1d(static_cast<uint64_t>(chunks) * kStatsWg, kStatsWg), node,
             "stats");

  PushConstants rp;
  rp.u32(static_cast<uint32_t>(segments)).u32(static_cast<uint32_t>(spatial * cg));
  rp.u32(static_cast<uint32_t>(per_seg)).f32(static_cast<float>(a.get_float("eps")));
  l.dispatch(reduce_pipe, {Lowering::bind_scratch(partial, Access::read), Lowering::bind_scratch(stats, Access::write)},
             rp, l.grid_1d(static_cast<uint64_t>(segments) * kStatsWg, kStatsWg), node, "reduce");

  const uint64_t total = static_cast<uint64_t>(xs[0] * spatial * slots);
  PushConstants ap;
  ap.u32(static_cast<uint32_t>(total)).u32(static_cast<uint32_t>(spatial)).u32(static_cast<uint32_t>(slots));
  ap.u32(static_cast<uint32_t>(real)).u32(static_cast<uint32_t>(cg)).u32(static_cast<uint32_t>(groups));
  push(ap, sx);
  push(ap, sy);
  ap.f32(in_scale);
  std::vector<runtime::BindingDesc> ab = {l.bind(x, Access::read), Lowering::bind_scratch(stats, Access::read),
                                          l.bind(gamma, Access::read)};
  if (beta != kNoValue) ab.push_back(l.bind(beta, Access::read));
  if (bias != kNoValue) ab.push_back(l.bind(bias, Access::read));
  ab.push_back(l.bind(y, Access::write));
  l.dispatch(apply_pipe, std::move(ab), ap, l.grid_1d(total, kApplyWg), node, "apply");
  return Status::ok();
}

}  // namespace strata::codegen

// lower_norm_act: norm_act and group_moments -> kernels/norm_act_*.comp.
//
// norm_act with a statistics operand (given (mean, rstd) per group, ir/ops.h) runs the
// apply pass alone, reading the operand where it would read the reduce's scratch.
// group_moments is the statistics pass alone with one chunk per row (P = W), writing
// its partials (mean, M2) straight to the result [G, R, 2]: slot g·R + r is the
// partial slot of (group g, chunk r). Its band_rows windows are whole rows.
//
//   norm = "group"  three passes with exact statistics, like group_norm: per-chunk
//                   (mean, M2) to scratch, group_norm_reduce (Chan merge per (image,
//                   group), (mean, rstd) to scratch), then the apply pass (normalise,
//                   γ, β, SiLU, zeros in padding slots).
//   norm = "rms"    one pass (sum of t² over the real channels, then every channel slot
//                   stored).
//
// Each pass has a vector variant (norm_act_{stats,apply,rms}_vec.comp) and the portable
// scalar one (norm_act_{stats,apply,rms}.comp):
//
//   vector   taken when the operands the pass reads and writes are channel-contiguous
//            (nhwc) with R real channels and every position stride a multiple of 8, the
//            value's offset 16-byte aligned, and (apply, rms) γ, β, bias stored f32 at
//            aligned offsets (`vector_layout` below), so that 8 channel slots of a
//            position are one 16-byte load or store (f16: one uvec4; f32: two vec4).
//            stats: one workgroup per chunk of P ≈ 16384 / R positions × all channels
//            of one image (a contiguous run of rows), each invocation owning 8 channels
//            and Chan-merging whole rows of its groups, a fixed tree per column and per
//            group (group size CG a multiple of 8 or a divisor of 8, R ≤ 8·WG). apply:
//            U vectors per invocation, loaded before any is computed. rms: Cs / 8
//            invocations per position and a fixed shared-memory tree for Σ t².
//   scalar   any layout and storage: norm_act_stats (Welford per chunk of one (image,
//            group): P positions × the group's cg channels, ≈ 4096 values),
//            norm_act_apply (one invocation per stored element), norm_act_rms (one
//            invocation per position, Kahan sum).
//
// The choice depends on the node's types and placement only, never on bands, so a
// banded node runs the same variant and the same arithmetic as an unbanded one. Both
// statistics variants write (mean, M2) per (image, group, chunk) in the layout that
// group_norm_reduce reads (CHUNK = P·cg values).
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
// Vector variants (*_vec.comp), sizes measured on an H200 (Flux and Qwen-Image 1024²).
constexpr uint32_t kVecStatsWg = 128;        // norm_act_stats_vec invocations (R <= 8·WG)
constexpr uint32_t kVecStatsRows = 2;        // rows in flight per invocation (U)
constexpr int64_t kVecChunkValues = 16384;   // values per statistics chunk (about)
constexpr uint32_t kVecApplyWg = 256;        // norm_act_apply_vec invocations
constexpr uint32_t kVecApplyVectors = 2;     // 8-slot vectors per invocation (U)
constexpr uint32_t kVecRmsWg = 256;          // norm_act_rms_vec invocations (Cs <= 8·WG)

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

// The largest power of two below n (0 for n <= 1): the first stride of the kernels'
// shared-memory trees over n entries.
uint32_t tree_stride(uint64_t n) {
  if (n <= 1) return 0;
  uint32_t s = 1;
  while (2 * uint64_t{s} < n) s <<= 1;
  return s;
}

// Whether `v` (an activation x or y) can be read or written in 8-slot vectors of 16
// bytes (f16) or 32 bytes (f32): channel-contiguous, position stride a multiple of 8
// and 16-byte aligned. Windows of whole positions then start on a vector too: their
// first element is a multiple of 8, so the binding offset (the aligned offset at or
// below it, Lowering::element_window) is 16-byte aligned and the base a multiple of 8
// (f16) or 4 (f32) elements, which is all the vector kernels need.
bool vector_layout(const Lowering& l, ValueId v, const ImageStrides& s) {
  return s.c == 1 && s.s % 8 == 0 && s.n % 8 == 0 && l.location(v).offset % 16 == 0;
}

// Whether a parameter (γ, β, bias) can be read as vec4: f32 and 16-byte aligned.
bool vector_param(const Lowering& l, ValueId v) {
  return v == kNoValue || (l.storage(v) == DType::f32 && l.location(v).offset % 16 == 0);
}

// Which statistics kernel and chunk size a group norm's statistics use: the vector one
// (all groups of a chunk of positions per workgroup) when x is readable in vectors and
// the groups fit it, else the scalar one. chunk_positions > 0 fixes P (group_moments:
// one row); else P ≈ kVecChunkValues / R (vector) or kChunkValues / cg (scalar).
struct StatsPlan {
  bool vec = false;
  int64_t per_chunk = 1;  // P
};
StatsPlan stats_plan(int64_t real, int64_t groups, bool x_vec, int64_t chunk_positions) {
  const int64_t cg = real / groups;
  StatsPlan p;
  p.vec = x_vec && cg > 0 && real / 8 <= int64_t{kVecStatsWg} && (cg % 8 == 0 || 8 % cg == 0);
  p.per_chunk = chunk_positions > 0 ? chunk_positions
                : p.vec            ? std::max<int64_t>(1, kVecChunkValues / real)
                                   : std::max<int64_t>(1, kChunkValues / cg);
  return p;
}

// One statistics pass's operands: x (its first `real` channels in `groups` groups),
// the bias added on read, the plan, in_scale, and the band (positions per window; 0:
// one window over everything).
struct StatsPass {
  ValueId x, bias;
  int64_t real, groups;
  StatsPlan plan;
  float in_scale;
  int64_t band_positions;
};

// Dispatches norm_act_stats{,_vec}.comp: (mean, M2) per (image, group, chunk) to
// `partial` (slot (n·G + g)·⌈S/P⌉ + chunk). Windows of whole chunks, about one band
// each (at least one chunk), so a window never splits a chunk and banded statistics
// are those of one dispatch.
Status dispatch_group_stats(Lowering& l, const Node& node, const StatsPass& s, runtime::BindingDesc partial) {
  const ValueId x = s.x, bias = s.bias;
  const Shape& xs = l.shape(x);
  const int64_t spatial = l.type(x).elements() / (xs[0] * xs[1]);
  const int64_t groups = s.groups, cg = s.real / groups, per_chunk = s.plan.per_chunk;
  const int64_t per_seg = (spatial + per_chunk - 1) / per_chunk;
  const bool banded = s.band_positions > 0, x16 = l.storage(x) == DType::f16;
  if (static_cast<uint64_t>(spatial * cg) > UINT32_MAX)
    return l.fail(node, fmt::format("{} values per group exceed the kernels' 32-bit indexing", spatial * cg));
  STRATA_ASSIGN_OR_RETURN(ImageStrides sx, image_strides(l, node, x));
  Defines defines = {{"HAS_BIAS", bias == kNoValue ? "0" : "1"}};
  if (bias != kNoValue) add_type_define(defines, "BI_T", l.storage(bias));
  if (s.plan.vec) {
    defines["CG"] = std::to_string(cg);
    defines["U"] = std::to_string(kVecStatsRows);
    defines["X16"] = x16 ? "1" : "0";
    if (x16) defines["F16"] = "1";
  } else {
    defines["CH_FAST"] = sx.c == 1 ? "1" : "0";
    add_type_define(defines, "X_T", l.storage(x));
  }
  const uint32_t wg = s.plan.vec ? kVecStatsWg : kStatsWg;
  KernelKey key;
  key.file = s.plan.vec ? "norm_act_stats_vec.comp" : "norm_act_stats.comp";
  key.defines = std::move(defines);
  key.defines["WG"] = std::to_string(wg);
  key.bindings = 2 + (bias != kNoValue);
  key.push_constant_bytes = (s.plan.vec ? 14 : 13) * 4;
  key.workgroup_size = {wg, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));

  const int64_t parts_per_window = banded ? std::max<int64_t>(1, s.band_positions / per_chunk) : per_seg;
  // Which slots each window writes, for ranks that split the windows (rank_split.h).
  if (banded && parts_per_window < per_seg) l.record_stats_windows(node, xs[0] * groups, per_seg, parts_per_window);
  const uint32_t cols = static_cast<uint32_t>(s.real / 8), lanes = s.plan.vec ? kVecStatsWg / cols : 0;
  for (int64_t part0 = 0, i = 0, n = (per_seg + parts_per_window - 1) / parts_per_window; part0 < per_seg;
       part0 += parts_per_window, ++i) {
    const int64_t parts = std::min(parts_per_window, per_seg - part0);
    // Workgroups: one per (image, chunk) in the vector pass, per (image, group, chunk)
    // in the scalar one.
    const int64_t window_chunks = (banded ? 1 : xs[0]) * (s.plan.vec ? 1 : groups) * (banded ? parts : per_seg);
    Lowering::ElementWindow xw{l.bind(x, Access::read), 0};
    if (banded) {
      const uint64_t ps = static_cast<uint64_t>(l.strides(x).back());
      const int64_t first = part0 * per_chunk, last = std::min(spatial, (part0 + parts) * per_chunk);
      xw = l.element_window(x, static_cast<uint64_t>(first) * ps, static_cast<uint64_t>(last - first) * ps,
                            Access::read);
    }
    PushConstants sp;
    if (s.plan.vec) {
      sp.u32(static_cast<uint32_t>(spatial)).u32(static_cast<uint32_t>(per_chunk)).u32(static_cast<uint32_t>(per_seg));
      sp.u32(static_cast<uint32_t>(window_chunks)).u32(static_cast<uint32_t>(groups));
      sp.u32(cols).u32(lanes).u32(tree_stride(lanes)).u32(sx.n).u32(sx.s);
    } else {
      sp.u32(static_cast<uint32_t>(spatial)).u32(static_cast<uint32_t>(cg)).u32(static_cast<uint32_t>(per_chunk));
      sp.u32(static_cast<uint32_t>(per_seg)).u32(static_cast<uint32_t>(window_chunks)).u32(static_cast<uint32_t>(groups));
      push(sp, sx);
    }
    sp.f32(s.in_scale);
    sp.u32(static_cast<uint32_t>(part0)).u32(static_cast<uint32_t>(banded ? parts : per_seg)).u32(xw.base);
    std::vector<runtime::BindingDesc> sb = {xw.binding};
    if (bias != kNoValue) sb.push_back(l.bind(bias, Access::read));
    sb.push_back(partial);
    const std::string step = n == 1 ? std::string("stats") : fmt::format("stats {}/{}", i + 1, n);
    STRATA_RETURN_IF_ERROR(l.check_ranges(node, sb, step));
    l.dispatch(pipe, std::move(sb), sp, l.grid_1d(static_cast<uint64_t>(window_chunks) * wg, wg), node, step);
  }
  return Status::ok();
}

}  // namespace

Status lower_group_moments(Lowering& l, const Node& node) {
  if (node.op != Op::group_moments) return l.fail(node, "lower_group_moments handles group_moments only");
  const ValueId x = node.inputs[0], y = node.outputs[0];
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {y}));
  const Shape& xs = l.shape(x);
  const int64_t c = xs[1], rows = xs[2], width = xs[3], groups = node.attrs.get_int("groups");
  STRATA_ASSIGN_OR_RETURN(ImageStrides sx, image_strides(l, node, x));
  const bool x_vec = c % 8 == 0 && vector_layout(l, x, sx);
  const int64_t band = Lowering::band_rows(node, rows);
  if (band < rows && !l.rows_contiguous(x))
    return l.fail(node, fmt::format("band_rows needs row-contiguous x; x is {} {}", shape_str(xs),
                                    layout_str(l.type(x).layout)));
  if (band < rows) l.record_bands(node, rows, band);
  // One chunk per row: partial slot g·R + r is y[g, r].
  const StatsPass pass{x,      kNoValue,
                       c,      groups,
                       stats_plan(c, groups, x_vec, width),
                       static_cast<float>(node.attrs.get_float("in_scale", 1.0)),
                       band < rows ? band * width : 0};
  return dispatch_group_stats(l, node, pass, l.bind(y, Access::write));
}

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

  // Vector variants (see the header): x readable and y writable as 8-slot vectors.
  const bool x16 = l.storage(x) == DType::f16, y16 = l.storage(y) == DType::f16;
  const bool x_vec = real > 0 && real % 8 == 0 && vector_layout(l, x, sx);
  const bool out_vec = x_vec && slots % 8 == 0 && vector_layout(l, y, sy) && vector_param(l, gamma) &&
                       vector_param(l, beta) && vector_param(l, bias);
  Defines vec_out = {{"HAS_BETA", beta == kNoValue ? "0" : "1"},
                     {"HAS_BIAS", bias == kNoValue ? "0" : "1"},
                     {"SILU", silu ? "1" : "0"},
                     {"ROUND", round_define(l.type(y).dtype)},
                     {"X16", x16 ? "1" : "0"},
                     {"Y16", y16 ? "1" : "0"}};
  if (x16 || y16) vec_out["F16"] = "1";

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
  // Bindings of x and y for window i (the whole values when not banded).
  auto xy_windows = [&](size_t i) {
    std::pair<Lowering::ElementWindow, Lowering::ElementWindow> w{{l.bind(x, Access::read), 0},
                                                                  {l.bind(y, Access::write), 0}};
    if (banded) {
      w.first = position_window(x, windows[i], Access::read);
      w.second = position_window(y, windows[i], Access::write);
    }
    return w;
  };
  auto params = [&](std::vector<runtime::BindingDesc>& b) {
    b.push_back(l.bind(gamma, Access::read));
    if (beta != kNoValue) b.push_back(l.bind(beta, Access::read));
    if (bias != kNoValue) b.push_back(l.bind(bias, Access::read));
  };

  if (norm == "rms") {
    const bool vec = out_vec && slots <= int64_t{8} * kVecRmsWg;
    const uint32_t wg = vec ? kVecRmsWg : kApplyWg;
    const uint32_t yvecs = static_cast<uint32_t>(slots / 8), per_group = vec ? wg / yvecs : 0;
    Defines vec_rms = vec_out;
    vec_rms["YV"] = std::to_string(yvecs);
    vec_rms["YS"] = std::to_string(tree_stride(yvecs));
    const KernelKey key = vec ? key_for("norm_act_rms_vec.comp", wg, 3 + optional, 12, vec_rms)
                              : key_for("norm_act_rms.comp", wg, 3 + optional, 15, out_defines);
    STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));
    for (size_t i = 0; i < windows.size(); ++i) {
      const uint64_t positions = banded ? static_cast<uint64_t>(windows[i].count) : static_cast<uint64_t>(xs[0] * spatial);
      const uint64_t per_image = banded ? positions : static_cast<uint64_t>(spatial);
      auto [xw, yw] = xy_windows(i);
      PushConstants p;
      p.u32(static_cast<uint32_t>(positions)).u32(static_cast<uint32_t>(per_image));
      if (vec) {
        p.u32(static_cast<uint32_t>(real / 8)).u32(sx.n).u32(sx.s).u32(sy.n).u32(sy.s);
      } else {
        p.u32(static_cast<uint32_t>(slots)).u32(static_cast<uint32_t>(real));
        push(p, sx);
        push(p, sy);
      }
      p.f32(in_scale).f32(static_cast<float>(a.get_float("eps", 1e-12)));
      p.f32(static_cast<float>(std::sqrt(static_cast<double>(real))));
      p.u32(xw.base).u32(yw.base);
      std::vector<runtime::BindingDesc> b = {xw.binding};
      params(b);
      b.push_back(yw.binding);
      const std::string step = windows.size() == 1 ? "" : step_name("band", i);
      STRATA_RETURN_IF_ERROR(l.check_ranges(node, b, step));
      const uint64_t invocations = vec ? (positions + per_group - 1) / per_group * wg : positions;
      l.dispatch(pipe, std::move(b), p, l.grid_1d(invocations, wg), node, step);
    }
    return Status::ok();
  }
  if (norm != "group") return l.fail(node, "norm '" + norm + "' has no kernel");

  // Chunks of P positions per (image, group) segment: × cg channels in the scalar
  // statistics pass, × all R channels (all groups at once) in the vector pass.
  const int64_t groups = a.get_int("groups"), cg = real / groups;
  const bool given = node.inputs.size() > 4 && node.inputs[4] != kNoValue;  // stats operand
  const StatsPlan sp = stats_plan(real, groups, x_vec, 0);
  const int64_t per_chunk = sp.per_chunk;
  const int64_t per_seg = (spatial + per_chunk - 1) / per_chunk, segments = xs[0] * groups;
  if (static_cast<uint64_t>(spatial * cg) > UINT32_MAX)
    return l.fail(node, fmt::format("{} values per group exceed the kernels' 32-bit indexing", spatial * cg));
  const Location stats = given ? Location{} : l.scratch(node, static_cast<uint64_t>(segments) * 8);  // (mean, rstd)
  const bool ch_fast_y = sy.c == 1;
  out_defines["CH_FAST"] = ch_fast_y ? "1" : "0";
  Defines vec_apply = vec_out;
  vec_apply["CG"] = std::to_string(cg);
  vec_apply["U"] = std::to_string(kVecApplyVectors);
  vec_apply["YV"] = std::to_string(slots / 8);
  // Dense: x and y have the same slots and no gaps, so vector i is at element 8·i of both.
  const bool dense = int64_t{sx.s} == slots && int64_t{sy.s} == slots && int64_t{sx.n} == spatial * slots &&
                     int64_t{sy.n} == spatial * slots;
  vec_apply["DENSE"] = dense ? "1" : "0";
  const KernelKey apply_key = out_vec ? key_for("norm_act_apply_vec.comp", kVecApplyWg, 4 + optional, 11, vec_apply)
                                      : key_for("norm_act_apply.comp", kApplyWg, 4 + optional, 15, out_defines);
  STRATA_ASSIGN_OR_RETURN(uint32_t apply_pipe, l.pipeline(apply_key));
  const uint32_t cols = static_cast<uint32_t>(real / 8);

  if (!given) {
    const Location partial = l.scratch(node, static_cast<uint64_t>(xs[0] * groups * per_seg) * 8);  // (mean, M2)
    STRATA_RETURN_IF_ERROR(dispatch_group_stats(l, node, {x, bias, real, groups, sp, in_scale, banded ? band_positions : 0},
                                                Lowering::bind_scratch(partial, Access::write)));
    STRATA_ASSIGN_OR_RETURN(uint32_t reduce_pipe,
                            l.pipeline(key_for("group_norm_reduce.comp", kStatsWg, 2, 4,
                                               {{"CHUNK", std::to_string(per_chunk * cg)}})));
    PushConstants rp;
    rp.u32(static_cast<uint32_t>(segments)).u32(static_cast<uint32_t>(spatial * cg));
    rp.u32(static_cast<uint32_t>(per_seg)).f32(static_cast<float>(a.get_float("eps")));
    l.dispatch(reduce_pipe, {Lowering::bind_scratch(partial, Access::read), Lowering::bind_scratch(stats, Access::write)},
               rp, l.grid_1d(static_cast<uint64_t>(segments) * kStatsWg, kStatsWg), node, "reduce");
  }

  for (size_t i = 0; i < windows.size(); ++i) {
    const int64_t per_image = banded ? windows[i].count : spatial;
    const uint64_t total = static_cast<uint64_t>((banded ? 1 : xs[0]) * per_image * slots);
    auto [xw, yw] = xy_windows(i);
    PushConstants ap;
    if (out_vec) {
      ap.u32(static_cast<uint32_t>(total / 8)).u32(static_cast<uint32_t>(per_image));
      ap.u32(cols).u32(static_cast<uint32_t>(groups)).u32(sx.n).u32(sx.s).u32(sy.n).u32(sy.s);
    } else {
      ap.u32(static_cast<uint32_t>(total)).u32(static_cast<uint32_t>(per_image)).u32(static_cast<uint32_t>(slots));
      ap.u32(static_cast<uint32_t>(real)).u32(static_cast<uint32_t>(cg)).u32(static_cast<uint32_t>(groups));
      push(ap, sx);
      push(ap, sy);
    }
    ap.f32(in_scale);
    ap.u32(xw.base).u32(yw.base);
    std::vector<runtime::BindingDesc> ab = {
        xw.binding, given ? l.bind(node.inputs[4], Access::read) : Lowering::bind_scratch(stats, Access::read)};
    params(ab);
    ab.push_back(yw.binding);
    const std::string step = step_name("apply", i);
    STRATA_RETURN_IF_ERROR(l.check_ranges(node, ab, step));
    if (out_vec)
      l.dispatch(apply_pipe, std::move(ab), ap,
                 l.grid_1d((total / 8 + kVecApplyVectors - 1) / kVecApplyVectors, kVecApplyWg), node, step);
    else
      l.dispatch(apply_pipe, std::move(ab), ap, l.grid_1d(total, kApplyWg), node, step);
  }
  return Status::ok();
}

}  // namespace strata::codegen

// lower_norm: group_norm, rms_norm, layer_norm and token_rms_norm ->
// kernels/{group_norm_*,rms_norm,layer_norm}.comp.
//
//   group_norm  three passes over x viewed as N·G contiguous (n, group) segments cut
//               into chunks of kChunk elements: group_norm_stats (Welford per chunk,
//               (mean, M2) to scratch), group_norm_reduce (Chan merge per segment,
//               (mean, rstd) to scratch), group_norm_apply (normalise, γ, β). Scratch
//               comes from Lowering::scratch. Measured against the interpreter's f64
//               statistics: ~1e-7 of the output's magnitude on x = 3 + N(0, 1); the
//               limit is the f32 rounding of the mean, ulp(mean)/2 in units of the std.
//   rms_norm    an invocation per position (rms_norm.comp), Kahan-summed squares.
//   layer_norm  a workgroup per row (rows of 512 or more) or per 128 / LANES rows,
//               exact two-pass (layer_norm.comp).
//   token_rms_norm  layer_norm.comp with RMS = 1: the same row kernel without the mean,
//               and with its fused mul and residual (passes/fuse_token_norm.cpp).
//               Where its result is read by W8A8 linears (the transformers' q, k, v
//               after attention_norm1, w1 and w3 after ffn_norm1), it also writes their
//               int8 rows (QUANT: the values y holds, quantized as quantize_rows.comp
//               does), held in scratch memory until the last of them is lowered
//               (Lowering::hold_scratch), so that none runs a quantizer
//               (lower_gemm_int8.cpp); y itself only where something else reads it.
//               CodegenOptions::w8a8_producer_rows = false leaves the rows to the linears.
//               A per-head norm (x [T, H, D]: the attention's q and k) read only by a
//               permute to [H, T, D] read only by a rope (ROPE) writes the rope's
//               result itself, rotated as rope.comp rotates the f16 values the norm
//               would store; the permute and the rope are absorbed (no dispatch). That
//               result is written earlier than the memory plan placed it for, so it
//               moves to scratch memory held until its last reader (the attention).
//               CodegenOptions::norm_rope = false keeps the three.
//   Both read rows as 4-vectors where C and the windows allow (VEC 4).
//
// Large tensors: every pass binds windows of x and y (a run of whole chunks / samples
// / rows starting at an aligned offset, the kernel told where its first element is),
// so a tensor larger than the target's storage-buffer range is split over several
// dispatches with identical arithmetic. Only a unit that alone exceeds the range (an
// rms_norm sample, a layer_norm row) is an error naming the node.
#include "codegen/lowering.h"
#include "codegen/storage.h"
#include "codegen/w8a8.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

namespace strata::codegen {
namespace {

using runtime::Access;

constexpr uint32_t kStatsWg = 256;     // group_norm_{stats,reduce,apply}.comp invocations
constexpr uint32_t kChunk = 4096;      // elements per group_norm chunk (a multiple of kStatsWg)
constexpr uint32_t kRmsWg = 64;        // rms_norm.comp invocations
constexpr uint32_t kLayerNormWg = 128; // layer_norm.comp invocations

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }




// x and y windows over the same elements share one base (values are placed at
// aligned offsets); the kernels rely on it.
Status check_same_base(const Lowering& l, const Node& node, const Lowering::ElementWindow& a, const Lowering::ElementWindow& b) {
  if (a.base == b.base) return Status::ok();
  return l.fail(node, fmt::format("input and output windows are misaligned ({} vs {} elements past the offset)",
                                  a.base, b.base));
}

// A run of consecutive units (chunks, samples, rows) one dispatch covers.
struct Run {
  uint64_t first = 0, count = 0;
};

// Splits `units` units of `unit_elems` contiguous elements each into runs whose
// windows fit the storage-buffer range. Empty if a single unit does not fit.
std::vector<Run> split_uniform(const Lowering& l, uint64_t units, uint64_t unit_elems) {
  const uint64_t range = l.target().max_storage_buffer_range, align = l.offset_alignment();
  std::vector<Run> runs;
  for (uint64_t u = 0; u < units;) {
    const uint64_t start = u * unit_elems * 4 / align * align;
    const uint64_t end = std::min(units, (start + range) / (unit_elems * 4));
    if (end <= u) return {};
    runs.push_back({u, end - u});
    u = end;
  }
  return runs;
}

// Type defines of a norm kernel's operands (X_T, G_T, BE_T, Y_T; absent ones
// skipped) and the output's ROUND.
void add_operand_types(const Lowering& l, KernelKey& key, ValueId x, ValueId gamma, ValueId beta, ValueId y) {
  add_type_define(key.defines, "X_T", l.storage(x));
  if (gamma != kNoValue) add_type_define(key.defines, "G_T", l.storage(gamma));
  if (beta != kNoValue) add_type_define(key.defines, "BE_T", l.storage(beta));
  add_type_define(key.defines, "Y_T", l.storage(y));
  key.defines["ROUND"] = round_define(l.type(y).dtype);
}

Status too_large(const Lowering& l, const Node& node, const std::string& what, uint64_t bytes) {
  return l.fail(node, fmt::format("{} ({} bytes) exceeds the storage-buffer range {} (needs banding)", what, bytes,
                                  l.target().max_storage_buffer_range));
}

// ---- group_norm ----------------------------------------------------------------

// The chunking of a group_norm: segment s = (n, g) holds seg_len elements from
// s·seg_len; its chunk p holds min(kChunk, seg_len - p·kChunk) elements from p·kChunk.
struct GroupChunks {
  uint64_t segments = 0, seg_len = 0, per_seg = 0;
  uint64_t total() const { return segments * per_seg; }
  uint64_t begin(uint64_t c) const { return (c / per_seg) * seg_len + (c % per_seg) * kChunk; }
  uint64_t end(uint64_t c) const { return begin(c) + std::min<uint64_t>(kChunk, seg_len - (c % per_seg) * kChunk); }
};

// Runs of whole chunks whose element windows fit the range (the largest run from
// each start, found by bisection: a chunk's end grows with its index). Empty if a
// single chunk does not fit.
std::vector<Run> split_chunks(const Lowering& l, const GroupChunks& g) {
  const uint64_t range = l.target().max_storage_buffer_range, align = l.offset_alignment();
  std::vector<Run> runs;
  for (uint64_t c = 0; c < g.total();) {
    const uint64_t start = g.begin(c) * 4 / align * align;
    if (g.end(c) * 4 - start > range) return {};
    uint64_t lo = c + 1, hi = g.total();  // the run [c, lo) fits; find the largest
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      if (g.end(mid - 1) * 4 - start <= range) lo = mid;
      else hi = mid - 1;
    }
    runs.push_back({c, lo - c});
    c = lo;
  }
  return runs;
}

Status lower_group_norm(Lowering& l, const Node& node) {
  if (node.inputs.size() > 3 && node.inputs[3] != kNoValue)
    return l.fail(node, "group_norm with given statistics runs as norm_act (passes/fuse_norm_act)");
  const ValueId x = node.inputs[0], gamma = node.inputs[1], beta = node.inputs[2], y = node.outputs[0];
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {x, gamma, beta, y}));
  const Shape& xs = l.shape(x);
  const int64_t groups = node.attrs.get_int("groups");
  const uint64_t n = xs[0], c = xs[1];
  const uint64_t elems = num_elements(xs);
  if (elems == 0) return Status::ok();
  const uint64_t spatial = elems / (n * c), cg = c / groups;

  GroupChunks g;
  g.segments = n * groups;
  g.seg_len = cg * spatial;
  g.per_seg = ceil_div(g.seg_len, kChunk);
  if (g.seg_len > UINT32_MAX || g.total() > UINT32_MAX)
    return l.fail(node, fmt::format("{} elements per group exceed the kernels' 32-bit indexing", g.seg_len));
  const std::vector<Run> runs = split_chunks(l, g);
  if (runs.empty()) return too_large(l, node, "a group-norm chunk", kChunk * 4);

  const Location partial = l.scratch(node, g.total() * 8);  // (mean, M2) per chunk
  const Location stats = l.scratch(node, g.segments * 8);   // (mean, rstd) per segment
  const std::map<std::string, std::string> defines = {{"WG", std::to_string(kStatsWg)},
                                                      {"CHUNK", std::to_string(kChunk)}};
  auto key_for = [&](const char* file, uint32_t bindings, uint32_t push_words) {
    KernelKey key;
    key.file = file;
    key.defines = defines;
    key.bindings = bindings;
    key.push_constant_bytes = push_words * 4;
    key.workgroup_size = {kStatsWg, 1, 1};
    return key;
  };
  KernelKey stats_key = key_for("group_norm_stats.comp", 2, 5), apply_key = key_for("group_norm_apply.comp", 5, 8);
  add_type_define(stats_key.defines, "X_T", l.storage(x));
  add_operand_types(l, apply_key, x, gamma, beta, y);
  STRATA_ASSIGN_OR_RETURN(uint32_t stats_pipe, l.pipeline(stats_key));
  STRATA_ASSIGN_OR_RETURN(uint32_t reduce_pipe, l.pipeline(key_for("group_norm_reduce.comp", 2, 4)));
  STRATA_ASSIGN_OR_RETURN(uint32_t apply_pipe, l.pipeline(apply_key));

  for (const Run& run : runs) {
    const uint64_t first = g.begin(run.first), count = g.end(run.first + run.count - 1) - first;
    const Lowering::ElementWindow xw = l.element_window(x, first, count, Access::read);
    PushConstants push;
    push.u32(static_cast<uint32_t>(g.seg_len)).u32(static_cast<uint32_t>(g.per_seg));
    push.u32(static_cast<uint32_t>(run.first)).u32(static_cast<uint32_t>(run.count)).u32(xw.base);
    l.dispatch(stats_pipe, {xw.binding, Lowering::bind_scratch(partial, Access::write)}, push,
               l.grid_1d(run.count * kStatsWg, kStatsWg), node, "stats");
  }

  PushConstants reduce_push;
  reduce_push.u32(static_cast<uint32_t>(g.segments)).u32(static_cast<uint32_t>(g.seg_len));
  reduce_push.u32(static_cast<uint32_t>(g.per_seg)).f32(static_cast<float>(node.attrs.get_float("eps")));
  l.dispatch(reduce_pipe,
             {Lowering::bind_scratch(partial, Access::read), Lowering::bind_scratch(stats, Access::write)},
             reduce_push, l.grid_1d(g.segments * kStatsWg, kStatsWg), node, "reduce");

  for (const Run& run : runs) {
    const uint64_t first = g.begin(run.first), count = g.end(run.first + run.count - 1) - first;
    const Lowering::ElementWindow xw = l.element_window(x, first, count, Access::read);
    const Lowering::ElementWindow yw = l.element_window(y, first, count, Access::write);
    STRATA_RETURN_IF_ERROR(check_same_base(l, node, xw, yw));
    PushConstants push;
    push.u32(static_cast<uint32_t>(g.seg_len)).u32(static_cast<uint32_t>(g.per_seg));
    push.u32(static_cast<uint32_t>(run.first)).u32(static_cast<uint32_t>(run.count)).u32(xw.base);
    push.u32(static_cast<uint32_t>(groups)).u32(static_cast<uint32_t>(cg)).u32(static_cast<uint32_t>(spatial));
    l.dispatch(apply_pipe,
               {xw.binding, Lowering::bind_scratch(stats, Access::read), l.bind(gamma, Access::read),
                l.bind(beta, Access::read), yw.binding},
               push, l.grid_1d(run.count * kStatsWg, kStatsWg), node, "apply");
  }
  return Status::ok();
}

// ---- rms_norm ------------------------------------------------------------------

Status lower_rms_norm(Lowering& l, const Node& node) {
  const ValueId x = node.inputs[0], gamma = node.inputs[1], y = node.outputs[0];
  const ValueId beta = node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {x, gamma, beta, y}));
  const Shape& xs = l.shape(x);
  const uint64_t elems = num_elements(xs);
  if (elems == 0) return Status::ok();
  const uint64_t n = xs[0], c = xs[1], spatial = elems / (n * c);
  const std::vector<Run> runs = split_uniform(l, n, c * spatial);
  if (runs.empty()) return too_large(l, node, "one sample of rms_norm input", c * spatial * 4);

  KernelKey key;
  key.file = "rms_norm.comp";
  key.defines = {{"WG", std::to_string(kRmsWg)}, {"HAS_BETA", beta == kNoValue ? "0" : "1"}};
  add_operand_types(l, key, x, gamma, beta, y);
  key.bindings = beta == kNoValue ? 3 : 4;
  key.push_constant_bytes = 6 * 4;
  key.workgroup_size = {kRmsWg, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));

  const float eps = static_cast<float>(node.attrs.get_float("eps", 1e-12));
  for (const Run& run : runs) {
    const uint64_t first = run.first * c * spatial, count = run.count * c * spatial;
    const Lowering::ElementWindow xw = l.element_window(x, first, count, Access::read);
    const Lowering::ElementWindow yw = l.element_window(y, first, count, Access::write);
    STRATA_RETURN_IF_ERROR(check_same_base(l, node, xw, yw));
    PushConstants push;
    push.u32(static_cast<uint32_t>(c)).u32(static_cast<uint32_t>(spatial));
    push.u32(static_cast<uint32_t>(run.count * spatial)).u32(xw.base);
    push.f32(eps).f32(static_cast<float>(std::sqrt(double(c))));
    std::vector<runtime::BindingDesc> bindings = {xw.binding, l.bind(gamma, Access::read)};
    if (beta != kNoValue) bindings.push_back(l.bind(beta, Access::read));
    bindings.push_back(yw.binding);
    l.dispatch(pipe, std::move(bindings), push, l.grid_1d(run.count * spatial, kRmsWg), node);
  }
  return Status::ok();
}

// ---- layer_norm ----------------------------------------------------------------

// The permute {1, 0, 2} and the rope after a per-head token norm writing y (x [T, H, D],
// no mul or residual), where nothing else reads their results and the rope's result is
// stored as y is and row-major.
struct RopeAfter {
  const Node* permute = nullptr;
  const Node* rope = nullptr;
  const Node* last = nullptr;  // the last node reading the rope's result
};
std::optional<RopeAfter> rope_after(const Lowering& l, const Node& node, ValueId x, ValueId y) {
  if (!l.options().norm_rope || node.inputs.size() > 2 || l.shape(x).size() != 3) return std::nullopt;
  const Node* permute = l.sole_reader(y);
  if (!permute || permute->op != Op::permute || permute->attrs.get_ints("perm") != std::vector<int64_t>{1, 0, 2})
    return std::nullopt;
  const Node* rope = l.sole_reader(permute->outputs[0]);
  if (!rope || rope->op != Op::rope || rope->inputs[0] != permute->outputs[0]) return std::nullopt;
  const ValueId r = rope->outputs[0], cos = rope->inputs[1], sin = rope->inputs[2];
  const Shape& xs = l.shape(x);
  const Shape table{xs[0], xs[2] / 2};
  if (l.shape(cos) != table || l.shape(sin) != table || l.storage(cos) != l.storage(sin)) return std::nullopt;
  for (ValueId v : {permute->outputs[0], r})
    if (l.storage(v) != l.storage(y) || l.type(v).dtype != l.type(y).dtype || !is_row_major(l.type(v)))
      return std::nullopt;
  for (ValueId v : {r, cos, sin})
    if (l.location(v).offset % 16 != 0 || l.location(v).bytes > l.target().max_storage_buffer_range)
      return std::nullopt;
  // r is written where the norm runs, before the rope, where the memory plan may have
  // given its bytes to values in use until then: it moves to scratch memory held until
  // its last reader (lower_layer_norm), and cannot be a graph output.
  for (ValueId out : l.graph().outputs())
    if (out == r) return std::nullopt;
  const Node* last = nullptr;
  for (const Node& n : l.graph().nodes())
    for (ValueId in : n.inputs)
      if (in == r) last = &n;
  if (!last) return std::nullopt;
  return RopeAfter{permute, rope, last};
}

// layer_norm and token_rms_norm (RMS = 1: no mean, no beta; its fused mul and
// residual operands, passes/fuse_token_norm.cpp).
Status lower_layer_norm(Lowering& l, const Node& node) {
  const bool rms = node.op == Op::token_rms_norm;
  auto operand = [&](size_t i) { return node.inputs.size() > i ? node.inputs[i] : kNoValue; };
  const ValueId x = node.inputs[0], y = node.outputs[0], gamma = operand(1);
  const ValueId beta = rms ? kNoValue : operand(2), mul = rms ? operand(2) : kNoValue, res = rms ? operand(3) : kNoValue;
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {x, gamma, beta, mul, res, y}));
  const Shape& xs = l.shape(x);
  const uint64_t elems = num_elements(xs);
  if (elems == 0) return Status::ok();
  const uint64_t cols = xs.back(), rows = elems / cols;
  const std::vector<Run> runs = split_uniform(l, rows, cols);
  if (runs.empty()) return too_large(l, node, rms ? "one token_rms_norm row" : "one layer_norm row", cols * 4);

  const bool has_gamma = gamma != kNoValue, has_beta = beta != kNoValue, has_mul = mul != kNoValue,
             has_res = res != kNoValue;
  const bool mul_row = has_mul && static_cast<uint64_t>(num_elements(l.shape(mul))) == cols;
  if (has_mul && !mul_row && l.shape(mul) != xs)
    return l.fail(node, fmt::format("the mul operand {} is neither a row of {} nor x's shape", shape_str(l.shape(mul)),
                                    cols));
  // 4-vectors (layer_norm.comp VEC): C a multiple of 4, each run's windows starting
  // on a whole vector at 16-byte offsets, and at most kMaxVectorsPerLane per lane.
  constexpr uint64_t kMaxVectorsPerLane = 16;
  bool vec = cols % 4 == 0 && ceil_div(cols / 4, kLayerNormWg) <= kMaxVectorsPerLane;
  auto aligned = [](const runtime::BindingDesc& b) { return b.offset % 16 == 0; };
  for (const Run& run : runs) {
    if (!vec) break;
    for (ValueId v : {x, mul_row ? kNoValue : mul, res, y}) {
      if (v == kNoValue) continue;
      const Lowering::ElementWindow w = l.element_window(v, run.first * cols, run.count * cols, Access::read);
      vec = vec && w.base % 4 == 0 && aligned(w.binding);
    }
  }
  for (ValueId v : {gamma, beta, mul_row ? mul : kNoValue})
    if (v != kNoValue) vec = vec && aligned(l.bind(v, Access::read));
  // The int8 rows of y's W8A8 readers: one dispatch of whole rows as 4-vectors,
  // binding the rows whole as the linears do.
  const W8A8RowReaders readers =
      rms && l.options().w8a8_producer_rows ? w8a8_row_readers(l.graph(), y) : W8A8RowReaders{};
  const uint64_t q_bytes = w8a8_rows_bytes(static_cast<int64_t>(rows), static_cast<int64_t>(cols));
  const bool quant = readers.last != nullptr && vec && runs.size() == 1 &&
                     (l.storage(y) == DType::f16 || l.storage(y) == DType::f32) &&
                     q_bytes <= l.target().max_storage_buffer_range;
  const bool write_y = !quant || readers.others;
  const std::optional<RopeAfter> rope =
      rms && vec && runs.size() == 1 && !quant ? rope_after(l, node, x, y) : std::nullopt;
  // Lanes per row: about 4 elements (or 4-vectors) each for short rows, at least 8
  // lanes (rows of 128 as vectors: 8 lanes, 16 rows per workgroup), all 128 for rows
  // of more than 512 elements (more than 1024 as vectors): one row per workgroup.
  const uint64_t units = vec ? cols / 4 : cols;
  uint32_t lanes = 8;
  while (lanes < kLayerNormWg && lanes * 4 < units) lanes *= 2;
  const uint32_t rows_per_group = kLayerNormWg / lanes;
  KernelKey key;
  key.file = "layer_norm.comp";
  key.defines = {{"WG", std::to_string(kLayerNormWg)},
                 {"HAS_GAMMA", has_gamma ? "1" : "0"},
                 {"HAS_BETA", has_beta ? "1" : "0"}};
  if (lanes < kLayerNormWg) key.defines["LANES"] = std::to_string(lanes);
  if (rms) key.defines["RMS"] = "1";
  add_operand_types(l, key, x, gamma, beta, y);
  if (has_mul) {
    key.defines["HAS_MUL"] = "1";
    key.defines["MUL_ROW"] = mul_row ? "1" : "0";
    add_type_define(key.defines, "M_T", l.storage(mul));
  }
  if (has_res) {
    key.defines["HAS_RES"] = "1";
    add_type_define(key.defines, "R_T", l.storage(res));
  }
  if (vec) {
    key.defines["VEC"] = "4";
    key.defines["NV"] = std::to_string(ceil_div(units, lanes));
    add_vec4_type_define(key.defines, "X_V", l.storage(x));
    add_vec4_type_define(key.defines, "Y_V", l.storage(y));
    if (has_gamma) add_vec4_type_define(key.defines, "G_V", l.storage(gamma));
    if (has_beta) add_vec4_type_define(key.defines, "BE_V", l.storage(beta));
    if (has_mul) add_vec4_type_define(key.defines, "M_V", l.storage(mul));
    if (has_res) add_vec4_type_define(key.defines, "R_V", l.storage(res));
  }
  if (rope) {
    key.defines["ROPE"] = "1";
    key.defines["T_V2"] = l.storage(rope->rope->inputs[1]) == DType::f16 ? "f16vec2" : "vec2";
  }
  if (quant) {
    key.defines["QUANT"] = "1";
    key.defines["W8A8_CODES"] = "1";
    if (!write_y) key.defines["WRITE_Y"] = "0";
  }
  key.bindings = 1 + has_gamma + has_beta + has_mul + has_res + 2 * rope.has_value() + write_y + quant;
  key.push_constant_bytes = (4 + quant + 2 * rope.has_value()) * 4;
  key.workgroup_size = {kLayerNormWg, 1, 1};
  STRATA_ASSIGN_OR_RETURN(uint32_t pipe, l.pipeline(key));

  const float eps = static_cast<float>(node.attrs.get_float("eps", 1e-5));
  if (rope) {
    const ValueId r = rope->rope->outputs[0];
    l.set_location(r, l.hold_scratch(node, l.location(r).bytes, fmt::format("rotated heads of value {}", r),
                                     *rope->last));
  }
  const Location q_rows = quant ? l.hold_scratch(node, q_bytes, w8a8_rows_name(y), *readers.last) : Location{};
  for (const Run& run : runs) {
    const Lowering::ElementWindow xw = l.element_window(x, run.first * cols, run.count * cols, Access::read);
    const Lowering::ElementWindow yw = l.element_window(y, run.first * cols, run.count * cols, Access::write);
    STRATA_RETURN_IF_ERROR(check_same_base(l, node, xw, yw));
    PushConstants push;
    push.u32(static_cast<uint32_t>(cols)).u32(static_cast<uint32_t>(run.count)).u32(xw.base).f32(eps);
    if (quant) push.u32(static_cast<uint32_t>(w8a8_padded_k(static_cast<int64_t>(cols)) / 4));
    if (rope) push.u32(static_cast<uint32_t>(xs[0])).u32(static_cast<uint32_t>(xs[1]));
    std::vector<runtime::BindingDesc> bindings = {xw.binding};
    if (has_gamma) bindings.push_back(l.bind(gamma, Access::read));
    if (has_beta) bindings.push_back(l.bind(beta, Access::read));
    for (ValueId v : {mul, res}) {
      if (v == kNoValue) continue;
      if (v == mul && mul_row) {
        bindings.push_back(l.bind(v, Access::read));
        continue;
      }
      const Lowering::ElementWindow w = l.element_window(v, run.first * cols, run.count * cols, Access::read);
      STRATA_RETURN_IF_ERROR(check_same_base(l, node, xw, w));
      bindings.push_back(w.binding);
    }
    if (rope) {
      bindings.push_back(l.bind(rope->rope->inputs[1], Access::read));
      bindings.push_back(l.bind(rope->rope->inputs[2], Access::read));
      bindings.push_back(l.bind(rope->rope->outputs[0], Access::write));
    } else if (write_y) {
      bindings.push_back(yw.binding);
    }
    if (quant) bindings.push_back(Lowering::bind_scratch(q_rows, Access::write));
    l.dispatch(pipe, std::move(bindings), push, l.grid_1d(ceil_div(run.count, rows_per_group) * kLayerNormWg, kLayerNormWg),
               node);
  }
  if (rope) {
    l.absorb(*rope->permute);
    l.absorb(*rope->rope);
  }
  return Status::ok();
}

}  // namespace

Status lower_norm(Lowering& l, const Node& node) {
  switch (node.op) {
    case Op::group_norm: return lower_group_norm(l, node);
    case Op::rms_norm: return lower_rms_norm(l, node);
    case Op::layer_norm:
    case Op::token_rms_norm: return lower_layer_norm(l, node);
    default: return l.fail(node, "lower_norm handles group_norm, rms_norm, layer_norm and token_rms_norm only");
  }
}

}  // namespace strata::codegen

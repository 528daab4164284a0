// fuse_frame_taps: the temporal taps of a causal video conv over a frame stack become
// one conv_gemm (ir/ops.h frame_taps), so the conv runs as one dispatch with one long
// reduction (K = taps · kh · kw · Ci) instead of one dispatch per tap, each writing
// the partial sum that the next reads back as its residual.
//
// Rewrites a chain of frame convs n_0 → n_1 → … → n_{m−1} (m ≥ 2), as a model builds
// HunyuanVideo's causal 3×3×3 conv and fuse_residual leaves it: conv_gemm nodes over
// the same x with the same frame_rows, kernel, pad, stride and gather, frame_taps 1,
// frame_shift s, s + 1, …, s + m − 1, where n_{i+1}'s residual is n_i's result and
// n_i's only reader (not a graph output), and only n_0 may have a bias or a residual
// of its own. They become one conv_gemm at n_{m−1}'s place writing its result: x, the
// weight [Co, Ci, m·kh, kw] whose tap t (kernel rows t·kh …) is n_{m−1−t}'s weight (the
// oldest frame first, as a conv3d weight is stored), n_0's bias and residual,
// frame_shift s, frame_taps m. The weight is a new constant "<n_0's weight>[taps m]"
// in ctx.weights.
//
// Runs only when CompileOptions::fuse_frame_taps is set (tensor-core targets; the
// target decides, compile/target.cpp). Requires: fuse_residual done, weights still
// "oihw" (before assign_layout), no precision attrs yet (before lower_precision).
// Preserves what the graph computes up to rounding: the fused conv sums all taps in
// one f32 accumulation (the interpreter in f64) instead of rounding each tap's partial
// sum, so results move by about one ulp of the partial sums; tests compare within a
// tolerance. Node names: the fused node keeps n_{m−1}'s.
//
// Bands: split_bands gives a fused conv's band the rows of all the frames its taps
// read (ir/band_math.h), so under a small binding limit it may not fit where a single
// tap would; the targets that fuse have 4 GiB bindings.
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <fmt/format.h>

namespace strata {
namespace {

bool has_operand(const Node& n, size_t slot) { return n.inputs.size() > slot && n.inputs[slot] != kNoValue; }

// A single-tap frame conv in the oihw layout, with no precision attributes.
bool single_tap_frame_conv(const Graph& g, const Node& n) {
  if (n.op != Op::conv_gemm || n.attrs.get_string("weight_layout", "oihw") != "oihw") return false;
  if (n.attrs.has("acc_scale") || n.attrs.has("residual_scale") || n.attrs.has("out_scale") ||
      n.attrs.has("band_rows") || n.attrs.has("dtype"))
    return false;
  const Expected<FrameGather> f = conv_frames(n.attrs);
  return f && f->on() && f->taps == 1 && g.value(n.inputs[1]).kind == ValueKind::constant;
}

// Whether `next` continues a chain ending in `prev`: the same conv over the same x one
// frame further back, with prev's result as its residual and nothing else of its own.
bool continues(const Graph& g, const Node& prev, const Node& next) {
  if (!single_tap_frame_conv(g, next) || next.inputs[0] != prev.inputs[0] || has_operand(next, 2) ||
      !has_operand(next, 3) || next.inputs[3] != prev.outputs[0])
    return false;
  for (const char* attr : {"kernel", "pad", "stride"})
    if (next.attrs.get_ints(attr, {}) != prev.attrs.get_ints(attr, {})) return false;
  if (next.attrs.get_string("gather", "plain") != prev.attrs.get_string("gather", "plain")) return false;
  const FrameGather a = *conv_frames(prev.attrs), b = *conv_frames(next.attrs);
  return a.rows == b.rows && b.shift == a.shift + 1;
}

// The fused weight: tap t (rows t·kh …) is chain[m − 1 − t]'s weight.
Expected<ValueId> fused_weight(Graph& g, PassContext& ctx, const std::vector<size_t>& chain) {
  const size_t m = chain.size();
  const Value& first = g.value(g.nodes()[chain[0]].inputs[1]);
  const Shape s = first.type.shape;  // [Co, Ci, kh, kw]
  const int64_t co = s[0], ci = s[1], kh = s[2], kw = s[3], plane = kh * kw;
  const Shape fused{co, ci, static_cast<int64_t>(m) * kh, kw};
  const std::string name = fmt::format("{}[taps {}]", first.weight, m);
  if (!ctx.weights.contains(name)) {
    std::vector<float> dst(static_cast<size_t>(co * ci * static_cast<int64_t>(m) * plane));
    for (size_t t = 0; t < m; ++t) {
      const Value& w = g.value(g.nodes()[chain[m - 1 - t]].inputs[1]);
      if (w.type.shape != s) return error("tap weights {} and {} differ in shape", w.name, first.name);
      STRATA_ASSIGN_OR_RETURN(TensorView view, ctx.weights.get(w.weight));
      const std::vector<float> src = view.to_f32();
      if (static_cast<int64_t>(src.size()) != w.type.elements())
        return error("weight '{}' has {} elements, constant %{} expects {}", w.weight, src.size(), w.name,
                     w.type.elements());
      for (int64_t oc = 0; oc < co * ci; ++oc)  // (o, c) pairs: each holds m planes of kh·kw
        std::copy_n(src.begin() + oc * plane, plane,
                    dst.begin() + (oc * static_cast<int64_t>(m) + static_cast<int64_t>(t)) * plane);
    }
    STRATA_RETURN_IF_ERROR(ctx.weights.add_owned(name, fused, std::move(dst)));
  }
  return g.add_constant(first.name + ".taps", TensorType{fused, first.type.dtype, {}}, name);
}

}  // namespace

Status run_fuse_frame_taps(Graph& g, PassContext& ctx) {
  if (!ctx.options.fuse_frame_taps) return Status::ok();
  int64_t fused = 0, removed = 0;
  // After a fusion, index i holds the node that followed the chain's head: look again
  // there (the fused node itself has frame_taps > 1 and is skipped).
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!single_tap_frame_conv(g, g.nodes()[i])) continue;
    // Walk the chain forward through each result's only reader.
    const Uses uses = find_uses(g);
    std::vector<size_t> chain{i};
    for (;;) {
      const ValueId out = g.nodes()[chain.back()].outputs[0];
      if (uses.count(out) != 1 || uses.readers[static_cast<size_t>(out)].size() != 1) break;
      const size_t next = uses.readers[static_cast<size_t>(out)][0];
      if (!continues(g, g.nodes()[chain.back()], g.nodes()[next])) break;
      chain.push_back(next);
    }
    if (chain.size() < 2) continue;
    auto weight = fused_weight(g, ctx, chain);
    if (!weight) return weight.status().with_context(fmt::format("fusing the taps of '{}'", g.nodes()[i].name));
    const Node& head = g.nodes()[chain[0]];
    Node conv = g.nodes()[chain.back()];
    conv.inputs = head.inputs;
    conv.inputs[1] = *weight;
    FrameGather f = *conv_frames(head.attrs);
    f.taps = static_cast<int64_t>(chain.size());
    conv.attrs = head.attrs;
    conv.attrs.set("kernel", std::vector<int64_t>{f.taps * head.attrs.get_ints("kernel")[0],
                                                  head.attrs.get_ints("kernel")[1]});
    set_frames(conv.attrs, f);
    trim_operands(conv);
    std::vector<bool> dead(g.nodes().size(), false);
    for (size_t k = 0; k + 1 < chain.size(); ++k) dead[chain[k]] = true;
    g.nodes()[chain.back()] = std::move(conv);
    remove_nodes(g, dead);
    ++fused;
    removed += static_cast<int64_t>(chain.size()) - 1;
    --i;  // the loop's ++i comes back to index chain[0] = i
  }
  ctx.log.push_back(fmt::format("fuse_frame_taps: {} frame convs fused ({} tap convs removed)", fused, removed));
  return Status::ok();
}

}  // namespace strata

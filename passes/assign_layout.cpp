// assign_layout: NHWC activations, tap-major conv weights.
//
// Rewrites:
//   - Image values become Layout{nhwc, padded_channels = shape[1]}: channels
//     innermost, stored with a stride of shape[1] channels (pad_channels already made
//     the logical channel count the padded one, so nothing hides beyond the shape).
//     Image values are the rank-4, non-constant operands and results of conv_gemm (x,
//     residual, result) and norm_act (x, result), and everything joined to them through
//     ops that work per pixel or per channel: add, mul, scale, clamp, silu, gelu, cast,
//     upsample_nearest, slice, concat, and reshapes that regroup only the spatial dims
//     ([N,C,H,W] → [N,C,H',W'], H·W = H'·W': the same NHWC bytes, an alias). Constants (weights, per-channel [1,C,1,1]
//     vectors) keep their logical layout; a binary op broadcasts them by logical index.
//   - conv_gemm weights repacked from "oihw" w[Co,Ci,kh,kw] to "o_hwi" w[Co, kh·kw·Ci]
//     (column (ky·kw + kx)·Ci + ci) into a derived tensor "<orig>[o_hwi]" in
//     ctx.weights, weight_layout set to "o_hwi". The repack happens once, here; the
//     Plan's weight table uploads the derived tensor.
//
// Layout boundaries (what codegen must know): graph inputs and outputs stay logical
// (NCHW), as the host reads and writes them. Layouts change only in `reshape` nodes:
//   - after an image graph input, a relayout `reshape` to the same shape (node and value
//     "<input>.nhwc") converts it to NHWC, and every reader reads that;
//   - before an image graph output, its producer writes "<output>.nhwc" and a relayout
//     `reshape` ("<output>.to_logical") writes the logical output value;
//   - state inputs and outputs (ir/program.h) are no boundary: the host does not read
//     them, the plans of a program do. Every rank-4 state is stored NHWC, whatever
//     reads or writes it, so all plans binding a state store it alike: an image state
//     value is NHWC like any other and needs no relayout; a non-image one (read or
//     written by logical ops) gets one after the state input ("<in>.logical") or
//     before the state output ("<out>.logical" written, then relayout);
//   - reshapes between image values and logical ones (the attention block's
//     [1,C,H,W] ↔ [C,H·W]) read one layout and write the other.
// So every node other than reshape sees one layout on all its non-constant operands and
// results; a reshape whose operand and result layouts differ is a copy (or an alias
// when the physical orders coincide, e.g. NHWC [1,C,H,W] → logical [H·W,C]).
//
// Requires: pad_channels done (channel counts final), weights in "oihw".
// Preserves: shapes, dtypes, what the graph computes (layouts are physical: the
// interpreter ignores them; the repacked weight holds the same numbers); node and
// value names (added: relayout nodes and values, repacked constants).
#include "passes/passes.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace strata {
namespace {

bool per_pixel_op(Op op) {
  switch (op) {
    case Op::add:
    case Op::mul:
    case Op::scale:
    case Op::clamp:
    case Op::silu:
    case Op::gelu:
    case Op::cast:
    case Op::upsample_nearest:
    case Op::slice:
    case Op::concat: return true;
    default: return false;
  }
}

// A reshape that regroups only the spatial dims of an image, [N, C, H, W] → [N, C,
// H', W'] with H·W = H'·W' (HunyuanVideo's temporal upsample views the frame stack
// [1, C, T·R, W] as [1, C, T, R·W]): in NHWC both are the same bytes, (N, H·W, C), so
// it joins the image values and stays an alias instead of two transposing copies.
bool spatial_regroup(const Graph& g, const Node& n) {
  if (n.op != Op::reshape || n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  const TensorType &x = g.value(n.inputs[0]).type, &y = g.value(n.outputs[0]).type;
  // Same shape: a relayout (a layout boundary this pass inserted), not a regroup.
  return x.rank() == 4 && y.rank() == 4 && x.shape != y.shape && x.shape[0] == y.shape[0] &&
         x.shape[1] == y.shape[1] && x.shape[2] * x.shape[3] == y.shape[2] * y.shape[3];
}

// The image values: seeds from conv_gemm / norm_act, grown through per-pixel ops and
// spatial regroups.
std::vector<bool> image_values(const Graph& g) {
  std::vector<bool> image(g.values().size(), false);
  auto candidate = [&](ValueId v) {
    return v != kNoValue && g.value(v).kind != ValueKind::constant && g.value(v).type.rank() == 4;
  };
  auto mark = [&](ValueId v) {
    if (!candidate(v) || image[static_cast<size_t>(v)]) return false;
    image[static_cast<size_t>(v)] = true;
    return true;
  };
  for (const Node& n : g.nodes()) {
    if (n.op == Op::conv_gemm) {
      mark(n.inputs[0]);
      if (n.inputs.size() > 3) mark(n.inputs[3]);
      mark(n.outputs[0]);
    } else if (n.op == Op::norm_act) {
      mark(n.inputs[0]);
      mark(n.outputs[0]);
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const Node& n : g.nodes()) {
      if (!per_pixel_op(n.op) && !spatial_regroup(g, n)) continue;
      bool any = false;
      for (ValueId v : n.inputs) any = any || (candidate(v) && image[static_cast<size_t>(v)]);
      for (ValueId v : n.outputs) any = any || image[static_cast<size_t>(v)];
      if (!any) continue;
      for (ValueId v : n.inputs) changed = mark(v) || changed;
      for (ValueId v : n.outputs) changed = mark(v) || changed;
    }
  }
  return image;
}

Layout nhwc_of(const TensorType& t) { return Layout{LayoutKind::nhwc, t.shape[1]}; }

Node relayout(const std::string& name, ValueId in, ValueId out, const Shape& shape) {
  return Node{Op::reshape, name, Attrs{{"shape", shape}}, {in}, {out}};
}

// w[Co,Ci,kh,kw] → w[Co, kh·kw·Ci], tap-major; returns the new constant.
Expected<ValueId> repack(Graph& g, PassContext& ctx, ValueId w, std::map<ValueId, ValueId>& done) {
  if (auto it = done.find(w); it != done.end()) return it->second;
  const Value v = g.value(w);
  const Shape& s = v.type.shape;
  int64_t co = s[0], ci = s[1], kh = s[2], kw = s[3];
  Shape to{co, kh * kw * ci};
  std::string name = v.weight + "[o_hwi]";
  if (!ctx.weights.contains(name)) {
    STRATA_ASSIGN_OR_RETURN(TensorView view, ctx.weights.get(v.weight));
    std::vector<float> src = view.to_f32();
    if (static_cast<int64_t>(src.size()) != v.type.elements())
      return error("weight '{}' has {} elements, constant %{} expects {}", v.weight, src.size(), v.name,
                   v.type.elements());
    std::vector<float> dst(src.size());
    for (int64_t o = 0; o < co; ++o)
      for (int64_t c = 0; c < ci; ++c)
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t x = 0; x < kw; ++x)
            dst[static_cast<size_t>(o * kh * kw * ci + (y * kw + x) * ci + c)] =
                src[static_cast<size_t>(((o * ci + c) * kh + y) * kw + x)];
    STRATA_RETURN_IF_ERROR(ctx.weights.add_owned(name, to, std::move(dst)));
  }
  ValueId r = g.add_constant(v.name + ".o_hwi", TensorType{to, v.type.dtype, {}}, name);
  done[w] = r;
  return r;
}

}  // namespace

Status run_assign_layout(Graph& g, PassContext& ctx) {
  // Weights first: repacked constants are new values, not image values.
  std::map<ValueId, ValueId> repacked;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node& n = g.nodes()[i];
    if (n.op != Op::conv_gemm) continue;
    STRATA_ASSIGN_OR_RETURN(const WeightLayout layout, conv_weight_layout(n.attrs));
    if (layout != WeightLayout::oihw) continue;
    ValueId w = n.inputs[1];
    if (g.value(w).kind != ValueKind::constant)
      return error("node '{}' (conv_gemm): weight %{} is not a constant, cannot repack it", n.name, g.value(w).name);
    auto r = repack(g, ctx, w, repacked);
    if (!r) return r.status().with_context(fmt::format("node '{}' (conv_gemm)", n.name));
    g.nodes()[i].inputs[1] = *r;
    set_weight_layout(g.nodes()[i].attrs, WeightLayout::o_hwi);
  }

  std::vector<bool> image = image_values(g);
  // The host's inputs and outputs (states are not the host's: see the header).
  std::set<ValueId> inputs, outputs;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (!g.input_state(i)) inputs.insert(g.inputs()[i]);
  for (size_t i = 0; i < g.outputs().size(); ++i)
    if (!g.output_state(i)) outputs.insert(g.outputs()[i]);
  int64_t nhwc_values = 0;
  for (size_t v = 0; v < image.size(); ++v) {
    Value& val = g.value(static_cast<ValueId>(v));
    if (!image[v] || inputs.count(val.id) || outputs.count(val.id)) continue;
    val.type.layout = nhwc_of(val.type);
    ++nhwc_values;
  }

  // Boundaries: relayout after image inputs and before image outputs.
  std::vector<Node> head, tail, state_tail;
  int64_t relayouts = 0;
  // Rank-4 states: NHWC always (see the header).
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const ValueId in = g.inputs()[i];
    if (!g.input_state(i) || g.value(in).type.rank() != 4) continue;
    g.value(in).type.layout = nhwc_of(g.value(in).type);
    if (image[static_cast<size_t>(in)]) continue;
    TensorType t = g.value(in).type;
    t.layout = Layout{};
    ValueId logical = g.add_value(g.value(in).name + ".logical", t);
    for (Node& n : g.nodes())
      for (ValueId& v : n.inputs)
        if (v == in) v = logical;
    head.push_back(relayout(g.value(logical).name, in, logical, t.shape));
    ++relayouts;
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const ValueId out = g.outputs()[i];
    if (!g.output_state(i) || g.value(out).type.rank() != 4 || g.value(out).kind != ValueKind::intermediate)
      continue;
    if (outputs.count(out)) {  // also the host's output (logical): the state gets an NHWC copy
      TensorType t = g.value(out).type;
      t.layout = nhwc_of(t);
      ValueId copy = g.add_value(g.value(out).name + ".state", t);
      state_tail.push_back(relayout(g.value(copy).name, out, copy, t.shape));  // after out's own relayout
      g.outputs()[i] = copy;
      ++relayouts;
      continue;
    }
    if (image[static_cast<size_t>(out)] || g.value(out).type.layout.kind == LayoutKind::nhwc) continue;
    ValueId inner = g.add_value(g.value(out).name + ".logical", g.value(out).type);
    for (Node& n : g.nodes()) {
      for (ValueId& v : n.inputs)
        if (v == out) v = inner;
      for (ValueId& v : n.outputs)
        if (v == out) v = inner;
    }
    g.value(out).type.layout = nhwc_of(g.value(out).type);
    tail.push_back(relayout(g.value(out).name + ".to_nhwc", inner, out, g.value(out).type.shape));
    ++relayouts;
  }
  for (ValueId in : g.inputs()) {
    if (!inputs.count(in) || !image[static_cast<size_t>(in)] || outputs.count(in)) continue;
    TensorType t = g.value(in).type;
    t.layout = nhwc_of(t);
    ValueId conv = g.add_value(g.value(in).name + ".nhwc", t);
    for (Node& n : g.nodes())
      for (ValueId& v : n.inputs)
        if (v == in) v = conv;
    head.push_back(relayout(g.value(conv).name, in, conv, t.shape));
    ++relayouts;
  }
  for (ValueId out : outputs) {
    if (!image[static_cast<size_t>(out)] || inputs.count(out)) continue;
    TensorType t = g.value(out).type;
    t.layout = nhwc_of(t);
    ValueId inner = g.add_value(g.value(out).name + ".nhwc", t);
    for (Node& n : g.nodes()) {
      for (ValueId& v : n.inputs)
        if (v == out) v = inner;
      for (ValueId& v : n.outputs)
        if (v == out) v = inner;
    }
    tail.push_back(relayout(g.value(out).name + ".to_logical", inner, out, t.shape));
    ++relayouts;
  }
  std::vector<Node>& nodes = g.nodes();
  nodes.insert(nodes.begin(), head.begin(), head.end());
  nodes.insert(nodes.end(), tail.begin(), tail.end());
  nodes.insert(nodes.end(), state_tail.begin(), state_tail.end());
  g.compact();  // drops the oihw constants no node reads any more
  ctx.log.push_back(fmt::format("assign_layout: {} values nhwc, {} weights repacked to o_hwi, {} relayouts",
                                nhwc_values, repacked.size(), relayouts));
  return Status::ok();
}

}  // namespace strata

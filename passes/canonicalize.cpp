// canonicalize: brings model graphs to the 2-D form the later passes and kernels use.
//
// Rewrites, in this order:
//   (a) Single-frame video graphs lose the frame dim. When every rank-5 activation
//       [N, C, T, H, W] has T = 1, that unit dim is dropped everywhere:
//       - conv3d with T_in = 1 and causal padding (t_front = kt - 1, t_back = 0) meets
//         data with its last temporal tap only: it becomes a conv2d whose weight is
//         that tap, sliced into a derived tensor "<weight>[t=last]" in ctx.weights;
//       - a reshape that only adds or removes the unit dim disappears (its readers
//         read its operand); other reshapes get the rank-4 shape;
//       - upsample_nearest factors lose their frame entry ([1, 2, 2] → [2, 2]);
//       - a constant broadcast into an add / mul ([1, C, 1, 1, 1]-style) is replaced
//         by a derived copy without the frame dim, "<weight>[t=0]";
//       - pointwise ops and norms just get rank-4 types.
//       Graphs with T > 1 (real video) keep their conv3d and rank-5 values: temporal
//       convolutions are a later issue. The same holds when a rank-5 value is a graph
//       input or output or meets an op not listed here; ctx.log says why.
//   (b) A linear over tokens whose result is only turned back into a channel-major map
//       (permute [1, 0] → reshape [1, M, H, W], the attention's output projection) is
//       a 1×1 convolution of that map: the permute and reshape move in front of it and
//       it becomes a conv_gemm whose oihw weight "<weight>[1x1]" is the [M, K] linear
//       weight seen as [M, K, 1, 1] (a derived copy), so its residual add can fuse
//       (fuse_residual).
//   (c) A linear over the tokens of a map (reshape [1, K, H, W] → [K, H·W], permute
//       [1, 0], the attention's q / k / v projections) is a 1×1 convolution of that
//       map: it becomes a conv_gemm of the map (weight "<weight>[1x1]" as in (b)),
//       followed by a reshape [M, H·W] and a permute [1, 0] that give the tokens back,
//       so the projection runs on the conv kernels (tensor cores) instead of the
//       portable GEMM. The input's permute and reshape go when nothing else reads them.
//   (d) Every conv2d becomes conv_gemm {kernel, pad, stride, weight_layout = "oihw",
//       gather = "plain"} with the same operands (a frame stack's frame_rows and
//       frame_shift carried over).
//
// Requires: a verified graph of logical layouts. Preserves: what the interpreter
// computes, bit for bit for (a) and (d) (the skipped taps only ever added 0); (b) and
// (c) sum the same products in another order (≤ 1 ulp of f32). Graph inputs and outputs
// keep their types.
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <fmt/format.h>

#include <cstring>
#include <map>

namespace strata {
namespace {

constexpr size_t kFrameDim = 2;  // T in [N, C, T, H, W]

// The attributes of a conv_gemm that reads x as is, with diffusers' oihw weights.
Attrs plain_conv_gemm_attrs(std::vector<int64_t> kernel, std::vector<int64_t> pad, std::vector<int64_t> stride) {
  Attrs a{{"kernel", std::move(kernel)}, {"pad", std::move(pad)}, {"stride", std::move(stride)}};
  set_weight_layout(a, WeightLayout::oihw);
  set_gather(a, GatherKind::plain);
  return a;
}

Shape without(Shape s, size_t dim) {
  s.erase(s.begin() + static_cast<std::ptrdiff_t>(dim));
  return s;
}

bool is_rank5(const Graph& g, ValueId v) { return v != kNoValue && g.value(v).type.rank() == 5; }

// A constant bound to a derived tensor: `elements` (indices into the source constant's
// tensor, row major) of it, with `shape`. Added to the store once; reused when the
// store already holds it (the pipeline run again over the same weights).
Expected<ValueId> derive_constant(Graph& g, WeightStore& ws, ValueId src, const std::string& suffix,
                                  const Shape& shape, const std::vector<int64_t>& elements) {
  const Value& c = g.value(src);
  const std::string name = c.weight + suffix;
  if (!ws.contains(name)) {
    STRATA_ASSIGN_OR_RETURN(TensorView view, ws.get(c.weight));
    const size_t es = dtype_size(view.dtype);
    std::vector<uint8_t> bytes(elements.size() * es);
    for (size_t i = 0; i < elements.size(); ++i)
      std::memcpy(bytes.data() + i * es, static_cast<const uint8_t*>(view.data) + elements[i] * es, es);
    STRATA_RETURN_IF_ERROR(ws.add_owned_bytes(name, view.dtype, shape, std::move(bytes)));
  } else {
    STRATA_ASSIGN_OR_RETURN(TensorView view, ws.get(name));
    if (view.shape != shape)
      return error("derived weight '{}' exists with shape {}, expected {}", name, shape_str(view.shape),
                   shape_str(shape));
  }
  return g.add_constant(c.name + suffix, TensorType{shape, c.type.dtype, {}}, name);
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

// The dim of a broadcast operand of rank r that lines up with T of a rank-5 result.
int64_t frame_dim_of_operand(int64_t rank) { return rank - 3; }

// Why the frame dim cannot be dropped, or "" when it can.
std::string frame_drop_blocker(const Graph& g) {
  for (const Value& v : g.values())
    if (v.kind != ValueKind::constant && v.type.rank() == 5 && v.type.shape[kFrameDim] != 1)
      return fmt::format("%{} has {} frames (T > 1: conv3d kept)", v.name, v.type.shape[kFrameDim]);
  for (ValueId v : g.inputs())
    if (is_rank5(g, v)) return fmt::format("graph input %{} is rank 5", g.value(v).name);
  for (ValueId v : g.outputs())
    if (is_rank5(g, v)) return fmt::format("graph output %{} is rank 5", g.value(v).name);
  for (const Node& n : g.nodes()) {
    const bool touches = is_rank5(g, n.outputs[0]) || (!n.inputs.empty() && is_rank5(g, n.inputs[0]));
    if (!touches) continue;
    switch (n.op) {
      case Op::conv3d: {
        const Value& w = g.value(n.inputs[1]);
        auto pad = n.attrs.get_ints("pad", {0, 0, 0, 0});
        if (w.kind != ValueKind::constant) return fmt::format("conv3d '{}' has a computed weight", n.name);
        if (pad[0] != w.type.shape[kFrameDim] - 1 || pad[1] != 0)
          return fmt::format("conv3d '{}' is not causal (pad {})", n.name, shape_str(pad));
        break;
      }
      case Op::add:
      case Op::mul:
        for (ValueId v : n.inputs)
          if (g.value(v).type.rank() >= 3 && g.value(v).kind != ValueKind::constant && !is_rank5(g, v))
            return fmt::format("{} '{}' broadcasts a computed rank-{} operand", op_name(n.op), n.name,
                               g.value(v).type.rank());
        break;
      case Op::reshape: case Op::upsample_nearest: case Op::silu: case Op::gelu: case Op::scale:
      case Op::clamp: case Op::cast: case Op::group_norm: case Op::rms_norm: case Op::layer_norm:
      case Op::softmax:
        break;
      default: return fmt::format("{} '{}' reads a rank-5 value", op_name(n.op), n.name);
    }
  }
  return "";
}

// (a) Drops the unit frame dim; the graph satisfies !frame_drop_blocker.
Status drop_frames(Graph& g, PassContext& ctx) {
  std::vector<bool> was5(g.values().size());
  for (size_t id = 0; id < g.values().size(); ++id) {
    Value& v = g.value(static_cast<ValueId>(id));
    was5[id] = v.type.rank() == 5;
    if (v.kind != ValueKind::constant && v.type.rank() == 5) v.type.shape = without(v.type.shape, kFrameDim);
  }
  auto old5 = [&](ValueId v) {  // was rank 5 before this rewrite (derived constants were not)
    return v != kNoValue && static_cast<size_t>(v) < was5.size() && was5[static_cast<size_t>(v)];
  };
  std::vector<bool> dead(g.nodes().size(), false);
  std::map<ValueId, ValueId> alias;  // output of a removed reshape -> its operand
  int64_t convs = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node& n = g.nodes()[i];
    for (ValueId& v : n.inputs)
      if (auto it = alias.find(v); it != alias.end()) v = it->second;
    const bool touches = old5(n.outputs[0]) || old5(n.inputs[0]);
    if (!touches) continue;
    const Shape out = g.value(n.outputs[0]).type.shape;  // a copy: constants may be added
    switch (n.op) {
      case Op::conv3d: {
        const ValueId w = n.inputs[1];
        const Shape ws = g.value(w).type.shape;  // [Co, Ci, kt, kh, kw]
        std::vector<int64_t> taps;
        for (int64_t o = 0; o < ws[0] * ws[1]; ++o)
          for (int64_t k = 0; k < ws[3] * ws[4]; ++k) taps.push_back((o * ws[2] + ws[2] - 1) * ws[3] * ws[4] + k);
        auto w2 = derive_constant(g, ctx.weights, w, "[t=last]", {ws[0], ws[1], ws[3], ws[4]}, taps);
        if (!w2) return w2.status().with_context(fmt::format("conv3d '{}'", n.name));
        auto pad = n.attrs.get_ints("pad");
        n.op = Op::conv2d;
        n.inputs[1] = *w2;
        n.attrs = Attrs{{"pad", std::vector<int64_t>{pad[2], pad[3]}}, {"stride", std::vector<int64_t>{1, 1}}};
        ++convs;
        break;
      }
      case Op::reshape:
        if (g.value(n.inputs[0]).type.shape == out) {
          alias[n.outputs[0]] = n.inputs[0];
          dead[i] = true;
        } else {
          n.attrs.set("shape", out);
        }
        break;
      case Op::upsample_nearest: {
        auto f = n.attrs.get_ints("factors");
        if (old5(n.inputs[0]) && f.size() >= 3) f.erase(f.end() - 3);
        n.attrs.set("factors", f);
        break;
      }
      case Op::add:
      case Op::mul:
        for (ValueId& v : n.inputs) {
          const Value& c = g.value(v);
          if (c.kind != ValueKind::constant || c.type.rank() < 3) continue;
          const auto dim = static_cast<size_t>(frame_dim_of_operand(c.type.rank()));
          auto c2 = derive_constant(g, ctx.weights, v, "[t=0]", without(c.type.shape, dim), iota(c.type.elements()));
          if (!c2) return c2.status().with_context(fmt::format("{} '{}'", op_name(n.op), n.name));
          v = *c2;
        }
        break;
      default: break;  // types only
    }
  }
  for (auto& v : g.outputs())
    if (auto it = alias.find(v); it != alias.end()) v = it->second;
  int64_t reshapes = static_cast<int64_t>(alias.size());
  remove_nodes(g, dead);
  ctx.log.push_back(fmt::format(
      "canonicalize: dropped the unit frame dim ({} conv3d → conv2d, {} reshapes removed)", convs, reshapes));
  return Status::ok();
}

// (b) linear → permute [1,0] → reshape [1,M,H,W]  ⇒  permute → reshape → 1×1 conv_gemm.
Expected<int64_t> linears_to_convs(Graph& g, WeightStore& ws) {
  int64_t count = 0;
  Uses uses = find_uses(g);
  for (size_t l = 0; l < g.nodes().size(); ++l) {
    const Node& lin = g.nodes()[l];
    if (lin.op != Op::linear || g.value(lin.inputs[0]).type.rank() != 2) continue;
    const ValueId y = lin.outputs[0];
    if (uses.count(y) != 1 || uses.readers[static_cast<size_t>(y)].empty()) continue;
    const size_t p = uses.readers[static_cast<size_t>(y)][0];
    const Node& perm = g.nodes()[p];
    if (perm.op != Op::permute || perm.attrs.get_ints("perm") != std::vector<int64_t>{1, 0}) continue;
    const ValueId yt = perm.outputs[0];
    if (uses.count(yt) != 1 || uses.readers[static_cast<size_t>(yt)].empty()) continue;
    const size_t r = uses.readers[static_cast<size_t>(yt)][0];
    const Node& resh = g.nodes()[r];
    const Shape map = g.value(resh.outputs[0]).type.shape;
    const Shape x = g.value(lin.inputs[0]).type.shape;  // [T, K]
    const int64_t m = g.value(y).type.shape[1];
    if (resh.op != Op::reshape || map.size() != 4 || map[0] != 1 || map[1] != m || map[2] * map[3] != x[0])
      continue;
    const ValueId w = lin.inputs[1];
    if (g.value(w).kind != ValueKind::constant) continue;
    auto w4 = derive_constant(g, ws, w, "[1x1]", {m, x[1], 1, 1}, iota(m * x[1]));
    if (!w4) return w4.status().with_context(fmt::format("linear '{}'", g.nodes()[l].name));
    // Readers of the map now read the conv's result, which reuses the linear's value.
    const ValueId map_v = resh.outputs[0];
    replace_uses(g, map_v, y, r + 1);
    g.value(y).type.shape = map;
    g.value(yt).type.shape = {x[1], x[0]};
    g.value(map_v).type.shape = {1, x[1], map[2], map[3]};
    Node new_perm = g.nodes()[p], new_resh = g.nodes()[r], conv = g.nodes()[l];
    new_perm.inputs = {conv.inputs[0]};
    new_resh.attrs.set("shape", g.value(map_v).type.shape);
    conv.op = Op::conv_gemm;
    conv.inputs[0] = map_v;
    conv.inputs[1] = *w4;
    conv.attrs = plain_conv_gemm_attrs({1, 1}, {0, 0}, {1, 1});
    g.nodes()[l] = std::move(new_perm);
    g.nodes()[p] = std::move(new_resh);
    g.nodes()[r] = std::move(conv);
    ++count;
    uses = find_uses(g);
  }
  return count;
}

// (c) map → reshape [K, T] → permute [1, 0] → linear  ⇒  1×1 conv_gemm of the map →
//     reshape [M, T] → permute [1, 0] (the linear's result, for its readers).
Expected<int64_t> map_linears_to_convs(Graph& g, WeightStore& ws) {
  int64_t count = 0;
  std::vector<int64_t> producer = g.producers();
  for (size_t l = 0; l < g.nodes().size(); ++l) {
    const Node lin = g.nodes()[l];
    if (lin.op != Op::linear || g.value(lin.inputs[0]).type.rank() != 2) continue;
    const int64_t p = producer[static_cast<size_t>(lin.inputs[0])];
    if (p < 0) continue;
    const Node& perm = g.nodes()[static_cast<size_t>(p)];
    if (perm.op != Op::permute || perm.attrs.get_ints("perm") != std::vector<int64_t>{1, 0}) continue;
    const int64_t r = producer[static_cast<size_t>(perm.inputs[0])];
    if (r < 0 || g.nodes()[static_cast<size_t>(r)].op != Op::reshape) continue;
    const ValueId map = g.nodes()[static_cast<size_t>(r)].inputs[0];
    const Shape ms = g.value(map).type.shape;
    const Shape x = g.value(lin.inputs[0]).type.shape;  // [T, K]
    if (ms.size() != 4 || ms[0] != 1 || ms[1] != x[1] || ms[2] * ms[3] != x[0]) continue;
    const ValueId w = lin.inputs[1], y = lin.outputs[0];
    if (g.value(w).kind != ValueKind::constant) continue;
    const int64_t m = g.value(y).type.shape[1];
    auto w4 = derive_constant(g, ws, w, "[1x1]", {m, x[1], 1, 1}, iota(m * x[1]));
    if (!w4) return w4.status().with_context(fmt::format("linear '{}'", lin.name));
    const DType dt = g.value(y).type.dtype;
    const ValueId ym = g.add_value(lin.name + ".map", TensorType{{1, m, ms[2], ms[3]}, dt, {}});
    const ValueId yt = g.add_value(lin.name + ".channels", TensorType{{m, x[0]}, dt, {}});
    Node conv = lin;
    conv.op = Op::conv_gemm;
    conv.inputs[0] = map;
    conv.inputs[1] = *w4;
    conv.outputs = {ym};
    conv.attrs = plain_conv_gemm_attrs({1, 1}, {0, 0}, {1, 1});
    Node to_channels{Op::reshape, lin.name + ".channels", Attrs{{"shape", std::vector<int64_t>{m, x[0]}}}, {ym}, {yt}};
    Node to_tokens{Op::permute, lin.name + ".tokens", Attrs{{"perm", std::vector<int64_t>{1, 0}}}, {yt}, {y}};
    auto& nodes = g.nodes();
    nodes[l] = std::move(conv);
    nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(l) + 1, {std::move(to_channels), std::move(to_tokens)});
    producer = g.producers();
    ++count;
  }
  // The input's permute, then its reshape, once nothing reads them (any permute or
  // reshape nothing reads goes: it computes nothing anyone uses).
  for (bool removed = count > 0; removed;) {
    const Uses uses = find_uses(g);
    std::vector<bool> dead(g.nodes().size(), false);
    removed = false;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const Node& n = g.nodes()[i];
      if ((n.op == Op::permute || n.op == Op::reshape) && uses.count(n.outputs[0]) == 0) dead[i] = removed = true;
    }
    if (removed) remove_nodes(g, dead);
  }
  return count;
}

// (d) conv2d → conv_gemm(oihw, plain).
int64_t convs_to_gemm(Graph& g) {
  int64_t count = 0;
  for (Node& n : g.nodes()) {
    if (n.op != Op::conv2d) continue;
    const Shape& w = g.value(n.inputs[1]).type.shape;
    n.op = Op::conv_gemm;
    const Expected<FrameGather> frames = conv_frames(n.attrs);  // verified: it parses
    n.attrs = plain_conv_gemm_attrs({w[2], w[3]}, n.attrs.get_ints("pad", {0, 0}), n.attrs.get_ints("stride", {1, 1}));
    if (frames) set_frames(n.attrs, *frames);
    trim_operands(n);
    ++count;
  }
  return count;
}

}  // namespace

Status run_canonicalize(Graph& graph, PassContext& ctx) {
  bool any5 = false;
  for (const Value& v : graph.values()) any5 |= v.kind != ValueKind::constant && v.type.rank() == 5;
  if (any5) {
    const std::string blocker = frame_drop_blocker(graph);
    if (blocker.empty())
      STRATA_RETURN_IF_ERROR(drop_frames(graph, ctx));
    else
      ctx.log.push_back("canonicalize: rank-5 values kept: " + blocker);
  }
  STRATA_ASSIGN_OR_RETURN(const int64_t linears, linears_to_convs(graph, ctx.weights));
  STRATA_ASSIGN_OR_RETURN(const int64_t map_linears, map_linears_to_convs(graph, ctx.weights));
  const int64_t convs = convs_to_gemm(graph);
  graph.compact();  // drops the linear weights replaced by their [1x1] copies
  ctx.log.push_back(fmt::format("canonicalize: {} conv2d → conv_gemm, {} token linears → 1×1 conv_gemm, {} linears "
                                "over a map's tokens → 1×1 conv_gemm",
                                convs, linears, map_linears));
  return Status::ok();
}

}  // namespace strata

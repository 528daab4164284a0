// winograd_convs: a causal video conv's tap chain (and, with winograd_min_taps = 1, a
// single 2-D conv) as Winograd F(m×m, 3×3), m =
// CompileOptions::winograd_tile (2 or 4; ir/ops.h): one winograd_input per input frame
// (shared by every chain that reads the frame), one winograd_gemm over the chain's
// frames and one winograd_output, so the 3×3 taps multiply 2.25× (m = 2) or 4× (m = 4)
// fewer times.
//
// Why: Wan 2.2's decoder is 96 % 3×3×3 convs on the H200, at the GEMM core's rate
// (~240 TFLOP/s of ~270). Fewer multiplies are the only way left to a faster decode;
// measured before building, the Winograd form was
// 34-56 % faster per conv at 256-1024 channels, and slower on Flux's 2-D convs of 128 and
// 256 channels, so by default the pass takes only chains of two or more taps of wide
// convs. With F(4×4) a single wide 2-D conv gains too (Flux 1024²: 1.14 →
// 0.71 ms at 256² × 512 channels, 1.40 → 1.20 ms at 512² × 256), at 4× its weights'
// bytes as U: CompileOptions::winograd_min_taps = 1 (`--winograd-2d`) takes them. m = 4
// halves the GEMM work again and shrinks V from 4× to 2.25× the image; its
// f16 V rounds ~4× coarser than m = 2's, well inside the f16 bar
// (tests/compile/test_wan_winograd.cpp).
//
// Rewrites: a chain n_0 → … → n_{m−1} (winograd_min_taps ≤ m ≤ 3) of conv_gemm nodes
// as the Wan builder and fuse_residual leave a causal conv (models/wan_decoder.cpp
// causal_conv; m = 1: any conv):
// each a 3×3, pad 1, stride 1, plain-gather conv with o_hwi f16 weights [Co, 9·C] over
// an f16 NHWC image [1, C, H, W] (a different frame each), f16 out, no bands or frame
// stack; n_{i+1}'s residual is n_i's result and n_i's only reader (not a graph
// output); only n_0 has a bias or a residual of its own; every link has the same
// acc_scale, and residual_scale_{i+1} · out_scale_i = 1 (lower_precision's range guards
// cancel along the chain). It becomes, at n_{m−1}'s place, writing its result:
//   V_x = winograd_input(x) {tile, dtype f16}   for each x of the chain not yet transformed
//   M = winograd_gemm(V_{x_0}, …, V_{x_{m−1}}, U) {dtype f32; f16 for a single conv}
//   y = winograd_output(M, n_0's bias, n_0's residual) {height, width, tile, acc_scale,
//       residual_scale = n_0's, out_scale = n_{m−1}'s, dtype f16}
// U = G w_i Gᵀ of the links' f16-rounded weights, a new constant
// "<w_0>[winograd <w_1> …]" of dtype f16 (interp::winograd_weights); for a single conv
// with CompileOptions::winograd_single_u_at_run (compile.h's default) instead
//   U = winograd_weights(w_0) {tile, dtype f16}   right before the GEMM
// an activation made at each run (no constant 4× the weights' bytes; its f16 range
// checked by a bound on |w| instead of computing U). Only when C ≥
// CompileOptions::winograd_min_channels, H·W ≥ winograd_min_pixels, C and Co are
// multiples of 32, x, y and the residual hold no channel padding, U fits f16, and V
// and M fit the binding limit. A single conv (m = 1) also needs H·W ≥
// winograd_single_min_pixels and its V and M (both f16) to fit under the
// activations' peak as the graph stands (live_bytes: what is alive at each node in the
// graph's order, constants left out), with U too when it is made at each run, so the
// plan's activations do not grow (passes/schedule.cpp keeps winograd_weights next to its
// GEMM). Its M is
// f16: its GEMM (K = C) is bound by M's bytes as much as by the multiplies, and the
// rounding costs ~1.5 dB (tests/passes/test_winograd_convs.cpp); a chain's M, the sum of
// up to three taps, stays f32 (measured ~2 dB lower in f16).
//
// Runs when CompileOptions::winograd_convs is set (tensor-core targets:
// compile/target.cpp), after phase_weights (layouts, dtypes and range guards are
// decided) and before split_bands (the new ops never run in bands).
// Preserves what the graph computes up to rounding: V and U are rounded to f16 and the
// chain's partial sums are not (tests/passes/test_winograd_convs.cpp). Node names: the
// output keeps n_{m−1}'s; the others add ".winograd_input" / ".winograd_gemm".
#include "passes/passes.h"

#include "ir/interpreter.h"
#include "passes/rewrite.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <thread>

namespace strata {
namespace {

constexpr int64_t kMaxTaps = 3;

bool has_operand(const Node& n, size_t slot) { return n.inputs.size() > slot && n.inputs[slot] != kNoValue; }

int64_t channel_slots(const TensorType& t) {
  return t.layout.padded_channels > t.shape[1] ? t.layout.padded_channels : t.shape[1];
}

// An f16 NHWC [1, C, H, W] value with no padding channels.
bool plain_nhwc(const TensorType& t) {
  return t.dtype == DType::f16 && t.rank() == 4 && t.shape[0] == 1 && t.layout.kind == LayoutKind::nhwc &&
         channel_slots(t) == t.shape[1];
}

// A link of a chain: the conv the pass can take, on its own.
bool eligible_conv(const Graph& g, const Node& n, const CompileOptions& o) {
  if (n.op != Op::conv_gemm || n.inputs.size() < 2 || n.attrs.has("band_rows")) return false;
  const Attrs& a = n.attrs;
  const auto layout = conv_weight_layout(a);
  const auto gather = conv_gather(a);
  if (!layout || *layout != WeightLayout::o_hwi || !gather || *gather != GatherKind::plain) return false;
  if (a.get_ints("kernel") != std::vector<int64_t>{3, 3} || a.get_ints("pad", {0, 0}) != std::vector<int64_t>{1, 1} ||
      a.get_ints("stride", {1, 1}) != std::vector<int64_t>{1, 1} || a.get_int("frame_rows", 0) != 0)
    return false;
  const Value& w = g.value(n.inputs[1]);
  const TensorType& x = g.value(n.inputs[0]).type;
  const TensorType& y = g.value(n.outputs[0]).type;
  if (w.kind != ValueKind::constant || w.type.dtype != DType::f16) return false;
  if (!plain_nhwc(x) || !plain_nhwc(y) || x.shape[2] != y.shape[2] || x.shape[3] != y.shape[3]) return false;
  if (has_operand(n, 3) && !plain_nhwc(g.value(n.inputs[3]).type)) return false;
  const int64_t c = x.shape[1], co = y.shape[1];
  if (c < o.winograd_min_channels || c % 32 != 0 || co % 32 != 0) return false;
  if (x.shape[2] * x.shape[3] < o.winograd_min_pixels) return false;
  const int64_t tile = o.winograd_tile, positions = (tile + 2) * (tile + 2);
  const int64_t rows = interp::winograd_rows(interp::winograd_tiles(x.shape[2], x.shape[3], tile));
  const uint64_t v_bytes = uint64_t(positions * rows * c) * 2, m_bytes = uint64_t(positions * rows * co) * 4;
  return o.binding_limit == 0 || (v_bytes <= o.binding_limit && m_bytes <= o.binding_limit);
}

// Whether `next` continues a chain ending in `prev` (the header's conditions).
bool continues(const Graph& g, const Node& prev, const Node& next, const CompileOptions& o) {
  if (!eligible_conv(g, next, o) || has_operand(next, 2) || !has_operand(next, 3) || next.inputs[3] != prev.outputs[0])
    return false;
  if (g.value(next.inputs[0]).type.shape != g.value(prev.inputs[0]).type.shape ||
      g.value(next.inputs[1]).type.shape != g.value(prev.inputs[1]).type.shape)
    return false;
  if (next.attrs.get_float("acc_scale", 1.0) != prev.attrs.get_float("acc_scale", 1.0)) return false;
  return next.attrs.get_float("residual_scale", 1.0) * prev.attrs.get_float("out_scale", 1.0) == 1.0;
}

// U for the chain's weights, as a constant (one per distinct weight list); nullopt
// when a value of U leaves f16's range (the chain keeps its direct convs).
Expected<std::optional<ValueId>> winograd_weight(Graph& g, PassContext& ctx, const std::vector<ValueId>& weights,
                                                 int64_t tile,
                                                 std::map<std::vector<ValueId>, std::optional<ValueId>>& made) {
  if (auto it = made.find(weights); it != made.end()) return it->second;
  const Value& first = g.value(weights[0]);
  std::string name = first.weight + (tile == 2 ? "[winograd" : "[winograd4");
  for (size_t i = 1; i < weights.size(); ++i) name += " " + g.value(weights[i]).weight;
  name += "]";
  const int64_t co = first.type.shape[0], c = first.type.shape[1] / 9, frames = static_cast<int64_t>(weights.size());
  const Shape shape{(tile + 2) * (tile + 2), co, frames * c};
  if (!ctx.weights.contains(name)) {
    std::vector<Tensor> taps;  // w_i o_hwi, rounded to f16 as the conv kernel read it
    for (ValueId w : weights) {
      const Value& v = g.value(w);
      STRATA_ASSIGN_OR_RETURN(TensorView view, ctx.weights.get(v.weight));
      std::vector<float> src = view.to_f32();
      if (static_cast<int64_t>(src.size()) != v.type.elements())
        return error("weight '{}' has {} elements, constant %{} expects {}", v.weight, src.size(), v.name,
                     v.type.elements());
      for (float& x : src) x = interp::round_to(x, DType::f16);
      taps.emplace_back(v.type.shape, std::move(src));
    }
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : taps) ptrs.push_back(&t);
    // Every core: F(4×4)'s U of Wan's widest convs is ~10⁹ multiplies each.
    const interp::Parallel par{.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
    Tensor u = interp::winograd_weights_o_hwi(ptrs, tile, par);
    for (float x : u.data)
      if (!(std::fabs(x) <= 65504.0f)) {
        made.emplace(weights, std::nullopt);
        return std::optional<ValueId>();
      }
    STRATA_RETURN_IF_ERROR(ctx.weights.add_owned(name, shape, std::move(u.data)));
  }
  const ValueId id = g.add_constant(first.name + ".winograd", TensorType{shape, DType::f16, {}}, name);
  made.emplace(weights, id);
  return std::optional<ValueId>(id);
}

// Whether every value of U = G w Gᵀ for the f16 weights w fits f16, by the bound
// |U| <= (max row sum of |G|)² · max |w| (m = 2: 1.5², m = 4: (28/15)²), without computing
// U: a plan that computes U at each run never holds it.
Expected<bool> u_fits_f16(const Graph& g, PassContext& ctx, ValueId weight, int64_t tile) {
  const Value& v = g.value(weight);
  STRATA_ASSIGN_OR_RETURN(TensorView view, ctx.weights.get(v.weight));
  float largest = 0.0f;
  for (float x : view.to_f32()) {
    const float r = std::fabs(interp::round_to(x, DType::f16));
    if (!(r <= 65504.0f)) return false;
    largest = std::max(largest, r);
  }
  const double row = tile == 2 ? 1.5 : 28.0 / 15.0;
  return double(largest) * row * row <= 65504.0;
}

// live[i]: the bytes of the activations alive while node i runs (written at or before i,
// read at or after it; graph inputs from the start, graph outputs to the end), in the
// graph's order, constants left out: the footprint a single conv's V and M add to.
std::vector<uint64_t> live_bytes(const Graph& g, const Uses& uses) {
  const size_t count = g.nodes().size();
  std::vector<uint64_t> delta(count + 1, 0), ends(count + 1, 0);
  std::vector<int64_t> written(g.values().size(), -1);
  for (size_t i = 0; i < count; ++i)
    for (ValueId v : g.nodes()[i].outputs)
      if (v != kNoValue) written[static_cast<size_t>(v)] = static_cast<int64_t>(i);
  for (size_t v = 0; v < g.values().size(); ++v) {
    const Value& value = g.value(static_cast<ValueId>(v));
    if (value.kind == ValueKind::constant) continue;
    const bool input = std::find(g.inputs().begin(), g.inputs().end(), static_cast<ValueId>(v)) != g.inputs().end();
    if (written[v] < 0 && !input) continue;
    const size_t first = input ? 0 : static_cast<size_t>(written[v]);
    size_t last = first;
    for (size_t r : uses.readers[v]) last = std::max(last, r);
    if (uses.outputs[v] > 0) last = count - 1;
    delta[first] += value.type.bytes();
    ends[last + 1] += value.type.bytes();
  }
  std::vector<uint64_t> live(count, 0);
  uint64_t now = 0;
  for (size_t i = 0; i < count; ++i) live[i] = now = now + delta[i] - ends[i];
  return live;
}

}  // namespace

Status run_winograd_convs(Graph& g, PassContext& ctx) {
  if (!ctx.options.winograd_convs) return Status::ok();
  const int64_t tile = ctx.options.winograd_tile, positions = (tile + 2) * (tile + 2);
  if (tile != 2 && tile != 4) return error("winograd_convs: the tile must be 2 or 4, got {}", tile);
  const Uses uses = find_uses(g);
  const size_t count = g.nodes().size();
  // Chains, found on the unchanged graph: role[i] = the chain whose last link node i
  // is (index into chains), or -2 for an earlier link.
  std::vector<std::vector<size_t>> chains;
  std::vector<int64_t> role(count, -1);
  // A single conv (winograd_min_taps 1) is taken only where its V and M fit under the
  // activations' peak as the graph stands: the image decoders' memory does not grow.
  const std::vector<uint64_t> live = live_bytes(g, uses);
  const uint64_t peak = live.empty() ? 0 : *std::max_element(live.begin(), live.end());
  int64_t kept_peak = 0;
  for (size_t i = 0; i < count; ++i) {
    if (role[i] != -1 || !eligible_conv(g, g.nodes()[i], ctx.options)) continue;
    std::vector<size_t> chain{i};
    while (static_cast<int64_t>(chain.size()) < kMaxTaps) {
      const ValueId out = g.nodes()[chain.back()].outputs[0];
      if (uses.count(out) != 1 || uses.readers[static_cast<size_t>(out)].size() != 1) break;
      const size_t next = uses.readers[static_cast<size_t>(out)][0];
      if (role[next] != -1 || !continues(g, g.nodes()[chain.back()], g.nodes()[next], ctx.options)) break;
      chain.push_back(next);
    }
    if (static_cast<int64_t>(chain.size()) < ctx.options.winograd_min_taps) continue;
    if (chain.size() == 1) {
      const Node& n = g.nodes()[i];
      const TensorType& x = g.value(n.inputs[0]).type;
      if (x.shape[2] * x.shape[3] < ctx.options.winograd_single_min_pixels) continue;
      const int64_t rows = interp::winograd_rows(interp::winograd_tiles(x.shape[2], x.shape[3], tile));
      const int64_t co = g.value(n.outputs[0]).type.shape[1];
      uint64_t scratch = uint64_t(positions * rows) * uint64_t(x.shape[1] + co) * 2;  // V and M, f16
      if (ctx.options.winograd_single_u_at_run) scratch += uint64_t(positions * co * x.shape[1]) * 2;  // and U
      if (live[i] + scratch > peak) {
        ++kept_peak;
        continue;
      }
    }
    for (size_t k = 0; k + 1 < chain.size(); ++k) role[chain[k]] = -2;
    role[chain.back()] = static_cast<int64_t>(chains.size());
    chains.push_back(std::move(chain));
  }

  std::map<std::vector<ValueId>, std::optional<ValueId>> weights_made;
  std::map<ValueId, ValueId> transformed;  // x → V
  const std::vector<Node> old = g.nodes();
  std::vector<Node> nodes;
  int64_t rewritten = 0, kept_range = 0;
  uint64_t v_bytes = 0, u_run_bytes = 0;
  for (size_t i = 0; i < count; ++i) {
    if (role[i] == -1) {
      nodes.push_back(old[i]);
      continue;
    }
    if (role[i] == -2) continue;  // emitted with its chain's last link
    const std::vector<size_t>& chain = chains[static_cast<size_t>(role[i])];
    std::vector<ValueId> ws;
    for (size_t k : chain) ws.push_back(old[k].inputs[1]);
    const bool u_at_run = chain.size() == 1 && ctx.options.winograd_single_u_at_run;
    std::optional<ValueId> u_const;
    if (u_at_run) {
      auto fits = u_fits_f16(g, ctx, ws[0], tile);
      if (!fits) return fits.status().with_context(fmt::format("the Winograd weights of '{}'", old[chain[0]].name));
      if (!*fits) {
        ++kept_range;
        nodes.push_back(old[i]);
        continue;
      }
    } else {
      auto u = winograd_weight(g, ctx, ws, tile, weights_made);
      if (!u) return u.status().with_context(fmt::format("the Winograd weights of '{}'", old[chain[0]].name));
      if (!*u) {
        ++kept_range;
        for (size_t k : chain) nodes.push_back(old[k]);
        continue;
      }
      u_const = *u;
    }
    const Node& head = old[chain[0]];
    const Node& last = old[chain.back()];
    const TensorType xt = g.value(head.inputs[0]).type;
    const int64_t c = xt.shape[1], h = xt.shape[2], w = xt.shape[3], co = g.value(last.outputs[0]).type.shape[1];
    const int64_t rows = interp::winograd_rows(interp::winograd_tiles(h, w, tile));
    std::vector<ValueId> gemm_in;
    for (size_t k : chain) {
      const ValueId x = old[k].inputs[0];
      auto it = transformed.find(x);
      if (it == transformed.end()) {
        const std::string name = g.value(x).name + ".winograd";
        const ValueId v = g.add_value(name, TensorType{{positions, rows, c}, DType::f16, {}});
        Attrs a;
        a.set("tile", tile);
        a.set("dtype", std::string("f16"));
        Node n;
        n.op = Op::winograd_input;
        n.name = old[k].name + ".winograd_input";
        n.inputs = {x};
        n.outputs = {v};
        n.attrs = std::move(a);
        nodes.push_back(std::move(n));
        it = transformed.emplace(x, v).first;
        v_bytes += uint64_t(positions * rows * c) * 2;
      }
      gemm_in.push_back(it->second);
    }
    if (u_at_run) {  // U from the conv's own weights, just before the GEMM reads it
      const ValueId uv = g.add_value(last.name + ".winograd_u", TensorType{{positions, co, c}, DType::f16, {}});
      Node n;
      n.op = Op::winograd_weights;
      n.name = last.name + ".winograd_weights";
      n.inputs = {ws[0]};
      n.outputs = {uv};
      n.attrs.set("tile", tile);
      n.attrs.set("dtype", std::string("f16"));
      nodes.push_back(std::move(n));
      gemm_in.push_back(uv);
      u_run_bytes += uint64_t(positions * co * c) * 2;
    } else {
      gemm_in.push_back(*u_const);
    }
    const DType m_dtype = chain.size() == 1 ? DType::f16 : DType::f32;
    const ValueId m = g.add_value(last.name + ".winograd_m", TensorType{{positions, rows, co}, m_dtype, {}});
    Node gemm;
    gemm.op = Op::winograd_gemm;
    gemm.name = last.name + ".winograd_gemm";
    gemm.inputs = std::move(gemm_in);
    gemm.outputs = {m};
    gemm.attrs.set("dtype", std::string(m_dtype == DType::f16 ? "f16" : "f32"));
    nodes.push_back(std::move(gemm));
    Node out;
    out.op = Op::winograd_output;
    out.name = last.name;
    out.inputs = {m, has_operand(head, 2) ? head.inputs[2] : kNoValue, has_operand(head, 3) ? head.inputs[3] : kNoValue};
    trim_operands(out);
    out.outputs = {last.outputs[0]};
    out.attrs.set("height", h);
    out.attrs.set("width", w);
    out.attrs.set("tile", tile);
    out.attrs.set("dtype", std::string("f16"));
    if (head.attrs.has("acc_scale")) out.attrs.set("acc_scale", head.attrs.get_float("acc_scale"));
    if (head.attrs.has("residual_scale")) out.attrs.set("residual_scale", head.attrs.get_float("residual_scale"));
    if (last.attrs.has("out_scale")) out.attrs.set("out_scale", last.attrs.get_float("out_scale"));
    nodes.push_back(std::move(out));
    ++rewritten;
  }
  uint64_t u_bytes = 0;  // the weights this plan reads as U (f16)
  for (const auto& [ws, id] : weights_made)
    if (id) u_bytes += uint64_t(g.value(*id).type.elements()) * 2;
  g.nodes() = std::move(nodes);
  g.compact();
  ctx.log.push_back(fmt::format("winograd_convs: {} conv chains as Winograd F({}x{}, 3x3) ({} frames "
                                "transformed, {} MiB of V in all, {} MiB of U held, {} MiB of U computed at each "
                                "run), {} kept (weights beyond f16), {} single convs kept (their scratch above the "
                                "activations' peak)",
                                rewritten, tile, tile, transformed.size(), v_bytes >> 20, u_bytes >> 20,
                                u_run_bytes >> 20, kept_range, kept_peak));
  return Status::ok();
}

}  // namespace strata

// pad_channels: channel counts padded to the GEMM tile, invisibly.
//
// Rewrites: every GEMM producer (conv_gemm, linear) writes its output channels
// padded to padded_channel_count(C): a multiple of CompileOptions::channel_tile (64 by
// default: 3 → 4, 16 → 16, 96 → 128, 144 → 192; 32 for f16 tensor-core plans: 96 →
// 96), or of 4 for counts below the tile. Its
// weight and bias become zero-padded derived tensors in ctx.weights, named
// "<orig>[pad 96x64x3x3->128x64x3x3]" (input channels are padded to what the input
// value holds, so a padded input meets zero weight columns). Padding then flows
// through every op that keeps padded channels exactly zero:
//   - norm_act: γ, β, bias zero-padded (given statistics are per group, untouched);
//     `channels` = the real count (statistics use the real channels, padded ones
//     come out 0);
//   - silu, gelu, cast; scale with add = 0; clamp whose range holds 0;
//   - add / mul of two equally padded operands; with a constant broadcast per channel
//     (the Qwen latents_std / mean) the constant is zero-padded; mul by a constant
//     broadcast along the channel dim keeps zeros;
//   - reshape (when the channel dim stays one dim: [1,C,H,W] → [C,H·W]), permute,
//     slice along another axis, upsample_nearest along other dims, concat along another
//     axis of equally padded operands;
//   - attention: q and k padded alike on the head dim contract over zeros (its scale
//     attribute already holds 1/√C_real), a padded v gives a padded result.
// A padded operand of any other op (softmax, raw norms and convs, matmul, ...) is
// sliced back to its real channels first ("<value>.unpad"); a slice along the padded
// axis reads real channels only and its result is unpadded (Qwen's q | k | v split).
// Graph inputs are never padded, except that a conv_gemm reading an unpadded value
// whose channel count is not a multiple of 4 gets it concatenated with zeros
// ("strata.zeros[...]") so that every conv input has 4k channels. Graph outputs keep
// their real shape (and their value): the padded result is renamed "<out>.padded" and
// a slice back to the real channels produces the output.
//
// Requires: logical layouts (runs before assign_layout); conv_gemm weights in "oihw" or
// "o_hwi" (padded as the view [Co, kh·kw, Ci]).
// Preserves: what the graph computes, bit for bit in f32 (padded channels are exact
// zeros, and adding zero products changes no sum); node names; the names of values
// that are not padded constants. Nodes and values are added (unpad slices), constants
// no node reads any more are dropped (Graph::compact).
#include "passes/passes.h"

#include "ir/infer.h"

#include <fmt/format.h>

#include <map>

namespace strata {
namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// The stored channel count for `c` real channels (tile <= 0: no padding).
int64_t padded_count(int64_t c, int64_t tile) {
  if (tile <= 0 || c <= 0) return c;
  return c < tile ? round_up(c, 4) : round_up(c, tile);
}

std::string dims_str(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out;
}

// `src` (row major, shape `from`) in the leading corner of a zero tensor of shape `to`.
std::vector<float> corner_copy(const std::vector<float>& src, const Shape& from, const Shape& to) {
  std::vector<float> dst(static_cast<size_t>(num_elements(to)), 0.0f);
  std::vector<int64_t> idx(from.size(), 0);  // src's multi-index, walked in order
  for (float x : src) {
    int64_t off = 0;
    for (size_t d = 0; d < to.size(); ++d) off = off * to[d] + idx[d];
    dst[static_cast<size_t>(off)] = x;
    for (size_t d = from.size(); d-- > 0 && ++idx[d] == from[d];) idx[d] = 0;
  }
  return dst;
}

// Dim `axis` of a value holds `real` real channels followed by zeros; axis < 0: the
// value is not padded.
struct Pad {
  int64_t axis = -1;
  int64_t real = 0;
  bool padded() const { return axis >= 0; }
  bool operator==(const Pad&) const = default;
};

class PadRewriter {
public:
  PadRewriter(Graph& g, PassContext& ctx) : g_(g), ctx_(ctx), pad_(g.values().size()) {}

  Status run() {
    std::vector<Node> old = std::move(g_.nodes());
    g_.nodes().clear();
    for (Node& n : old) {
      Status s = rewrite(n);
      if (!s) return s.with_context(fmt::format("node '{}' ({})", n.name, op_name(n.op)));
    }
    STRATA_RETURN_IF_ERROR(unpad_outputs());
    g_.nodes() = std::move(out_);
    g_.compact();
    int64_t padded_values = 0;
    for (const Pad& p : pad_) padded_values += p.padded();
    ctx_.log.push_back(fmt::format("pad_channels: {} values padded (tile {}), {} weights padded, {} unpad slices",
                                   padded_values, ctx_.options.channel_tile, padded_weights_, unpad_slices_));
    return Status::ok();
  }

private:
  int64_t tile() const { return ctx_.options.channel_tile; }
  Pad info(ValueId v) const { return v == kNoValue ? Pad{} : pad_[static_cast<size_t>(v)]; }
  const Shape& shape(ValueId v) const { return g_.value(v).type.shape; }
  bool is_constant(ValueId v) const { return v != kNoValue && g_.value(v).kind == ValueKind::constant; }

  ValueId new_value(const std::string& name, TensorType type, Pad p = {}) {
    ValueId id = g_.add_value(name, std::move(type));
    pad_.resize(g_.values().size());
    pad_[static_cast<size_t>(id)] = p;
    return id;
  }

  // Infers n's output type from its (rewritten) operands, records its pad, emits it.
  Status emit(Node n, Pad out_pad) {
    std::vector<const TensorType*> types;
    for (ValueId v : n.inputs) types.push_back(v == kNoValue ? nullptr : &g_.value(v).type);
    auto inferred = infer_output_types(n.op, n.attrs, types);
    if (!inferred) return inferred.status();
    for (size_t i = 0; i < n.outputs.size() && i < inferred->size(); ++i) {
      TensorType& t = g_.value(n.outputs[i]).type;
      t.shape = (*inferred)[i].shape;
      t.dtype = (*inferred)[i].dtype;
      pad_[static_cast<size_t>(n.outputs[i])] = out_pad;
    }
    out_.push_back(std::move(n));
    return Status::ok();
  }

  // The real channels of a padded value (a slice, shared by all its readers).
  ValueId unpad(ValueId v) {
    Pad p = info(v);
    if (!p.padded()) return v;
    if (auto it = unpadded_.find(v); it != unpadded_.end()) return it->second;
    TensorType t = g_.value(v).type;
    t.shape[static_cast<size_t>(p.axis)] = p.real;
    std::string name = g_.value(v).name + ".unpad";
    ValueId r = new_value(name, t);
    out_.push_back(Node{Op::slice, g_.value(r).name, Attrs{{"axis", p.axis}, {"start", int64_t{0}}, {"end", p.real}},
                        {v}, {r}});
    ++unpad_slices_;
    unpadded_[v] = r;
    return r;
  }

  // A constant holding `c`'s elements in the leading corner of shape `to`, zeros
  // elsewhere. `to` has c's rank (or rank 1 with c treated as a flat vector).
  Expected<ValueId> pad_constant(ValueId c, const Shape& to) {
    const Value& v = g_.value(c);
    return pad_constant(c, to.size() == 1 ? Shape{v.type.elements()} : v.type.shape, to, to);
  }

  // The general form: c's elements viewed as `from`, padded to `to` (same rank), the
  // result stored with shape `result` (to's element count).
  Expected<ValueId> pad_constant(ValueId c, const Shape& from, const Shape& to, const Shape& result) {
    const Value& v = g_.value(c);
    if (from == to) return c;
    bool fits = from.size() == to.size();
    for (size_t d = 0; fits && d < to.size(); ++d) fits = from[d] <= to[d];
    if (!fits) return error("cannot pad constant %{} of shape {} to {}", v.name, shape_str(from), shape_str(to));
    std::string weight = fmt::format("{}[pad {}->{}]", v.weight, dims_str(from), dims_str(to));
    auto key = std::make_pair(c, to);
    if (auto it = padded_consts_.find(key); it != padded_consts_.end()) return it->second;
    if (!ctx_.weights.contains(weight)) {
      STRATA_ASSIGN_OR_RETURN(TensorView view, ctx_.weights.get(v.weight));
      std::vector<float> src = view.to_f32();
      if (static_cast<int64_t>(src.size()) != num_elements(from))
        return error("weight '{}' has {} elements, constant %{} expects {}", v.weight, src.size(), v.name,
                     num_elements(from));
      STRATA_RETURN_IF_ERROR(ctx_.weights.add_owned(weight, result, corner_copy(src, from, to)));
    }
    ValueId r = g_.add_constant(v.name + ".pad", TensorType{result, v.type.dtype, {}}, weight);
    pad_.resize(g_.values().size());
    padded_consts_[key] = r;
    ++padded_weights_;
    return r;
  }

  // `x` (unpadded) concatenated with zeros along `axis` up to `to` channels.
  Expected<ValueId> pad_activation(ValueId x, int64_t axis, int64_t to) {
    TensorType t = g_.value(x).type;
    int64_t real = t.shape[static_cast<size_t>(axis)];
    Shape zshape = t.shape;
    zshape[static_cast<size_t>(axis)] = to - real;
    std::string weight = "strata.zeros[" + dims_str(zshape) + "]";
    if (!ctx_.weights.contains(weight))
      STRATA_RETURN_IF_ERROR(
          ctx_.weights.add_owned(weight, zshape, std::vector<float>(static_cast<size_t>(num_elements(zshape)), 0.0f)));
    ValueId zeros = g_.add_constant("strata.zeros", TensorType{zshape, t.dtype, {}}, weight);
    pad_.resize(g_.values().size());
    t.shape[static_cast<size_t>(axis)] = to;
    ValueId r = new_value(g_.value(x).name + ".padded", t, Pad{axis, real});
    out_.push_back(Node{Op::concat, g_.value(r).name, Attrs{{"axis", axis}}, {x, zeros}, {r}});
    return r;
  }

  Status rewrite(Node& n) {
    switch (n.op) {
      case Op::conv_gemm: return conv_gemm(n);
      case Op::linear: return linear(n);
      case Op::norm_act: return norm_act(n);
      case Op::silu:
      case Op::gelu:
      case Op::cast: return emit(n, info(n.inputs[0]));
      case Op::scale:
        if (n.attrs.get_float("add", 0.0) == 0.0) return emit(n, info(n.inputs[0]));
        return unpad_all(n);
      case Op::clamp:
        if (n.attrs.get_float("min") <= 0.0 && n.attrs.get_float("max") >= 0.0) return emit(n, info(n.inputs[0]));
        return unpad_all(n);
      case Op::add:
      case Op::mul: return binary(n);
      case Op::upsample_nearest: return upsample(n);
      case Op::reshape: return reshape(n);
      case Op::permute: return permute(n);
      case Op::slice: return slice(n);
      case Op::concat: return concat(n);
      case Op::attention: return attention(n);
      default: return unpad_all(n);
    }
  }

  Status unpad_all(Node& n) {
    for (ValueId& v : n.inputs)
      if (v != kNoValue) v = unpad(v);
    return emit(n, {});
  }

  Status conv_gemm(Node& n) {
    STRATA_ASSIGN_OR_RETURN(const WeightLayout layout, conv_weight_layout(n.attrs));
    ValueId& x = n.inputs[0];
    ValueId w = n.inputs[1];
    ValueId b = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
    ValueId r = n.inputs.size() > 3 ? n.inputs[3] : kNoValue;
    if (!is_constant(w) || (b != kNoValue && !is_constant(b))) return unpad_all(n);
    if (info(x).padded() && info(x).axis != 1) x = unpad(x);
    int64_t ci = shape(x)[1];
    if (!info(x).padded() && ci % 4 != 0) {
      STRATA_ASSIGN_OR_RETURN(x, pad_activation(x, 1, round_up(ci, 4)));
      ci = shape(x)[1];
    }
    Shape ws = shape(w);
    int64_t co = ws[0], cop = padded_count(co, tile());
    if (r != kNoValue) {  // the residual decides: its stored channels are the output's
      Pad pr = info(r);
      if (pr.padded() && (pr.axis != 1 || pr.real != co)) r = n.inputs[3] = unpad(r);
      cop = shape(r)[1];
    }
    if (layout == WeightLayout::oihw) {
      STRATA_ASSIGN_OR_RETURN(n.inputs[1], pad_constant(w, {cop, ci, ws[2], ws[3]}));
    } else {  // o_hwi [Co, taps·Ci]: pad the view [Co, taps, Ci]
      auto k = n.attrs.get_ints("kernel");
      int64_t taps = k[0] * k[1];
      STRATA_ASSIGN_OR_RETURN(n.inputs[1],
                              pad_constant(w, {co, taps, ws[1] / taps}, {cop, taps, ci}, {cop, taps * ci}));
    }
    if (b != kNoValue) {
      STRATA_ASSIGN_OR_RETURN(n.inputs[2], pad_constant(b, {cop}));
    }
    return emit(n, cop > co ? Pad{1, co} : Pad{});
  }

  Status linear(Node& n) {
    ValueId& x = n.inputs[0];
    ValueId w = n.inputs[1];
    ValueId b = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
    if (!is_constant(w) || (b != kNoValue && !is_constant(b))) return unpad_all(n);
    int64_t last = static_cast<int64_t>(shape(x).size()) - 1;
    if (info(x).padded() && info(x).axis != last) x = unpad(x);
    int64_t k = shape(x).back(), m = shape(w)[0], mp = padded_count(m, tile());
    STRATA_ASSIGN_OR_RETURN(n.inputs[1], pad_constant(w, {mp, k}));
    if (b != kNoValue) {
      STRATA_ASSIGN_OR_RETURN(n.inputs[2], pad_constant(b, {mp}));
    }
    return emit(n, mp > m ? Pad{last, m} : Pad{});
  }

  Status norm_act(Node& n) {
    ValueId& x = n.inputs[0];
    if (info(x).padded() && info(x).axis != 1) x = unpad(x);
    Pad p = info(x);
    if (!p.padded()) return emit(n, {});
    // Operand 4 (given statistics, per group) is not per channel: it stays as it is.
    const size_t per_channel = std::min<size_t>(n.inputs.size(), 4);
    for (size_t i = 1; i < per_channel; ++i)
      if (n.inputs[i] != kNoValue && !is_constant(n.inputs[i])) return unpad_all(n);
    for (size_t i = 1; i < per_channel; ++i)
      if (n.inputs[i] != kNoValue) {
        STRATA_ASSIGN_OR_RETURN(n.inputs[i], pad_constant(n.inputs[i], {shape(x)[1]}));
      }
    if (!n.attrs.has("channels")) n.attrs.set("channels", p.real);
    return emit(n, p);
  }

  Status binary(Node& n) {
    ValueId a = n.inputs[0], b = n.inputs[1];
    Pad pa = info(a), pb = info(b);
    if (!pa.padded() && !pb.padded()) return emit(n, {});
    int64_t rank = static_cast<int64_t>(std::max(shape(a).size(), shape(b).size()));
    auto out_axis = [&](ValueId v, Pad p) { return p.axis + rank - static_cast<int64_t>(shape(v).size()); };
    if (pa.padded() && pb.padded()) {
      bool same = out_axis(a, pa) == out_axis(b, pb) && pa.real == pb.real &&
                  shape(a)[static_cast<size_t>(pa.axis)] == shape(b)[static_cast<size_t>(pb.axis)];
      if (same) return emit(n, Pad{out_axis(a, pa), pa.real});
      return unpad_all(n);
    }
    size_t pi = pa.padded() ? 0 : 1;  // the padded operand and the other one
    ValueId p = n.inputs[pi], q = n.inputs[1 - pi];
    Pad pp = info(p);
    int64_t axis = out_axis(p, pp);
    int64_t qaxis = axis - (rank - static_cast<int64_t>(shape(q).size()));
    int64_t qdim = qaxis < 0 ? 1 : shape(q)[static_cast<size_t>(qaxis)];
    if (qdim == 1 && n.op == Op::mul) return emit(n, Pad{axis, pp.real});  // 0 · q = 0
    if (qdim == pp.real && qdim != 1 && is_constant(q)) {
      Shape to = shape(q);
      to[static_cast<size_t>(qaxis)] = shape(p)[static_cast<size_t>(pp.axis)];
      STRATA_ASSIGN_OR_RETURN(n.inputs[1 - pi], pad_constant(q, to));
      return emit(n, Pad{axis, pp.real});
    }
    return unpad_all(n);
  }

  Status upsample(Node& n) {
    Pad p = info(n.inputs[0]);
    auto f = n.attrs.get_ints("factors");
    int64_t first = static_cast<int64_t>(shape(n.inputs[0]).size() - f.size());
    if (p.padded() && p.axis >= first && f[static_cast<size_t>(p.axis - first)] != 1) return unpad_all(n);
    return emit(n, p);
  }

  // The channel dim must survive as one dim of the result: same number of elements
  // before it and after it.
  Status reshape(Node& n) {
    ValueId x = n.inputs[0];
    Pad p = info(x);
    if (!p.padded()) return emit(n, {});
    Shape in = shape(x);
    in[static_cast<size_t>(p.axis)] = p.real;
    const Shape& out = shape(n.outputs[0]);  // still the original (real) result shape
    int64_t pre = 1, post = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
      if (d < p.axis) pre *= in[static_cast<size_t>(d)];
      if (d > p.axis) post *= in[static_cast<size_t>(d)];
    }
    for (size_t b = 0; b < out.size(); ++b) {
      int64_t before = 1, after = 1;
      for (size_t d = 0; d < out.size(); ++d) {
        if (d < b) before *= out[d];
        if (d > b) after *= out[d];
      }
      if (before != pre || out[b] != p.real || after != post) continue;
      Shape padded = out;
      padded[b] = shape(x)[static_cast<size_t>(p.axis)];
      n.attrs.set("shape", padded);
      return emit(n, Pad{static_cast<int64_t>(b), p.real});
    }
    return unpad_all(n);
  }

  Status permute(Node& n) {
    Pad p = info(n.inputs[0]);
    if (!p.padded()) return emit(n, {});
    auto perm = n.attrs.get_ints("perm");
    for (size_t j = 0; j < perm.size(); ++j)
      if (perm[j] == p.axis) return emit(n, Pad{static_cast<int64_t>(j), p.real});
    return unpad_all(n);
  }

  Status slice(Node& n) {
    Pad p = info(n.inputs[0]);
    if (!p.padded() || n.attrs.get_int("axis") != p.axis) return emit(n, p);
    if (n.attrs.get_int("end") > p.real) return unpad_all(n);
    return emit(n, {});  // reads real channels only
  }

  Status concat(Node& n) {
    ValueId first = n.inputs[0];
    Pad p0 = info(first);
    bool uniform = p0.padded() && p0.axis != n.attrs.get_int("axis");
    auto stored = [&](ValueId v) { return shape(v)[static_cast<size_t>(p0.axis)]; };
    for (ValueId v : n.inputs) uniform = uniform && info(v) == p0 && stored(v) == stored(first);
    if (uniform) return emit(n, p0);
    return unpad_all(n);
  }

  Status attention(Node& n) {
    int64_t last = static_cast<int64_t>(shape(n.inputs[0]).size()) - 1;
    for (ValueId& v : n.inputs)
      if (info(v).padded() && info(v).axis != last) v = unpad(v);
    ValueId &q = n.inputs[0], &k = n.inputs[1];
    if (shape(q).back() != shape(k).back()) {  // one of q, k padded: both real
      q = unpad(q);
      k = unpad(k);
    }
    return emit(n, info(n.inputs[2]));
  }

  // Graph outputs keep their value (and name) with the real shape: the padded result
  // becomes "<out>.padded" and a slice writes the output.
  Status unpad_outputs() {
    for (ValueId v : g_.outputs()) {
      Pad p = info(v);
      if (!p.padded()) continue;
      TensorType padded_type = g_.value(v).type;
      ValueId fresh = new_value(g_.value(v).name + ".padded", padded_type, p);
      for (Node& n : out_) {
        for (ValueId& in : n.inputs)
          if (in == v) in = fresh;
        for (ValueId& o : n.outputs)
          if (o == v) o = fresh;
      }
      g_.value(v).type.shape[static_cast<size_t>(p.axis)] = p.real;
      pad_[static_cast<size_t>(v)] = {};
      out_.push_back(Node{Op::slice, g_.value(v).name + ".unpad",
                          Attrs{{"axis", p.axis}, {"start", int64_t{0}}, {"end", p.real}}, {fresh}, {v}});
      ++unpad_slices_;
    }
    return Status::ok();
  }

  Graph& g_;
  PassContext& ctx_;
  std::vector<Pad> pad_;  // per ValueId
  std::vector<Node> out_;
  std::map<ValueId, ValueId> unpadded_;
  std::map<std::pair<ValueId, Shape>, ValueId> padded_consts_;
  int64_t padded_weights_ = 0;
  int64_t unpad_slices_ = 0;
};

}  // namespace

Status run_pad_channels(Graph& graph, PassContext& ctx) { return PadRewriter(graph, ctx).run(); }

}  // namespace strata

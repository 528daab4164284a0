// lower_precision: f16 activation storage, f32 accumulation, power-of-two range guards.
//
// Runs only when CompileOptions::precision is f16; with f32 the graph is unchanged.
//
// Rewrites:
//   - Storage: conv_gemm and norm_act get dtype = "f16" (their kernels accumulate in
//     f32 and store f16). Other ops store what their first operand is (the op rules),
//     so the attention block, pointwise ops and reshapes after an f16 value are f16.
//     Graph inputs stay f32 (so the de-normalisation before the first conv runs in
//     f32), and graph outputs stay f32: a conv_gemm / norm_act whose result reaches an
//     output through reshape / permute / slice / clamp / scale / cast keeps dtype "f32";
//     any other f16 output gets a cast to f32 (keeping the output's name).
//   - Transformer ops (Z-Image, docs/ZIMAGE.md): token_rms_norm results are stored
//     f16 (normalised values; dtype attr), and so are linear results (dtype attr:
//     projections, FFN hiddens, modulation vectors; the tensor-core GEMM reads f16 x
//     and writes f16 y) — except a linear whose result starts a residual stream
//     (reaches an add or a concat through reshape / permute / slice / cast: the x and
//     caption embedders) and one that reaches a graph output: those store f32. The
//     op rules carry f16 on: mul of an f16 norm by the modulation, rope, attention,
//     silu. The residual stream itself stays f32 (add stores its first operand's
//     dtype, the stream). Measured on zimage_small: docs/ZIMAGE.md.
//   - States (ir/program.h) are no boundary: the plans of a program store them, the
//     host does not. A state input is f16; a state output is stored f16 with its real
//     values (exponent 0: a guarded value gets an f16 `scale` back, "<v>.unguard"; an
//     f32 one a cast to f16), so every plan reads and writes a state alike.
//   - Weights: a constant (f32 or bf16) read only as conv_gemm's weight (operand 1), whose values
//     are all within f16's range, gets dtype "f16": the tensor-core conv kernel multiplies f16 × f16 (products exact in its
//     f32 accumulator), the portable one converts on load; the interpreter rounds the
//     constant the same way. Biases stay f32 (added in the f32 epilogue).
//     CompileOptions::f16_conv_weights = false keeps every weight f32.
//   - A cast whose operand ends up with the cast's dtype (a norm cast to f16 that is
//     now stored f16) becomes a reshape to its own shape: an alias, no dispatch.
//   - Range guards: every f16 conv_gemm result (an un-normalised stream: conv_in's
//     output, the resnets' residual sums, the mid-block stream, the inputs of 1×1
//     shortcut and upsample convs, conv1's output before norm2) is stored as y · 2^-k
//     (out_scale = 2^-k in its epilogue) — except a conv whose result reaches ops that
//     need real values (Qwen's to_qkv, read by attention's q and k): that is a
//     projection of normalised values, not a stream. Every reader scales back in
//     f32: conv_gemm acc_scale (its input) and residual_scale (its residual), norm_act
//     in_scale, group_moments in_scale. The
//     guard exponent travels with the value through reshape / permute / slice /
//     upsample / cast; scale and clamp fold it into their attributes (add · 2^-k,
//     bounds · 2^-k); mul adds exponents; add and concat bring operands to the largest
//     exponent with a `scale` node on the others ("<v>.guard", a down-scale by a power
//     of two, so it cannot overflow); an op that is not linear in its operand (softmax,
//     linear's bias, attention's q and k, raw norms and convs) reads a cast to f32
//     scaled back ("<v>.unguard"). norm_act results, linear and attention results are
//     not guarded: they are normalised (or computed from normalised values, bounded by
//     |W|·√C·max|x|), and lack an out_scale. Powers of two make every guard exact in
//     the normal f16 range (only values below 2^-14 · 2^k ≈ 1e-3 lose bits, to
//     subnormals, an absolute error ≤ 2^-24 · 2^k).
//   - k = CompileOptions::range_guard_log2, default kDefaultRangeGuardLog2 = 4: the
//     seeds measured stream maxima of 1.5e5 on random latents at full size, past f16's
//     65504 (unguarded, 68 % of an image turned NaN); 1.5e5 · 2^-4 ≈ 9.4e3 leaves 7×
//     headroom. k = 0 turns guards off. check_ranges() (lower_precision.h) measures:
//     strata's own seeded full-size weights (N(0, 1/fan_in) convs) keep streams small
//     (max |x| ≈ 20 for Flux, 8 for Qwen-Image on a N(0,1) 8×8 latent), where the guard
//     costs nothing; real checkpoints and latents are what it is for.
//
// Error bound (documented, tested): the f16 graph's output is within PSNR ≥ 55 dB
// (peak-to-peak 2, i.e. RMS error ≤ 2·10^(-55/20) ≈ 3.6e-3) of the f32 graph's, with no
// NaN / inf. Why: every f16 store rounds with relative error ≤ 2^-11 (RMS ≈ 2^-11/√3);
// normalisation and the f32 accumulations do not amplify it, so a few dozen stores
// along the deepest path leave the output error near 1e-3 · |signal| at worst.
// Measured (interpreter, tests/passes/test_lower_precision.cpp): shared cases through
// the whole pipeline flux_small 70 dB, qwen_small 82 dB; decoder-shaped graphs with
// 16 / 96 / 144 channels 79 dB.
//
// Requires: fused ops (conv_gemm, norm_act) for the f16 storage to matter; runs after
// pad_channels and assign_layout (new nodes copy their operand's layout).
// Preserves: shapes, layouts, node and value names (added: guard scales and casts);
// what the graph computes, up to f16 rounding of the stored values.
#include "passes/passes.h"

#include "ir/infer.h"
#include "ir/interpreter.h"
#include "passes/lower_precision.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

namespace strata {
namespace {

// conv_gemm / norm_act nodes whose result reaches a graph output through ops that
// only move or clamp it: they store f32.
std::set<size_t> output_producers(const Graph& g) {
  std::set<size_t> out;
  auto producers = g.producers();
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    if (g.output_state(i)) continue;  // stored f16 (see the header)
    const ValueId v = g.outputs()[i];
    for (int64_t p = producers[static_cast<size_t>(v)]; p >= 0;) {
      const Node& n = g.nodes()[static_cast<size_t>(p)];
      if (n.op == Op::conv_gemm || n.op == Op::norm_act || n.op == Op::linear || n.op == Op::token_rms_norm) {
        out.insert(static_cast<size_t>(p));
        break;
      }
      bool passes_through = n.op == Op::reshape || n.op == Op::permute || n.op == Op::slice ||
                            n.op == Op::clamp || n.op == Op::scale || n.op == Op::cast;
      if (!passes_through) break;
      p = producers[static_cast<size_t>(n.inputs[0])];
    }
  }
  return out;
}

// conv_gemm nodes whose result is not guarded: some path from it through reshape /
// permute / slice / upsample / cast reaches an op that needs real values (attention's
// q or k, softmax, linear...). Such a result is a projection of normalised values, not
// a stream (Qwen's to_qkv, whose q and k slices feed attention): guarding it would
// only add an f32 unguard copy before those readers. (Graph outputs do not count:
// fix_outputs scales them back in f32.)
std::set<size_t> unguarded_convs(const Graph& g) {
  std::vector<std::vector<std::pair<size_t, size_t>>> readers(g.values().size());  // (node, slot)
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (size_t s = 0; s < g.nodes()[i].inputs.size(); ++s)
      if (g.nodes()[i].inputs[s] != kNoValue) readers[static_cast<size_t>(g.nodes()[i].inputs[s])].push_back({i, s});
  auto absorbs_guard = [](const Node& n, size_t slot) {
    switch (n.op) {
      case Op::conv_gemm:
      case Op::norm_act:
      case Op::group_moments:
      case Op::add:
      case Op::mul:
      case Op::concat:
      case Op::scale:
      case Op::clamp: return true;
      case Op::attention: return slot == 2;
      default: return false;
    }
  };
  std::set<size_t> out;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.nodes()[i].op != Op::conv_gemm) continue;
    bool needs_real = false;
    std::vector<ValueId> todo{g.nodes()[i].outputs[0]};
    while (!todo.empty()) {
      ValueId v = todo.back();
      todo.pop_back();
      for (auto [r, slot] : readers[static_cast<size_t>(v)]) {
        const Node& n = g.nodes()[r];
        bool moves = n.op == Op::reshape || n.op == Op::permute || n.op == Op::slice ||
                     n.op == Op::upsample_nearest || n.op == Op::cast;
        if (moves) todo.push_back(n.outputs[0]);
        else needs_real = needs_real || !absorbs_guard(n, slot);
      }
    }
    if (needs_real) out.insert(i);
  }
  return out;
}

// linear nodes whose result starts or joins a residual stream: some path from it
// through reshape / permute / slice / cast reaches an add or a concat (Z-Image's x
// and caption embedders, whose rows are concatenated with the pad tokens and then
// carry the refiners' residual sums). A stream is not normalised, so it stays f32;
// every other linear result (projections, FFN hiddens, modulation vectors) is read
// by a norm, an activation, attention or another linear, and is stored f16.
std::set<size_t> stream_linears(const Graph& g) {
  std::vector<std::vector<size_t>> readers(g.values().size());
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (ValueId v : g.nodes()[i].inputs)
      if (v != kNoValue) readers[static_cast<size_t>(v)].push_back(i);
  std::set<size_t> out;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.nodes()[i].op != Op::linear) continue;
    std::vector<ValueId> todo{g.nodes()[i].outputs[0]};
    while (!todo.empty() && !out.count(i)) {
      const ValueId v = todo.back();
      todo.pop_back();
      for (size_t r : readers[static_cast<size_t>(v)]) {
        const Node& n = g.nodes()[r];
        if (n.op == Op::reshape || n.op == Op::permute || n.op == Op::slice || n.op == Op::cast)
          todo.push_back(n.outputs[0]);
        else if (n.op == Op::add || n.op == Op::concat)
          out.insert(i);
      }
    }
  }
  return out;
}

// Multiplies a float attribute (default 1) by `f`; drops it when it becomes 1.
void scale_attr(Attrs& a, const std::string& name, double f) {
  double v = a.get_float(name, 1.0) * f;
  if (v == 1.0) a.erase(name);
  else a.set(name, v);
}

class Guards {
public:
  Guards(Graph& g, int k) : g_(g), k_(k), exp_(g.values().size(), 0) {}

  Status run(const std::set<size_t>& f32_nodes, const std::set<size_t>& unguarded) {
    std::vector<Node> old = std::move(g_.nodes());
    g_.nodes().clear();
    for (size_t i = 0; i < old.size(); ++i) {
      Node& n = old[i];
      if (n.op == Op::conv_gemm || n.op == Op::norm_act || n.op == Op::token_rms_norm ||
          (n.op == Op::linear && !n.attrs.has("dtype")))
        n.attrs.set("dtype", std::string(f32_nodes.count(i) ? "f32" : "f16"));
      guard_this_ = !unguarded.count(i);
      Status s = rewrite(n);
      if (!s) return s.with_context(fmt::format("node '{}' ({})", n.name, op_name(n.op)));
    }
    fix_outputs();
    g_.nodes() = std::move(out_);
    return Status::ok();
  }

  int64_t guarded = 0, rescales = 0, unguards = 0, output_casts = 0;

private:
  int e(ValueId v) const { return v == kNoValue ? 0 : exp_[static_cast<size_t>(v)]; }
  static double pow2(int n) { return std::ldexp(1.0, n); }

  ValueId new_value(const std::string& name, TensorType t, int exponent) {
    ValueId id = g_.add_value(name, std::move(t));
    exp_.resize(g_.values().size(), 0);
    exp_[static_cast<size_t>(id)] = exponent;
    return id;
  }

  // Emits n with its output types re-derived (dtype follows the operands), exponent `x`.
  Status emit(Node n, int x) {
    std::vector<const TensorType*> types;
    for (ValueId v : n.inputs) types.push_back(v == kNoValue ? nullptr : &g_.value(v).type);
    auto inferred = infer_output_types(n.op, n.attrs, types);
    if (!inferred) return inferred.status();
    for (size_t i = 0; i < n.outputs.size() && i < inferred->size(); ++i) {
      g_.value(n.outputs[i]).type.dtype = (*inferred)[i].dtype;
      exp_[static_cast<size_t>(n.outputs[i])] = x;
    }
    out_.push_back(std::move(n));
    return Status::ok();
  }

  // v stored with exponent `to` (>= e(v)): a down-scale in v's own dtype.
  ValueId rescale(ValueId v, int to) {
    if (e(v) == to) return v;
    auto key = std::make_pair(v, to);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    ValueId r = new_value(g_.value(v).name + ".guard", g_.value(v).type, to);
    out_.push_back(Node{Op::scale, g_.value(r).name, Attrs{{"mul", pow2(e(v) - to)}}, {v}, {r}});
    ++rescales;
    return cache_[key] = r;
  }

  // v's real values in f32 (exponent 0).
  ValueId unguard(ValueId v) {
    if (e(v) == 0) return v;
    auto key = std::make_pair(v, 0);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    ValueId x = v;
    if (g_.value(v).type.dtype != DType::f32) {
      TensorType t = g_.value(v).type;
      t.dtype = DType::f32;
      x = new_value(g_.value(v).name + ".f32", t, e(v));
      out_.push_back(Node{Op::cast, g_.value(x).name, Attrs{{"dtype", std::string("f32")}}, {v}, {x}});
    }
    ValueId r = new_value(g_.value(v).name + ".unguard", g_.value(x).type, 0);
    out_.push_back(Node{Op::scale, g_.value(r).name, Attrs{{"mul", pow2(e(v))}}, {x}, {r}});
    ++unguards;
    return cache_[key] = r;
  }

  Status rewrite(Node& n) {
    ValueId x = n.inputs[0];
    switch (n.op) {
      case Op::conv_gemm: {
        scale_attr(n.attrs, "acc_scale", pow2(e(x)));
        if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) scale_attr(n.attrs, "residual_scale", pow2(e(n.inputs[3])));
        bool guard = n.attrs.get_string("dtype") == "f16" && k_ != 0 && guard_this_;
        if (guard) {
          scale_attr(n.attrs, "out_scale", pow2(-k_));
          ++guarded;
        }
        return emit(n, guard ? k_ : 0);
      }
      case Op::norm_act:
      case Op::group_moments: scale_attr(n.attrs, "in_scale", pow2(e(x))); return emit(n, 0);
      case Op::reshape:
      case Op::permute:
      case Op::slice:
      case Op::upsample_nearest:
      case Op::cast: return emit(n, e(x));
      case Op::scale:
        if (n.attrs.has("add")) n.attrs.set("add", n.attrs.get_float("add") * pow2(-e(x)));
        return emit(n, e(x));
      case Op::clamp:
        n.attrs.set("min", n.attrs.get_float("min") * pow2(-e(x)));
        n.attrs.set("max", n.attrs.get_float("max") * pow2(-e(x)));
        return emit(n, e(x));
      case Op::mul: return emit(n, e(n.inputs[0]) + e(n.inputs[1]));
      case Op::add:
      case Op::concat: {
        int top = 0;
        for (ValueId v : n.inputs) top = std::max(top, e(v));
        for (ValueId& v : n.inputs) v = rescale(v, top);
        return emit(n, top);
      }
      case Op::attention:
        n.inputs[0] = unguard(n.inputs[0]);
        n.inputs[1] = unguard(n.inputs[1]);
        return emit(n, e(n.inputs[2]));
      default:
        for (ValueId& v : n.inputs)
          if (v != kNoValue) v = unguard(v);
        return emit(n, 0);
    }
  }

  // Graph outputs: f32 real values under their own names; state outputs f16 real
  // values (fix_state_output).
  void fix_outputs() {
    std::set<ValueId> seen;
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      const ValueId v = g_.outputs()[i];
      if (g_.output_state(i)) {
        fix_state_output(v);
        continue;
      }
      const TensorType t = g_.value(v).type;
      if (!seen.insert(v).second || (t.dtype == DType::f32 && e(v) == 0)) continue;
      if (g_.value(v).kind != ValueKind::intermediate) continue;
      ValueId inner = new_value(g_.value(v).name + ".stored", t, e(v));
      for (Node& n : out_) {
        for (ValueId& in : n.inputs)
          if (in == v) in = inner;
        for (ValueId& o : n.outputs)
          if (o == v) o = inner;
      }
      ValueId src = inner;
      if (t.dtype != DType::f32) {
        TensorType f = t;
        f.dtype = DType::f32;
        ValueId dst = e(v) == 0 ? v : new_value(g_.value(v).name + ".f32", f, e(v));
        g_.value(v).type.dtype = DType::f32;
        out_.push_back(Node{Op::cast, g_.value(v).name + ".to_f32", Attrs{{"dtype", std::string("f32")}}, {src}, {dst}});
        src = dst;
      }
      if (e(v) != 0)
        out_.push_back(Node{Op::scale, g_.value(v).name + ".unguard", Attrs{{"mul", pow2(e(v))}}, {src}, {v}});
      exp_[static_cast<size_t>(v)] = 0;
      ++output_casts;
    }
  }

  // A state output as every plan stores it: f16, exponent 0, under its own name.
  void fix_state_output(ValueId v) {
    const TensorType t = g_.value(v).type;
    if (t.dtype == DType::f16 && e(v) == 0) return;
    if (g_.value(v).kind != ValueKind::intermediate) return;  // codegen reports it
    ValueId inner = new_value(g_.value(v).name + ".stored", t, e(v));
    for (Node& n : out_) {
      for (ValueId& in : n.inputs)
        if (in == v) in = inner;
      for (ValueId& o : n.outputs)
        if (o == v) o = inner;
    }
    g_.value(v).type.dtype = DType::f16;
    ValueId src = inner;
    if (t.dtype != DType::f16) {
      TensorType h = t;
      h.dtype = DType::f16;
      ValueId dst = e(v) == 0 ? v : new_value(g_.value(v).name + ".f16", h, e(v));
      out_.push_back(Node{Op::cast, g_.value(v).name + ".to_f16", Attrs{{"dtype", std::string("f16")}}, {src}, {dst}});
      src = dst;
    }
    if (e(v) != 0)  // a power of two: exact, in f16, for values within its range
      out_.push_back(Node{Op::scale, g_.value(v).name + ".unguard", Attrs{{"mul", pow2(e(v))}}, {src}, {v}});
    exp_[static_cast<size_t>(v)] = 0;
    ++output_casts;
  }

  Graph& g_;
  int k_;
  std::vector<int> exp_;  // per ValueId: stored = real · 2^-exp
  std::vector<Node> out_;
  std::map<std::pair<ValueId, int>, ValueId> cache_;
  bool guard_this_ = true;  // the current node may be guarded (unguarded_convs)
};

// Whether every value of weight `name` is finite and within f16's range (a weight
// that is not stays f32: rounding it to f16 would make it infinite).
bool fits_f16(const WeightStore& weights, const std::string& name) {
  auto view = weights.get(name);
  if (!view) return false;
  for (float x : view->to_f32())
    if (!(std::fabs(x) <= kF16Max)) return false;
  return true;
}

}  // namespace

Status run_lower_precision(Graph& g, PassContext& ctx) {
  if (ctx.options.precision != Precision::f16) return Status::ok();
  int k = ctx.options.range_guard_log2.value_or(kDefaultRangeGuardLog2);
  if (k < 0 || k > 24) return error("range_guard_log2 {} outside 0..24", k);
  // State inputs are stored f16 (see the header); their readers follow the op rules.
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (g.input_state(i)) g.value(g.inputs()[i]).type.dtype = DType::f16;
  Guards guards(g, k);
  std::set<size_t> f32_nodes = output_producers(g);
  for (size_t i : stream_linears(g)) f32_nodes.insert(i);
  STRATA_RETURN_IF_ERROR(guards.run(f32_nodes, unguarded_convs(g)));
  // A cast whose operand now has its dtype (MiniMax-H3's cast of a norm to f16, the norm
  // now stored f16) rounds nothing: it becomes a reshape to its own shape, which memory
  // planning makes an alias (no dispatch, no buffer).
  int64_t identity_casts = 0;
  for (Node& n : g.nodes()) {
    if (n.op != Op::cast || n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    const TensorType& x = g.value(n.inputs[0]).type;
    const TensorType& y = g.value(n.outputs[0]).type;
    if (x.dtype != y.dtype || x.shape != y.shape || !(x.layout == y.layout)) continue;
    n.op = Op::reshape;
    n.attrs = Attrs{{"shape", y.shape}};
    ++identity_casts;
  }
  // Conv weights to f16: only constants every reader takes as conv_gemm's weight.
  std::vector<int> conv_weight_reads(g.values().size(), 0), reads(g.values().size(), 0);
  for (const Node& n : g.nodes())
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      if (n.inputs[s] == kNoValue) continue;
      ++reads[static_cast<size_t>(n.inputs[s])];
      if (n.op == Op::conv_gemm && s == 1) ++conv_weight_reads[static_cast<size_t>(n.inputs[s])];
    }
  int64_t f16_weights = 0;
  for (ValueId c : g.constants()) {
    Value& v = g.value(c);
    const size_t i = static_cast<size_t>(c);
    // bf16 weights (checkpoints saved in bf16) too: inside f16's range every bf16
    // value but the tiniest converts exactly, and the tensor-core conv takes only f16.
    const bool wide = v.type.dtype == DType::f32 || v.type.dtype == DType::bf16;
    if (ctx.options.f16_conv_weights && wide && reads[i] > 0 && reads[i] == conv_weight_reads[i] &&
        fits_f16(ctx.weights, v.weight)) {
      v.type.dtype = DType::f16;
      ++f16_weights;
    }
  }
  int64_t f16_values = 0;
  for (const Value& v : g.values()) f16_values += v.type.dtype == DType::f16 && v.kind != ValueKind::constant;
  ctx.log.push_back(fmt::format(
      "lower_precision: {} values f16, {} conv weights f16, range guard 2^-{} on {} conv results, {} rescales, {} "
      "unguards, {} output casts, {} identity casts made aliases",
      f16_values, f16_weights, k, guards.guarded, guards.rescales, guards.unguards, guards.output_casts,
      identity_casts));
  return Status::ok();
}

Expected<std::vector<RangeReport>> check_ranges(const Graph& graph, const WeightStore& weights,
                                                const std::vector<Tensor>& inputs) {
  std::vector<RangeReport> reports;
  InterpretOptions options;
  options.on_value = [&](const Node& n, const Tensor& t) {
    const Value& v = graph.value(n.outputs.front());
    if (v.type.dtype != DType::f16) return;
    RangeReport r{v.name, n.name, 0.0, 0, t.elements()};
    for (float x : t.data) {
      if (!std::isfinite(x)) ++r.nonfinite;
      else r.max_abs = std::max(r.max_abs, static_cast<double>(std::fabs(x)));
    }
    reports.push_back(std::move(r));
  };
  auto run = interpret(graph, weights, inputs, options);
  if (!run) return run.status().with_context("check_ranges");
  return reports;
}

std::string format_range_reports(const std::vector<RangeReport>& reports) {
  std::string out;
  int64_t bad = 0;
  double top = 0.0;
  for (const RangeReport& r : reports) {
    bad += r.overflow();
    top = std::max(top, r.max_abs);
    out += fmt::format("{:>12.5g}  {:>7.1f}x  {}{}{}\n", r.max_abs, r.max_abs > 0 ? kF16Max / r.max_abs : INFINITY,
                       r.value, r.nonfinite ? fmt::format("  ({} of {} inf/NaN)", r.nonfinite, r.elements) : "",
                       r.overflow() ? "  OVERFLOW" : "");
  }
  out += fmt::format("{} f16 sites, largest |x| {:.5g} (f16 max 65504), {} overflowing\n", reports.size(), top, bad);
  return out;
}

}  // namespace strata

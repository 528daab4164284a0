// fuse_norm_act: a normalisation, the SiLU after it and the bias of the conv before it
// become one norm_act node (ir/ops.h), which reads the conv's raw sum once and writes
// the next conv's input once.
//
// Rewrites each group_norm / rms_norm N into norm_act {norm = "group" | "rms", groups,
// eps, silu} at N's place, with operands (x, γ, β?, bias?, stats?) — stats: a
// group_norm's given statistics operand, carried over:
//   - when N's result is read only by a silu S (and is not a graph output), S is
//     absorbed: silu = 1 and the norm_act writes S's result; otherwise silu = 0;
//   - when x is the result of a conv_gemm C that has a bias, no residual and no scale
//     attributes, and N is x's only reader (x is not a graph output), C's bias moves to
//     the norm_act's bias operand (added on read, before the statistics) and C loses
//     it. A conv whose result has other readers (a residual add, a shortcut) keeps its
//     bias, since they must see it.
// layer_norm is left alone (norm_act has no layer variant).
//
// Requires: canonicalize (convs are conv_gemm). Preserves: what the interpreter
// computes, bit for bit where no bias moves (norm_act's kernel is the norm's and the
// silu's); a moved bias is added in f32 to the rounded sum instead of in f64 before
// rounding (≤ 1 ulp of f32 per element).
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <fmt/format.h>

namespace strata {
namespace {

bool has_scale_attrs(const Node& c) {
  return c.attrs.has("acc_scale") || c.attrs.has("residual_scale") || c.attrs.has("out_scale");
}

// The bias of x's producer when it can move into a norm at node `norm` (and removes it
// from the conv), else kNoValue.
ValueId take_conv_bias(Graph& g, const Uses& uses, const std::vector<int64_t>& producers, ValueId x,
                       size_t norm) {
  const int64_t p = producers[static_cast<size_t>(x)];
  if (p < 0 || !uses.only_reader_is(x, norm)) return kNoValue;
  Node& c = g.nodes()[static_cast<size_t>(p)];
  const bool has_bias = c.inputs.size() > 2 && c.inputs[2] != kNoValue;
  const bool has_residual = c.inputs.size() > 3 && c.inputs[3] != kNoValue;
  if (c.op != Op::conv_gemm || !has_bias || has_residual || has_scale_attrs(c)) return kNoValue;
  const ValueId bias = c.inputs[2];
  c.inputs[2] = kNoValue;
  trim_operands(c);
  return bias;
}

}  // namespace

Status run_fuse_norm_act(Graph& g, PassContext& ctx) {
  const Uses uses = find_uses(g);
  const std::vector<int64_t> producers = g.producers();
  std::vector<bool> dead(g.nodes().size(), false);
  int64_t fused = 0, silus = 0, biases = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::group_norm && n.op != Op::rms_norm) continue;
    const bool rms = n.op == Op::rms_norm;
    Node f;
    f.op = Op::norm_act;
    f.name = n.name;
    f.attrs.set("norm", std::string(rms ? "rms" : "group"));
    if (!rms) f.attrs.set("groups", n.attrs.get_int("groups"));
    f.attrs.set("eps", n.attrs.get_float("eps", rms ? 1e-12 : 0.0));
    f.attrs.set("silu", int64_t(0));
    f.outputs = n.outputs;
    const ValueId y = n.outputs[0];
    if (uses.count(y) == 1 && uses.readers[static_cast<size_t>(y)].size() == 1) {
      const size_t s = uses.readers[static_cast<size_t>(y)][0];
      if (g.nodes()[s].op == Op::silu) {
        f.attrs.set("silu", int64_t(1));
        f.outputs = g.nodes()[s].outputs;
        dead[s] = true;
        ++silus;
      }
    }
    const ValueId x = n.inputs[0];
    const ValueId beta = n.inputs.size() > 2 ? n.inputs[2] : kNoValue;
    const ValueId stats = n.inputs.size() > 3 ? n.inputs[3] : kNoValue;
    f.inputs = {x, n.inputs[1], beta, kNoValue, stats};
    const ValueId bias = take_conv_bias(g, uses, producers, x, i);
    if (bias != kNoValue) {
      f.inputs[3] = bias;
      ++biases;
    }
    trim_operands(f);
    g.nodes()[i] = std::move(f);
    ++fused;
  }
  remove_nodes(g, dead);
  ctx.log.push_back(fmt::format("fuse_norm_act: {} norms → norm_act ({} with SiLU, {} conv biases added on read)",
                                fused, silus, biases));
  return Status::ok();
}

}  // namespace strata

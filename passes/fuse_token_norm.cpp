// fuse_token_norm: the transformers' norm epilogues. A token RMSNorm whose result is
// only modulated (· scale) and added to a residual stream becomes one token_rms_norm
// with its mul and residual operands (ir/ops.h), and a SwiGLU gate mul(silu(a), b)
// becomes silu_mul(a, b). Each reads its operands once and writes one result, instead
// of a chain of elementwise dispatches that write and re-read every intermediate
// (Z-Image: per block 2 norms · modulation, 2 norms · gate + residual and one gate).
//
// Rewrites, when CompileOptions::fuse_token_ops is set:
//   - token_rms_norm N(x, γ?) whose result is read only by a mul M (and is no graph
//     output) whose other operand m is a row vector ([C] or [1, …, 1, C]) or x's shape,
//     and M's result has x's shape: N takes m as its mul operand and M's result.
//   - then (with or without a mul) a result read only by an add A whose other operand r
//     has x's shape and A's result x's shape: N takes r as its residual and A's result.
//   The fused node takes the dtype of the result it writes (the last absorbed node's:
//   a modulated norm f16, a residual stream f32 after lower_precision) and the place
//   of the last node it absorbed, where all its operands are computed.
//   - mul M(s, b) or M(b, s) where s is a silu S's result read only by M (no graph
//     output): silu_mul(S's input, b) with M's dtype at M's place; S goes.
//
// Requires: lower_precision (the dtypes it chose for the intermediates are the ones
// the fusion removes; the fused node writes its result's). Preserves: shapes, the
// graph's inputs and outputs, names (the fused node keeps the norm's or the mul's
// name); what the interpreter computes up to the dropped intermediate roundings (the
// fused forms are computed in f64 and rounded once).
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <fmt/format.h>

namespace strata {
namespace {

// m multiplies a [..., C] value row by row (every dim but the last 1) or elementwise.
bool modulates(const Shape& m, const Shape& x) {
  if (m == x) return true;
  if (m.empty() || m.size() > x.size() || m.back() != x.back()) return false;
  for (size_t d = 0; d + 1 < m.size(); ++d)
    if (m[d] != 1) return false;
  return true;
}

struct Counts {
  int64_t muls = 0, residuals = 0, swiglu = 0;
};

// The single reader of v when it is a node of kind `op` not yet absorbed, else -1.
int64_t sole_reader(const Graph& g, const Uses& uses, const std::vector<bool>& dead, ValueId v, Op op) {
  if (uses.count(v) != 1 || uses.readers[static_cast<size_t>(v)].size() != 1) return -1;
  const size_t r = uses.readers[static_cast<size_t>(v)][0];
  if (dead[r] || g.nodes()[r].op != op || !uses.only_reader_is(v, r)) return -1;
  return static_cast<int64_t>(r);
}

// Folds the mul and the add after the norm at node i; returns whether it did.
bool fuse_norm(Graph& g, const Uses& uses, std::vector<bool>& dead, std::vector<bool>& moved, size_t i, Counts& c) {
  const Node& n = g.nodes()[i];
  if (n.op != Op::token_rms_norm || n.inputs.size() > 2) return false;
  const ValueId x = n.inputs[0];
  const Shape xs = g.value(x).type.shape;
  ValueId y = n.outputs[0], mul = kNoValue, residual = kNoValue;
  int64_t last = -1;
  if (int64_t m = sole_reader(g, uses, dead, y, Op::mul); m >= 0) {
    const Node& mn = g.nodes()[static_cast<size_t>(m)];
    const ValueId other = mn.inputs[0] == y ? mn.inputs[1] : mn.inputs[0];
    if (mn.inputs[0] != mn.inputs[1] && modulates(g.value(other).type.shape, xs) &&
        g.value(mn.outputs[0]).type.shape == xs) {
      mul = other;
      y = mn.outputs[0];
      last = m;
    }
  }
  if (int64_t a = sole_reader(g, uses, dead, y, Op::add); a >= 0) {
    const Node& an = g.nodes()[static_cast<size_t>(a)];
    const ValueId other = an.inputs[0] == y ? an.inputs[1] : an.inputs[0];
    if (an.inputs[0] != an.inputs[1] && g.value(other).type.shape == xs && g.value(an.outputs[0]).type.shape == xs) {
      residual = other;
      y = an.outputs[0];
      if (last >= 0) dead[static_cast<size_t>(last)] = true;
      last = a;
    }
  }
  if (last < 0) return false;
  Node f = n;
  f.inputs.resize(4, kNoValue);
  f.inputs[2] = mul;
  f.inputs[3] = residual;
  trim_operands(f);
  f.outputs = {y};
  f.attrs.set("dtype", std::string(dtype_name(g.value(y).type.dtype)));
  c.muls += mul != kNoValue;
  c.residuals += residual != kNoValue;
  g.nodes()[static_cast<size_t>(last)] = std::move(f);
  moved[static_cast<size_t>(last)] = true;
  dead[i] = true;
  return true;
}

// mul(silu(a), b) at node i → silu_mul(a, b); returns whether it did.
bool fuse_swiglu(Graph& g, const Uses& uses, const std::vector<int64_t>& producers, std::vector<bool>& dead,
                 size_t i, Counts& c) {
  const Node& m = g.nodes()[i];
  if (m.op != Op::mul || m.inputs[0] == m.inputs[1]) return false;
  for (size_t k = 0; k < 2; ++k) {
    const int64_t p = producers[static_cast<size_t>(m.inputs[k])];
    if (p < 0 || dead[static_cast<size_t>(p)] || g.nodes()[static_cast<size_t>(p)].op != Op::silu ||
        !uses.only_reader_is(m.inputs[k], i))
      continue;
    Node f;
    f.op = Op::silu_mul;
    f.name = m.name;
    f.inputs = {g.nodes()[static_cast<size_t>(p)].inputs[0], m.inputs[1 - k]};
    f.outputs = m.outputs;
    f.attrs.set("dtype", std::string(dtype_name(g.value(m.outputs[0]).type.dtype)));
    dead[static_cast<size_t>(p)] = true;
    g.nodes()[i] = std::move(f);
    ++c.swiglu;
    return true;
  }
  return false;
}

}  // namespace

Status run_fuse_token_norm(Graph& g, PassContext& ctx) {
  Counts c;
  if (ctx.options.fuse_token_ops) {
    const Uses uses = find_uses(g);
    const std::vector<int64_t> producers = g.producers();
    std::vector<bool> dead(g.nodes().size(), false), moved(g.nodes().size(), false);
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (dead[i] || moved[i]) continue;
      if (!fuse_norm(g, uses, dead, moved, i, c)) fuse_swiglu(g, uses, producers, dead, i, c);
    }
    remove_nodes(g, dead);
  }
  ctx.log.push_back(fmt::format("fuse_token_norm: {} token norms take their modulation, {} their residual add; "
                                "{} silu · gate → silu_mul",
                                c.muls, c.residuals, c.swiglu));
  return Status::ok();
}

}  // namespace strata

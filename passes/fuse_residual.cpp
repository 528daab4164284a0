// fuse_residual: a residual add after a convolution becomes the conv_gemm's epilogue
// (y = acc + bias + residual), so the sum is written once instead of three times.
//
// Rewrites add(a, b) of two operands of the result's shape and dtype where one of them,
// a (or b), is the result of a conv_gemm C that has no residual yet and whose only
// reader is the add (and is not a graph output): C takes the other operand as its
// residual and writes the add's result; the add disappears. When both operands
// qualify, the conv whose own input (operand 0) has fewer bytes takes the other, the
// later one in the graph on a tie. The conv taking the residual runs after the other
// branch, so its input lives across it while the other conv's input may die early
// (passes/schedule.cpp): in a resnet with a 1×1 shortcut from more channels to fewer
// (Flux's up blocks), conv2 takes the shortcut's result and the block input need not
// wait for conv2. C stays where it was when the
// other operand is already computed there, else it moves to the add's place (its own
// operands are all computed before it, so the order stays topological).
// A conv keeps its bias (fuse_norm_act only moves a bias when the norm is the conv's
// only reader, so a conv read by an add still has it). Broadcasting adds (a latent
// shift, a bias) and adds of non-conv results stay.
//
// Requires: canonicalize; runs after fuse_norm_act. Preserves: what the interpreter
// computes, bit for bit (conv_gemm's epilogue adds the residual to the f32-rounded
// conv result in f32, as add does, and the sum does not depend on the operand order).
// Which operand becomes the residual decides which one lower_precision later stores
// in f16 (the residual is stored, the taking conv's own result is added in f32).
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <fmt/format.h>

namespace strata {
namespace {

bool has_residual(const Node& c) { return c.inputs.size() > 3 && c.inputs[3] != kNoValue; }

// Fuses the add at node `i` if it qualifies; returns whether it did.
bool fuse_one(Graph& g, size_t i) {
  const Node& add = g.nodes()[i];
  if (add.op != Op::add) return false;
  const TensorType& out = g.value(add.outputs[0]).type;
  const Uses uses = find_uses(g);
  const std::vector<int64_t> producers = g.producers();
  int64_t best = -1;  // the conv taking the residual
  size_t conv_slot = 0;
  uint64_t best_input_bytes = 0;
  for (size_t k = 0; k < 2; ++k) {
    const ValueId v = add.inputs[k];
    const TensorType& t = g.value(v).type;
    if (t.shape != out.shape || t.dtype != out.dtype) return false;
    const int64_t p = producers[static_cast<size_t>(v)];
    if (p < 0 || !uses.only_reader_is(v, i)) continue;
    const Node& c = g.nodes()[static_cast<size_t>(p)];
    if (c.op != Op::conv_gemm || has_residual(c) || c.attrs.has("residual_scale")) continue;
    const uint64_t input_bytes = g.value(c.inputs[0]).type.bytes();
    if (best < 0 || input_bytes < best_input_bytes || (input_bytes == best_input_bytes && p > best)) {
      best = p;
      conv_slot = k;
      best_input_bytes = input_bytes;
    }
  }
  if (best < 0) return false;
  const auto p = static_cast<size_t>(best);
  const ValueId other = add.inputs[1 - conv_slot];
  Node conv = g.nodes()[p];
  conv.inputs.resize(4, kNoValue);
  conv.inputs[3] = other;
  conv.outputs = add.outputs;
  const bool other_ready = producers[static_cast<size_t>(other)] < best;
  std::vector<bool> dead(g.nodes().size(), false);
  if (other_ready) {
    g.nodes()[p] = std::move(conv);
    dead[i] = true;
  } else {
    g.nodes()[i] = std::move(conv);
    dead[p] = true;
  }
  remove_nodes(g, dead);
  return true;
}

}  // namespace

Status run_fuse_residual(Graph& g, PassContext& ctx) {
  int64_t fused = 0;
  // After a fusion the next unchecked node is again at index i: either the add (at
  // i) was removed, or the conv before it was and the fused conv took i - 1.
  for (size_t i = 0; i < g.nodes().size();) {
    if (fuse_one(g, i))
      ++fused;
    else
      ++i;
  }
  ctx.log.push_back(fmt::format("fuse_residual: {} adds → conv_gemm residuals", fused));
  return Status::ok();
}

}  // namespace strata

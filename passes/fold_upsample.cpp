// fold_upsample: a nearest-2× upsample read by convolutions is folded into their input
// gather, so the 4× larger tensor is never written.
//
// Rewrites: for each upsample_nearest U of a rank-4 [N, C, H, W] value with factors
// [2, 2] (leading factors, if any, all 1), every conv_gemm that reads U's result as its
// input x with gather "plain" instead reads U's operand with gather "upsample2x" (the
// kernel indexes the half-size map, ir/ops.h). U disappears when nothing reads it any
// more and it is not a graph output; an upsample followed by anything else (a norm, a
// graph output, a conv's residual) stays for those readers.
//
// Requires: canonicalize (convs are conv_gemm). Preserves: what the interpreter
// computes, bit for bit (the gather reads the same values in the same order).
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <fmt/format.h>

namespace strata {
namespace {

bool is_nearest_2x(const Graph& g, const Node& n) {
  if (n.op != Op::upsample_nearest || g.value(n.inputs[0]).type.rank() != 4) return false;
  const auto f = n.attrs.get_ints("factors");
  if (f.size() < 2 || f[f.size() - 1] != 2 || f[f.size() - 2] != 2) return false;
  for (size_t i = 0; i + 2 < f.size(); ++i)
    if (f[i] != 1) return false;
  return true;
}

}  // namespace

Status run_fold_upsample(Graph& g, PassContext& ctx) {
  const Uses uses = find_uses(g);
  std::vector<bool> dead(g.nodes().size(), false);
  int64_t folded = 0, removed = 0, kept = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& u = g.nodes()[i];
    if (!is_nearest_2x(g, u)) continue;
    const ValueId small = u.inputs[0], big = u.outputs[0];
    size_t remaining = uses.count(big);
    for (size_t r : uses.readers[static_cast<size_t>(big)]) {
      Node& c = g.nodes()[r];
      if (c.op != Op::conv_gemm || c.inputs[0] != big) continue;
      STRATA_ASSIGN_OR_RETURN(const GatherKind gather, conv_gather(c.attrs));
      if (gather != GatherKind::plain) continue;
      c.inputs[0] = small;
      set_gather(c.attrs, GatherKind::upsample2x);
      --remaining;
      ++folded;
    }
    if (remaining == 0) {
      dead[i] = true;
      ++removed;
    } else {
      ++kept;
    }
  }
  remove_nodes(g, dead);
  ctx.log.push_back(fmt::format("fold_upsample: {} convs gather upsample2x, {} upsamples removed, {} kept", folded,
                                removed, kept));
  return Status::ok();
}

}  // namespace strata

// fold_transposes: the two transposes between an NHWC map and its tokens become views.
//
// An attention block reads a map's pixels as tokens and writes tokens back as a map.
// The models spell that as diffusers does: tokens = permute(reshape(map, [C, H·W]),
// [1, 0]), and map = reshape(permute(tokens, [1, 0]), [1, C, H, W]). With the map
// stored NHWC, its bytes already are the tokens [H·W, C] in row-major order, but each
// step alone moves every element: the reshape to a row-major [C, H·W] and the permute
// back (Flux 1024²: nine copies of 16 MiB, ~0.8 ms on the H200). This pass spells the same
// functions with steps that each keep the bytes
// where they are, so the memory planner makes them aliases (passes/memory_plan.h:
// same_stored_bytes, permute_keeps_bytes) and codegen moves nothing:
//
//   (A) tokens = permute(r = reshape(map, [C, T]), [1, 0]), map [1, C, H, W] NHWC,
//       T = H·W, r read only there:
//         m = reshape(map, [1, C, 1, T]) NHWC       (a spatial regroup)
//         p = permute(m, [0, 3, 2, 1])  [1, T, 1, C] row major
//         tokens = reshape(p, [T, C])
//   (B) map = reshape(q = permute(tokens, [1, 0]), [1, C, H, W]) NHWC, tokens [T, C]
//       row major, q read only there:
//         p = reshape(tokens, [1, T, 1, C])         row major
//         m = permute(p, [0, 3, 2, 1])  [1, C, 1, T] NHWC
//         map = reshape(m, [1, C, H, W]) NHWC
//
// Requires: assign_layout done (the NHWC maps); the maps without channel padding (a
// padded map's pixels are not its tokens). Runs on every target.
// Preserves: what the graph computes, bit for bit (only data movement changes); the
// rewritten node's result keeps its value id and name (tokens in (A), map in (B)).
#include "passes/passes.h"
#include "passes/rewrite.h"

#include <fmt/format.h>

namespace strata {
namespace {

bool unpadded_nhwc_map(const TensorType& t) {
  return t.rank() == 4 && t.shape[0] == 1 && t.layout.kind == LayoutKind::nhwc &&
         (t.layout.padded_channels == 0 || t.layout.padded_channels == t.shape[1]);
}

bool row_major_2d(const TensorType& t) { return t.rank() == 2 && t.layout.is_default(); }

bool is_transpose(const Node& n) {
  return n.op == Op::permute && n.attrs.get_ints("perm") == std::vector<int64_t>{1, 0};
}

Node make(Op op, std::string name, ValueId in, ValueId out, Attrs attrs) {
  Node n;
  n.op = op;
  n.name = std::move(name);
  n.inputs = {in};
  n.outputs = {out};
  n.attrs = std::move(attrs);
  return n;
}

Attrs shape_attr(Shape s) { return Attrs{{"shape", std::vector<int64_t>(s.begin(), s.end())}}; }
const Attrs kSwap{{"perm", std::vector<int64_t>{0, 3, 2, 1}}};

}  // namespace

Status run_fold_transposes(Graph& g, PassContext& ctx) {
  const Uses uses = find_uses(g);
  const std::vector<int64_t> producer = g.producers();
  auto made_by = [&](ValueId v) -> const Node* {
    const int64_t p = producer[static_cast<size_t>(v)];
    return p < 0 ? nullptr : &g.nodes()[static_cast<size_t>(p)];
  };
  std::vector<Node> nodes;
  std::vector<bool> dead(g.nodes().size(), false);
  int64_t to_tokens = 0, to_maps = 0;
  // New nodes go where the rewritten node was; the bypassed node (r or q) becomes dead.
  std::vector<std::vector<Node>> replacement(g.nodes().size());
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    // (A): n = permute [1, 0] of r = reshape(map).
    if (is_transpose(n)) {
      const ValueId r = n.inputs[0];
      const Node* reshape = made_by(r);
      if (reshape == nullptr || reshape->op != Op::reshape || !uses.only_reader_is(r, i) ||
          !replacement[static_cast<size_t>(producer[static_cast<size_t>(r)])].empty())
        continue;
      const ValueId map = reshape->inputs[0];
      // Copies: add_value below may move the values these would refer to.
      const TensorType mt = g.value(map).type;
      const TensorType tt = g.value(n.outputs[0]).type;
      if (!unpadded_nhwc_map(mt) || !row_major_2d(tt) || !row_major_2d(g.value(r).type)) continue;
      const int64_t c = mt.shape[1], t = mt.shape[2] * mt.shape[3];
      if (tt.shape != Shape{t, c}) continue;
      const DType dt = tt.dtype;
      const ValueId m = g.add_value(g.value(r).name + ".map", TensorType{{1, c, 1, t}, dt, mt.layout});
      const ValueId p = g.add_value(g.value(r).name + ".pixels", TensorType{{1, t, 1, c}, dt, {}});
      replacement[i] = {make(Op::reshape, reshape->name, map, m, shape_attr({1, c, 1, t})),
                        make(Op::permute, n.name, m, p, kSwap),
                        make(Op::reshape, n.name, p, n.outputs[0], shape_attr({t, c}))};
      dead[static_cast<size_t>(producer[static_cast<size_t>(r)])] = true;
      ++to_tokens;
      continue;
    }
    // (B): n = reshape of q = permute [1, 0] (tokens) into an NHWC map.
    if (n.op == Op::reshape) {
      const ValueId q = n.inputs[0];
      const Node* transpose = made_by(q);
      if (transpose == nullptr || !is_transpose(*transpose) || !uses.only_reader_is(q, i) ||
          !replacement[static_cast<size_t>(producer[static_cast<size_t>(q)])].empty())
        continue;
      const ValueId tokens = transpose->inputs[0];
      // Copies: add_value below may move the values these would refer to (a reference
      // here crashed once the values' vector grew: Qwen-Image 1024² with more Winograd
      // convs).
      const TensorType tt = g.value(tokens).type;
      const TensorType mt = g.value(n.outputs[0]).type;
      if (!unpadded_nhwc_map(mt) || !row_major_2d(tt) || !row_major_2d(g.value(q).type)) continue;
      const int64_t c = mt.shape[1], t = mt.shape[2] * mt.shape[3];
      if (tt.shape != Shape{t, c}) continue;
      const DType dt = mt.dtype;
      const ValueId p = g.add_value(g.value(q).name + ".pixels", TensorType{{1, t, 1, c}, dt, {}});
      const ValueId m = g.add_value(g.value(q).name + ".map", TensorType{{1, c, 1, t}, dt, mt.layout});
      replacement[i] = {make(Op::reshape, transpose->name, tokens, p, shape_attr({1, t, 1, c})),
                        make(Op::permute, transpose->name, p, m, kSwap),
                        make(Op::reshape, n.name, m, n.outputs[0], shape_attr({1, c, mt.shape[2], mt.shape[3]}))};
      dead[static_cast<size_t>(producer[static_cast<size_t>(q)])] = true;
      ++to_maps;
    }
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (dead[i]) continue;
    if (replacement[i].empty()) nodes.push_back(g.nodes()[i]);
    else for (Node& r : replacement[i]) nodes.push_back(std::move(r));
  }
  g.nodes() = std::move(nodes);
  g.compact();
  ctx.log.push_back(fmt::format("fold_transposes: {} map → tokens and {} tokens → map transpose pairs now views",
                                to_tokens, to_maps));
  return Status::ok();
}

}  // namespace strata

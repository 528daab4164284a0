// attention_gemms: a long single-head attention with a wide head becomes two GEMMs
// around a softmax, in chunks of query rows, so that its multiply-adds run on the
// tensor-core GEMM (the conv kernel as a 1×1 conv: codegen/lower_gemm.cpp) instead
// of the flash kernel.
//
// Why: the decoders' mid-block attention (one head of 384-512 dims over 16 384 tokens
// at 1024², 65 536 at 2048²) runs on attention_coop_dsplit.comp at 77-96 TFLOP/s: a
// subgroup cannot hold a 16-row output tile of 512 columns, so the head dims are split
// over the subgroups and every key block pays a cross-subgroup score reduction, two
// barriers and the softmax between the two MMA phases. The scores written out cost 6 bytes
// each (f32 written and read once by the
// softmax, f16 weights written and read once by the second GEMM) against 4·D FLOPs:
// at D = 512 about a third of the GEMMs' time on the H200.
//
// Rewrites attention(q[Tq, D], k[Tk, D], v[Tk, Dv]) {scale}, no frame_tokens, where
// q, k and v are f16, row major, D ≥ 256, D, Dv and Tk multiples of 8 and Tk ≥ 1024,
// into, per chunk of R query rows [r0, r0 + R):
//   q_c  = slice(q, 0, r0, r0 + R)              (only when there are several chunks)
//   qs_c = scale(q_c) {mul = scale}             f16: the scale folded into q
//   s_c  = linear(qs_c, k) {dtype = "f32"}      [R, Tk] scores, kept in f32
//   p_c  = softmax(s_c) {dtype = "f16"}         [R, Tk] weights
//   o_c  = linear(p_c, vt) {dtype = q's}        [R, Dv], vt = permute(v, [1, 0]) once
// and the result is concat(o_c, axis 0) (the one chunk's o_c when there is one chunk,
// written straight into the attention's value). Chunks bound the scores' memory: R is
// chosen so that s_c and p_c of one chunk (6·R·Tk bytes) take at most twice the
// largest activation of the graph (so the arena's peak, set by the full-size maps of
// a decoder, does not grow; at least 64 MiB), and s_c fits the binding limit.
// Where the target knows its GEMM wave (CompileOptions::gemm_wave_workgroups: the
// workgroups that run at once), R is instead the most rows within those bounds whose
// output GEMM, R/128 × ⌈Dv/128⌉ workgroups, fills whole waves: the output GEMM's long
// reduction (Tk) makes every workgroup take one wave's time, so Flux 2048²'s even
// chunks of 9472 rows (296 workgroups on the H200's 264) took two waves each, at 147
// TFLOP/s; chunks of 8448 rows take one. The scores GEMM has Tk/128 times as many
// workgroups and fills its waves either way. Chunking changes no result: every query
// row's scores, weights and output are computed alike in any chunk.
//
// With CompileOptions::fold_softmax, Tk % 128 == 0, Tk ≥ fold_softmax_min_keys (32768)
// and D ≥ fold_softmax_min_head_dim (512), where it measured faster, the softmax is
// folded into the two GEMMs (ir/ops.h, blocks of kFoldBlock keys), per chunk:
//   e_c  = linear(qs_c, k) {exp_blocks = 32}     f16 [R, Tk + Tk/16]: exp(s − block max)
//                                                and each block's (max, sum)
//   w_c  = block_softmax(e_c) {block = 32}       f16 [R, Tk/32]: each block's weight
//   o_c  = linear(e_c, vt, w_c) {scale_blocks = 32, dtype = q's}
// Why: the f32 scores (4 bytes each, written and read) and the softmax's pass over them
// go; the scores GEMM writes 2.1 bytes per score instead of 4, and the output GEMM
// reads 2 as before (measured on Flux 2048² below). The
// row stride Tk·17/16 halfs keeps every row 16-byte aligned (Tk % 128 == 0). The
// chunks are the unfolded ones (their bytes are bounded by the same budget, now with
// room to spare).
// Runs only when CompileOptions::attention_gemms is set (tensor-core targets, where a
// linear of f16 operands runs on the tensor-core GEMM; compile/target.cpp), after
// lower_precision (the dtypes above are the storage it would choose; nothing later
// changes them). Requires row-major q, k, v (what assign_layout leaves an
// attention's operands).
// Preserves: what the graph computes up to rounding — the flash kernels round the
// weights p to f16 and divide by their sum at the end; here q·scale is rounded to
// f16 and the normalised weights are (tests compare within a bound). Node names: the
// new nodes are "<attention>.scores" and so on; the attention's result value keeps
// its name and id.
#include "passes/passes.h"

#include <fmt/format.h>

#include <algorithm>

namespace strata {
namespace {

constexpr int64_t kMinHeadDim = 256;   // narrower heads fit the flash kernels' registers
constexpr int64_t kMinKeys = 1024;     // shorter: the flash kernel's fixed costs are small
constexpr int64_t kRowMultiple = 128;  // the GEMM's pixel tile
constexpr int64_t kColumnTile = 128;   // the GEMM's channel tile (the output GEMM's Dv)
constexpr uint64_t kMinScoreBytes = 64ull << 20;
constexpr int64_t kFoldBlock = 32;     // the folded softmax's key block: the GEMM's 32-wide fragments and BK
constexpr int64_t kFoldKeys = 128;     // keys a multiple of this: 16-byte aligned rows of e
// Where the fold measured faster on the H200: Flux 2048² (D 512, 65 536
// keys) 227.6 → 224.2 ms; Flux 1024² (16 384 keys) 47.0 either way; Qwen-Image (D 384)
// slower, 28.4 → 28.9 ms at 1024² and 150.9 → 161.5 at 2048². The scores GEMM's
// epilogue (exponentials, block maxima and sums) costs per score what the softmax pass
// saves only over long rows and wide heads. Hence CompileOptions::
// fold_softmax_min_keys (32768) and fold_softmax_min_head_dim (512).

bool row_major_f16(const TensorType& t) { return t.dtype == DType::f16 && t.layout.is_default(); }

bool applies(const Graph& g, const Node& n) {
  if (n.op != Op::attention || n.attrs.get_int("frame_tokens", 0) != 0 || n.inputs.size() != 3) return false;
  const TensorType &q = g.value(n.inputs[0]).type, &k = g.value(n.inputs[1]).type, &v = g.value(n.inputs[2]).type;
  if (q.rank() != 2 || k.rank() != 2 || v.rank() != 2) return false;
  if (!row_major_f16(q) || !row_major_f16(k) || !row_major_f16(v)) return false;
  const int64_t d = q.shape[1], dv = v.shape[1], tk = k.shape[0];
  return d >= kMinHeadDim && d % 8 == 0 && dv % 8 == 0 && tk % 8 == 0 && tk >= kMinKeys;
}

// Query rows per chunk: a multiple of kRowMultiple (or all of them) with the chunk's
// scores and weights within `budget` bytes and its f32 scores within `binding_limit`;
// with `wave` > 0 (workgroups per wave) whole waves of the output GEMM where the bounds
// allow one.
int64_t chunk_rows(int64_t tq, int64_t tk, int64_t dv, uint64_t budget, uint64_t binding_limit, uint32_t wave) {
  const uint64_t per_row = 6 * static_cast<uint64_t>(tk);
  uint64_t rows = std::max<uint64_t>(budget / per_row, 1);
  if (binding_limit > 0) rows = std::min<uint64_t>(rows, std::max<uint64_t>(binding_limit / (4 * tk), 1));
  if (rows >= static_cast<uint64_t>(tq)) return tq;
  const uint64_t column_tiles = static_cast<uint64_t>((dv + kColumnTile - 1) / kColumnTile);
  const uint64_t wave_row_tiles = wave / column_tiles;  // row tiles whose output GEMM is one wave
  const uint64_t max_row_tiles = rows / kRowMultiple;
  if (wave_row_tiles > 0 && max_row_tiles >= wave_row_tiles)
    return static_cast<int64_t>(max_row_tiles / wave_row_tiles * wave_row_tiles * kRowMultiple);
  // Even chunks: as many as the budget needs, each rounded up to the tile, unless that
  // breaks the binding limit.
  const int64_t chunks = (tq + static_cast<int64_t>(rows) - 1) / static_cast<int64_t>(rows);
  int64_t r = (tq + chunks - 1) / chunks;
  r = (r + kRowMultiple - 1) / kRowMultiple * kRowMultiple;
  if (binding_limit > 0 && static_cast<uint64_t>(r) * 4 * tk > binding_limit) r = static_cast<int64_t>(rows);
  return std::min<int64_t>(r, tq);
}

Node make_node(Op op, std::string name, std::vector<ValueId> in, ValueId out, Attrs attrs = {}) {
  Node n;
  n.op = op;
  n.name = std::move(name);
  n.inputs = std::move(in);
  n.outputs = {out};
  n.attrs = std::move(attrs);
  return n;
}

// The nodes that compute attention node `a` (see the header), writing its result.
std::vector<Node> decompose(Graph& g, const Node& a, uint64_t budget, const CompileOptions& options) {
  const uint64_t binding_limit = options.binding_limit;
  const uint32_t wave = options.gemm_wave_workgroups;
  const ValueId q = a.inputs[0], k = a.inputs[1], v = a.inputs[2], out = a.outputs[0];
  const TensorType qt = g.value(q).type, vt_in = g.value(v).type, ot = g.value(out).type;
  const int64_t tq = qt.shape[0], d = qt.shape[1], tk = g.value(k).type.shape[0], dv = vt_in.shape[1];
  const int64_t rows = chunk_rows(tq, tk, dv, budget, binding_limit, wave);
  const bool fold = options.fold_softmax && tk % kFoldKeys == 0 && tk >= options.fold_softmax_min_keys &&
                    d >= options.fold_softmax_min_head_dim;
  const std::string& name = a.name;
  std::vector<Node> nodes;

  const ValueId vt = g.add_value(g.value(v).name + ".t", TensorType{{dv, tk}, DType::f16, {}});
  Attrs perm;
  perm.set("perm", std::vector<int64_t>{1, 0});
  nodes.push_back(make_node(Op::permute, name + ".v_t", {v}, vt, perm));

  std::vector<ValueId> parts;
  for (int64_t r0 = 0; r0 < tq; r0 += rows) {
    const int64_t r = std::min(rows, tq - r0);
    const bool whole = r == tq;
    const std::string tag = whole ? "" : fmt::format("[{}]", r0 / rows);
    ValueId qc = q;
    if (!whole) {
      qc = g.add_value(g.value(q).name + tag, TensorType{{r, d}, DType::f16, {}});
      Attrs s;
      s.set("axis", int64_t{0});
      s.set("start", r0);
      s.set("end", r0 + r);
      nodes.push_back(make_node(Op::slice, name + ".q" + tag, {q}, qc, s));
    }
    const ValueId qs = g.add_value(name + ".q_scaled" + tag, TensorType{{r, d}, DType::f16, {}});
    Attrs sc;
    sc.set("mul", a.attrs.get_float("scale"));
    nodes.push_back(make_node(Op::scale, name + ".q_scaled" + tag, {qc}, qs, sc));
    const ValueId o = whole ? out : g.add_value(name + ".out" + tag, TensorType{{r, dv}, ot.dtype, {}});
    Attrs od;
    od.set("dtype", std::string(dtype_name(ot.dtype)));
    parts.push_back(o);
    if (fold) {
      const int64_t blocks = tk / kFoldBlock;
      const ValueId e = g.add_value(name + ".exp_blocks" + tag, TensorType{{r, tk + 2 * blocks}, DType::f16, {}});
      Attrs eb;
      eb.set("exp_blocks", kFoldBlock);
      nodes.push_back(make_node(Op::linear, name + ".scores" + tag, {qs, k}, e, eb));
      const ValueId wb = g.add_value(name + ".block_weights" + tag, TensorType{{r, blocks}, DType::f16, {}});
      Attrs bs;
      bs.set("block", kFoldBlock);
      nodes.push_back(make_node(Op::block_softmax, name + ".softmax" + tag, {e}, wb, bs));
      od.set("scale_blocks", kFoldBlock);
      nodes.push_back(make_node(Op::linear, name + ".out" + tag, {e, vt, wb}, o, od));
      continue;
    }
    const ValueId s = g.add_value(name + ".scores" + tag, TensorType{{r, tk}, DType::f32, {}});
    Attrs f32;
    f32.set("dtype", std::string("f32"));
    nodes.push_back(make_node(Op::linear, name + ".scores" + tag, {qs, k}, s, f32));
    const ValueId p = g.add_value(name + ".weights" + tag, TensorType{{r, tk}, DType::f16, {}});
    Attrs f16;
    f16.set("dtype", std::string("f16"));
    nodes.push_back(make_node(Op::softmax, name + ".softmax" + tag, {s}, p, f16));
    nodes.push_back(make_node(Op::linear, name + ".out" + tag, {p, vt}, o, od));
  }
  if (parts.size() > 1) {
    Attrs c;
    c.set("axis", int64_t{0});
    nodes.push_back(make_node(Op::concat, name, parts, out, c));
  }
  return nodes;
}

}  // namespace

Status run_attention_gemms(Graph& g, PassContext& ctx) {
  if (!ctx.options.attention_gemms) return Status::ok();
  uint64_t largest = 0;
  for (const Value& v : g.values())
    if (v.kind == ValueKind::intermediate) largest = std::max<uint64_t>(largest, v.type.bytes());
  const uint64_t budget = std::max(2 * largest, kMinScoreBytes);
  std::vector<Node> nodes;
  int64_t rewritten = 0, chunks = 0, folded = 0;
  for (const Node& n : g.nodes()) {
    if (!applies(g, n)) {
      nodes.push_back(n);
      continue;
    }
    std::vector<Node> parts = decompose(g, n, budget, ctx.options);
    chunks += std::count_if(parts.begin(), parts.end(),
                            [](const Node& p) { return p.op == Op::softmax || p.op == Op::block_softmax; });
    folded += std::count_if(parts.begin(), parts.end(), [](const Node& p) { return p.op == Op::block_softmax; }) > 0;
    ++rewritten;
    for (Node& p : parts) nodes.push_back(std::move(p));
  }
  g.nodes() = std::move(nodes);
  ctx.log.push_back(fmt::format("attention_gemms: {} attentions as score and output GEMMs ({} chunks of query rows{}), "
                                "{} with the softmax folded into them",
                                rewritten, chunks,
                                ctx.options.gemm_wave_workgroups
                                    ? fmt::format(", output GEMM waves of {} workgroups", ctx.options.gemm_wave_workgroups)
                                    : std::string(),
                                folded));
  return Status::ok();
}

}  // namespace strata

// attention_gemms (passes/attention_gemms.cpp): a long single-head attention with a
// wide head becomes a scores GEMM, a softmax and an output GEMM per chunk of query
// rows, and the tensor-core GEMM (emulated on lavapipe) runs them.
//
// What must hold:
//   - the rewrite: no attention left, one softmax per chunk (the chunk count follows
//     the binding limit), the result keeps the attention's value; narrow heads, short
//     key runs, frame masks and the option off keep the attention;
//   - the values, in the interpreter: within the bound that q·scale rounded to f16 and
//     the weights rounded to f16 allow (derived per row below from the data);
//   - the kernels: conv_gemm_coop and softmax.comp run it (no attention kernel), within
//     one f16 ulp of each weight and of each output of the interpreter's run of the
//     same graph.
//   - the softmax folded into the GEMMs (fold_softmax): exp_blocks scores, one
//     block_softmax per chunk and scale_blocks output GEMMs, no f32 scores and no
//     softmax node; keys not a multiple of 128 stay unfolded; the values within the
//     bound of its extra f16 roundings, and its kernels (conv_gemm_coop EXP_BLOCKS /
//     A_SCALE, block_softmax.comp) within the ulps their roundings may flip.
#include "codegen/vk_test_util.h"

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace strata {
namespace {

using testing::random_tensor;

struct Built {
  Graph graph;
  WeightStore weights;
  std::vector<Tensor> inputs;
};

// attention(q[tq, d], k[tk, d], v[tk, dv]) on f16 inputs, result f16.
Built build(int64_t tq, int64_t tk, int64_t d, int64_t dv, int64_t frame_tokens = 0) {
  Built t;
  Builder b(t.graph, &t.weights);
  ValueId q = b.input("q", {tq, d}, DType::f16);
  ValueId k = b.input("k", {tk, d}, DType::f16);
  ValueId v = b.input("v", {tk, dv}, DType::f16);
  b.output(b.attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(d)), frame_tokens));
  EXPECT_TRUE(b.ok()) << b.status().message();
  t.inputs = {random_tensor({tq, d}, 31, -2.0f, 2.0f), random_tensor({tk, d}, 32, -2.0f, 2.0f),
              random_tensor({tk, dv}, 33, -1.0f, 1.0f)};
  return t;
}

Status rewrite(Graph& g, WeightStore& w, bool on, uint64_t binding_limit, uint32_t wave = 0, bool fold = false) {
  CompileOptions options;
  options.precision = Precision::f16;
  options.attention_gemms = on;
  options.fold_softmax = fold;
  options.fold_softmax_min_keys = 1024;  // the test shapes' (the default keeps the fold to where it gains)
  options.fold_softmax_min_head_dim = 256;
  options.binding_limit = binding_limit;
  options.gemm_wave_workgroups = wave;
  PassContext ctx{options, w, {}};
  STRATA_RETURN_IF_ERROR(run_attention_gemms(g, ctx));
  return verify(g);
}

int64_t count(const Graph& g, Op op) {
  return std::count_if(g.nodes().begin(), g.nodes().end(), [op](const Node& n) { return n.op == op; });
}

TEST(AttentionGemms, LongWideAttentionBecomesChunkedGemms) {
  Built t = build(300, 1024, 256, 264);
  const ValueId out = t.graph.outputs()[0];
  const std::string name = t.graph.value(out).name;
  // Scores of 128 rows × 1024 keys in f32 are 512 KiB: three chunks (128, 128, 44).
  ASSERT_TRUE(rewrite(t.graph, t.weights, true, 512 << 10).is_ok());
  EXPECT_EQ(count(t.graph, Op::attention), 0);
  EXPECT_EQ(count(t.graph, Op::softmax), 3);
  EXPECT_EQ(count(t.graph, Op::linear), 6);
  EXPECT_EQ(count(t.graph, Op::concat), 1);
  EXPECT_EQ(t.graph.outputs()[0], out);
  EXPECT_EQ(t.graph.value(out).name, name);
  for (const Node& n : t.graph.nodes())
    if (n.op == Op::softmax) {
      EXPECT_EQ(t.graph.value(n.inputs[0]).type.dtype, DType::f32);  // the scores stay f32
      EXPECT_EQ(t.graph.value(n.outputs[0]).type.dtype, DType::f16);
      EXPECT_LE(t.graph.value(n.inputs[0]).type.bytes(), 512u << 10);
    }
  // No binding limit and room for all scores: one chunk, no slice or concat.
  Built one = build(300, 1024, 256, 264);
  ASSERT_TRUE(rewrite(one.graph, one.weights, true, 0).is_ok());
  EXPECT_EQ(count(one.graph, Op::softmax), 1);
  EXPECT_EQ(count(one.graph, Op::concat), 0);
  EXPECT_EQ(count(one.graph, Op::slice), 0);
}

std::vector<int64_t> chunk_rows(const Graph& g) {
  std::vector<int64_t> rows;
  for (const Node& n : g.nodes())
    if (n.op == Op::softmax) rows.push_back(g.value(n.inputs[0]).type.shape[0]);
  return rows;
}

// With the GEMM's wave known (6 workgroups; Dv = 264 takes 3 column tiles, so 2 row
// tiles of 128 fill a wave), chunks are whole waves of the output GEMM within the
// bound: 384 rows (1.5 MiB of f32 scores) allow one wave, 256 rows. Even chunks
// (wave unknown) take 384 + 136. The chunking changes no value.
TEST(AttentionGemms, ChunksFillWholeWavesOfTheOutputGemm) {
  const uint64_t limit = 384 * 1024 * 4;
  Built even = build(520, 1024, 256, 264);
  Built waves = build(520, 1024, 256, 264);
  ASSERT_TRUE(rewrite(even.graph, even.weights, true, limit).is_ok());
  ASSERT_TRUE(rewrite(waves.graph, waves.weights, true, limit, 6).is_ok());
  EXPECT_EQ(chunk_rows(even.graph), (std::vector<int64_t>{384, 136}));
  EXPECT_EQ(chunk_rows(waves.graph), (std::vector<int64_t>{256, 256, 8}));
  // A wave too large for the bound (8 row tiles > 3): even chunks again.
  Built wide = build(520, 1024, 256, 264);
  ASSERT_TRUE(rewrite(wide.graph, wide.weights, true, limit, 24).is_ok());
  EXPECT_EQ(chunk_rows(wide.graph), (std::vector<int64_t>{384, 136}));
  auto a = interpret(even.graph, even.weights, even.inputs);
  auto b = interpret(waves.graph, waves.weights, waves.inputs);
  ASSERT_TRUE(a) << a.message();
  ASSERT_TRUE(b) << b.message();
  testing::expect_identical((*b)[0], (*a)[0]);
}

TEST(AttentionGemms, OtherAttentionsAndTheOptionOffKeepTheAttention) {
  struct Case {
    const char* what;
    int64_t tq, tk, d, frame_tokens;
    bool on;
  };
  for (const Case& c : {Case{"the option off", 64, 1024, 256, 0, false}, Case{"a 128-dim head", 64, 1024, 128, 0, true},
                        Case{"512 keys", 64, 512, 256, 0, true}, Case{"a frame mask", 64, 1024, 256, 256, true}}) {
    SCOPED_TRACE(c.what);
    Built t = build(c.tq, c.tk, c.d, c.d, c.frame_tokens);
    ASSERT_TRUE(rewrite(t.graph, t.weights, c.on, 0).is_ok());
    EXPECT_EQ(count(t.graph, Op::attention), 1);
    EXPECT_EQ(count(t.graph, Op::softmax), 0);
  }
}

// Per query row i, how far the rewritten graph may move the output from the fused
// attention's (both in the interpreter, results rounded to f16):
//   - q·scale rounded to f16 moves each q element by at most 2^-11 relative, so score
//     s_ij by e_i ≤ 2^-11 · scale · Σ_d |q_id · k_jd| (max over j);
//   - a weight p_ij = exp(s_ij − m) / Σ: its ratio to the exact one is within
//     exp(±2·e_i); then it is rounded to f16 (2^-11 relative);
//   - so |Δo_ij| ≤ (exp(2·e_i)·(1 + 2^-11) − 1) · Σ_j p_ij |v_j| ≤ that · max |v|;
//   - and both outputs are rounded to f16: 2^-11 · |o| each.
// `roundings`: the f16 roundings of each weight (1 unfolded; folded: e, the block sum
// l_b through the normalisation, c and e·c, plus the f32 arithmetic of c, far below
// one more).
std::vector<double> row_bounds(const Built& t, double scale, int roundings = 1) {
  const Tensor &q = t.inputs[0], &k = t.inputs[1], &v = t.inputs[2];
  const int64_t tq = q.shape[0], d = q.shape[1], tk = k.shape[0];
  double vmax = 0;
  for (float x : v.data) vmax = std::max(vmax, double(std::fabs(x)));
  std::vector<double> bounds(static_cast<size_t>(tq));
  const double u = std::ldexp(1.0, -11);
  for (int64_t i = 0; i < tq; ++i) {
    double e = 0;
    for (int64_t j = 0; j < tk; ++j) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c)
        s += std::fabs(double(q.data[size_t(i * d + c)]) * double(k.data[size_t(j * d + c)]));
      e = std::max(e, u * scale * s);
    }
    bounds[size_t(i)] = (std::exp(2 * e) * std::pow(1 + u, roundings) - 1) * vmax;
  }
  return bounds;
}

TEST(AttentionGemms, InterpreterResultsStayWithinTheRoundingBound) {
  const Built before = build(300, 1024, 256, 264);
  Built after = build(300, 1024, 256, 264);
  ASSERT_TRUE(rewrite(after.graph, after.weights, true, 512 << 10).is_ok());
  auto want = interpret(before.graph, before.weights, before.inputs);
  auto got = interpret(after.graph, after.weights, after.inputs);
  ASSERT_TRUE(want) << want.message();
  ASSERT_TRUE(got) << got.message();
  const Tensor &w = (*want)[0], &g = (*got)[0];
  ASSERT_EQ(g.shape, w.shape);
  const std::vector<double> bounds = row_bounds(before, 1.0 / 16.0);
  const int64_t dv = w.shape[1];
  size_t bad = 0;
  double moved = 0;
  for (size_t i = 0; i < w.data.size(); ++i) {
    const double diff = std::fabs(double(g.data[i]) - double(w.data[i]));
    moved = std::max(moved, diff);
    const double bound = bounds[i / size_t(dv)] + std::ldexp(1.0, -11) * (std::fabs(w.data[i]) + std::fabs(g.data[i]));
    if (diff > bound && bad++ < 5) ADD_FAILURE() << "element " << i << ": |d| " << diff << " > " << bound;
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(moved, 0.0);  // the rewrite ran: the two graphs round differently
}

TEST(AttentionGemms, TensorCoreGemmsRunItWithinAnUlpOfTheInterpreter) {
  Built t = build(130, 1024, 256, 264);
  // Two chunks (128 and 2 rows): the second a partial row tile.
  ASSERT_TRUE(rewrite(t.graph, t.weights, true, 512 << 10).is_ok());
  ASSERT_EQ(count(t.graph, Op::softmax), 2);
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  target.tensor_cores = codegen::TensorCores::emulated;
  auto plan = codegen::compile_plan(t.graph, t.weights, target, {});
  ASSERT_TRUE(plan) << plan.message();
  std::string pipelines;
  for (const auto& p : plan->pipelines) pipelines += p.name + "\n";
  EXPECT_NE(pipelines.find("conv_gemm_coop.comp"), std::string::npos) << pipelines;
  EXPECT_NE(pipelines.find("softmax.comp"), std::string::npos) << pipelines;
  EXPECT_EQ(pipelines.find("attention"), std::string::npos) << pipelines;
  auto got = testing::run_for_target_graph(t.graph, t.weights, t.inputs, target);
  ASSERT_TRUE(got) << got.message();
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  // The kernels' scores and exponentials are f32 (the interpreter's f64); a weight's or
  // an output's f16 rounding may then go the other way: one ulp (2^-10 relative) of
  // each weight moves an output by at most 2^-10 · Σ_j p_ij |v_j| ≤ 2^-10 · max |v|.
  double vmax = 0;
  for (float x : t.inputs[2].data) vmax = std::max(vmax, double(std::fabs(x)));
  testing::expect_close((*got)[0], (*want)[0], std::ldexp(1.0, -10), std::ldexp(1.0, -10) * vmax);
}

TEST(AttentionGemms, FoldedSoftmaxReplacesTheScoresAndTheSoftmax) {
  Built t = build(300, 1024, 256, 264);
  const ValueId out = t.graph.outputs()[0];
  ASSERT_TRUE(rewrite(t.graph, t.weights, true, 512 << 10, 0, true).is_ok());
  EXPECT_EQ(count(t.graph, Op::attention), 0);
  EXPECT_EQ(count(t.graph, Op::softmax), 0);
  EXPECT_EQ(count(t.graph, Op::block_softmax), 3);  // the unfolded chunks: 128, 128, 44 rows
  EXPECT_EQ(t.graph.outputs()[0], out);
  int64_t scores = 0, outs = 0;
  for (const Node& n : t.graph.nodes()) {
    if (n.op != Op::linear) continue;
    const TensorType& y = t.graph.value(n.outputs[0]).type;
    if (n.attrs.has("exp_blocks")) {
      ++scores;
      EXPECT_EQ(n.attrs.get_int("exp_blocks"), 32);
      EXPECT_EQ(y.dtype, DType::f16);
      EXPECT_EQ(y.shape[1], 1024 + 64);  // 32 blocks: a (max, sum) pair each
    } else {
      ++outs;
      EXPECT_EQ(n.attrs.get_int("scale_blocks", 0), 32);
      ASSERT_EQ(n.inputs.size(), 3u);
      EXPECT_EQ(t.graph.value(n.inputs[2]).type.shape, (Shape{y.shape[0], 32}));
      EXPECT_EQ(t.graph.value(n.inputs[2]).type.dtype, DType::f16);  // stored as the GEMM applies them
    }
  }
  EXPECT_EQ(scores, 3);
  EXPECT_EQ(outs, 3);
  for (const Value& v : t.graph.values())
    EXPECT_FALSE(v.type.dtype == DType::f32 && v.type.shape.back() == 1024) << v.name;  // no f32 scores
  // The default bounds (32768 keys, D 512: where the fold measured faster) keep it out.
  Built small = build(300, 1024, 256, 264);
  CompileOptions defaults;
  defaults.precision = Precision::f16;
  defaults.attention_gemms = defaults.fold_softmax = true;
  PassContext ctx{defaults, small.weights, {}};
  ASSERT_TRUE(run_attention_gemms(small.graph, ctx).is_ok());
  EXPECT_EQ(count(small.graph, Op::block_softmax), 0);
  EXPECT_EQ(count(small.graph, Op::softmax), 1);
  // 1032 keys (not a multiple of 128: the e rows would not be 16-byte aligned): unfolded.
  Built odd = build(300, 1032, 256, 264);
  ASSERT_TRUE(rewrite(odd.graph, odd.weights, true, 512 << 10, 0, true).is_ok());
  EXPECT_EQ(count(odd.graph, Op::block_softmax), 0);
  EXPECT_GT(count(odd.graph, Op::softmax), 0);
}

TEST(AttentionGemms, FoldedSoftmaxStaysWithinTheRoundingBound) {
  const Built before = build(300, 1024, 256, 264);
  Built after = build(300, 1024, 256, 264);
  ASSERT_TRUE(rewrite(after.graph, after.weights, true, 512 << 10, 0, true).is_ok());
  ASSERT_EQ(count(after.graph, Op::block_softmax), 3);
  auto want = interpret(before.graph, before.weights, before.inputs);
  auto got = interpret(after.graph, after.weights, after.inputs);
  ASSERT_TRUE(want) << want.message();
  ASSERT_TRUE(got) << got.message();
  const Tensor &w = (*want)[0], &g = (*got)[0];
  ASSERT_EQ(g.shape, w.shape);
  const std::vector<double> bounds = row_bounds(before, 1.0 / 16.0, 5);
  const int64_t dv = w.shape[1];
  size_t bad = 0;
  double moved = 0;
  for (size_t i = 0; i < w.data.size(); ++i) {
    const double diff = std::fabs(double(g.data[i]) - double(w.data[i]));
    moved = std::max(moved, diff);
    const double bound = bounds[i / size_t(dv)] + std::ldexp(1.0, -11) * (std::fabs(w.data[i]) + std::fabs(g.data[i]));
    if (diff > bound && bad++ < 5) ADD_FAILURE() << "element " << i << ": |d| " << diff << " > " << bound;
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_GT(moved, 0.0);
}

TEST(AttentionGemms, FoldedSoftmaxKernelsMatchTheInterpreter) {
  Built t = build(130, 1024, 256, 264);
  ASSERT_TRUE(rewrite(t.graph, t.weights, true, 512 << 10, 0, true).is_ok());
  ASSERT_EQ(count(t.graph, Op::block_softmax), 2);  // 128 rows and a partial tile of 2
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  target.tensor_cores = codegen::TensorCores::emulated;
  auto plan = codegen::compile_plan(t.graph, t.weights, target, {});
  ASSERT_TRUE(plan) << plan.message();
  std::string pipelines;
  for (const auto& p : plan->pipelines) pipelines += p.name + "\n";
  EXPECT_NE(pipelines.find("EXP_BLOCKS=1"), std::string::npos) << pipelines;
  EXPECT_NE(pipelines.find("A_SCALE=32"), std::string::npos) << pipelines;
  EXPECT_NE(pipelines.find("block_softmax.comp"), std::string::npos) << pipelines;
  EXPECT_EQ(pipelines.find("attention"), std::string::npos) << pipelines;
  EXPECT_EQ(pipelines.find("\nsoftmax.comp"), std::string::npos) << pipelines;
  auto got = testing::run_for_target_graph(t.graph, t.weights, t.inputs, target);
  ASSERT_TRUE(got) << got.message();
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  // The kernels' scores, exponentials and sums are f32 (the interpreter's f64), so four
  // f16 roundings per weight may go the other way: e, the block sum l_b (through c), c
  // and e·c, an ulp (2^-10 relative) each, moving an output by at most 4 · 2^-10 ·
  // max |v|; and the output's own rounding, an ulp of it.
  double vmax = 0;
  for (float x : t.inputs[2].data) vmax = std::max(vmax, double(std::fabs(x)));
  testing::expect_close((*got)[0], (*want)[0], std::ldexp(1.0, -10), 4 * std::ldexp(1.0, -10) * vmax);
}

// block_softmax.comp stores f16 weights, most of them subnormal in a long row (a 65 536-key
// row's weights are ~2^-16 and below): stored through a device's f32 → f16 conversion,
// which may flush subnormals, they would be 0. Rows of 4 blocks whose weights span the
// normal range, the subnormals and one below half the smallest subnormal (0); none of
// them within 0.05 of a rounding tie (checked when written), so the kernel's f32
// exponentials round to the same f16 as the interpreter's f64 ones: equal bits.
TEST(AttentionGemms, BlockWeightsKeepF16Subnormals) {
  Graph g;
  WeightStore w;
  Builder b(g, &w);
  constexpr int64_t kBlocks = 4, kKeys = 32 * kBlocks, kCols = kKeys + 2 * kBlocks;
  ValueId e = b.input("e", {3, kCols}, DType::f16);
  b.output(b.op(Op::block_softmax, {e}, {{"block", int64_t(32)}}, "weights"));
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(g.value(g.outputs()[0]).type.dtype, DType::f16);
  const float stats[3][kBlocks][2] = {{{0, 1}, {-10, 20}, {-14, 3}, {-17, 31}},
                                      {{-1, 2}, {0, 7}, {-12, 1}, {-15.5f, 13}},
                                      {{-3, 5}, {-16, 1}, {-2, 9}, {-11, 2}}};
  Tensor in(Shape{3, kCols});
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < kBlocks; ++c) {
      in.data[static_cast<size_t>(r * kCols + kKeys + 2 * c)] = stats[r][c][0];
      in.data[static_cast<size_t>(r * kCols + kKeys + 2 * c + 1)] = stats[r][c][1];
    }
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  const codegen::Target target = codegen::target_for((*device)->info());
  auto got = testing::run_for_target_graph(g, w, {in}, target);
  ASSERT_TRUE(got) << got.message();
  auto want = interpret(g, w, {in});
  ASSERT_TRUE(want) << want.message();
  const std::vector<float>& k = (*got)[0].data;
  ASSERT_EQ(k.size(), (*want)[0].data.size());
  int subnormal = 0;
  for (size_t i = 0; i < k.size(); ++i) {
    EXPECT_EQ(k[i], (*want)[0].data[i]) << "weight " << i;
    subnormal += k[i] > 0 && k[i] < std::ldexp(1.0f, -14);
  }
  EXPECT_EQ(subnormal, 6);                 // 6 of the 12 weights are f16 subnormals
  EXPECT_EQ(k[3], std::ldexp(1.0f, -24));  // the smallest: 0.69 of 2^-24, rounded up
  EXPECT_EQ(k[7], 0.0f);                   // 0.40 of 2^-24: rounded down to 0
}

}  // namespace
}  // namespace strata

// winograd_convs: a causal conv's tap chain as Winograd F(2×2, 3×3) or F(4×4, 3×3)
// (ir/ops.h).
//
// What must hold: with the option set, a chain of three frame convs (as the Wan builder
// writes a causal conv: the newest tap with the bias, each older tap added, a
// residual joining) becomes one winograd_input per frame, one winograd_gemm and one
// winograd_output writing the chain's result; frames shared by two chains are
// transformed once; the interpreter's result moves by f16 rounding only (V and U), for
// both tile sizes;
// convs below the channel threshold, single taps and the option off stay direct; with
// winograd_min_taps 1 a single 2-D conv (bias and residual of its own) is taken where
// its V and M fit under the activations' peak, and keeps its result up to f16 rounding.
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace strata {
namespace {

constexpr int64_t kC = 32, kH = 6, kW = 9;

std::vector<float> uniform(int64_t n, uint32_t seed, float range) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-range, range);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(gen);
  return v;
}

// Frames x0..x3 and two output frames of one causal conv (taps w0, w1, w2: frame t
// reads x_t, x_{t+1}, x_{t+2}), the second with a residual r.
Graph two_chains(WeightStore& store) {
  Graph g;
  Builder b(g, &store);
  std::vector<ValueId> x;
  // f16 frames (in Wan the norms' outputs) and a SiLU after each chain: the chains'
  // inputs and results are f16 activations, as the pass requires.
  for (int f = 0; f < 4; ++f) x.push_back(b.input("x" + std::to_string(f), {1, kC, kH, kW}, DType::f16));
  ValueId r = b.input("r", {1, kC, kH, kW}, DType::f16);
  auto weight = [&](const std::string& name, Shape shape, uint32_t seed, float range) {
    if (!store.contains(name)) { EXPECT_TRUE(store.add_owned(name, shape, uniform(num_elements(shape), seed, range)).is_ok()); }
    return b.constant(name, TensorType{shape, DType::f32, {}});
  };
  const float wr = 1.0f / std::sqrt(27.0f * kC);
  ValueId w[3] = {weight("w0", {kC, kC, 3, 3}, 1, wr), weight("w1", {kC, kC, 3, 3}, 2, wr),
                  weight("w2", {kC, kC, 3, 3}, 3, wr)};
  ValueId bias = weight("bias", {kC}, 4, 0.5f);
  for (int t = 0; t < 2; ++t) {
    ValueId y = b.conv2d(x[t + 2], w[2], bias, {.pad = 1});
    if (t == 1) y = b.add(y, r);
    y = b.add(b.conv2d(x[t + 1], w[1], kNoValue, {.pad = 1}), y);
    y = b.add(b.conv2d(x[t], w[0], kNoValue, {.pad = 1}), y);
    b.output(b.silu(y));
  }
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

Status passes_until(Graph& g, WeightStore& store, bool winograd, int64_t min_channels = 32, int64_t tile = 4) {
  CompileOptions options;
  options.winograd_tile = tile;
  options.precision = Precision::f16;
  options.winograd_convs = winograd;
  options.winograd_min_channels = min_channels;
  options.stop_after = "winograd_convs";
  PassContext ctx{options, store, {}};
  return run_pipeline(g, ctx);
}

int64_t count(const Graph& g, Op op) {
  int64_t n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

std::vector<Tensor> inputs() {
  std::vector<Tensor> in;
  for (uint32_t f = 0; f < 5; ++f) {
    in.emplace_back(Shape{1, kC, kH, kW}, uniform(kC * kH * kW, 10 + f, 1.0f));
    for (float& v : in.back().data) v = interp::round_to(v, DType::f16);
  }
  return in;
}

class WinogradConvsTiles : public ::testing::TestWithParam<int64_t> {};

TEST_P(WinogradConvsTiles, ChainsBecomeTransformsAndOneGemmEach) {
  const int64_t tile = GetParam();
  WeightStore store;
  Graph g = two_chains(store);
  ASSERT_TRUE(passes_until(g, store, true, 32, tile).is_ok());
  EXPECT_EQ(count(g, Op::conv_gemm), 0);
  EXPECT_EQ(count(g, Op::winograd_gemm), 2);
  EXPECT_EQ(count(g, Op::winograd_output), 2);
  EXPECT_EQ(count(g, Op::winograd_input), 4);  // x1 and x2 are read by both chains: once each
  for (const Node& n : g.nodes()) {
    if (n.op != Op::winograd_gemm) continue;
    EXPECT_EQ(n.inputs.size(), 4u);  // three frames and U
    EXPECT_EQ(g.value(n.inputs.back()).type.shape, (Shape{(tile + 2) * (tile + 2), kC, 3 * kC}));
    EXPECT_EQ(g.value(n.inputs.back()).type.dtype, DType::f16);
  }
  for (const Node& n : g.nodes())
    if (n.op == Op::winograd_input || n.op == Op::winograd_output) { EXPECT_EQ(n.attrs.get_int("tile", 2), tile); }
}

TEST_P(WinogradConvsTiles, KeepsWhatTheGraphComputesUpToF16Rounding) {
  const int64_t tile = GetParam();
  WeightStore store;
  Graph before = two_chains(store);
  Graph direct = before, wino = before;
  ASSERT_TRUE(passes_until(direct, store, false).is_ok());
  ASSERT_TRUE(passes_until(wino, store, true, 32, tile).is_ok());
  ASSERT_EQ(count(wino, Op::winograd_gemm), 2);
  auto want = interpret(direct, store, inputs());
  auto got = interpret(wino, store, inputs());
  ASSERT_TRUE(want) << want.message();
  ASSERT_TRUE(got) << got.message();
  ASSERT_EQ(want->size(), 2u);
  for (size_t o = 0; o < 2; ++o) {
    double se = 0, sr = 0, max_diff = 0;
    for (size_t i = 0; i < want->at(o).data.size(); ++i) {
      const double d = double(got->at(o).data[i]) - want->at(o).data[i];
      se += d * d;
      sr += double(want->at(o).data[i]) * want->at(o).data[i];
      max_diff = std::max(max_diff, std::fabs(d));
    }
    // V's and U's f16 rounding (~2^-11 relative each, through sums of ~300 products):
    // the outputs are of size ~1, stored in f16 (half ULP 2^-12 near 1).
    EXPECT_GT(10 * std::log10(sr / se), 55.0) << "output " << o;
    EXPECT_LT(max_diff, 0.02) << "output " << o;
    EXPECT_GT(max_diff, 0.0) << "output " << o << ": the Winograd form rounds differently";
  }
}

INSTANTIATE_TEST_SUITE_P(Tiles, WinogradConvsTiles, ::testing::Values(int64_t(2), int64_t(4)));

TEST(WinogradConvs, TakesOnlyWideMultiTapConvsWithTheOptionSet) {
  WeightStore store;
  Graph off = two_chains(store);
  ASSERT_TRUE(passes_until(off, store, false).is_ok());
  EXPECT_EQ(count(off, Op::winograd_gemm), 0);
  Graph narrow = two_chains(store);
  ASSERT_TRUE(passes_until(narrow, store, true, /*min_channels=*/64).is_ok());
  EXPECT_EQ(count(narrow, Op::winograd_gemm), 0);
  EXPECT_EQ(count(narrow, Op::conv_gemm), 6);

  // Frames below the pixel threshold (6 × 9 = 54 here) keep the direct convs.
  Graph small = two_chains(store);
  {
    CompileOptions options;
    options.precision = Precision::f16;
    options.winograd_convs = true;
    options.winograd_min_channels = 32;
    options.winograd_min_pixels = kH * kW + 1;
    options.stop_after = "winograd_convs";
    PassContext ctx{options, store, {}};
    ASSERT_TRUE(run_pipeline(small, ctx).is_ok());
  }
  EXPECT_EQ(count(small, Op::winograd_gemm), 0);
  EXPECT_EQ(count(small, Op::conv_gemm), 6);

  // A single tap (no chain) stays a conv.
  Graph g;
  Builder b(g, &store);
  ValueId x = b.input("x", {1, kC, kH, kW}, DType::f16);
  b.output(b.silu(b.conv2d(x, b.constant("w0", TensorType{{kC, kC, 3, 3}, DType::f32, {}}), kNoValue, {.pad = 1})));
  ASSERT_TRUE(passes_until(g, store, true).is_ok());
  EXPECT_EQ(count(g, Op::winograd_gemm), 0);
  EXPECT_EQ(count(g, Op::conv_gemm), 1);
}

// x → conv (bias, residual r) → SiLU, and with `big_branch` an upsampled copy of the
// result (8 × 8: ~8× the bytes of the conv's V and M together at this size) that sets
// the activations' peak after the conv.
Graph single_conv(WeightStore& store, bool big_branch) {
  Graph g;
  Builder b(g, &store);
  ValueId x = b.input("x", {1, kC, kH, kW}, DType::f16), r = b.input("r", {1, kC, kH, kW}, DType::f16);
  const float wr = 1.0f / std::sqrt(9.0f * kC);
  if (!store.contains("w_single")) {
    EXPECT_TRUE(store.add_owned("w_single", {kC, kC, 3, 3}, uniform(kC * kC * 9, 21, wr)).is_ok());
  }
  if (!store.contains("b_single")) { EXPECT_TRUE(store.add_owned("b_single", {kC}, uniform(kC, 22, 0.5f)).is_ok()); }
  ValueId w = b.constant("w_single", TensorType{{kC, kC, 3, 3}, DType::f32, {}});
  ValueId bias = b.constant("b_single", TensorType{{kC}, DType::f32, {}});
  ValueId y = b.silu(b.add(b.conv2d(x, w, bias, {.pad = 1}), r));
  b.output(y);
  if (big_branch) b.output(b.silu(b.upsample_nearest(y, {1, 1, 8, 8})));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

Status single_passes(Graph& g, WeightStore& store, bool winograd, int64_t min_taps, bool u_at_run = false) {
  CompileOptions options;
  options.winograd_single_u_at_run = u_at_run;
  options.precision = Precision::f16;
  options.winograd_convs = winograd;
  options.winograd_min_channels = 32;
  options.winograd_min_taps = min_taps;
  options.stop_after = "winograd_convs";
  PassContext ctx{options, store, {}};
  return run_pipeline(g, ctx);
}

TEST(WinogradConvs, SingleConvsWithMinTapsOneOnlyUnderTheActivationsPeak) {
  WeightStore store;
  Graph taps2 = single_conv(store, true), taps1 = single_conv(store, true), lone = single_conv(store, false);
  ASSERT_TRUE(single_passes(taps2, store, true, 2).is_ok());
  EXPECT_EQ(count(taps2, Op::winograd_gemm), 0);  // the default takes chains only
  ASSERT_TRUE(single_passes(taps1, store, true, 1).is_ok());
  EXPECT_EQ(count(taps1, Op::winograd_gemm), 1);
  EXPECT_EQ(count(taps1, Op::conv_gemm), 0);
  for (const Node& n : taps1.nodes())
    if (n.op == Op::winograd_output) { EXPECT_EQ(n.inputs.size(), 3u); }  // M, the bias and the residual
  // Alone, the conv's V and M (~8× its input and output) would set a new peak.
  ASSERT_TRUE(single_passes(lone, store, true, 1).is_ok());
  EXPECT_EQ(count(lone, Op::winograd_gemm), 0);
  EXPECT_EQ(count(lone, Op::conv_gemm), 1);
}

TEST(WinogradConvs, SingleConvKeepsWhatTheGraphComputesUpToF16Rounding) {
  WeightStore store;
  Graph direct = single_conv(store, true), wino = single_conv(store, true);
  ASSERT_TRUE(single_passes(direct, store, false, 1).is_ok());
  ASSERT_TRUE(single_passes(wino, store, true, 1).is_ok());
  ASSERT_EQ(count(wino, Op::winograd_gemm), 1);
  std::vector<Tensor> in = inputs();
  in.resize(2);
  auto want = interpret(direct, store, in);
  auto got = interpret(wino, store, in);
  ASSERT_TRUE(want) << want.message();
  ASSERT_TRUE(got) << got.message();
  ASSERT_EQ(want->size(), 2u);
  double se = 0, sr = 0, max_diff = 0;
  for (size_t i = 0; i < want->at(0).data.size(); ++i) {
    const double d = double(got->at(0).data[i]) - want->at(0).data[i];
    se += d * d;
    sr += double(want->at(0).data[i]) * want->at(0).data[i];
    max_diff = std::max(max_diff, std::fabs(d));
  }
  EXPECT_GT(10 * std::log10(sr / se), 55.0);
  EXPECT_LT(max_diff, 0.02);
  EXPECT_GT(max_diff, 0.0) << "the Winograd form rounds differently";
}

// winograd_single_u_at_run: the single conv's U is a winograd_weights node reading the
// conv's own f16 weights, just before the GEMM, and no U constant is made; the
// interpreter computes the same U as the held constant (one function, the same f16
// weights, one f16 rounding), so the results agree bit for bit.
TEST(WinogradConvs, SingleConvUAtRunEqualsTheHeldUBitForBit) {
  WeightStore held_store, run_store;
  Graph held = single_conv(held_store, true), run = single_conv(run_store, true);
  ASSERT_TRUE(single_passes(held, held_store, true, 1, false).is_ok());
  ASSERT_TRUE(single_passes(run, run_store, true, 1, true).is_ok());
  ASSERT_EQ(count(held, Op::winograd_gemm), 1);
  ASSERT_EQ(count(run, Op::winograd_gemm), 1);
  EXPECT_EQ(count(held, Op::winograd_weights), 0);
  ASSERT_EQ(count(run, Op::winograd_weights), 1);
  for (const std::string& name : run_store.names())
    EXPECT_EQ(name.find("[winograd"), std::string::npos) << name << ": a U constant with U made at each run";
  bool held_u = false;
  for (const std::string& name : held_store.names()) held_u |= name.find("[winograd") != std::string::npos;
  EXPECT_TRUE(held_u);
  // The node reads the conv's weight constant and feeds the GEMM, right before it.
  const auto& nodes = run.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op != Op::winograd_weights) continue;
    ASSERT_EQ(nodes[i].inputs.size(), 1u);
    EXPECT_EQ(run.value(nodes[i].inputs[0]).kind, ValueKind::constant);
    EXPECT_EQ(run.value(nodes[i].inputs[0]).type.dtype, DType::f16);
    ASSERT_LT(i + 1, nodes.size());
    EXPECT_EQ(nodes[i + 1].op, Op::winograd_gemm);
    EXPECT_EQ(nodes[i + 1].inputs.back(), nodes[i].outputs[0]);
  }
  std::vector<Tensor> in = inputs();
  in.resize(2);
  auto want = interpret(held, held_store, in);
  auto got = interpret(run, run_store, in);
  ASSERT_TRUE(want) << want.message();
  ASSERT_TRUE(got) << got.message();
  ASSERT_EQ(want->size(), got->size());
  for (size_t o = 0; o < want->size(); ++o) EXPECT_EQ(max_abs_diff(got->at(o), want->at(o)), 0.0) << "output " << o;
}

}  // namespace
}  // namespace strata

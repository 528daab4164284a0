// assign_layout: golden before/after, the layout-boundary invariant codegen relies on,
// the tap-major repack, and the interpreter before/after (bit-identical: layouts are
// physical only).
#include "passes/passes.h"
#include "passes/memory_plan.h"
#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/decoder_like.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

constexpr const char* kBefore = R"(graph @layout(%x: f32[1,4,4,4]) {
  %w1: f32[8,4,3,3] = weight "w1"
  %b1: f32[8] = weight "b1"
  %c1: f32[1,8,4,4] = conv_gemm "c1" (%x, %w1, %b1) {kernel = [3, 3], pad = [1, 1], weight_layout = "oihw"}
  %g: f32[8] = weight "g"
  %n: f32[1,8,4,4] = norm_act "n" (%c1, %g) {eps = 1e-12, norm = "rms", silu = 1}
  %r: f32[8,16] = reshape "r" (%n) {shape = [8, 16]}
  %t: f32[16,8] = permute "t" (%r) {perm = [1, 0]}
  %w2: f32[4,8,1,1] = weight "w2"
  %y: f32[1,4,4,4] = conv_gemm "y" (%n, %w2, _, %x) {kernel = [1, 1], weight_layout = "oihw"}
  return %y, %t
}
)";

// The input is converted once (a relayout reshape), image values are NHWC with their
// channel count as stride, the token values stay logical (the reshape %r reads NHWC
// and writes logical), weights are repacked tap-major, and the image output is
// written NHWC then converted back under its own name.
constexpr const char* kAfter = R"(graph @layout(%x: f32[1,4,4,4]) {
  %x.nhwc: f32[1,4,4,4]{nhwc:cpad=4} = reshape "x.nhwc" (%x) {shape = [1, 4, 4, 4]}
  %w1.o_hwi: f32[8,36] = weight "w1[o_hwi]"
  %b1: f32[8] = weight "b1"
  %c1: f32[1,8,4,4]{nhwc:cpad=8} = conv_gemm "c1" (%x.nhwc, %w1.o_hwi, %b1) {kernel = [3, 3], pad = [1, 1], weight_layout = "o_hwi"}
  %g: f32[8] = weight "g"
  %n: f32[1,8,4,4]{nhwc:cpad=8} = norm_act "n" (%c1, %g) {eps = 1e-12, norm = "rms", silu = 1}
  %r: f32[8,16] = reshape "r" (%n) {shape = [8, 16]}
  %t: f32[16,8] = permute "t" (%r) {perm = [1, 0]}
  %w2.o_hwi: f32[4,8] = weight "w2[o_hwi]"
  %y.nhwc: f32[1,4,4,4]{nhwc:cpad=4} = conv_gemm "y" (%n, %w2.o_hwi, _, %x.nhwc) {kernel = [1, 1], weight_layout = "o_hwi"}
  %y: f32[1,4,4,4] = reshape "y.to_logical" (%y.nhwc) {shape = [1, 4, 4, 4]}
  return %y, %t
}
)";

TEST(AssignLayoutTest, Golden) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kBefore, store);
  ASSERT_EQ(print_graph(g), kBefore);
  Graph before = g;
  CompileOptions options;
  PassContext ctx{options, store, {}};
  Status s = run_assign_layout(g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message();
  EXPECT_EQ(print_graph(g), kAfter);
  auto in = testing::random_inputs(before, 3);
  EXPECT_TRUE(testing::bit_identical(testing::run_graph(g, store, in), testing::run_graph(before, store, in)));
}

TEST(AssignLayoutTest, RepackIsTapMajor) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kBefore, store);
  CompileOptions options;
  PassContext ctx{options, store, {}};
  ASSERT_TRUE(run_assign_layout(g, ctx).is_ok());
  auto oihw = store.get("w1")->to_f32();  // [8,4,3,3]
  auto packed = store.get("w1[o_hwi]");
  ASSERT_TRUE(packed.has_value());
  EXPECT_EQ(packed->shape, (Shape{8, 36}));
  auto p = packed->to_f32();
  for (int64_t o = 0; o < 8; ++o)
    for (int64_t ci = 0; ci < 4; ++ci)
      for (int64_t ky = 0; ky < 3; ++ky)
        for (int64_t kx = 0; kx < 3; ++kx)
          ASSERT_EQ(p[static_cast<size_t>(o * 36 + (ky * 3 + kx) * 4 + ci)],
                    oihw[static_cast<size_t>(((o * 4 + ci) * 3 + ky) * 3 + kx)]);
}

// Codegen's contract: graph inputs and outputs are logical; every node but reshape sees
// one layout on all its rank-4 non-constant operands and results.
void expect_layout_boundaries(const Graph& g) {
  for (ValueId v : g.inputs()) EXPECT_TRUE(g.value(v).type.layout.is_default()) << g.value(v).name;
  for (ValueId v : g.outputs()) EXPECT_TRUE(g.value(v).type.layout.is_default()) << g.value(v).name;
  for (const Node& n : g.nodes()) {
    if (n.op == Op::reshape) continue;
    std::vector<ValueId> vs;
    for (ValueId v : n.inputs)
      if (v != kNoValue && g.value(v).kind != ValueKind::constant && g.value(v).type.rank() == 4) vs.push_back(v);
    for (ValueId v : n.outputs)
      if (g.value(v).type.rank() == 4) vs.push_back(v);
    for (ValueId v : vs) {
      EXPECT_EQ(g.value(v).type.layout.kind, g.value(vs.front()).type.layout.kind)
          << "node '" << n.name << "': %" << g.value(v).name << " vs %" << g.value(vs.front()).name;
      if (g.value(v).type.layout.kind == LayoutKind::nhwc) {
        EXPECT_EQ(g.value(v).type.layout.padded_channels, g.value(v).type.shape[1]);
      }
    }
    if (n.op == Op::conv_gemm || n.op == Op::norm_act) {
      EXPECT_EQ(g.value(n.outputs[0]).type.layout.kind, LayoutKind::nhwc) << n.name;
    }
    if (n.op == Op::conv_gemm) {
      EXPECT_EQ(n.attrs.get_string("weight_layout"), "o_hwi") << n.name;
    }
    // Token values (attention) stay logical.
    if (n.op == Op::attention || n.op == Op::linear) {
      EXPECT_TRUE(g.value(n.outputs[0]).type.layout.is_default()) << n.name;
    }
  }
}

class AssignLayoutSemantics : public ::testing::TestWithParam<int64_t> {};

TEST_P(AssignLayoutSemantics, AfterPaddingBitIdentical) {
  WeightStore store;
  Graph g = testing::decoder_like(store, testing::DecoderLikeOptions{.latent_channels = 3, .channels = GetParam()});
  Graph before = g;
  CompileOptions options;
  PassContext ctx{options, store, {}};
  ASSERT_TRUE(run_pad_channels(g, ctx).is_ok());
  Status s = run_assign_layout(g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message() << "\n" << print_graph(g);
  expect_layout_boundaries(g);
  auto in = testing::random_inputs(before, 5);
  auto want = testing::run_graph(before, store, in);
  auto got = testing::run_graph(g, store, in);
  EXPECT_TRUE(testing::bit_identical(got, want)) << testing::max_rel_diff(got, want) << "\n" << print_graph(g);
}

INSTANTIATE_TEST_SUITE_P(Channels, AssignLayoutSemantics, ::testing::Values(3, 16, 96, 144));

// HunyuanVideo's temporal upsample between two convs: the frame stack [1, C, T·R, W]
// viewed as [1, C, T, R·W], each frame doubled, the first dropped, viewed back. The
// regrouping reshapes join the image values (NHWC, the same bytes: aliases), so no
// transposing copy runs; the graph still computes the same bits.
TEST(AssignLayoutTest, SpatialRegroupStaysNhwc) {
  WeightStore store;
  Graph g;
  Builder b(g, &store);
  const int64_t c = 8, frames = 3, rows = 2, width = 5;
  ValueId x = b.input("x", {1, c, frames * rows, width});
  ValueId w1 = testing::seeded_weight(b, store, "w1", {c, c, 3, 3}, 0.2f);
  ValueId w2 = testing::seeded_weight(b, store, "w2", {c, c, 3, 3}, 0.2f);
  ValueId y = b.conv2d(x, w1, kNoValue, {.pad = 1});
  ValueId t = b.reshape(y, {1, c, frames, rows * width});
  t = b.slice(b.upsample_nearest(t, {2, 1}), 2, 1, 2 * frames);
  ValueId z = b.reshape(t, {1, c, (2 * frames - 1) * rows, width});
  b.output(b.conv2d(z, w2, kNoValue, {.pad = 1}));
  ASSERT_TRUE(b.ok()) << b.status().message();
  Graph before = g;
  CompileOptions options;
  PassContext ctx{options, store, {}};
  for (auto pass : {run_canonicalize, run_assign_layout}) {
    Status s = pass(g, ctx);
    ASSERT_TRUE(s.is_ok()) << s.message();
  }
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message();
  int regroups = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::reshape || g.value(n.inputs[0]).type.shape == g.value(n.outputs[0]).type.shape) continue;
    ++regroups;
    EXPECT_EQ(g.value(n.inputs[0]).type.layout.kind, LayoutKind::nhwc) << n.name;
    EXPECT_EQ(g.value(n.outputs[0]).type.layout.kind, LayoutKind::nhwc) << n.name;
    EXPECT_TRUE(same_stored_bytes(g.value(n.inputs[0]).type, g.value(n.outputs[0]).type)) << n.name;
  }
  EXPECT_EQ(regroups, 2) << print_graph(g);
  auto in = testing::random_inputs(before, 3);
  EXPECT_TRUE(testing::bit_identical(testing::run_graph(g, store, in), testing::run_graph(before, store, in)));
}

TEST(AssignLayoutTest, SecondRunChangesNothing) {
  WeightStore store;
  Graph g = testing::decoder_like(store, testing::DecoderLikeOptions{.channels = 16});
  CompileOptions options;
  PassContext ctx{options, store, {}};
  ASSERT_TRUE(run_assign_layout(g, ctx).is_ok());
  std::string once = print_graph(g);
  ASSERT_TRUE(run_assign_layout(g, ctx).is_ok());
  EXPECT_EQ(print_graph(g), once);
}

}  // namespace
}  // namespace strata

// fuse_frame_taps: a causal 3×3×3 conv built as three shifted single-tap frame convs
// (HunyuanVideo's causal_conv before this pass) becomes one conv_gemm with
// frame_taps 3 when CompileOptions::fuse_frame_taps is set, and computes the same
// values (up to the one rounding of each tap's partial sum it removes).
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "passes/decoder_like.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

constexpr int64_t kC = 8, kFrames = 4, kRows = 3, kWidth = 5;

// x → silu → the three taps (newest first, with the bias; each older one adds the sum
// so far), plus a shortcut: what models/hunyuan_decoder.cpp builds per tap.
Graph causal_conv(WeightStore& store, bool shared_x = true) {
  Graph g;
  Builder b(g, &store);
  ValueId x = b.input("x", {1, kC, kFrames * kRows, kWidth});
  ValueId h = b.silu(x);
  ValueId other = b.silu(b.scale(x, 0.5));
  ValueId bias = testing::seeded_weight(b, store, "bias", {kC}, 0.5f);
  ValueId y = x;  // the shortcut
  for (int64_t kt = 2; kt >= 0; --kt) {
    ValueId w = testing::seeded_weight(b, store, "w" + std::to_string(kt), {kC, kC, 3, 3}, 0.2f);
    ValueId in = shared_x || kt != 1 ? h : other;
    ValueId term = b.conv2d(in, w, kt == 2 ? bias : kNoValue, {.pad = 1, .frames = {.rows = kRows, .shift = 2 - kt}});
    y = b.add(term, y);
  }
  b.output(y);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

struct Convs {
  int64_t convs = 0;
  const Node* fused = nullptr;
};

Convs count(const Graph& g) {
  Convs r;
  for (const Node& n : g.nodes())
    if (n.op == Op::conv_gemm) {
      ++r.convs;
      if (n.attrs.get_int("frame_taps", 1) > 1) r.fused = &n;
    }
  return r;
}

Status passes(Graph& g, WeightStore& store, bool fuse) {
  CompileOptions options;
  options.fuse_frame_taps = fuse;
  PassContext ctx{options, store, {}};
  for (auto pass : {run_canonicalize, run_fuse_norm_act, run_fuse_residual, run_fuse_frame_taps}) {
    STRATA_RETURN_IF_ERROR(pass(g, ctx));
    STRATA_RETURN_IF_ERROR(verify(g));
  }
  return Status::ok();
}

TEST(FuseFrameTaps, ThreeTapConvsBecomeOneWithTheSameValues) {
  WeightStore store;
  Graph before = causal_conv(store);
  Graph g = before;
  Status s = passes(g, store, true);
  ASSERT_TRUE(s.is_ok()) << s.message();
  const Convs r = count(g);
  ASSERT_EQ(r.convs, 1) << print_graph(g);
  ASSERT_NE(r.fused, nullptr);
  EXPECT_EQ(r.fused->attrs.get_int("frame_taps"), 3);
  EXPECT_EQ(r.fused->attrs.get_int("frame_shift", 0), 0);
  EXPECT_EQ(r.fused->attrs.get_ints("kernel"), (std::vector<int64_t>{9, 3}));
  EXPECT_EQ(g.value(r.fused->inputs[1]).type.shape, (Shape{kC, kC, 9, 3}));
  ASSERT_EQ(r.fused->inputs.size(), 4u);  // the bias and the shortcut as its residual
  EXPECT_NE(r.fused->inputs[2], kNoValue);
  EXPECT_NE(r.fused->inputs[3], kNoValue);
  auto in = testing::random_inputs(before, 7);
  auto want = testing::run_graph(before, store, in);
  auto got = testing::run_graph(g, store, in);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].data.size(), want[0].data.size());
  for (size_t i = 0; i < got[0].data.size(); ++i)
    ASSERT_NEAR(got[0].data[i], want[0].data[i], 1e-5 * (1.0 + std::fabs(want[0].data[i]))) << "element " << i;
}

TEST(FuseFrameTaps, OffOrDifferentInputsKeepTheTaps) {
  WeightStore store;
  Graph off = causal_conv(store);
  ASSERT_TRUE(passes(off, store, false).is_ok());
  EXPECT_EQ(count(off).convs, 3);
  EXPECT_EQ(count(off).fused, nullptr);
  // The middle tap reads another tensor: the chain breaks there, nothing fuses (two
  // neighbours with shifts 0 and 2 are not consecutive).
  Graph mixed = causal_conv(store, false);
  ASSERT_TRUE(passes(mixed, store, true).is_ok());
  EXPECT_EQ(count(mixed).convs, 3);
  EXPECT_EQ(count(mixed).fused, nullptr);
}

}  // namespace
}  // namespace strata

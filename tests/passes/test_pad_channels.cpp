// pad_channels: the printed graph before and after on a small graph (golden), and the
// interpreter before and after on decoder-shaped graphs with awkward channel counts
// (bit-identical: padded channels are exact zeros).
#include "passes/passes.h"
#include "ir/verifier.h"
#include "passes/decoder_like.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

using testing::decoder_like;
using testing::DecoderLikeOptions;

constexpr const char* kBefore = R"(graph @pad(%x: f32[1,3,4,4]) {
  %w1: f32[96,3,3,3] = weight "w1"
  %b1: f32[96] = weight "b1"
  %c1: f32[1,96,4,4] = conv_gemm "c1" (%x, %w1, %b1) {kernel = [3, 3], pad = [1, 1], weight_layout = "oihw"}
  %g: f32[96] = weight "g"
  %be: f32[96] = weight "be"
  %n: f32[1,96,4,4] = norm_act "n" (%c1, %g, %be) {eps = 1e-06, groups = 8, norm = "group", silu = 1}
  %w2: f32[3,96,1,1] = weight "w2"
  %y: f32[1,3,4,4] = conv_gemm "y" (%n, %w2) {kernel = [1, 1], weight_layout = "oihw"}
  return %y
}
)";

// The 3-channel input is concatenated with zeros to 4 (conv inputs are 4k channels),
// 96 channels become 128 (tile 64) with zero weight rows / columns, zero γ, β, bias;
// norm_act keeps its statistics on the 96 real channels; the 3-channel output is
// computed as 4 and sliced back under its own name.
constexpr const char* kAfter = R"(graph @pad(%x: f32[1,3,4,4]) {
  %strata.zeros: f32[1,1,4,4] = weight "strata.zeros[1x1x4x4]"
  %x.padded: f32[1,4,4,4] = concat "x.padded" (%x, %strata.zeros) {axis = 1}
  %w1.pad: f32[128,4,3,3] = weight "w1[pad 96x3x3x3->128x4x3x3]"
  %b1.pad: f32[128] = weight "b1[pad 96->128]"
  %c1: f32[1,128,4,4] = conv_gemm "c1" (%x.padded, %w1.pad, %b1.pad) {kernel = [3, 3], pad = [1, 1], weight_layout = "oihw"}
  %g.pad: f32[128] = weight "g[pad 96->128]"
  %be.pad: f32[128] = weight "be[pad 96->128]"
  %n: f32[1,128,4,4] = norm_act "n" (%c1, %g.pad, %be.pad) {channels = 96, eps = 1e-06, groups = 8, norm = "group", silu = 1}
  %w2.pad: f32[4,128,1,1] = weight "w2[pad 3x96x1x1->4x128x1x1]"
  %y.padded: f32[1,4,4,4] = conv_gemm "y" (%n, %w2.pad) {kernel = [1, 1], weight_layout = "oihw"}
  %y: f32[1,3,4,4] = slice "y.unpad" (%y.padded) {axis = 1, end = 3, start = 0}
  return %y
}
)";

TEST(PadChannelsTest, Golden) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kBefore, store);
  ASSERT_EQ(print_graph(g), kBefore);
  Graph before = g;
  CompileOptions options;
  PassContext ctx{options, store, {}};
  ASSERT_TRUE(run_pad_channels(g, ctx).is_ok());
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message();
  EXPECT_EQ(print_graph(g), kAfter);
  // The padded weights hold the originals in their leading corner, zeros elsewhere.
  auto w1 = store.get("w1")->to_f32();
  auto p1 = store.get("w1[pad 96x3x3x3->128x4x3x3]")->to_f32();
  EXPECT_EQ(p1[((5 * 4 + 2) * 3 + 1) * 3 + 2], w1[((5 * 3 + 2) * 3 + 1) * 3 + 2]);
  EXPECT_EQ(p1[((5 * 4 + 3) * 3 + 1) * 3 + 2], 0.0f);
  EXPECT_EQ(p1[((100 * 4 + 1) * 3 + 1) * 3 + 2], 0.0f);
  auto in = testing::random_inputs(before, 7);
  EXPECT_TRUE(testing::bit_identical(testing::run_graph(g, store, in), testing::run_graph(before, store, in)));
}

TEST(PadChannelsTest, PaddedCountRule) {
  // Below the tile: multiples of 4; at or above: multiples of the tile.
  const std::pair<int64_t, int64_t> cases[] = {{3, 4}, {16, 16}, {96, 128}, {144, 192}, {64, 64}, {130, 192}};
  for (auto [c, want] : cases) {
    WeightStore store;
    std::string text = fmt::format(R"(graph @g(%x: f32[1,8,2,2]) {{
  %w: f32[{0},8,1,1] = weight "w"
  %y: f32[1,{0},2,2] = conv_gemm "y" (%x, %w) {{kernel = [1, 1], weight_layout = "oihw"}}
  %s: f32[1,{0},2,2] = silu "s" (%y)
  return %s
}}
)", c);
    Graph g = testing::parse_with_weights(text, store);
    CompileOptions options;
    PassContext ctx{options, store, {}};
    ASSERT_TRUE(run_pad_channels(g, ctx).is_ok());
    ValueId y = g.find_value("y");
    ASSERT_NE(y, kNoValue);
    EXPECT_EQ(g.value(y).type.shape[1], want) << c << " channels";
    EXPECT_EQ(g.value(g.outputs()[0]).type.shape[1], c);
  }
}

// Awkward channel counts through the whole decoder-shaped graph: conv with and without
// bias, residuals, group / RMS norm with and without SiLU, both attention styles,
// upsample gather, per-channel constants, clamp, an upsample no conv follows.
class PadChannelsSemantics : public ::testing::TestWithParam<std::pair<int64_t, int64_t>> {};

TEST_P(PadChannelsSemantics, InterpreterBitIdentical) {
  auto [latent, channels] = GetParam();
  WeightStore store;
  Graph g = decoder_like(store, DecoderLikeOptions{.latent_channels = latent, .channels = channels});
  Graph before = g;
  CompileOptions options;
  PassContext ctx{options, store, {}};
  Status s = run_pad_channels(g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message() << "\n" << print_graph(g);
  // Outputs keep their names and real shapes.
  ASSERT_EQ(g.outputs().size(), before.outputs().size());
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    EXPECT_EQ(g.value(g.outputs()[i]).name, before.value(before.outputs()[i]).name);
    EXPECT_EQ(g.value(g.outputs()[i]).type, before.value(before.outputs()[i]).type);
  }
  auto in = testing::random_inputs(before, 11);
  auto want = testing::run_graph(before, store, in);
  auto got = testing::run_graph(g, store, in);
  EXPECT_TRUE(testing::bit_identical(got, want)) << "max rel diff " << testing::max_rel_diff(got, want) << "\n"
                                                 << print_graph(g);
}

INSTANTIATE_TEST_SUITE_P(AwkwardCounts, PadChannelsSemantics,
                         ::testing::Values(std::pair<int64_t, int64_t>{16, 96}, std::pair<int64_t, int64_t>{3, 144},
                                           std::pair<int64_t, int64_t>{16, 16}, std::pair<int64_t, int64_t>{3, 3}),
                         [](const auto& info) {
                           return fmt::format("in{}_c{}", info.param.first, info.param.second);
                         });

TEST(PadChannelsTest, AttentionTokensPadded) {
  // 96 channels: the Flux-style q, k, v and the attention result are padded to 128.
  WeightStore store;
  Graph g = decoder_like(store, DecoderLikeOptions{.channels = 96});
  CompileOptions options;
  PassContext ctx{options, store, {}};
  ASSERT_TRUE(run_pad_channels(g, ctx).is_ok());
  int attention_padded = 0;
  for (const Node& n : g.nodes())
    if (n.op == Op::attention && g.value(n.inputs[0]).type.shape.back() == 128) {
      ++attention_padded;
      EXPECT_EQ(g.value(n.outputs[0]).type.shape.back(), 128);
      EXPECT_DOUBLE_EQ(n.attrs.get_float("scale"), 1.0 / std::sqrt(96.0));
    }
  EXPECT_EQ(attention_padded, 1) << print_graph(g);
  ASSERT_FALSE(ctx.log.empty());
  EXPECT_NE(ctx.log.back().find("pad_channels:"), std::string::npos);
}

TEST(PadChannelsTest, NoPaddingLeavesGraphAlone) {
  // 16 and 64 channels need no padding: only the 3-channel output is padded.
  WeightStore store;
  Graph g = decoder_like(store, DecoderLikeOptions{.channels = 64});
  std::string before = print_graph(g);
  CompileOptions options;
  PassContext ctx{options, store, {}};
  ASSERT_TRUE(run_pad_channels(g, ctx).is_ok());
  // Only the 3-channel conv_out is padded (to 4), clamped and sliced back.
  std::string after = print_graph(g);
  EXPECT_NE(after.find("%clamp: f32[1,3,12,10] = slice \"clamp.unpad\" (%clamp.padded)"), std::string::npos) << after;
  EXPECT_EQ(after.find("conv_in.weight.pad"), std::string::npos) << after;
}

TEST(PadChannelsTest, PadsPackedWeights) {
  // o_hwi weights [Co, kh·kw·Ci] pad as the view [Co, kh·kw, Ci]: input 3 → 4
  // channels per tap, 96 → 128 rows.
  WeightStore store;
  Graph g = testing::parse_with_weights(R"(graph @g(%x: f32[1,3,5,4]) {
  %w: f32[96,27] = weight "w"
  %y: f32[1,96,5,4] = conv_gemm "y" (%x, %w) {kernel = [3, 3], pad = [1, 1], weight_layout = "o_hwi"}
  %s: f32[1,96,5,4] = silu "s" (%y)
  return %s
}
)", store);
  Graph before = g;
  CompileOptions options;
  PassContext ctx{options, store, {}};
  Status s = run_pad_channels(g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message();
  auto w = store.get("w[pad 96x9x3->128x9x4]");
  ASSERT_TRUE(w.has_value()) << print_graph(g);
  EXPECT_EQ(w->shape, (Shape{128, 36}));
  auto in = testing::random_inputs(before, 2);
  EXPECT_TRUE(testing::bit_identical(testing::run_graph(g, store, in), testing::run_graph(before, store, in)));
}

}  // namespace
}  // namespace strata

// Frame stacks (ir/ops.h frame_rows / frame_shift): the interpreter's conv over a
// stack against a direct loop with replicate padding and the temporal shift, the
// shape rule's checks, and band_math's frame conv (the rows a band of output rows
// reads: the union over the frames it touches, each from its shifted source frame).
#include "ir/band_math.h"
#include "ir/builder.h"
#include "ir/interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace strata {
namespace {

TEST(FrameGather, ConvReadsTheShiftedFrameWithReplicatePadding) {
  constexpr int64_t T = 3, R = 4, W = 5, shift = 1;
  Graph g;
  WeightStore store;
  Builder b(g, &store);
  ValueId x = b.input("x", {1, 1, T * R, W});
  ValueId w = b.input("w", {1, 1, 3, 3});
  b.output(b.conv2d(x, w, kNoValue, {.pad = 1, .frames = {.rows = R, .shift = shift}}));
  ASSERT_TRUE(b.ok()) << b.status().message();
  Tensor xt({1, 1, T * R, W}), wt({1, 1, 3, 3});
  for (size_t i = 0; i < xt.data.size(); ++i) xt.data[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  for (size_t i = 0; i < wt.data.size(); ++i) wt.data[i] = static_cast<float>(i) - 4.0f;
  auto y = interpret(g, store, {xt, wt});
  ASSERT_TRUE(y) << y.message();
  for (int64_t f = 0; f < T; ++f)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < W; ++c) {
        const int64_t src = std::max<int64_t>(f - shift, 0);
        double want = 0;
        for (int64_t ky = 0; ky < 3; ++ky)
          for (int64_t kx = 0; kx < 3; ++kx) {
            const int64_t rr = std::clamp<int64_t>(r + ky - 1, 0, R - 1), cc = std::clamp<int64_t>(c + kx - 1, 0, W - 1);
            want += double(wt.data[static_cast<size_t>(ky * 3 + kx)]) *
                    xt.data[static_cast<size_t>((src * R + rr) * W + cc)];
          }
        EXPECT_EQ(y->front().data[static_cast<size_t>((f * R + r) * W + c)], static_cast<float>(want))
            << "frame " << f << " row " << r << " column " << c;
      }
}

TEST(FrameGather, ShapeRuleNeedsSameSizeConvsAndWholeFrames) {
  Graph g;
  WeightStore store;
  Builder b(g, &store);
  ValueId x = b.input("x", {1, 2, 10, 4});
  ValueId w = b.input("w", {2, 2, 3, 3});
  b.conv2d(x, w, kNoValue, {.pad = 1, .frames = {.rows = 4}});  // 10 rows are not frames of 4
  EXPECT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("not a stack of frames of 4 rows"), std::string::npos) << b.status().message();
  Graph g2;
  Builder b2(g2, &store);
  ValueId x2 = b2.input("x", {1, 2, 8, 4});
  ValueId w2 = b2.input("w", {2, 2, 3, 3});
  b2.conv2d(x2, w2, kNoValue, {.pad = 0, .frames = {.rows = 4}});  // would lose rows
  EXPECT_FALSE(b2.ok());
}

TEST(FrameGather, BandMathReadsTheShiftedSourceFrames) {
  const RowOp shift0 = RowOp::make_frame_conv(3, 1, 4, 0), shift2 = RowOp::make_frame_conv(3, 1, 4, 2);
  EXPECT_EQ(output_rows(shift0, 12), 12);
  EXPECT_EQ(output_rows(shift0, 10), 0);  // not whole frames
  // Rows of frame 1 read frame 1, clamped to it (no halo from the frames around).
  EXPECT_EQ(needed_rows({shift0}, 12, {4, 8}), (RowRange{4, 8}));
  EXPECT_EQ(needed_rows({shift0}, 12, {5, 6}), (RowRange{4, 7}));
  // Shift 2: frames 0, 1 and 2 all read frame 0; a band across frames 1 and 2 needs
  // all of frame 0 (the tail of frame 1 and the head of frame 2 meet there).
  EXPECT_EQ(needed_rows({shift2}, 12, {6, 9}), (RowRange{0, 4}));
  EXPECT_EQ(needed_rows({shift2}, 12, {9, 10}), (RowRange{0, 3}));
  // Through the nearest-2× gather: frames of 4 virtual rows are frames of 2 rows of x.
  EXPECT_EQ(needed_rows(conv_row_ops(2, 3, 1, 1, 4, 0), 6, {4, 6}), (RowRange{2, 4}));
}

// frame_taps = 3: one conv with kernel rows [tap 0 | tap 1 | tap 2] computes what the
// three single-tap convs (shifts 2, 1, 0) sum to (HunyuanVideo's causal 3×3×3 conv).
TEST(FrameGather, TapsInOneConvSumTheShiftedTapConvs) {
  constexpr int64_t T = 4, R = 3, W = 5, C = 2, K = 3;
  Graph fused, split;
  WeightStore store;
  Tensor xt({1, C, T * R, W}), wt({C, C, K * K, K});
  for (size_t i = 0; i < xt.data.size(); ++i) xt.data[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  for (size_t i = 0; i < wt.data.size(); ++i) wt.data[i] = static_cast<float>((i * 5) % 9) - 4.0f;
  {
    Builder b(fused, &store);
    ValueId x = b.input("x", {1, C, T * R, W});
    ValueId w = b.input("w", {C, C, K * K, K});
    b.output(b.conv2d(x, w, kNoValue, {.pad = 1, .frames = {.rows = R, .shift = 0, .taps = K}}));
    ASSERT_TRUE(b.ok()) << b.status().message();
  }
  std::vector<Tensor> inputs{xt};
  {
    Builder b(split, &store);
    ValueId x = b.input("x", {1, C, T * R, W});
    ValueId sum = kNoValue;
    for (int64_t t = 0; t < K; ++t) {
      ValueId w = b.input("w" + std::to_string(t), {C, C, K, K});
      Tensor wt_t({C, C, K, K});  // rows t·K … of the fused weight
      for (int64_t oc = 0; oc < C * C; ++oc)
        std::copy_n(wt.data.begin() + (oc * K + t) * K * K, K * K, wt_t.data.begin() + oc * K * K);
      inputs.push_back(wt_t);
      ValueId y = b.conv2d(x, w, kNoValue, {.pad = 1, .frames = {.rows = R, .shift = K - 1 - t}});
      sum = sum == kNoValue ? y : b.add(sum, y);
    }
    b.output(sum);
    ASSERT_TRUE(b.ok()) << b.status().message();
  }
  auto got = interpret(fused, store, {xt, wt});
  ASSERT_TRUE(got) << got.message();
  auto want = interpret(split, store, inputs);
  ASSERT_TRUE(want) << want.message();
  // Small integers: every partial sum is exact, so the two orders agree exactly.
  EXPECT_EQ(got->front().data, want->front().data);
  // The kernel rows must be whole taps.
  Graph bad;
  Builder b(bad, &store);
  b.conv2d(b.input("x", {1, C, T * R, W}), b.input("w", {C, C, 8, K}), kNoValue,
           {.pad = 1, .frames = {.rows = R, .taps = K}});
  EXPECT_NE(b.status().message().find("8 kernel rows are not 3 temporal taps"), std::string::npos)
      << b.status().message();
}

TEST(FrameGather, BandMathOfTapsCoversTheirFrames) {
  // Taps 3 (shifts 0, 1, 2), frames of 4 rows: rows [9, 10) of frame 2 read rows [0, 3)
  // of frames 0, 1 and 2; the covering range runs from frame 0's to frame 2's.
  const RowOp taps = RowOp::make_frame_conv(3, 1, 4, 0, 3);
  EXPECT_EQ(needed_rows({taps}, 12, {9, 10}), (RowRange{0, 11}));
  EXPECT_EQ(needed_rows({taps}, 12, {0, 1}), (RowRange{0, 2}));  // frame 0 reads only itself
  EXPECT_EQ(conv_row_ops(1, 9, 1, 1, 4, 0, 3).back().k, 3);      // 9 kernel rows: 3 taps of 3
}

}  // namespace
}  // namespace strata

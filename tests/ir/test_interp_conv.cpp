// Interpreter: conv2d, conv3d, linear, matmul and attention against values worked out
// by hand in each test.
#include "test_interp_util.h"

#include <cmath>

namespace strata {
namespace {

using testing::expect_exact;
using testing::expect_near;
using testing::InterpGraph;

TEST(InterpConv, Conv2dZeroPaddingAtBorders) {
  // 3×3 ones kernel over a 3×3 image of ones, padding 1: each output counts the
  // input pixels under the kernel: corners see 4, edges 6, the centre 9.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 3, 3});
  ValueId w = t.weight("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  t.b.output(t.b.conv2d(x, w, kNoValue, {.pad = 1}));
  Tensor y = t.run1({Tensor({1, 1, 3, 3}, std::vector<float>(9, 1.0f))});
  expect_exact(y, {1, 1, 3, 3}, {4, 6, 4, 6, 9, 6, 4, 6, 4});
}

TEST(InterpConv, Conv2dStride) {
  // 2×2 ones kernel, stride 2, on x = 0..15 (4×4): sums of the four 2×2 blocks.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 4, 4});
  ValueId w = t.weight("w", {1, 1, 2, 2}, {1, 1, 1, 1});
  t.b.output(t.b.conv2d(x, w, kNoValue, {.stride = 2}));
  std::vector<float> xs(16);
  for (int i = 0; i < 16; ++i) xs[i] = float(i);
  Tensor y = t.run1({Tensor({1, 1, 4, 4}, xs)});
  expect_exact(y, {1, 1, 2, 2}, {0 + 1 + 4 + 5, 2 + 3 + 6 + 7, 8 + 9 + 12 + 13, 10 + 11 + 14 + 15});
}

TEST(InterpConv, Conv2dStrideWithPadding) {
  // 3×3 ones, pad 1, stride 2 on a 4×4 image of ones: outputs at (0,0), (0,2), (2,0),
  // (2,2) cover 2×2, 2×3, 3×2 and 3×3 pixels inside the image.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 4, 4});
  ValueId w = t.weight("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  t.b.output(t.b.conv2d(x, w, kNoValue, {.pad = 1, .stride = 2}));
  Tensor y = t.run1({Tensor({1, 1, 4, 4}, std::vector<float>(16, 1.0f))});
  expect_exact(y, {1, 1, 2, 2}, {4, 6, 6, 9});
}

TEST(InterpConv, Conv2dChannelsAndBias) {
  // 1×1 conv, 2 channels in and out: y[co] = Σ_ci w[co,ci]·x[ci] + b[co].
  // x0 = (1, 2), x1 = (3, 4); w = [[1, 10], [-1, 0.5]]; b = (100, -1).
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 2, 1, 2});
  ValueId w = t.weight("w", {2, 2, 1, 1}, {1, 10, -1, 0.5f});
  ValueId bias = t.weight("b", {2}, {100, -1});
  t.b.output(t.b.conv2d(x, w, bias));
  Tensor y = t.run1({Tensor({1, 2, 1, 2}, {1, 2, 3, 4})});
  expect_exact(y, {1, 2, 1, 2}, {1 + 30 + 100, 2 + 40 + 100, -1 + 1.5f - 1, -2 + 2 - 1});
}

TEST(InterpConv, Conv3dCausalTemporalTaps) {
  // 1×1×1 channels, kernel kt = 3 with taps (5, 2, 3), causal: two zero frames in
  // front, so y[t] = 5·x[t-2] + 2·x[t-1] + 3·x[t]. x = (1, 10, 100):
  // y = (3·1, 2·1 + 3·10, 5·1 + 2·10 + 3·100).
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 3, 1, 1});
  ValueId w = t.weight("w", {1, 1, 3, 1, 1}, {5, 2, 3});
  t.b.output(t.b.conv3d(x, w, kNoValue, {.pad = 0, .causal = true}));
  Tensor y = t.run1({Tensor({1, 1, 3, 1, 1}, {1, 10, 100})});
  expect_exact(y, {1, 1, 3, 1, 1}, {3, 32, 325});
}

TEST(InterpConv, Conv3dCausalOnOneFrameIsConv2dWithLastTap) {
  // On a single frame the two front taps only see padding: the result is a conv2d
  // with w[:, :, kt-1] (the "current frame" tap), bit for bit.
  const int64_t co = 3, ci = 2, k = 3;
  InterpGraph t;
  std::vector<float> w3 = testing::random_values(co * ci * k * k * k, 7);
  std::vector<float> w2;
  for (int64_t o = 0; o < co; ++o)
    for (int64_t i = 0; i < ci; ++i)
      for (int64_t s = 0; s < k * k; ++s)
        w2.push_back(w3[static_cast<size_t>(((o * ci + i) * k + (k - 1)) * k * k + s)]);
  std::vector<float> bias = testing::random_values(co, 8);
  ValueId x3 = t.b.input("x3", {1, ci, 1, 5, 4});
  ValueId x2 = t.b.input("x2", {1, ci, 5, 4});
  ValueId b = t.weight("b", {co}, bias);
  ValueId y3 = t.b.conv3d(x3, t.weight("w3", {co, ci, k, k, k}, w3), b, {.pad = 1});
  ValueId y2 = t.b.conv2d(x2, t.weight("w2", {co, ci, k, k}, w2), b, {.pad = 1});
  t.b.output(t.b.reshape(y3, {1, co, 5, 4}));
  t.b.output(y2);
  Tensor x = testing::random_tensor({1, ci, 5, 4}, 9);
  Tensor x_frame = x;
  x_frame.shape = {1, ci, 1, 5, 4};
  auto out = t.run({x_frame, x});
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ((*out)[0].data, (*out)[1].data);
}

TEST(InterpConv, Linear) {
  // x = [[1,2,3],[4,5,6]], w = [[1,0,-1],[0.5,0.5,0.5]], b = (10, 0):
  // row 0: (1-3+10, 3), row 1: (4-6+10, 7.5).
  InterpGraph t;
  ValueId x = t.b.input("x", {2, 3});
  ValueId w = t.weight("w", {2, 3}, {1, 0, -1, 0.5f, 0.5f, 0.5f});
  ValueId b = t.weight("b", {2}, {10, 0});
  t.b.output(t.b.linear(x, w, b));
  Tensor y = t.run1({Tensor({2, 3}, {1, 2, 3, 4, 5, 6})});
  expect_exact(y, {2, 2}, {8, 3, 8, 7.5f});
}

TEST(InterpConv, LinearOverLeadingDimsWithoutBias) {
  // [1, 2, 1, 2] input rows (1,1) and (2,-1); w = [[3, 4]] → 7 and 2.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 2, 1, 2});
  t.b.output(t.b.linear(x, t.weight("w", {1, 2}, {3, 4})));
  Tensor y = t.run1({Tensor({1, 2, 1, 2}, {1, 1, 2, -1})});
  expect_exact(y, {1, 2, 1, 1}, {7, 2});
}

TEST(InterpConv, MatmulBatched) {
  // batch 0: [[1,2],[3,4]]·[5,6]ᵀ = (17, 39); batch 1: identity·(7, 8) = (7, 8).
  InterpGraph t;
  ValueId a = t.b.input("a", {2, 2, 2});
  ValueId b = t.b.input("b", {2, 2, 1});
  t.b.output(t.b.matmul(a, b));
  Tensor y = t.run1({Tensor({2, 2, 2}, {1, 2, 3, 4, 1, 0, 0, 1}), Tensor({2, 2, 1}, {5, 6, 7, 8})});
  expect_exact(y, {2, 2, 1}, {17, 39, 7, 8});
}

TEST(InterpConv, AttentionTwoTokens) {
  // Head 0, D = 1, scale 0.5, k = (0, ln 3), v = [[4, 0], [0, 8]]:
  //   q = 2: scores (0, ln 3) → softmax (1/4, 3/4) → (1, 6)
  //   q = 0: scores (0, 0)    → (1/2, 1/2)        → (2, 4)
  // Head 1: q = 0 → uniform weights over v = [[1, 1], [3, 3]] → (2, 2) for both rows.
  InterpGraph t;
  ValueId q = t.b.input("q", {2, 2, 1});
  ValueId k = t.b.input("k", {2, 2, 1});
  ValueId v = t.b.input("v", {2, 2, 2});
  t.b.output(t.b.attention(q, k, v, 0.5));
  const float ln3 = std::log(3.0f);
  Tensor y = t.run1({Tensor({2, 2, 1}, {2, 0, 0, 0}), Tensor({2, 2, 1}, {0, ln3, 5, 7}),
                     Tensor({2, 2, 2}, {4, 0, 0, 8, 1, 1, 3, 3})});
  expect_near(y, {2, 2, 2}, {1, 6, 2, 4, 2, 2, 2, 2}, 1e-6);
}

TEST(InterpConv, AttentionLargeScoresDoNotOverflow) {
  // Scores 1000 and 0: the max is subtracted before exp, so no inf/NaN; the weights
  // are (1, e^-1000 ≈ 0) → the first value row.
  InterpGraph t;
  ValueId q = t.b.input("q", {1, 1});
  ValueId k = t.b.input("k", {2, 1});
  ValueId v = t.b.input("v", {2, 1});
  t.b.output(t.b.attention(q, k, v, 1.0));
  Tensor y = t.run1({Tensor({1, 1}, {1000}), Tensor({2, 1}, {1, 0}), Tensor({2, 1}, {5, 9})});
  expect_exact(y, {1, 1}, {5});
}

}  // namespace
}  // namespace strata

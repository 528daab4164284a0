// Interpreter: group_norm, rms_norm, layer_norm and softmax against values worked out
// by hand in each test.
#include "test_interp_util.h"

#include <cmath>

namespace strata {
namespace {

using testing::expect_exact;
using testing::expect_near;
using testing::InterpGraph;

TEST(InterpNorm, GroupNormKnownMeanAndVariance) {
  // x[1, 4, 1, 2], 2 groups of 2 channels.
  //   group 0 = channels 0, 1 = (1, 3, 5, 7): mean 4, biased var (9+1+1+9)/4 = 5;
  //     with eps 4 the denominator is √9 = 3 → (-1, -1/3, 1/3, 1).
  //   group 1 = (10, 10, 10, 10): var 0 → normalised 0 → beta.
  // gamma = (2, 3, 4, 5), beta = (1, 0, -5, 7):
  //   ch 0: (-1, -1/3)·2 + 1 = (-1, 1/3); ch 1: (1/3, 1)·3 = (1, 3); ch 2: -5; ch 3: 7.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 4, 1, 2});
  ValueId g = t.weight("gamma", {4}, {2, 3, 4, 5});
  ValueId b = t.weight("beta", {4}, {1, 0, -5, 7});
  t.b.output(t.b.group_norm(x, g, b, 2, 4.0));
  Tensor y = t.run1({Tensor({1, 4, 1, 2}, {1, 3, 5, 7, 10, 10, 10, 10})});
  expect_near(y, {1, 4, 1, 2}, {-1, 1.0f / 3, 1, 3, -5, -5, 7, 7}, 1e-6);
}

TEST(InterpNorm, GroupNormIsPerSample) {
  // Two samples, one group each: sample 0 = (0, 2) → (-1, 1) (mean 1, var 1, eps 0);
  // sample 1 = (10, 14) → mean 12, var 4 → (-1, 1). Statistics never mix samples.
  InterpGraph t;
  ValueId x = t.b.input("x", {2, 1, 2});
  t.b.output(t.b.group_norm(x, t.weight("gamma", {1}, {1}), t.weight("beta", {1}, {0}), 1, 0.0));
  Tensor y = t.run1({Tensor({2, 1, 2}, {0, 2, 10, 14})});
  expect_exact(y, {2, 1, 2}, {-1, 1, -1, 1});
}

TEST(InterpNorm, GroupMomentsPerGroupAndRow) {
  // x[1, 4, 2, 2], 2 groups of 2 channels, in_scale 0.5.
  //   group 0, row 0: channels 0, 1 of row 0 = (2, 6, 10, 14)·0.5 = (1, 3, 5, 7):
  //     mean 4, M2 = 9 + 1 + 1 + 9 = 20;
  //   group 0, row 1: (0, 0, 4, 4)·0.5 = (0, 0, 2, 2): mean 1, M2 = 4;
  //   group 1, row 0: (8, 8, 8, 8)·0.5: mean 4, M2 0; row 1: (-2, 2, -2, 2)·0.5: mean 0, M2 4·1 = 4.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 4, 2, 2});
  t.b.output(t.b.op(Op::group_moments, {x}, {{"groups", int64_t{2}}, {"in_scale", 0.5}}));
  // x[c][r][w]
  Tensor y = t.run1({Tensor({1, 4, 2, 2}, {2, 6, 0, 0,     // c0: row 0 (2, 6), row 1 (0, 0)
                                           10, 14, 4, 4,   // c1
                                           8, 8, -2, 2,    // c2
                                           8, 8, -2, 2})});  // c3
  expect_exact(y, {2, 2, 2}, {4, 20, 1, 4, 4, 0, 0, 4});
}

TEST(InterpNorm, GroupNormWithGivenStatistics) {
  // The statistics operand replaces the computed ones: group 0 (mean 1, rstd 2),
  // group 1 (mean -1, rstd 0.5); x = (1, 2 | 3, 5) in channels 0 | 1 of 2 groups of 1.
  //   ch 0: (x − 1)·2 = (0, 2); ch 1: (x + 1)·0.5 = (2, 3); γ = (1, 2), β = (0, 1):
  //   ch 0 (0, 2); ch 1 (2·2 + 1, 3·2 + 1) = (5, 7).
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 2, 1, 2});
  ValueId stats = t.b.input("stats", {2, 2});
  t.b.output(t.b.group_norm(x, t.weight("gamma", {2}, {1, 2}), t.weight("beta", {2}, {0, 1}), 2, 1e-6, stats));
  Tensor y = t.run1({Tensor({1, 2, 1, 2}, {1, 2, 3, 5}), Tensor({2, 2}, {1, 2, -1, 0.5f})});
  expect_exact(y, {1, 2, 1, 2}, {0, 2, 5, 7});
}

TEST(InterpNorm, RmsNormPerPixel) {
  // x[1, 2, 1, 2]: pixel 0 = (3, 4): ‖x‖ = 5 → (3/5, 4/5)·√2·γ (+β);
  // pixel 1 = (0, 0): divided by max(0, eps), so 0, plus β.
  // γ stored as [2, 1, 1] (Wan's shape) = (1, 2), β = (0.5, -1).
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 2, 1, 2});
  ValueId g = t.weight("gamma", {2, 1, 1}, {1, 2});
  ValueId b = t.weight("beta", {2, 1, 1}, {0.5f, -1});
  t.b.output(t.b.rms_norm(x, g, b));
  Tensor y = t.run1({Tensor({1, 2, 1, 2}, {3, 0, 4, 0})});
  const double r2 = std::sqrt(2.0);
  expect_near(y, {1, 2, 1, 2}, {float(0.6 * r2 + 0.5), 0.5f, float(0.8 * r2 * 2 - 1), -1}, 1e-6);
}

TEST(InterpNorm, RmsNormVideoWithoutBeta) {
  // x[1, 2, 2, 1, 1] (two frames): frame 0 = (3, 4), frame 1 = (-6, 8) → both
  // normalise to (±0.6, 0.8)·√2 with γ = (1, 1).
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 2, 2, 1, 1});
  t.b.output(t.b.rms_norm(x, t.weight("gamma", {2, 1, 1, 1}, {1, 1})));
  Tensor y = t.run1({Tensor({1, 2, 2, 1, 1}, {3, -6, 4, 8})});
  const double r2 = std::sqrt(2.0);
  expect_near(y, {1, 2, 2, 1, 1}, {float(0.6 * r2), float(-0.6 * r2), float(0.8 * r2), float(0.8 * r2)}, 1e-6);
}

TEST(InterpNorm, LayerNormLastDim) {
  // Rows (1, 3, 5, 7) and (2, 2, 2, 2), eps 4: row 0 → (-1, -1/3, 1/3, 1) as in the
  // group-norm test; row 1 → 0. γ = (1, 2, 3, 4), β = (0, 0, 0, 1).
  InterpGraph t;
  ValueId x = t.b.input("x", {2, 4});
  ValueId g = t.weight("gamma", {4}, {1, 2, 3, 4});
  ValueId b = t.weight("beta", {4}, {0, 0, 0, 1});
  t.b.output(t.b.layer_norm(x, g, b, 4.0));
  Tensor y = t.run1({Tensor({2, 4}, {1, 3, 5, 7, 2, 2, 2, 2})});
  expect_near(y, {2, 4}, {-1, -2.0f / 3, 1, 5, 0, 0, 0, 1}, 1e-6);
}

TEST(InterpNorm, LayerNormWithoutAffine) {
  // (0, 2): mean 1, var 1, eps 0 → (-1, 1).
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 2});
  t.b.output(t.b.op(Op::layer_norm, {x}, {{"eps", 0.0}}));
  Tensor y = t.run1({Tensor({1, 2}, {0, 2})});
  expect_exact(y, {1, 2}, {-1, 1});
}

TEST(InterpNorm, SoftmaxLastDim) {
  // Row (0, ln 2, ln 3): exp = (1, 2, 3) → (1/6, 1/3, 1/2). Row (7, 7, 7) → 1/3 each.
  InterpGraph t;
  ValueId x = t.b.input("x", {2, 3});
  t.b.output(t.b.softmax(x));
  Tensor y = t.run1({Tensor({2, 3}, {0, std::log(2.0f), std::log(3.0f), 7, 7, 7})});
  expect_near(y, {2, 3}, {1.0f / 6, 1.0f / 3, 0.5f, 1.0f / 3, 1.0f / 3, 1.0f / 3}, 1e-7);
}

TEST(InterpNorm, SoftmaxLargeInputs) {
  // (1000, 1000 + ln 3) would overflow exp without subtracting the max: (1/4, 3/4).
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 2});
  t.b.output(t.b.softmax(x));
  const float big = 1000.0f;
  // ln 3 at 1000's f32 spacing (2^-14) is not exact: compare with the rounded input.
  const float hi = big + std::log(3.0f);
  const double e = std::exp(double(hi) - double(big));
  Tensor y = t.run1({Tensor({1, 2}, {big, hi})});
  expect_near(y, {1, 2}, {float(1 / (1 + e)), float(e / (1 + e))}, 1e-7);
  EXPECT_NEAR(y.data[0], 0.25, 1e-4);
}

}  // namespace
}  // namespace strata

// Interpreter: pointwise ops, broadcasting, nearest upsampling, data movement and
// casts against values worked out by hand in each test.
#include "test_interp_util.h"

#include <cmath>
#include <limits>

namespace strata {
namespace {

using testing::expect_exact;
using testing::expect_near;
using testing::InterpGraph;

TEST(InterpMisc, SiluAndGelu) {
  // silu(x) = x·σ(x): silu(0) = 0, silu(1) = 1/(1+e⁻¹) = 0.7310585786,
  // silu(-1) = -1/(1+e) = -0.2689414214.
  // gelu(x) = x·Φ(x): gelu(0) = 0, gelu(1) = Φ(1) = 0.8413447461, gelu(-1) = -(1-Φ(1)).
  InterpGraph t;
  ValueId x = t.b.input("x", {3});
  t.b.output(t.b.silu(x));
  t.b.output(t.b.gelu(x));
  auto out = t.run({Tensor({3}, {0, 1, -1})});
  ASSERT_TRUE(out.has_value()) << out.message();
  expect_near((*out)[0], {3}, {0, 0.7310585786f, -0.2689414214f}, 1e-7);
  expect_near((*out)[1], {3}, {0, 0.8413447461f, -0.1586552539f}, 1e-7);
}

TEST(InterpMisc, ScaleAndClamp) {
  // scale: x·2 + 1; clamp to [-1, 1].
  InterpGraph t;
  ValueId x = t.b.input("x", {4});
  t.b.output(t.b.scale(x, 2.0, 1.0));
  t.b.output(t.b.clamp(x, -1.0, 1.0));
  auto out = t.run({Tensor({4}, {-2, 0.5f, 3, -0.25f})});
  ASSERT_TRUE(out.has_value()) << out.message();
  expect_exact((*out)[0], {4}, {-3, 2, 7, 0.5f});
  expect_exact((*out)[1], {4}, {-1, 0.5f, 1, -0.25f});
}

TEST(InterpMisc, AddBroadcastsRowVector) {
  // [2, 3] + [3]: the vector is added to each row.
  InterpGraph t;
  ValueId a = t.b.input("a", {2, 3});
  ValueId b = t.b.input("b", {3});
  t.b.output(t.b.add(a, b));
  Tensor y = t.run1({Tensor({2, 3}, {1, 2, 3, 4, 5, 6}), Tensor({3}, {10, 20, 30})});
  expect_exact(y, {2, 3}, {11, 22, 33, 14, 25, 36});
}

TEST(InterpMisc, AddBroadcastsBothWays) {
  // [2, 1] + [1, 3] = outer sum: y[i][j] = a[i] + b[j].
  InterpGraph t;
  ValueId a = t.b.input("a", {2, 1});
  ValueId b = t.b.input("b", {1, 3});
  t.b.output(t.b.add(a, b));
  Tensor y = t.run1({Tensor({2, 1}, {100, 200}), Tensor({1, 3}, {1, 2, 3})});
  expect_exact(y, {2, 3}, {101, 102, 103, 201, 202, 203});
}

TEST(InterpMisc, MulPerChannel) {
  // x[1, 2, 1, 2] · s[2, 1, 1]: channel 0 scaled by 2, channel 1 by -1.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 2, 1, 2});
  t.b.output(t.b.mul(x, t.weight("s", {2, 1, 1}, {2, -1})));
  Tensor y = t.run1({Tensor({1, 2, 1, 2}, {1, 2, 3, 4})});
  expect_exact(y, {1, 2, 1, 2}, {2, 4, -3, -4});
}

TEST(InterpMisc, AddSameShape) {
  InterpGraph t;
  ValueId a = t.b.input("a", {2});
  t.b.output(t.b.add(a, a));
  expect_exact(t.run1({Tensor({2}, {1.5f, -2})}), {2}, {3, -4});
}

TEST(InterpMisc, UpsampleNearest2x) {
  // [[1, 2], [3, 4]] → each pixel becomes a 2×2 block.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 2, 2});
  t.b.output(t.b.upsample_nearest(x, {2, 2}));
  Tensor y = t.run1({Tensor({1, 1, 2, 2}, {1, 2, 3, 4})});
  expect_exact(y, {1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

TEST(InterpMisc, UpsampleNearestTrailingDimsOnly) {
  // factors [2] touch only the last dim; [2, 1, 1] on [1, 1, T=2, 1, 2] repeats frames.
  InterpGraph t;
  ValueId x = t.b.input("x", {2, 2});
  ValueId v = t.b.input("v", {1, 1, 2, 1, 2});
  t.b.output(t.b.upsample_nearest(x, {2}));
  t.b.output(t.b.upsample_nearest(v, {2, 1, 1}));
  auto out = t.run({Tensor({2, 2}, {1, 2, 3, 4}), Tensor({1, 1, 2, 1, 2}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.has_value()) << out.message();
  expect_exact((*out)[0], {2, 4}, {1, 1, 2, 2, 3, 3, 4, 4});
  expect_exact((*out)[1], {1, 1, 4, 1, 2}, {1, 2, 1, 2, 3, 4, 3, 4});
}

TEST(InterpMisc, ReshapeAndPermute) {
  // x = [[0, 1, 2], [3, 4, 5]]: reshape keeps the row-major order; permute [1, 0] is
  // the transpose [[0, 3], [1, 4], [2, 5]].
  InterpGraph t;
  ValueId x = t.b.input("x", {2, 3});
  t.b.output(t.b.reshape(x, {3, -1}));
  t.b.output(t.b.permute(x, {1, 0}));
  auto out = t.run({Tensor({2, 3}, {0, 1, 2, 3, 4, 5})});
  ASSERT_TRUE(out.has_value()) << out.message();
  expect_exact((*out)[0], {3, 2}, {0, 1, 2, 3, 4, 5});
  expect_exact((*out)[1], {3, 2}, {0, 3, 1, 4, 2, 5});
}

TEST(InterpMisc, Permute3d) {
  // x[2, 3, 4] = 0..23 (x[i][j][k] = 12i + 4j + k); perm [2, 0, 1] gives
  // y[k][i][j] = x[i][j][k].
  InterpGraph t;
  ValueId x = t.b.input("x", {2, 3, 4});
  t.b.output(t.b.permute(x, {2, 0, 1}));
  std::vector<float> xs(24);
  for (int i = 0; i < 24; ++i) xs[static_cast<size_t>(i)] = float(i);
  Tensor y = t.run1({Tensor({2, 3, 4}, xs)});
  ASSERT_EQ(y.shape, (Shape{4, 2, 3}));
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ(y.data[static_cast<size_t>((k * 2 + i) * 3 + j)], float(12 * i + 4 * j + k));
}

TEST(InterpMisc, SliceAndConcat) {
  // x = [[0, 1, 2], [3, 4, 5]]: columns [1, 3) = [[1, 2], [4, 5]]; concat on axis 0
  // stacks rows, on axis 1 joins rows side by side.
  InterpGraph t;
  ValueId x = t.b.input("x", {2, 3});
  ValueId y = t.b.input("y", {1, 3});
  t.b.output(t.b.slice(x, 1, 1, 3));
  t.b.output(t.b.concat({x, y}, 0));
  t.b.output(t.b.concat({x, x}, 1));
  auto out = t.run({Tensor({2, 3}, {0, 1, 2, 3, 4, 5}), Tensor({1, 3}, {6, 7, 8})});
  ASSERT_TRUE(out.has_value()) << out.message();
  expect_exact((*out)[0], {2, 2}, {1, 2, 4, 5});
  expect_exact((*out)[1], {3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  expect_exact((*out)[2], {2, 6}, {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
}

TEST(InterpMisc, CastToF16Rounds) {
  // f16 keeps 10 mantissa bits: near 1 its step is 2^-10.
  //   1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even → 1.
  //   1 + 3·2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even) → 1 + 2^-9.
  //   65520 is halfway between 65504 (the largest f16) and 2^16: rounds to +inf.
  //   2^-25 is half the smallest subnormal (2^-24): ties to even → 0.
  InterpGraph t;
  ValueId x = t.b.input("x", {5});
  t.b.output(t.b.cast(t.b.cast(x, DType::f16), DType::f32));
  const float e11 = std::ldexp(1.0f, -11);
  Tensor y = t.run1({Tensor({5}, {1 + e11, 1 + 3 * e11, 65520, std::ldexp(1.0f, -25), 0.1f})});
  ASSERT_EQ(y.data.size(), 5u);
  EXPECT_EQ(y.data[0], 1.0f);
  EXPECT_EQ(y.data[1], 1 + std::ldexp(1.0f, -9));
  EXPECT_EQ(y.data[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(y.data[3], 0.0f);
  EXPECT_EQ(y.data[4], 0.0999755859375f);  // 1638·2^-14, the f16 nearest 0.1
}

TEST(InterpMisc, CastToBf16Rounds) {
  // bf16 keeps 7 mantissa bits: 1 + 2^-8 ties to even → 1; 1 + 3·2^-8 → 1 + 2^-6.
  InterpGraph t;
  ValueId x = t.b.input("x", {2});
  t.b.output(t.b.cast(x, DType::bf16));
  const float e8 = std::ldexp(1.0f, -8);
  Tensor y = t.run1({Tensor({2}, {1 + e8, 1 + 3 * e8})});
  expect_exact(y, {2}, {1, 1 + std::ldexp(1.0f, -6)});
}

TEST(InterpMisc, F16ValuesStayRoundedDownstream) {
  // The add of two f16 values is an f16 value, so its result is rounded to f16 too.
  // a = 1 + 2^-10 and b = 2^-11 are exact in f16. a + a = 2 + 2^-9 is exact (the f16
  // step in [2, 4) is 2^-9); a + b = 1 + 3·2^-11 is not, and ties to even → 1 + 2^-9.
  InterpGraph t;
  ValueId a = t.b.cast(t.b.input("a", {1}), DType::f16);
  ValueId b = t.b.cast(t.b.input("b", {1}), DType::f16);
  t.b.output(t.b.add(a, a));
  t.b.output(t.b.add(a, b));
  auto out = t.run({Tensor({1}, {1 + std::ldexp(1.0f, -10)}), Tensor({1}, {std::ldexp(1.0f, -11)})});
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_EQ((*out)[0].data[0], 2 + std::ldexp(1.0f, -9));
  EXPECT_EQ((*out)[1].data[0], 1 + std::ldexp(1.0f, -9));
}

}  // namespace
}  // namespace strata

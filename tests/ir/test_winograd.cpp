// Interpreter: Winograd F(2×2, 3×3) and F(4×4, 3×3) (ir/ops.h). The three ops with
// weights from winograd_weights must compute the causal conv they replace: the sum of
// one 3×3 conv (pad 1) per frame, as conv2d computes it; and the transforms' values by
// hand.
#include "test_interp_util.h"

#include <cmath>

namespace strata {
namespace {

using testing::expect_exact;
using testing::InterpGraph;
using testing::random_tensor;

// The 4×4 patch of a tile is read with zero padding, and Bᵀ d B of a one-hot patch is
// an outer product of B's rows: x = 1 at (0, 0) is patch element (1, 1) of tile 0, so
// V[a·4 + b] = Bᵀ[a][1]·Bᵀ[b][1] with Bᵀ[·][1] = (0, 1, −1, 1).
TEST(InterpWinograd, InputTransformOfOneHotPixel) {
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 2, 2});
  t.b.output(t.b.op(Op::winograd_input, {x}, {}, "v"));
  Tensor v = t.run1({Tensor({1, 1, 2, 2}, {1, 0, 0, 0})});
  const float col[4] = {0, 1, -1, 1};
  std::vector<float> want(16);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) want[static_cast<size_t>(a * 4 + b)] = col[a] * col[b];
  std::vector<float> padded(16 * 32, 0.0f);  // the tile rows padded to 32 with zeros
  for (int xi = 0; xi < 16; ++xi) padded[static_cast<size_t>(xi * 32)] = want[static_cast<size_t>(xi)];
  expect_exact(v, {16, 32, 1}, padded);
}

// The same for F(4×4, 3×3): a 6×6 patch, Bᵀ[·][1] = (3/2, −1, 1, −½, 2, 1) (points 0,
// ±1, 2, −½, ∞), so V[a·6 + b] = Bᵀ[a][1]·Bᵀ[b][1], 36 positions.
TEST(InterpWinograd, InputTransformOfOneHotPixelTile4) {
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 2, 2});
  t.b.output(t.b.op(Op::winograd_input, {x}, {{"tile", int64_t(4)}}, "v"));
  Tensor v = t.run1({Tensor({1, 1, 2, 2}, {1, 0, 0, 0})});
  const float col[6] = {1.5f, -1, 1, -0.5f, 2, 1};
  std::vector<float> padded(36 * 32, 0.0f);
  for (int a = 0; a < 6; ++a)
    for (int b = 0; b < 6; ++b) padded[static_cast<size_t>((a * 6 + b) * 32)] = col[a] * col[b];
  expect_exact(v, {36, 32, 1}, padded);
}

// A causal 3-tap conv of 5 → 4 channels over 7 × 6 frames (the last tile row and, for
// m = 4, column partly outside), with a residual and range-guard scales, equals its
// Winograd form to f32 rounding, for both tile sizes.
class InterpWinogradTiles : public ::testing::TestWithParam<int64_t> {};

TEST_P(InterpWinogradTiles, ThreeFramesMatchTheConvsTheyReplace) {
  const int64_t tile = GetParam(), positions = (tile + 2) * (tile + 2);
  const int64_t c = 5, co = 4, h = 7, w = 6;
  std::vector<Tensor> frames, taps;
  for (uint32_t f = 0; f < 3; ++f) {
    frames.push_back(random_tensor({1, c, h, w}, 10 + f));
    taps.push_back(random_tensor({co, c, 3, 3}, 20 + f));
  }
  const Tensor bias = random_tensor({co}, 30);
  const Tensor residual = random_tensor({1, co, h, w}, 31);

  // Direct: Σ_f conv2d(x_f, w_f) + bias + residual.
  InterpGraph direct;
  ValueId sum = kNoValue;
  for (int f = 0; f < 3; ++f) {
    ValueId x = direct.b.input("x" + std::to_string(f), {1, c, h, w});
    ValueId wt = direct.weight("w" + std::to_string(f), {co, c, 3, 3}, taps[static_cast<size_t>(f)].data);
    ValueId b = f == 0 ? direct.weight("bias", {co}, bias.data) : kNoValue;
    ValueId term = direct.b.conv2d(x, wt, b, {.pad = 1});
    sum = sum == kNoValue ? term : direct.b.add(sum, term);
  }
  // With range guards as lower_precision sets them: y = (Σ + bias + r·4)·0.5.
  ValueId r = direct.b.op(Op::scale, {direct.b.input("residual", {1, co, h, w})}, {{"mul", 4.0}}, "r4");
  direct.b.output(direct.b.op(Op::scale, {direct.b.add(sum, r)}, {{"mul", 0.5}}, "half"));
  std::vector<Tensor> inputs = frames;
  inputs.push_back(residual);
  const Tensor want = direct.run1(inputs);

  // Winograd, through the ops (the interpreter's dispatch, shape rules and all).
  const Tensor u = interp::winograd_weights({&taps[0], &taps[1], &taps[2]}, tile);
  ASSERT_EQ(u.shape, (Shape{positions, co, 3 * c}));
  InterpGraph wino;
  std::vector<ValueId> vs;
  for (int f = 0; f < 3; ++f)
    vs.push_back(wino.b.op(Op::winograd_input, {wino.b.input("x" + std::to_string(f), {1, c, h, w})},
                           {{"tile", tile}}, "v" + std::to_string(f)));
  vs.push_back(wino.weight("u", u.shape, u.data));
  ValueId m = wino.b.op(Op::winograd_gemm, vs, {}, "m");
  ValueId res = wino.b.input("residual", {1, co, h, w});
  wino.b.output(wino.b.op(Op::winograd_output, {m, wino.weight("bias", {co}, bias.data), res},
                          {{"height", h}, {"width", w}, {"tile", tile}, {"residual_scale", 4.0}, {"out_scale", 0.5}},
                          "y"));
  const Tensor got = wino.run1(inputs, /*threads=*/3);

  ASSERT_EQ(got.shape, want.shape);
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double(got.data[i]) - want.data[i]));
    max_abs = std::max(max_abs, std::fabs(double(want.data[i])));
  }
  EXPECT_GT(max_abs, 0.5);
  // V, U and M are stored in f32 (relative 6e-8 each); sums of 135 products of size ~1.
  EXPECT_LT(max_diff, 1e-5) << "max |Δ| " << max_diff;
}

INSTANTIATE_TEST_SUITE_P(Tiles, InterpWinogradTiles, ::testing::Values(int64_t(2), int64_t(4)));

// Shape rules: the frames must agree, the weights must span F·C, the tiles must match.
TEST(InterpWinograd, ShapeRulesNameWhatDoesNotFit) {
  InterpGraph t;
  ValueId a = t.b.op(Op::winograd_input, {t.b.input("a", {1, 4, 6, 6})}, {}, "a.v");
  ValueId b = t.b.op(Op::winograd_input, {t.b.input("b", {1, 4, 20, 20})}, {}, "b.v");  // 100 tiles: 128 rows
  ASSERT_TRUE(t.b.ok());
  t.b.op(Op::winograd_gemm, {a, b, t.b.constant("u", testing::f32_type({16, 3, 8}))}, {}, "mixed");
  ASSERT_FALSE(t.b.ok());
  EXPECT_NE(t.b.status().message().find("the frames must agree"), std::string::npos) << t.b.status().message();

  InterpGraph t2;
  ValueId v = t2.b.op(Op::winograd_input, {t2.b.input("a", {1, 4, 6, 6})}, {}, "a.v");
  t2.b.op(Op::winograd_gemm, {v, v, t2.b.constant("u", testing::f32_type({16, 3, 4}))}, {}, "short");
  ASSERT_FALSE(t2.b.ok());
  EXPECT_NE(t2.b.status().message().find("[16, Co, 2·4]"), std::string::npos) << t2.b.status().message();

  InterpGraph t3;
  ValueId v3 = t3.b.op(Op::winograd_input, {t3.b.input("a", {1, 4, 6, 6})}, {}, "a.v");
  ValueId m3 = t3.b.op(Op::winograd_gemm, {v3, t3.b.constant("u", testing::f32_type({16, 3, 4}))}, {}, "m");
  t3.b.op(Op::winograd_output, {m3}, {{"height", int64_t(16)}, {"width", int64_t(10)}}, "y");  // 40 tiles: 64 rows
  ASSERT_FALSE(t3.b.ok());
  EXPECT_NE(t3.b.status().message().find("reads [16, 64, Co]"), std::string::npos) << t3.b.status().message();

  // Tiles are 2 or 4; and F(4×4)'s output reads 36 positions.
  InterpGraph t4;
  t4.b.op(Op::winograd_input, {t4.b.input("a", {1, 4, 6, 6})}, {{"tile", int64_t(3)}}, "a.v");
  ASSERT_FALSE(t4.b.ok());
  EXPECT_NE(t4.b.status().message().find("tile must be 2 or 4"), std::string::npos) << t4.b.status().message();
  InterpGraph t5;
  ValueId v5 = t5.b.op(Op::winograd_input, {t5.b.input("a", {1, 4, 6, 6})}, {{"tile", int64_t(4)}}, "a.v");
  ValueId m5 = t5.b.op(Op::winograd_gemm, {v5, t5.b.constant("u", testing::f32_type({36, 3, 4}))}, {}, "m");
  ASSERT_TRUE(t5.b.ok()) << t5.b.status().message();
  t5.b.op(Op::winograd_output, {m5}, {{"height", int64_t(6)}, {"width", int64_t(6)}}, "y");  // tile 2: 16 positions
  ASSERT_FALSE(t5.b.ok());
  EXPECT_NE(t5.b.status().message().find("with tile 2 reads [16, 32, Co]"), std::string::npos)
      << t5.b.status().message();
}

}  // namespace
}  // namespace strata

// Codegen: conv2d and conv3d (kernels/conv.comp) on Vulkan against the interpreter,
// on random inputs and weights, over awkward shapes: channel counts that are not
// multiples of 4 or of the tiles, 1×1 and non-square frames, strides, batches,
// causal and symmetric temporal padding.
#include "codegen/vk_test_util.h"

#include "ir/builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace strata {
namespace {

struct Conv2dCase {
  int64_t n, ci, co, h, w, kh, kw, pad, stride;
  bool bias;
};

std::string describe(const Conv2dCase& c) {
  return fmt::format("conv2d x[{},{},{},{}] w[{},{},{},{}] pad {} stride {}{}", c.n, c.ci, c.h, c.w, c.co, c.ci,
                     c.kh, c.kw, c.pad, c.stride, c.bias ? " +bias" : "");
}

using testing::expect_matches_interpreter;
using testing::OneNode;
using testing::narrow_target;
using testing::run_for_target;


void build_conv2d(OneNode& t, const Conv2dCase& c) {
  ValueId x = t.input("x", {c.n, c.ci, c.h, c.w});
  ValueId w = t.weight("w", {c.co, c.ci, c.kh, c.kw});
  ValueId bias = c.bias ? t.weight("b", {c.co}) : kNoValue;
  t.b.output(t.b.conv2d(x, w, bias, {.pad = c.pad, .stride = c.stride}));
}

void run_conv2d(const Conv2dCase& c) {
  OneNode t;
  build_conv2d(t, c);
  expect_matches_interpreter(t, describe(c));
}

// Every pair of channel counts from {3, 5, 16, 33} once, the frame size (1×1, 7×5,
// 17×33) and the bias rotating through the pairs so each meets several of them.
void each_channel_pair(int64_t k, int64_t pad) {
  const int64_t channels[] = {3, 5, 16, 33};
  const std::pair<int64_t, int64_t> frames[] = {{1, 1}, {7, 5}, {17, 33}};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const auto [h, w] = frames[(i + j) % 3];
      run_conv2d({1, channels[i], channels[j], h, w, k, k, pad, 1, (i + 2 * j) % 3 != 0});
    }
}

TEST(CodegenConv, Conv2d3x3Pad1) { each_channel_pair(3, 1); }

TEST(CodegenConv, Conv2d1x1) { each_channel_pair(1, 0); }

TEST(CodegenConv, Conv2dStride2) {
  run_conv2d({1, 5, 16, 17, 33, 3, 3, 1, 2, true});
  run_conv2d({2, 16, 3, 7, 5, 3, 3, 1, 2, false});
  run_conv2d({1, 33, 5, 17, 33, 1, 1, 0, 2, true});
  run_conv2d({1, 3, 33, 1, 1, 3, 3, 1, 2, false});
}

TEST(CodegenConv, Conv2dBatch2) {
  run_conv2d({2, 3, 5, 7, 5, 3, 3, 1, 1, true});
  run_conv2d({2, 33, 16, 17, 33, 3, 3, 1, 1, false});
  run_conv2d({2, 16, 33, 17, 33, 1, 1, 0, 1, true});
}

TEST(CodegenConv, Conv2dEveryChannelTile) {
  // Output channels 8, 9, 24 and 70 fill the 8-row tile and take the 16-, 32- and
  // 64-row tiles (70: two tiles, the second partial); 40 input channels are three K
  // chunks, the last partial.
  run_conv2d({1, 40, 8, 9, 11, 3, 3, 1, 1, false});
  run_conv2d({1, 40, 9, 9, 11, 3, 3, 1, 1, true});
  run_conv2d({1, 40, 24, 9, 11, 3, 3, 1, 1, true});
  run_conv2d({2, 40, 70, 9, 11, 3, 3, 1, 1, true});
  run_conv2d({1, 17, 70, 13, 1, 1, 1, 0, 1, false});
}

TEST(CodegenConv, Conv2dGeneralKernels) {
  // No padding, rectangular 2×3 and 5×5 kernels, padding larger than the image.
  run_conv2d({1, 5, 7, 9, 8, 2, 3, 0, 1, true});
  run_conv2d({1, 6, 9, 12, 10, 5, 5, 2, 1, false});
  run_conv2d({1, 4, 5, 2, 3, 3, 3, 2, 1, true});
  run_conv2d({2, 3, 4, 11, 9, 5, 5, 2, 2, true});
}

TEST(CodegenConv, Conv2dManyPixelTiles) {
  // 70×90 output pixels: 50 pixel tiles, the last partial.
  run_conv2d({1, 8, 16, 70, 90, 3, 3, 1, 1, true});
}

struct Conv3dCase {
  int64_t n, ci, co, t, h, w, kt, kh, kw;
  std::vector<int64_t> pad;  // [t_front, t_back, h, w]
  bool bias;
};

void run_conv3d(const Conv3dCase& c) {
  OneNode t;
  ValueId x = t.input("x", {c.n, c.ci, c.t, c.h, c.w});
  ValueId w = t.weight("w", {c.co, c.ci, c.kt, c.kh, c.kw});
  ValueId bias = c.bias ? t.weight("b", {c.co}) : kNoValue;
  t.b.output(t.b.op(Op::conv3d, {x, w, bias}, {{"pad", c.pad}}));
  expect_matches_interpreter(t, fmt::format("conv3d x[{},{},{},{},{}] w[{},{},{},{},{}] pad [{}]{}", c.n, c.ci,
                                            c.t, c.h, c.w, c.co, c.ci, c.kt, c.kh, c.kw, fmt::join(c.pad, ","),
                                            c.bias ? " +bias" : ""));
}

TEST(CodegenConv, Conv3dCausal) {
  // Causal: 2·(kt/2) frames in front, none after. With T = 1 only the last temporal
  // tap meets data.
  for (int64_t t : {1, 3}) {
    run_conv3d({1, 5, 16, t, 7, 5, 3, 3, 3, {2, 0, 1, 1}, true});
    run_conv3d({2, 16, 33, t, 17, 33, 3, 3, 3, {2, 0, 1, 1}, false});
    run_conv3d({1, 33, 3, t, 1, 1, 3, 3, 3, {2, 0, 1, 1}, true});
    run_conv3d({1, 3, 5, t, 7, 5, 1, 1, 1, {0, 0, 0, 0}, true});
  }
}

TEST(CodegenConv, Conv3dGeneralTemporalPadding) {
  // Symmetric and back padding, a temporal kernel longer than the clip, 2 frames.
  run_conv3d({1, 5, 7, 4, 6, 5, 3, 3, 3, {1, 1, 1, 1}, true});
  run_conv3d({2, 4, 6, 2, 5, 7, 3, 1, 3, {0, 2, 0, 1}, false});
  run_conv3d({1, 3, 4, 5, 3, 3, 2, 3, 3, {0, 0, 1, 1}, true});
}



// compile_plan for `target`, loaded on the test device, one run.

TEST(CodegenConv, PixelTilesFoldIntoGridZ) {
  // 561 pixels = 5 tiles over a grid 2 wide: 3 z slices per (n, t), the last half
  // empty; with batch 2 and 3 frames the z index also carries n and t.
  OneNode t;
  ValueId x = t.input("x", {2, 5, 3, 17, 33});
  ValueId w = t.weight("w", {7, 5, 3, 3, 3});
  t.b.output(t.b.conv3d(x, w, t.weight("b", {7}), {.pad = 1}));
  ASSERT_TRUE(t.b.ok()) << t.b.status().message();
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  auto got = run_for_target(t, narrow_target(2));
  ASSERT_TRUE(got) << got.message();
  testing::expect_close(got->at(0), want->at(0), 1e-5, 1e-4);
}

TEST(CodegenConv, OperandBeyondBindingRangeIsAnErrorNamingTheNode) {
  OneNode t;
  build_conv2d(t, {1, 16, 16, 17, 33, 3, 3, 1, 1, true});  // 35904-byte input and output
  ASSERT_TRUE(t.b.ok());
  codegen::Target target = narrow_target(65535);
  target.max_storage_buffer_range = 16384;
  auto plan = codegen::compile_plan(t.graph, t.weights, target);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.message().find("node 'conv2d' (conv2d)"), std::string::npos) << plan.message();
  EXPECT_NE(plan.message().find("storage-buffer range"), std::string::npos) << plan.message();
}

}  // namespace
}  // namespace strata

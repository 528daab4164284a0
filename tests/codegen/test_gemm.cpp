// Codegen: linear and matmul (kernels/gemm.comp) on Vulkan against the interpreter, on
// random inputs and weights: leading dims, K / M / N that are not multiples of the
// tile, with and without bias, batched matmul.
#include "codegen/vk_test_util.h"

#include "ir/builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace strata {
namespace {

using testing::expect_matches_interpreter;
using testing::OneNode;
using testing::narrow_target;
using testing::run_for_target;


void run_linear(const Shape& x_shape, int64_t m, bool bias) {
  OneNode t;
  ValueId x = t.input("x", x_shape);
  ValueId w = t.weight("w", {m, x_shape.back()});
  ValueId b = bias ? t.weight("b", {m}) : kNoValue;
  t.b.output(t.b.linear(x, w, b));
  expect_matches_interpreter(t, fmt::format("linear x{} w[{},{}]{}", shape_str(x_shape), m, x_shape.back(),
                                            bias ? " +bias" : ""));
}

void run_matmul(const Shape& a_shape, int64_t n) {
  OneNode t;
  Shape b_shape = a_shape;
  b_shape[b_shape.size() - 2] = a_shape.back();
  b_shape.back() = n;
  ValueId a = t.input("a", a_shape);
  ValueId b = t.input("b", b_shape);
  t.b.output(t.b.matmul(a, b));
  expect_matches_interpreter(t, fmt::format("matmul a{} b{}", shape_str(a_shape), shape_str(b_shape)));
}

TEST(CodegenGemm, LinearLeadingDims) {
  run_linear({2, 3, 37}, 70, true);   // 6 rows, K 37, two column tiles
  run_linear({2, 3, 37}, 70, false);
  run_linear({4, 33, 16}, 5, true);   // 132 rows: three row tiles, the last partial
  run_linear({1, 1, 1, 7}, 3, true);  // a single row
}

TEST(CodegenGemm, LinearAwkwardK) {
  for (int64_t k : {1, 3, 15, 17, 33, 100})
    run_linear({9, k}, 13, k % 2 == 1);
  run_linear({130}, 65, true);  // rank-1 input: one row of 130 features
}

TEST(CodegenGemm, LinearLarge) {
  run_linear({2, 100, 160}, 130, true);
}

TEST(CodegenGemm, MatmulBatched) {
  run_matmul({2, 3, 17, 37}, 65);
  run_matmul({4, 70, 9}, 130);
  run_matmul({5, 1, 1}, 1);
}

TEST(CodegenGemm, Matmul2d) {
  run_matmul({70, 9}, 130);
  run_matmul({64, 64}, 64);
  run_matmul({1, 200}, 3);
}



// compile_plan for `target`, loaded on the test device, one run.

TEST(CodegenGemm, RowTilesFoldIntoGridZ) {
  // linear: 210 rows = 4 row tiles over a grid 3 wide (2 z slices, the second mostly
  // empty); matmul: 3 row tiles over a grid 2 wide, times 3 batches along z.
  OneNode t;
  ValueId x = t.input("x", {3, 70, 9});
  t.b.output(t.b.linear(x, t.weight("w", {11, 9}), t.weight("b", {11})));
  ValueId a = t.input("a", {3, 130, 9});
  t.b.output(t.b.matmul(a, t.input("bm", {3, 9, 5})));
  ASSERT_TRUE(t.b.ok()) << t.b.status().message();
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  for (uint32_t max_x : {2u, 3u}) {
    auto got = run_for_target(t, narrow_target(max_x));
    ASSERT_TRUE(got) << got.message();
    ASSERT_EQ(got->size(), 2u);
    testing::expect_close(got->at(0), want->at(0), 1e-5, 1e-4);
    testing::expect_close(got->at(1), want->at(1), 1e-5, 1e-4);
  }
}

// An activation beyond the binding range runs in row windows (bit-identical runs:
// CodegenOpWindows.LinearRunsInRowWindows); a weight beyond it is bound whole and is
// an error naming the node.
TEST(CodegenGemm, WeightBeyondBindingRangeIsAnErrorNamingTheNode) {
  OneNode t;
  ValueId x = t.input("x", {64, 100});  // 25600 bytes
  t.b.output(t.b.linear(x, t.weight("proj.weight", {8, 100})));  // 3200 bytes
  ASSERT_TRUE(t.b.ok());
  codegen::Target target = narrow_target(65535);
  target.max_storage_buffer_range = 16384;
  auto windowed = codegen::compile_plan(t.graph, t.weights, target);
  ASSERT_TRUE(windowed) << windowed.message();
  for (const runtime::DispatchDesc& d : windowed->dispatches)
    for (const runtime::BindingDesc& b : d.bindings) EXPECT_LE(b.range, 16384u) << d.label;
  target.max_storage_buffer_range = 2048;
  auto plan = codegen::compile_plan(t.graph, t.weights, target);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.message().find("node 'proj' (linear)"), std::string::npos) << plan.message();
  EXPECT_NE(plan.message().find("storage-buffer range"), std::string::npos) << plan.message();
}

}  // namespace
}  // namespace strata

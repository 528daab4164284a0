// Codegen: linear and matmul (kernels/gemm.comp) on Vulkan against the interpreter, on
// random inputs and weights: leading dims, K / M / N that are not multiples of the
// tile, with and without bias, batched matmul.
#include "codegen/vk_test_util.h"

#include "ir/builder.h"
#include "ir/interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace strata {
namespace {

// A graph of one node, its weights, and the inputs to run it on.
struct OneNode {
  Graph graph;
  WeightStore weights;
  Builder b{graph, &weights};
  std::vector<Tensor> inputs;
  uint32_t seed = 100;

  ValueId input(const std::string& name, Shape shape) {
    inputs.push_back(testing::random_tensor(shape, seed++));
    return b.input(name, std::move(shape));
  }
  ValueId weight(const std::string& name, Shape shape) {
    Tensor t = testing::random_tensor(shape, seed++);
    Status s = weights.add_owned(name, shape, std::move(t.data));
    EXPECT_TRUE(s.is_ok()) << s.message();
    return b.constant(name, TensorType{std::move(shape), DType::f32, Layout{}});
  }
};

// The largest difference from the interpreter must be within 1e-5 of the output's
// magnitude (f32 sums in another order).
void expect_matches_interpreter(OneNode& t, const std::string& what) {
  ASSERT_TRUE(t.b.ok()) << what << ": " << t.b.status().message();
  InterpretOptions io;
  io.threads = 1;
  auto want = interpret(t.graph, t.weights, t.inputs, io);
  ASSERT_TRUE(want.has_value()) << what << ": " << want.message();
  auto got = testing::run_vulkan(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(got.has_value()) << what << ": " << got.message();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    const Tensor &g = (*got)[i], &r = (*want)[i];
    ASSERT_EQ(g.shape, r.shape) << what;
    double scale = 0.0;
    for (float v : r.data) scale = std::max(scale, double(std::fabs(v)));
    EXPECT_LE(max_abs_diff(g, r), 1e-5 * std::max(scale, 1e-3)) << what << " (output max |y| " << scale << ")";
  }
}

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

}  // namespace
}  // namespace strata

// Pointwise ops through codegen + Vulkan against the interpreter: silu, gelu, scale,
// clamp, cast (f16 / bf16 rounding), add and mul with numpy broadcasting, on awkward
// shapes (not multiples of the workgroup, 1x1 spatial, odd channel counts,
// non-square), one big enough for a 2-D grid, and one split into binding windows.
#include "codegen/vk_test_util.h"

#include "codegen/lowering.h"
#include "ir/builder.h"

#include <gtest/gtest.h>

#include <functional>

namespace strata {
namespace {

using testing::expect_close;
using testing::random_tensor;
using testing::run_both;

const std::vector<Shape> kShapes = {{1, 3, 5, 7}, {2, 5, 1, 1}, {1, 13, 9, 4}, {1, 4, 3, 2, 5}, {77}, {1, 1, 1, 1}};

// One unary node on every shape: relative error <= rel (+ abs).
void check_unary(const std::function<ValueId(Builder&, ValueId)>& op, double rel, double abs = 0.0,
                 float lo = -8.0f, float hi = 8.0f) {
  uint64_t seed = 1;
  for (const Shape& shape : kShapes) {
    SCOPED_TRACE(shape_str(shape));
    Graph g;
    Builder b(g, nullptr);
    b.output(op(b, b.input("x", shape)));
    ASSERT_TRUE(b.ok()) << b.status().message();
    auto r = run_both(g, WeightStore(), {random_tensor(shape, seed++, lo, hi)});
    ASSERT_EQ(r.vulkan.size(), 1u);
    expect_close(r.vulkan[0], r.interpreter[0], rel, abs);
  }
}

TEST(CodegenElementwise, Silu) { check_unary([](Builder& b, ValueId x) { return b.silu(x); }, 1e-6); }

TEST(CodegenElementwise, SiluLargeMagnitudes) {
  check_unary([](Builder& b, ValueId x) { return b.silu(x); }, 1e-6, 0.0, -80.0f, 80.0f);
}

TEST(CodegenElementwise, Gelu) { check_unary([](Builder& b, ValueId x) { return b.gelu(x); }, 0.0, 1e-6); }

TEST(CodegenElementwise, Clamp) {
  check_unary([](Builder& b, ValueId x) { return b.clamp(x, -1.5, 2.25); }, 0.0);
}

TEST(CodegenElementwise, Scale) {
  // Operands of one sign, so that x·mul + add does not cancel (mul and add are f32
  // on the device; the interpreter uses the f64 attributes).
  check_unary([](Builder& b, ValueId x) { return b.scale(x, 1.0 / 0.18215, 0.5); }, 1e-6, 0.0, 0.0f, 8.0f);
  check_unary([](Builder& b, ValueId x) { return b.scale(x, 0.5); }, 0.0);
}

TEST(CodegenElementwise, CastRoundsThroughHalfAndBfloat16) {
  for (DType t : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    check_unary([t](Builder& b, ValueId x) { return b.cast(x, t); }, 0.0);
    // Half's edges: overflow to inf, subnormals, ties.
    check_unary([t](Builder& b, ValueId x) { return b.cast(x, t); }, 0.0, 0.0, -70000.0f, 70000.0f);
    check_unary([t](Builder& b, ValueId x) { return b.cast(x, t); }, 0.0, 0.0, -1e-6f, 1e-6f);
  }
}

TEST(CodegenElementwise, CastEdgeValuesExactly) {
  const std::vector<float> edges = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 1e9f, 6.1e-5f,
                                    5.96e-8f, 2.98e-8f, 2.99e-8f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048,
                                    3.0e38f, -3.4e38f, 1.00390625f, 1.01171875f};
  for (DType t : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const Shape shape = {static_cast<int64_t>(edges.size())};
    Graph g;
    Builder b(g, nullptr);
    b.output(b.cast(b.input("x", shape), t));
    ASSERT_TRUE(b.ok()) << b.status().message();
    auto r = run_both(g, WeightStore(), {Tensor(shape, edges)});
    ASSERT_EQ(r.vulkan.size(), 1u);
    expect_close(r.vulkan[0], r.interpreter[0], 0.0);
  }
}

// Broadcast pairs: same shape, [1,C,1,1], [C,1,1], scalar-like, both sides stretched.
const std::vector<std::pair<Shape, Shape>> kPairs = {
    {{2, 5, 3, 7}, {2, 5, 3, 7}}, {{2, 5, 3, 7}, {1, 5, 1, 1}}, {{1, 6, 9, 11}, {6, 1, 1}},
    {{3, 1, 4}, {5, 1}},         {{1}, {2, 3, 5}},             {{4, 1, 3, 1, 2, 3}, {1, 5, 1, 7, 2, 1}},
    {{1, 3, 1, 1}, {1, 3, 1, 1}}, {{7, 1}, {1, 9}}};

void check_binary(bool add) {
  uint64_t seed = 100;
  for (const auto& [sa, sb] : kPairs) {
    SCOPED_TRACE(shape_str(sa) + " & " + shape_str(sb));
    Graph g;
    Builder b(g, nullptr);
    ValueId x = b.input("a", sa), y = b.input("b", sb);
    b.output(add ? b.add(x, y) : b.mul(x, y));
    ASSERT_TRUE(b.ok()) << b.status().message();
    auto r = run_both(g, WeightStore(), {random_tensor(sa, seed++), random_tensor(sb, seed++)});
    ASSERT_EQ(r.vulkan.size(), 1u);
    expect_close(r.vulkan[0], r.interpreter[0], 0.0);  // one f32 rounding on both sides
  }
}

TEST(CodegenElementwise, AddBroadcasting) { check_binary(true); }
TEST(CodegenElementwise, MulBroadcasting) { check_binary(false); }

TEST(CodegenElementwise, MixedDtypesRoundTheResult) {
  // add(f16 value, f32 value) is f16: the sum is rounded through half.
  Graph g;
  Builder b(g, nullptr);
  ValueId h = b.cast(b.input("x", {3, 17}), DType::f16);
  b.output(b.mul(b.add(h, b.input("y", {17})), h));
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto r = run_both(g, WeightStore(), {random_tensor({3, 17}, 5), random_tensor({17}, 6)});
  ASSERT_EQ(r.vulkan.size(), 1u);
  expect_close(r.vulkan[0], r.interpreter[0], 0.0);
}

// More than 65535 workgroups of 64: the grid becomes 2-D.
TEST(CodegenElementwise, TwoDimensionalGrid) {
  const Shape shape = {1, 3, 1200, 1170};
  ASSERT_GT(num_elements(shape), int64_t{65535} * 64);
  Graph g;
  Builder b(g, nullptr);
  ValueId x = b.input("x", shape);
  b.output(b.add(b.silu(x), b.input("bias", {1, 3, 1, 1})));
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto r = run_both(g, WeightStore(), {random_tensor(shape, 9), random_tensor({1, 3, 1, 1}, 10)});
  ASSERT_EQ(r.vulkan.size(), 1u);
  expect_close(r.vulkan[0], r.interpreter[0], 1e-6, 1e-6);  // silu's 1e-6 of |silu(x)| <= 4, then + bias
}

// A target whose binding limit is smaller than the values: unary and same-shape
// binary ops are split into windows, one dispatch each.
TEST(CodegenElementwise, WindowsAboveTheBindingLimit) {
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  Graph g;
  Builder b(g, nullptr);
  const Shape shape = {1, 5, 31, 29};  // 4495 values, 17980 bytes
  ValueId x = b.input("x", shape), s = b.input("s", {1});
  b.output(b.mul(b.add(b.gelu(x), x), s));
  ASSERT_TRUE(b.ok());
  codegen::Target target = codegen::target_for((*device)->info());
  target.max_storage_buffer_range = 4096;
  auto plan = codegen::compile_plan(g, WeightStore(), target);
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_EQ(plan->dispatches.size(), 3u * 5u) << runtime::describe(*plan);
  auto exec = runtime::Executor::create(*device, *plan);
  ASSERT_TRUE(exec) << exec.message();
  std::vector<Tensor> in = {random_tensor(shape, 1), random_tensor({1}, 2)};
  Tensor got(shape);
  ASSERT_TRUE((*exec)->run({std::as_bytes(std::span(in[0].data)), std::as_bytes(std::span(in[1].data))},
                           {std::as_writable_bytes(std::span(got.data))}));
  auto want = interpret(g, WeightStore(), in);
  ASSERT_TRUE(want) << want.message();
  expect_close(got, (*want)[0], 1e-5, 5e-6);  // gelu's 1e-6 times |s| <= 4
}

// Four elements per invocation (unary.comp / binary.comp VEC 4): taken where every 4
// consecutive elements are one run of the innermost dim in every operand, f32 and f16
// (f16vec4 accesses), with windows under a small binding limit; not taken where an
// operand is broadcast along the innermost dim or the element count is not a multiple
// of 4. Either way each element is the interpreter's: bit for bit for add, mul and
// casts, within silu's 1e-6 (as in Silu above). (Inputs are made in separate
// statements: their order is the graph's input order.)
TEST(CodegenElementwise, FourElementsPerInvocation) {
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  const codegen::Target target = codegen::target_for((*device)->info());
  struct Case {
    const char* what;
    std::function<ValueId(Builder&)> build;
    std::vector<Shape> inputs;
    bool vec;
    uint64_t range = 0;  // a binding limit, 0: the device's
    double rel = 0.0;
  };
  const std::vector<Case> cases = {
      {"silu f32", [](Builder& b) { return b.silu(b.input("x", {6, 40})); }, {{6, 40}}, true, 0, 1e-6},
      {"silu f16",
       [](Builder& b) { return b.cast(b.silu(b.cast(b.input("x", {6, 40}), DType::f16)), DType::f32); },
       {{6, 40}}, true},
      {"add f16 + f32, same shape",
       [](Builder& b) {
         ValueId a = b.input("a", {8, 12});
         return b.add(b.cast(a, DType::f16), b.input("b", {8, 12}));
       },
       {{8, 12}, {8, 12}}, true},
      {"mul by a row vector (modulation)",
       [](Builder& b) {
         ValueId a = b.input("a", {9, 16});
         return b.mul(b.cast(a, DType::f16), b.input("s", {1, 16}));
       },
       {{9, 16}, {1, 16}}, true},
      {"mul by a column vector",
       [](Builder& b) {
         ValueId a = b.input("a", {9, 16});
         return b.mul(a, b.input("s", {9, 1}));
       },
       {{9, 16}, {9, 1}}, false},
      {"add, 3 x 7 elements",
       [](Builder& b) {
         ValueId a = b.input("a", {3, 7});
         return b.add(a, b.input("b", {3, 7}));
       },
       {{3, 7}, {3, 7}}, false},
      {"add and silu in windows of 1 KiB",
       [](Builder& b) {
         ValueId a = b.input("a", {5, 32, 32});
         return b.silu(b.add(a, b.input("b", {5, 32, 32})));
       },
       {{5, 32, 32}, {5, 32, 32}}, true, 1024, 1e-6},
  };
  uint64_t seed = 300;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Graph g;
    Builder b(g, nullptr);
    b.output(c.build(b));
    ASSERT_TRUE(b.ok()) << b.status().message();
    codegen::Target t = target;
    if (c.range) t.max_storage_buffer_range = c.range;
    auto plan = codegen::compile_plan(g, WeightStore(), t);
    ASSERT_TRUE(plan) << plan.message();
    bool vec_seen = false, scalar_seen = false;
    for (const auto& d : plan->dispatches) {
      const std::string& name = plan->pipelines[d.pipeline].name;
      const bool computes = name.rfind("binary.comp", 0) == 0 ||
                            (name.rfind("unary.comp", 0) == 0 && name.find("OP=SILU") != std::string::npos);
      if (!computes) continue;
      (name.find("VEC=4") != std::string::npos ? vec_seen : scalar_seen) = true;
    }
    EXPECT_EQ(vec_seen, c.vec) << runtime::describe(*plan);
    EXPECT_EQ(scalar_seen, !c.vec) << runtime::describe(*plan);
    std::vector<Tensor> in;
    for (const Shape& s : c.inputs) in.push_back(random_tensor(s, seed++, -6.0f, 6.0f));
    auto got = testing::run_for_target_graph(g, WeightStore(), in, t);
    ASSERT_TRUE(got) << got.message();
    auto want = interpret(g, WeightStore(), in);
    ASSERT_TRUE(want) << want.message();
    expect_close((*got)[0], (*want)[0], c.rel);
  }
}

}  // namespace
}  // namespace strata

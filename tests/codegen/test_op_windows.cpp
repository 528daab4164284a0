// Ops other than conv_gemm and norm_act under a binding limit (docs/BANDS.md): a
// permute, a reshape between layouts, an upsample, a concat, a broadcasting add, a
// linear and a matmul whose operands exceed the target's storage-buffer range run
// in several dispatches (boxes of their loop, or row windows for the GEMMs), every
// binding within the range, and the result is bit-identical to one dispatch.
#include "tests/codegen/vk_test_util.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace strata {
namespace {

using testing::random_tensor;

Layout nhwc(int64_t padded = 0) { return Layout{LayoutKind::nhwc, padded}; }

struct Built {
  Graph graph;
  WeightStore weights;
  std::vector<Tensor> inputs;
  uint64_t seed = 1;

  ValueId input(Builder& b, const std::string& name, Shape shape, DType dtype, const Layout& layout = {}) {
    inputs.push_back(random_tensor(shape, seed++, -2.0f, 2.0f));
    ValueId v = b.input(name, std::move(shape), dtype);
    graph.value(v).type.layout = layout;
    return v;
  }
  ValueId weight(Builder& b, const std::string& name, Shape shape) {
    Tensor v = random_tensor(shape, seed++, -0.5f, 0.5f);
    EXPECT_TRUE(weights.add_owned(name, shape, std::move(v.data)));
    return b.constant(name, TensorType{std::move(shape), DType::f32, {}});
  }
};

codegen::Target device_target() {
  auto device = testing::test_device();
  EXPECT_TRUE(device) << device.message();
  return device ? codegen::target_for((*device)->info()) : codegen::Target{};
}

// Builds the case, runs it whole, then under `range`: more than one dispatch of the
// op's node, no binding above `range` in the whole plan, identical bytes.
void expect_windowed_identical(const std::function<ValueId(Built&, Builder&)>& build, Layout out_layout,
                               uint64_t range) {
  Built t;
  Builder b(t.graph, &t.weights);
  const ValueId y = build(t, b);
  ASSERT_TRUE(b.ok()) << b.status().message();
  t.graph.value(y).type.layout = out_layout;
  b.output(y);
  const std::string node = t.graph.nodes().back().name;

  const codegen::Target whole_target = device_target();
  auto whole_plan = codegen::compile_plan(t.graph, t.weights, whole_target);
  ASSERT_TRUE(whole_plan) << whole_plan.message();
  uint64_t largest = 0;
  for (const runtime::DispatchDesc& d : whole_plan->dispatches)
    if (d.label.rfind(node, 0) == 0)
      for (const runtime::BindingDesc& bd : d.bindings) largest = std::max(largest, bd.range);
  ASSERT_GT(largest, range) << "the node must bind more than the range when whole";

  codegen::Target narrow = whole_target;
  narrow.max_storage_buffer_range = range;
  auto plan = codegen::compile_plan(t.graph, t.weights, narrow);
  ASSERT_TRUE(plan) << plan.message();
  size_t dispatches = 0;
  for (const runtime::DispatchDesc& d : plan->dispatches) {
    for (const runtime::BindingDesc& bd : d.bindings) EXPECT_LE(bd.range, range) << d.label;
    dispatches += d.label.rfind(node, 0) == 0;
  }
  EXPECT_GT(dispatches, 1u);
  auto want = testing::run_for_target_graph(t.graph, t.weights, t.inputs, whole_target);
  ASSERT_TRUE(want) << want.message();
  auto got = testing::run_for_target_graph(t.graph, t.weights, t.inputs, narrow);
  ASSERT_TRUE(got) << got.message();
  testing::expect_identical((*got)[0], (*want)[0]);
}

TEST(CodegenOpWindows, PermuteOfAnNhwcValueRunsInTiles) {
  expect_windowed_identical(
      [](Built& t, Builder& b) {
        ValueId x = t.input(b, "x", {1, 12, 14, 10}, DType::f32, nhwc(16));
        return b.op(Op::permute, {x}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
      },
      Layout{}, 1024);
}

TEST(CodegenOpWindows, ReshapeBetweenLayoutsRunsInBoxes) {
  for (DType dt : {DType::f32, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    expect_windowed_identical(
        [dt](Built& t, Builder& b) {
          ValueId x = t.input(b, "x", {1, 12, 14, 10}, dt, nhwc());
          return b.op(Op::reshape, {x}, {{"shape", std::vector<int64_t>{1, 12, 140}}});
        },
        Layout{}, 1024);
  }
}

TEST(CodegenOpWindows, UpsampleRunsAsABoxedCopy) {
  expect_windowed_identical(
      [](Built& t, Builder& b) {
        ValueId x = t.input(b, "x", {1, 8, 9, 7}, DType::f16, nhwc());
        return b.op(Op::upsample_nearest, {x}, {{"factors", std::vector<int64_t>{2, 2}}});
      },
      nhwc(), 1024);
}

TEST(CodegenOpWindows, ConcatOperandsRunInBoxes) {
  expect_windowed_identical(
      [](Built& t, Builder& b) {
        ValueId x0 = t.input(b, "x0", {1, 6, 12, 10}, DType::f32, nhwc());
        ValueId x1 = t.input(b, "x1", {1, 10, 12, 10}, DType::f32, nhwc());
        return b.op(Op::concat, {x0, x1}, {{"axis", int64_t{1}}});
      },
      nhwc(), 1024);
}

TEST(CodegenOpWindows, BroadcastingAddRunsInBoxes) {
  expect_windowed_identical(
      [](Built& t, Builder& b) {
        ValueId x = t.input(b, "x", {1, 12, 14, 10}, DType::f32, nhwc());
        ValueId bias = t.input(b, "bias", {1, 12, 1, 1}, DType::f32);
        return b.op(Op::add, {x, bias}, {});
      },
      nhwc(), 1024);
}

TEST(CodegenOpWindows, LinearRunsInRowWindows) {
  expect_windowed_identical(
      [](Built& t, Builder& b) {
        ValueId x = t.input(b, "x", {100, 20}, DType::f32);
        ValueId w = t.weight(b, "w", {24, 20});
        ValueId bias = t.weight(b, "bias", {24});
        return b.op(Op::linear, {x, w, bias}, {});
      },
      Layout{}, 2048);
}

TEST(CodegenOpWindows, MatmulRunsPerBatchInRowWindows) {
  expect_windowed_identical(
      [](Built& t, Builder& b) {
        ValueId a = t.input(b, "a", {3, 70, 16}, DType::f32);
        ValueId m = t.input(b, "m", {3, 16, 12}, DType::f32);
        return b.op(Op::matmul, {a, m}, {});
      },
      Layout{}, 1024);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Below one element (with the alignment slack), or below a GEMM weight (bound whole),
// nothing can be split: the error names the node, the bytes needed and the range.
TEST(CodegenOpWindows, ALimitBelowOneElementOrAWeightIsAnErrorNamingTheNode) {
  struct Case {
    const char* what;
    uint64_t range;
    const char* needs;
  };
  for (const Case& c : {Case{"permute", 8, "one element"}, Case{"linear", 1024, "the weight 'w' needs 2400 bytes"}}) {
    SCOPED_TRACE(c.what);
    Built t;
    Builder b(t.graph, &t.weights);
    ValueId y;
    if (std::string(c.what) == "permute") {
      ValueId x = t.input(b, "x", {1, 12, 14, 10}, DType::f32);
      y = b.op(Op::permute, {x}, {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
    } else {
      ValueId x = t.input(b, "x", {4, 300}, DType::f32);
      y = b.op(Op::linear, {x, t.weight(b, "w", {2, 300})}, {});
    }
    ASSERT_TRUE(b.ok()) << b.status().message();
    b.output(y);
    codegen::Target narrow = device_target();
    narrow.max_storage_buffer_range = c.range;
    auto plan = codegen::compile_plan(t.graph, t.weights, narrow);
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.message().find("node '" + t.graph.nodes().back().name + "'"), std::string::npos) << plan.message();
    EXPECT_NE(plan.message().find(c.needs), std::string::npos) << plan.message();
    EXPECT_NE(plan.message().find("range " + std::to_string(c.range)), std::string::npos) << plan.message();
  }
}

}  // namespace
}  // namespace strata

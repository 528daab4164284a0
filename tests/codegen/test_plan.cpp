// compile_plan and CompiledGraph as a whole: value placement (arena reuse, reshape
// aliasing, the input / output / weights buffers), outputs that are inputs,
// constants or listed twice, weight transforms, requirements, replay, and the error
// paths (a wrong input shape, a device lacking a feature, unsupported values).
#include "compiled_graph.h"
#include "codegen/vk_test_util.h"

#include "codegen/placement.h"
#include "ir/builder.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

using testing::expect_close;
using testing::expect_identical;
using testing::random_tensor;

codegen::Target lavapipe_like() { return codegen::Target{}; }

const runtime::BufferDesc* find_buffer(const runtime::Plan& p, const std::string& name) {
  for (const auto& b : p.buffers)
    if (b.name == name) return &b;
  return nullptr;
}

TEST(CodegenPlan, ArenaReusesMemoryAndReshapesAlias) {
  Graph g;
  Builder b(g, nullptr);
  const Shape shape = {1, 8, 16, 16};  // 8 KiB per value
  ValueId h = b.input("x", shape);
  for (int i = 0; i < 10; ++i) h = b.reshape(b.silu(h), i % 2 ? shape : Shape{8, 256});
  b.output(b.silu(h));
  ASSERT_TRUE(b.ok());
  auto plan = codegen::compile_plan(g, WeightStore(), lavapipe_like());
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_EQ(plan->dispatches.size(), 11u) << "reshapes must not dispatch\n" << runtime::describe(*plan);
  const runtime::BufferDesc* arena = find_buffer(*plan, "activations");
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->size_bytes, 2u * 8192) << "a chain needs two live values at a time";
  EXPECT_EQ(find_buffer(*plan, "weights"), nullptr);
  EXPECT_FALSE(plan->requirements.storage_buffer_16bit_access);
  EXPECT_EQ(plan->requirements.min_storage_buffer_range, 8192u);
  ASSERT_EQ(plan->inputs.size(), 1u);
  EXPECT_EQ(plan->inputs[0].layout, "nchw");
  EXPECT_EQ(plan->buffers[plan->inputs[0].buffer].name, "input");
  EXPECT_EQ(plan->buffers[plan->outputs[0].buffer].name, "output");
  // The last silu writes the output buffer directly.
  EXPECT_EQ(plan->dispatches.back().bindings[1].buffer, plan->outputs[0].buffer);
}

TEST(CodegenPlan, ArenaFirstFitNeverOverlapsLiveValues) {
  // A diamond with a long-lived value: x -> a; b = silu(a); c = gelu(b); out = a + c.
  Graph g;
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 3, 7, 5});
  ValueId a = b.silu(x), c = b.gelu(b.silu(a));
  b.output(b.add(a, b.scale(c, 2.0)));
  ASSERT_TRUE(b.ok());
  auto plan = codegen::compile_plan(g, WeightStore(), lavapipe_like());
  ASSERT_TRUE(plan) << plan.message();
  auto r = testing::run_both(g, WeightStore(), {random_tensor({1, 3, 7, 5}, 3)});
  ASSERT_EQ(r.vulkan.size(), 1u);
  expect_close(r.vulkan[0], r.interpreter[0], 1e-6, 3e-6);
}

TEST(CodegenPlan, OutputsThatAreInputsConstantsOrRepeated) {
  Graph g;
  WeightStore w;
  // A constant stored as f16 (uploaded "f16->f32") and one stored as f32 but typed
  // bf16 (rounded on upload, "f32->bf16->f32").
  std::vector<uint8_t> half_bytes;
  Tensor hv = random_tensor({3, 1, 1}, 11);
  for (float v : hv.data) {
    uint16_t h = float_to_half(v);
    half_bytes.push_back(static_cast<uint8_t>(h & 0xff));
    half_bytes.push_back(static_cast<uint8_t>(h >> 8));
  }
  ASSERT_TRUE(w.add_owned_bytes("gamma", DType::f16, {3, 1, 1}, half_bytes));
  ASSERT_TRUE(w.add_owned("beta", {3, 1, 1}, random_tensor({3, 1, 1}, 12).data));
  Builder b(g, &w);
  ValueId x = b.input("x", {2, 3, 4, 4});
  ValueId gamma = b.weight("gamma");
  ValueId beta = b.constant("beta", TensorType{{3, 1, 1}, DType::bf16, {}});
  ValueId y = b.mul(x, gamma);
  b.output(y);
  b.output(b.add(y, beta));  // y is an output and read again
  b.output(x);                // an input
  b.output(beta);             // a constant
  b.output(y);                // listed twice
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto plan = codegen::compile_plan(g, w, lavapipe_like());
  ASSERT_TRUE(plan) << plan.message();
  ASSERT_EQ(plan->weights.size(), 2u);
  EXPECT_EQ(describe(plan->weights[0].transform), "f16->f32");
  EXPECT_EQ(plan->weights[1].transform,
            (runtime::WeightTransform{runtime::DType::f32, runtime::DType::bf16, runtime::DType::f32}));
  EXPECT_EQ(describe(plan->weights[1].transform), "f32->bf16->f32");
  for (const auto& o : plan->outputs) EXPECT_EQ(plan->buffers[o.buffer].name, "output") << o.name;
  EXPECT_EQ(plan->outputs[0].offset, plan->outputs[4].offset);
  auto r = testing::run_both(g, w, {random_tensor({2, 3, 4, 4}, 13)});
  ASSERT_EQ(r.vulkan.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    expect_identical(r.vulkan[i], r.interpreter[i]);
  }
}

TEST(CodegenPlan, ReplayWithDifferentInputs) {
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  Graph g;
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 5, 9, 3}), s = b.input("s", {5, 1, 1});
  b.output(b.concat({b.gelu(b.mul(x, s)), b.upsample_nearest(b.slice(x, 2, 0, 3), {3, 1})}, 1));
  ASSERT_TRUE(b.ok());
  auto cg = testing::CompiledGraph::create(*device, g, WeightStore());
  ASSERT_TRUE(cg) << cg.message();
  for (uint64_t seed : {1, 2, 1}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<Tensor> in = {random_tensor({1, 5, 9, 3}, seed), random_tensor({5, 1, 1}, seed + 10)};
    auto got = (*cg)->run(in);
    ASSERT_TRUE(got) << got.message();
    auto want = interpret(g, WeightStore(), in);
    ASSERT_TRUE(want) << want.message();
    expect_close((*got)[0], (*want)[0], 0.0, 1e-6);
  }
}

TEST(CodegenPlan, WrongInputShapeNamesTheInput) {
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  Graph g;
  Builder b(g, nullptr);
  ValueId latents = b.input("latents", {1, 4, 8, 8});
  b.output(b.add(latents, b.input("bias", {4, 1, 1})));
  auto cg = testing::CompiledGraph::create(*device, g, WeightStore());
  ASSERT_TRUE(cg) << cg.message();
  auto r = (*cg)->run({random_tensor({1, 4, 8, 9}, 1), random_tensor({4, 1, 1}, 2)});
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("latents"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("[1,4,8,9]"), std::string::npos) << r.message();
  auto r2 = (*cg)->run({random_tensor({1, 4, 8, 8}, 1)});
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.message().find("2 inputs"), std::string::npos) << r2.message();
}

TEST(CodegenPlan, MissingDeviceFeatureFailsClearly) {
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  if ((*device)->info().cooperative_matrix_nv) GTEST_SKIP() << "the device has VK_NV_cooperative_matrix";
  Graph g;
  Builder b(g, nullptr);
  b.output(b.silu(b.input("x", {7})));
  auto plan = codegen::compile_plan(g, WeightStore(), codegen::target_for((*device)->info()));
  ASSERT_TRUE(plan) << plan.message();
  plan->requirements.cooperative_matrix_nv = true;
  auto exec = runtime::Executor::create(*device, *plan);
  ASSERT_FALSE(exec);
  EXPECT_NE(exec.message().find("VK_NV_cooperative_matrix"), std::string::npos) << exec.message();
}

TEST(CodegenPlan, UnsupportedValuesAreNamed) {
  // (f16 inputs and nhwc outputs are staged through f32 logical host slots: see
  // test_storage.cpp.)
  {
    Graph g;
    Builder b(g, nullptr);
    ValueId y = b.silu(b.input("x", {1, 4, 2, 2}));
    b.output(y);
    g.value(y).type.layout = Layout{LayoutKind::nhwc, 2};  // fewer slots than channels
    auto plan = codegen::compile_plan(g, WeightStore(), lavapipe_like());
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.message().find("%" + g.value(y).name), std::string::npos) << plan.message();
    EXPECT_NE(plan.message().find("nhwc"), std::string::npos) << plan.message();
  }
  {
    Graph g;
    Builder b(g, nullptr);
    ValueId y = b.silu(b.input("x", {4}));
    b.output(y);
    g.value(y).type.layout = Layout{LayoutKind::nhwc, 0};  // no channel dim
    auto plan = codegen::compile_plan(g, WeightStore(), lavapipe_like());
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.message().find("%" + g.value(y).name), std::string::npos) << plan.message();
  }
  {
    Graph g;
    WeightStore w;
    Builder b(g, &w);
    b.output(b.add(b.input("x", {3}), b.constant("missing", TensorType{{3}, DType::f32, {}})));
    auto plan = codegen::compile_plan(g, w, lavapipe_like());
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.message().find("missing"), std::string::npos) << plan.message();
  }
}

TEST(CodegenPlan, PlacementIsDeterministicAndAligned) {
  Graph g;
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 3, 5, 7});
  b.output(b.concat({b.silu(x), b.gelu(x), b.permute(x, {0, 1, 3, 2})}, 2));
  codegen::Target t;
  t.min_storage_buffer_offset_alignment = 256;
  auto p1 = codegen::compile_plan(g, WeightStore(), t), p2 = codegen::compile_plan(g, WeightStore(), t);
  ASSERT_TRUE(p1 && p2);
  EXPECT_EQ(runtime::describe(*p1), runtime::describe(*p2));
  for (const auto& d : p1->dispatches)
    for (const auto& bd : d.bindings) EXPECT_EQ(bd.offset % 256, 0u) << d.label;
}

// The validation layer (with synchronization validation) sees nothing wrong in a
// plan of every pointwise and data-movement kernel: arena reuse, aliases, concat
// windows, a split above the binding limit, outputs copied from inputs. Skipped where
// the layer is not installed.
TEST(CodegenPlan, ValidationLayerIsSilent) {
  runtime::DeviceOptions opts;
  opts.validation = true;
  runtime::DeviceRequirements f16;  // the f16 output is stored as half
  f16.shader_float16 = f16.storage_buffer_16bit_access = true;
  auto dev = runtime::open_device(opts, f16);
  ASSERT_TRUE(dev) << dev.message();
  if (!(*dev)->instance().validation_enabled()) GTEST_SKIP() << "validation layer not installed";
  for (bool windowed : {false, true}) {
    SCOPED_TRACE(windowed ? "pointwise ops in windows" : "every kernel");
    Graph g;
    Builder b(g, nullptr);
    ValueId x = b.input("x", {1, 6, 7, 5}), s = b.input("s", windowed ? Shape{1} : Shape{6, 1, 1});
    ValueId h = b.gelu(b.add(b.silu(x), s));
    if (!windowed) {
      h = b.permute(b.concat({b.slice(h, 1, 0, 2), b.slice(h, 1, 2, 6), h}, 1), {0, 2, 1, 3});  // [1,7,12,5]
      h = b.upsample_nearest(b.reshape(b.clamp(b.scale(h, 0.5, 0.25), -1, 1), {7, 12, 5}), {2});
    }
    b.output(b.cast(b.mul(h, h), DType::f16));
    b.output(x);
    ASSERT_TRUE(b.ok()) << b.status().message();
    codegen::Target target = codegen::target_for((*dev)->info());
    if (windowed) target.max_storage_buffer_range = 256;  // 840-byte values: 4 windows each
    auto plan = codegen::compile_plan(g, WeightStore(), target);
    ASSERT_TRUE(plan) << plan.message();
    auto exec = runtime::Executor::create(*dev, *plan);
    ASSERT_TRUE(exec) << exec.message();
    std::vector<Tensor> in = {random_tensor({1, 6, 7, 5}, 1), random_tensor(g.value(s).type.shape, 2)};
    std::vector<Tensor> out = {Tensor(g.value(g.outputs()[0]).type.shape), Tensor({1, 6, 7, 5})};
    for (int run = 0; run < 2; ++run)
      ASSERT_TRUE((*exec)->run({std::as_bytes(std::span(in[0].data)), std::as_bytes(std::span(in[1].data))},
                               {std::as_writable_bytes(std::span(out[0].data)),
                                std::as_writable_bytes(std::span(out[1].data))}));
    auto want = interpret(g, WeightStore(), in);
    ASSERT_TRUE(want) << want.message();
    expect_close(out[0], (*want)[0], 1e-3, 1e-6);  // f16 output: at most one half ULP apart
    expect_identical(out[1], (*want)[1]);
  }
  std::vector<std::string> messages = (*dev)->instance().take_validation_messages();
  std::string all;
  for (const auto& m : messages) all += m + "\n";
  EXPECT_TRUE(messages.empty()) << all;
}

}  // namespace
}  // namespace strata

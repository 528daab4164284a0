// Codegen: the diffusion transformer's ops on Vulkan against the interpreter —
// token_rms_norm (layer_norm.comp with RMS), rope (rope.comp, also split into row
// windows by a small binding range), sinusoidal (sinusoidal.comp, arguments up to
// a thousand radians) and tanh (unary.comp).
#include "codegen/vk_test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {
namespace {

using testing::OneNode;

TEST(DitOpsVulkan, TokenRmsNormWithAndWithoutGamma) {
  for (int64_t c : {32, 170, 300}) {
    OneNode t;
    ValueId x = t.input("x", {2, 5, c});
    t.b.output(t.b.token_rms_norm(x, t.weight("gamma", {c}), 1e-5));
    t.b.output(t.b.token_rms_norm(x, kNoValue, 1e-6));
    testing::expect_matches_interpreter(t, "C = " + std::to_string(c));
  }
}

TEST(DitOpsVulkan, TokenRmsNormSplitIntoRowWindowsEqualsTheWholeRun) {
  OneNode t;
  ValueId x = t.input("x", {64, 96});  // 24 KiB; rows of 384 bytes
  t.b.output(t.b.token_rms_norm(x, t.weight("gamma", {96}), 1e-5));
  ASSERT_TRUE(t.b.ok());
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  auto whole = testing::run_for_target(t, target);
  ASSERT_TRUE(whole) << whole.message();
  target.max_storage_buffer_range = 4096;  // about 10 rows per window
  auto plan = codegen::compile_plan(t.graph, t.weights, target);
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_GE(plan->dispatches.size(), 5u);
  auto split = testing::run_for_target(t, target);
  ASSERT_TRUE(split) << split.message();
  testing::expect_identical((*split)[0], (*whole)[0]);
}

TEST(DitOpsVulkan, RopeMatchesTheInterpreter) {
  OneNode t;
  ValueId x = t.input("x", {3, 7, 32});
  ValueId c = t.weight("cos", {7, 16});
  ValueId s = t.weight("sin", {7, 16});
  t.b.output(t.b.rope(x, c, s));
  testing::expect_matches_interpreter(t, "rope [3, 7, 32]");
}

// Two pairs per invocation as 4-vectors where D is a multiple of 4 (f32 and f16
// storage), a pair per invocation where not (D = 6); both the interpreter's values.
TEST(DitOpsVulkan, RopeTakesTwoPairsPerInvocationWhereDAllows) {
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  const codegen::Target target = codegen::target_for((*device)->info());
  for (const auto& [d, f16, vec] : {std::tuple{32, false, true}, std::tuple{128, true, true}, std::tuple{6, true, false}}) {
    SCOPED_TRACE(::testing::Message() << "D " << d << (f16 ? " f16" : " f32"));
    OneNode t;
    ValueId x = t.input("x", {3, 5, d});
    ValueId c = t.weight("cos", {5, d / 2});
    ValueId s = t.weight("sin", {5, d / 2});
    ValueId y = t.b.rope(f16 ? t.b.cast(x, DType::f16) : x, c, s);
    t.b.output(f16 ? t.b.cast(y, DType::f32) : y);
    ASSERT_TRUE(t.b.ok());
    auto plan = codegen::compile_plan(t.graph, t.weights, target);
    ASSERT_TRUE(plan) << plan.message();
    int ropes = 0, vecs = 0;
    for (const auto& p : plan->pipelines)
      if (p.name.rfind("rope.comp", 0) == 0) {
        ++ropes;
        vecs += p.name.find("VEC=4") != std::string::npos;
      }
    EXPECT_EQ(ropes, 1);
    EXPECT_EQ(vecs, vec ? 1 : 0) << runtime::describe(*plan);
    auto got = testing::run_for_target(t, target);
    ASSERT_TRUE(got) << got.message();
    auto want = interpret(t.graph, t.weights, t.inputs);
    ASSERT_TRUE(want) << want.message();
    // f16: the interpreter rounds the f64 rotation to half, the kernel its f32 one:
    // at most one half step apart.
    testing::expect_close((*got)[0], (*want)[0], f16 ? 0x1p-10 : 1e-5, 1e-5);
  }
}

TEST(DitOpsVulkan, RopeSplitIntoRowWindowsEqualsTheWholeRun) {
  OneNode t;
  ValueId x = t.input("x", {4, 40, 64});  // 40 KiB; rows of 256 bytes
  ValueId c = t.weight("cos", {40, 32});
  ValueId s = t.weight("sin", {40, 32});
  t.b.output(t.b.rope(x, c, s));
  ASSERT_TRUE(t.b.ok());
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  auto whole = testing::run_for_target(t, target);
  ASSERT_TRUE(whole) << whole.message();
  target.max_storage_buffer_range = 8192;  // about 31 rows per window with the alignment slack
  auto plan = codegen::compile_plan(t.graph, t.weights, target);
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_GE(plan->dispatches.size(), 5u);
  auto split = testing::run_for_target(t, target);
  ASSERT_TRUE(split) << split.message();
  testing::expect_identical((*split)[0], (*whole)[0]);
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  testing::expect_close((*split)[0], (*want)[0], 1e-6, 1e-6);
}

TEST(DitOpsVulkan, SinusoidalOfLargeArguments) {
  // t · 1000 up to 1000 radians, as the timestep embedder forms them.
  Graph g;
  WeightStore w;
  Builder b(g, &w);
  std::vector<float> freqs(128);
  for (int i = 0; i < 128; ++i) freqs[static_cast<size_t>(i)] = std::exp(-std::log(10000.0f) * float(i) / 128.0f);
  ASSERT_TRUE(w.add_owned("freqs", {128}, freqs).is_ok());
  ValueId t = b.input("t", {4});
  b.output(b.sinusoidal(t, b.constant("freqs", TensorType{{128}, DType::f32, {}})));
  const Tensor in({4}, {0.0f, 1.0f, 370.0f, 999.9f});
  auto both = testing::run_both(g, w, {in});
  ASSERT_EQ(both.vulkan.size(), 1u);
  // cos / sin are at most 1; the reduction keeps the GPU within a few ulp of 1.
  testing::expect_close(both.vulkan[0], both.interpreter[0], 0.0, 1e-6);
}

TEST(DitOpsVulkan, Tanh) {
  OneNode t;
  ValueId x = t.input("x", {3, 50});  // uniform in [-4, 4)
  t.b.output(t.b.tanh(x));
  testing::expect_matches_interpreter(t, "tanh");
}

}  // namespace
}  // namespace strata

// Codegen: the Winograd F(2×2, 3×3) and F(4×4, 3×3) kernels (kernels/winograd_input.comp,
// winograd_gemm.comp, winograd_output.comp, winograd_weights.comp) against the interpreter, on coopmat.glsl's
// emulation (lavapipe has no cooperative matrices; the native variant runs on the
// H200). A three-frame chain as passes/winograd_convs
// leaves it: x frames f16 NHWC, V f16, U f16, M f32 (f16 for a single conv), y f16 NHWC
// with a residual and range-guard scales; 7 × 10 frames (m = 2: 35 tiles, TP = 64, the second row tile
// partly padding; m = 4: 6 tiles, the last row and column partly outside), 32 → 64
// channels.
//
// Tolerance: V is rounded to f16 in both (m = 2: sums of f16 values, exact in f32 here;
// m = 4: sums weighted by dyadic coefficients, exact in f32 but for rare values whose
// terms span more than f32's 24 bits, where V may round one f16 step apart), the
// GEMM's products of f16 values are exact and only the f32 summation order differs,
// then y's f16 rounding: ≤ 2e-3 relative plus 1e-4 of the largest |y|.
#include "codegen/shader_compiler.h"
#include "codegen/vk_test_util.h"

#include "ir/builder.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace strata {
namespace {

using testing::random_tensor;

struct Built {
  Graph graph;
  WeightStore weights;
  std::vector<Tensor> inputs;
};

Built build(int64_t c, int64_t co, int64_t h, int64_t w, int frames, int64_t tile, DType m_dtype = DType::f32) {
  Built t;
  Builder b(t.graph, &t.weights);
  const Layout nhwc{LayoutKind::nhwc, 0};
  uint64_t seed = 5;
  std::vector<ValueId> gemm_in;
  for (int f = 0; f < frames; ++f) {
    t.inputs.push_back(random_tensor({1, c, h, w}, seed++, -2.0f, 2.0f));
    for (float& v : t.inputs.back().data) v = interp::round_to(v, DType::f16);
    ValueId x = b.input("x" + std::to_string(f), {1, c, h, w}, DType::f16);
    t.graph.value(x).type.layout = nhwc;
    gemm_in.push_back(
        b.op(Op::winograd_input, {x}, {{"tile", tile}, {"dtype", std::string("f16")}}, "v" + std::to_string(f)));
  }
  std::vector<Tensor> taps;
  for (int f = 0; f < frames; ++f) {
    taps.push_back(random_tensor({co, c, 3, 3}, seed++, -0.1f, 0.1f));
    for (float& v : taps.back().data) v = interp::round_to(v, DType::f16);
  }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& tp : taps) ptrs.push_back(&tp);
  Tensor u = interp::winograd_weights(ptrs, tile);
  for (float& v : u.data) v = interp::round_to(v, DType::f16);  // as the f16 upload stores it
  const Shape us = u.shape;
  EXPECT_TRUE(t.weights.add_owned("u", us, std::move(u.data)));
  gemm_in.push_back(b.constant("u", TensorType{us, DType::f16, {}}));
  ValueId m = b.op(Op::winograd_gemm, gemm_in, {{"dtype", std::string(m_dtype == DType::f16 ? "f16" : "f32")}}, "m");
  Tensor bias = random_tensor({co}, seed++, -1.0f, 1.0f);
  EXPECT_TRUE(t.weights.add_owned("bias", {co}, std::move(bias.data)));
  t.inputs.push_back(random_tensor({1, co, h, w}, seed++, -0.5f, 0.5f));
  for (float& v : t.inputs.back().data) v = interp::round_to(v, DType::f16);
  ValueId r = b.input("r", {1, co, h, w}, DType::f16);
  t.graph.value(r).type.layout = nhwc;
  ValueId y = b.op(Op::winograd_output, {m, b.constant("bias", TensorType{{co}, DType::f32, {}}), r},
                   {{"height", h}, {"width", w}, {"tile", tile}, {"residual_scale", 16.0}, {"out_scale", 0.0625},
                    {"dtype", std::string("f16")}},
                   "y");
  EXPECT_TRUE(b.ok()) << b.status().message();
  t.graph.value(y).type.layout = nhwc;
  b.output(y);
  return t;
}

class CodegenWinogradTiles : public ::testing::TestWithParam<int64_t> {};

TEST_P(CodegenWinogradTiles, ThreeFrameChainMatchesTheInterpreter) {
  const int64_t tile = GetParam();
  const Built t = build(32, 64, 7, 10, 3, tile);
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  target.tensor_cores = codegen::TensorCores::emulated;
  auto plan = codegen::compile_plan(t.graph, t.weights, target, {});
  ASSERT_TRUE(plan) << plan.message();
  std::string names;
  for (const auto& p : plan->pipelines) names += p.name + "\n";
  for (const char* k : {"winograd_input.comp", "winograd_gemm.comp", "winograd_output.comp"})
    EXPECT_NE(names.find(k), std::string::npos) << names;
  EXPECT_NE(names.find("FRAMES=3"), std::string::npos) << names;
  EXPECT_NE(names.find(fmt::format("TILE={}", tile)), std::string::npos) << names;
  auto run_device = testing::test_device_for(plan->requirements);
  ASSERT_TRUE(run_device) << run_device.message();
  auto exec = runtime::Executor::create(*run_device, std::move(*plan), codegen::weight_source(t.weights));
  ASSERT_TRUE(exec) << exec.message();
  Tensor got(t.graph.value(t.graph.outputs()[0]).type.shape);
  std::vector<std::span<const std::byte>> in;
  for (const Tensor& x : t.inputs) in.push_back(std::as_bytes(std::span(x.data)));
  std::vector<std::span<std::byte>> out{std::as_writable_bytes(std::span(got.data))};
  Status s = (*exec)->run(in, out);
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  double largest = 0;
  for (float v : want->at(0).data) largest = std::max(largest, std::fabs(double(v)));
  ASSERT_GT(largest, 0.1);
  testing::expect_close(got, want->at(0), 2e-3, 1e-4 * largest);
}

INSTANTIATE_TEST_SUITE_P(Tiles, CodegenWinogradTiles, ::testing::Values(int64_t(2), int64_t(4)));

// A single conv as the pass leaves it with winograd_min_taps = 1: M in f16 (the GEMM's
// patch-and-round epilogue, the output transform's half loads). The interpreter rounds
// M to f16 too, from sums in another order: a rare M one f16 step apart moves y by less
// than the tolerance above (measured: 1.2e-4 at most for m = 4, 0 for m = 2).
TEST_P(CodegenWinogradTiles, SingleConvWithF16MMatchesTheInterpreter) {
  const int64_t tile = GetParam();
  const Built t = build(32, 64, 7, 10, 1, tile, DType::f16);
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  target.tensor_cores = codegen::TensorCores::emulated;
  auto plan = codegen::compile_plan(t.graph, t.weights, target, {});
  ASSERT_TRUE(plan) << plan.message();
  std::string names;
  for (const auto& p : plan->pipelines) names += p.name + "\n";
  size_t m16 = 0;
  for (size_t at = names.find("M_F16=1"); at != std::string::npos; at = names.find("M_F16=1", at + 1)) ++m16;
  EXPECT_EQ(m16, 2u) << names;  // the GEMM and the output transform
  auto run_device = testing::test_device_for(plan->requirements);
  ASSERT_TRUE(run_device) << run_device.message();
  auto exec = runtime::Executor::create(*run_device, std::move(*plan), codegen::weight_source(t.weights));
  ASSERT_TRUE(exec) << exec.message();
  Tensor got(t.graph.value(t.graph.outputs()[0]).type.shape);
  std::vector<std::span<const std::byte>> in;
  for (const Tensor& x : t.inputs) in.push_back(std::as_bytes(std::span(x.data)));
  std::vector<std::span<std::byte>> out{std::as_writable_bytes(std::span(got.data))};
  Status s = (*exec)->run(in, out);
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  double largest = 0;
  for (float v : want->at(0).data) largest = std::max(largest, std::fabs(double(v)));
  ASSERT_GT(largest, 0.1);
  testing::expect_close(got, want->at(0), 2e-3, 1e-4 * largest);
}

// winograd_weights.comp (a single conv's U made in the plan, passes/winograd_convs.cpp)
// against the interpreter: two frames of o_hwi f16 weights [Co, 9·C] (the second
// frame's columns start at C). The kernel sums in f32 (m = 4 with 15·G, exact products),
// the interpreter in f64, each rounded to f16 once: a value may land one f16 step
// apart where the f32 sum is inexact and near a rounding boundary, rarely.
TEST_P(CodegenWinogradTiles, WeightsKernelMatchesTheInterpreter) {
  const int64_t tile = GetParam(), co = 48, c = 40, alpha = tile + 2;
  Graph g;
  WeightStore weights;
  Builder b(g, &weights);
  std::vector<ValueId> w;
  for (int f = 0; f < 2; ++f) {
    Tensor t = random_tensor({co, 9 * c}, 40 + f, -0.3f, 0.3f);
    for (float& v : t.data) v = interp::round_to(v, DType::f16);
    const std::string name = "w" + std::to_string(f);
    ASSERT_TRUE(weights.add_owned(name, {co, 9 * c}, std::move(t.data)).is_ok());
    w.push_back(b.constant(name, TensorType{{co, 9 * c}, DType::f16, {}}));
  }
  ValueId u = b.op(Op::winograd_weights, w, {{"tile", tile}, {"dtype", std::string("f16")}}, "u");
  b.output(b.op(Op::cast, {u}, {{"dtype", std::string("f32")}}, "u32"));
  ASSERT_TRUE(b.ok()) << b.status().message();
  testing::BothResults r = testing::run_both(g, weights, {});
  ASSERT_EQ(r.vulkan.size(), 1u);
  ASSERT_EQ(r.vulkan[0].shape, (Shape{alpha * alpha, co, 2 * c}));
  int64_t differ = 0, beyond_a_step = 0;
  for (size_t i = 0; i < r.vulkan[0].data.size(); ++i) {
    const float got = r.vulkan[0].data[i], want = r.interpreter[0].data[i];
    if (got == want) continue;
    ++differ;
    // One f16 step at |want|: 2^(e − 10) for normal halves.
    const double step = std::ldexp(1.0, std::ilogb(std::max(std::fabs(want), 6.1e-5f)) - 10);
    if (std::fabs(double(got) - want) > step) ++beyond_a_step;
  }
  EXPECT_EQ(beyond_a_step, 0);
  EXPECT_LT(differ, r.vulkan[0].elements() / 200) << differ << " of " << r.vulkan[0].elements() << " differ";
  double largest = 0;
  for (float v : r.interpreter[0].data) largest = std::max(largest, double(std::fabs(v)));
  EXPECT_GT(largest, 0.1);
}

// CodegenOptions::winograd_gemm_tile (`--winograd-gemm-tile`, for measuring) sets the
// GEMM's tile: 1 × 2 subgroups of 16 × 16 fragments, BK 16, against the interpreter as
// above; a tile with two stages or halo rows, or malformed, is an error naming the node.
TEST(CodegenWinograd, AskedGemmTileMatchesTheInterpreter) {
  const Built t = build(32, 64, 7, 10, 1, 4, DType::f16);
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  target.tensor_cores = codegen::TensorCores::emulated;
  for (const char* bad : {"2x2x1x1x32x2", "2x2x1x1x32x1x1x2", "2x"}) {
    codegen::CodegenOptions options;
    options.winograd_gemm_tile = bad;
    auto plan = codegen::compile_plan(t.graph, t.weights, target, options);
    ASSERT_FALSE(plan) << bad;
    EXPECT_NE(plan.message().find("winograd_gemm"), std::string::npos) << plan.message();
    EXPECT_NE(plan.message().find(bad), std::string::npos) << plan.message();
  }
  codegen::CodegenOptions options;
  options.winograd_gemm_tile = "1x2x1x1x16";
  auto plan = codegen::compile_plan(t.graph, t.weights, target, options);
  ASSERT_TRUE(plan) << plan.message();
  std::string gemm;
  for (const auto& p : plan->pipelines)
    if (p.name.rfind("winograd_gemm.comp", 0) == 0) gemm = p.name;
  for (const char* define : {"BK=16", "WC=2", "WP=1"}) EXPECT_NE(gemm.find(define), std::string::npos) << gemm;
  auto run_device = testing::test_device_for(plan->requirements);
  ASSERT_TRUE(run_device) << run_device.message();
  auto exec = runtime::Executor::create(*run_device, std::move(*plan), codegen::weight_source(t.weights));
  ASSERT_TRUE(exec) << exec.message();
  Tensor got(t.graph.value(t.graph.outputs()[0]).type.shape);
  std::vector<std::span<const std::byte>> in;
  for (const Tensor& x : t.inputs) in.push_back(std::as_bytes(std::span(x.data)));
  std::vector<std::span<std::byte>> out{std::as_writable_bytes(std::span(got.data))};
  Status s = (*exec)->run(in, out);
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  double largest = 0;
  for (float v : want->at(0).data) largest = std::max(largest, std::fabs(double(v)));
  ASSERT_GT(largest, 0.1);
  testing::expect_close(got, want->at(0), 2e-3, 1e-4 * largest);
}

// The native variant (32×32 fragments rewritten to KHR, as the H200 runs it) compiles,
// with M in f32 (chains) and in f16 (single convs: the patches in the staging memory).
class CodegenWinogradNative : public ::testing::TestWithParam<const char*> {};

TEST_P(CodegenWinogradNative, CompilesToKhr) {
  const codegen::Defines d = {{"COOPMAT", "1"}, {"CM_SG", "32"}, {"CM_M", "32"}, {"CM_N", "32"}, {"COOPMAT_KHR", "1"},
                              {"WP", "2"},      {"WC", "2"},     {"FP", "2"},    {"FC", "2"},    {"BK", "32"},
                              {"FRAMES", "3"},  {"F16", "1"},    {"M_F16", GetParam()}};
  auto spirv = codegen::compile_kernel("winograd_gemm.comp", d);
  ASSERT_TRUE(spirv) << spirv.message();
  // Debian's SPIRV-Tools predates the KHR capability (6022): no validate_spirv (as in
  // test_attention_coop.cpp); the module must declare it: OpCapability (opcode 17, 2
  // words) CooperativeMatrixKHR.
  bool khr = false;
  for (size_t i = 5; i + 1 < spirv->size(); ++i) khr |= (*spirv)[i] == ((2u << 16) | 17u) && (*spirv)[i + 1] == 6022u;
  EXPECT_TRUE(khr);
}

INSTANTIATE_TEST_SUITE_P(MDtype, CodegenWinogradNative, ::testing::Values("0", "1"));

}  // namespace
}  // namespace strata

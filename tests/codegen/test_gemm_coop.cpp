// Codegen: linear on the tensor-core kernel (lower_gemm.cpp → conv_gemm_coop.comp as
// a 1×1 conv over one row of N pixels). Lavapipe has no cooperative matrices, so
// these run the kernel's plain-GLSL emulation (Target::tensor_cores = emulated),
// the same tiling, staging and epilogue as on the H200.
//
// What must hold:
//   - the linear is bit for bit the 1×1 conv_gemm over the map [1, K, 1, N] (NHWC,
//     the same bytes as x[N, K]) with the o_hwi weight w[M, K, 1, 1]: one kernel,
//     one arithmetic, so the lowering's strides, grid and push constants are right;
//   - f32 results stored 4 per 16-byte store (VEC_F32) are the bits of the conv's
//     scalar f32 stores;
//   - against the interpreter within f16 storage: f16 x and w, whose products are
//     exact in f32, differ by the f32 accumulation order and one f16 rounding of y
//     (≤ 1e-3 relative plus 1e-5 of max |y|, conv_gemm_coop's own bound);
//   - f32 operands (or a target without tensor cores) keep the portable gemm.comp;
//   - `--conv-tile` (CodegenOptions::conv_tile) sets the linears' tile as the convs'.
#include "codegen/vk_test_util.h"

#include "ir/builder.h"

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

// linear(x[N, K] f16, w[M, K] f16, bias[M] f32?) with the result stored in `out`.
Built build_linear(int64_t n, int64_t k, int64_t m, bool bias, DType x_dtype, DType out) {
  Built t;
  Builder b(t.graph, &t.weights);
  t.inputs.push_back(random_tensor({n, k}, 21, -2.0f, 2.0f));
  ValueId x = b.input("x", {n, k}, x_dtype);
  Tensor w = random_tensor({m, k}, 22, -1.0f / std::sqrt(float(k)), 1.0f / std::sqrt(float(k)));
  EXPECT_TRUE(t.weights.add_owned("w", {m, k}, std::move(w.data)));
  ValueId wv = b.constant("w", TensorType{{m, k}, x_dtype, {}});
  ValueId bv = kNoValue;
  if (bias) {
    Tensor bt = random_tensor({m}, 23, -1.0f, 1.0f);
    EXPECT_TRUE(t.weights.add_owned("b", {m}, std::move(bt.data)));
    bv = b.constant("b", TensorType{{m}, DType::f32, {}});
  }
  ValueId y = b.op(Op::linear, {x, wv, bv}, Attrs{{"dtype", std::string(out == DType::f16 ? "f16" : "f32")}});
  EXPECT_TRUE(b.ok()) << b.status().message();
  b.output(y);
  return t;
}

// The same product as conv_gemm 1×1 over x seen as the map [1, K, 1, N] (NHWC).
Built build_conv(int64_t n, int64_t k, int64_t m, bool bias, DType out) {
  Built t;
  Builder b(t.graph, &t.weights);
  // The host gives inputs in logical order (the plan's staging makes them NHWC):
  // x[N, K] transposed is the map [1, K, 1, N], whose NHWC memory is x's.
  const Tensor x = random_tensor({n, k}, 21, -2.0f, 2.0f);
  Tensor map({1, k, 1, n});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) map.data[static_cast<size_t>(j * n + i)] = x.data[static_cast<size_t>(i * k + j)];
  t.inputs.push_back(std::move(map));
  ValueId xv = b.input("x", {1, k, 1, n}, DType::f16);
  t.graph.value(xv).type.layout = Layout{LayoutKind::nhwc, 0};
  Tensor w = random_tensor({m, k}, 22, -1.0f / std::sqrt(float(k)), 1.0f / std::sqrt(float(k)));
  EXPECT_TRUE(t.weights.add_owned("w", {m, k}, std::move(w.data)));
  ValueId wv = b.constant("w", TensorType{{m, k}, DType::f16, {}});
  std::vector<ValueId> operands = {xv, wv};
  if (bias) {
    Tensor bt = random_tensor({m}, 23, -1.0f, 1.0f);
    EXPECT_TRUE(t.weights.add_owned("b", {m}, std::move(bt.data)));
    operands.push_back(b.constant("b", TensorType{{m}, DType::f32, {}}));
  }
  Attrs a = {{"kernel", std::vector<int64_t>{1, 1}},  {"pad", std::vector<int64_t>{0, 0}},
             {"stride", std::vector<int64_t>{1, 1}},  {"weight_layout", std::string("o_hwi")},
             {"gather", std::string("plain")},        {"dtype", std::string(out == DType::f16 ? "f16" : "f32")}};
  ValueId y = b.op(Op::conv_gemm, operands, a);
  EXPECT_TRUE(b.ok()) << b.status().message();
  t.graph.value(y).type.layout = Layout{LayoutKind::nhwc, 0};
  b.output(y);
  return t;
}

codegen::Target emulated_target() {
  auto device = testing::test_device_f16();
  EXPECT_TRUE(device) << device.message();
  codegen::Target target = device ? codegen::target_for((*device)->info()) : codegen::Target{};
  target.tensor_cores = codegen::TensorCores::emulated;
  return target;
}

struct Ran {
  Tensor y;
  std::string pipelines;
};

Ran run(const Built& t, const codegen::Target& target) {
  Ran r;
  auto plan = codegen::compile_plan(t.graph, t.weights, target, {});
  EXPECT_TRUE(plan) << plan.message();
  if (!plan) return r;
  for (const auto& p : plan->pipelines) r.pipelines += p.name + "\n";
  auto device = testing::test_device_for(plan->requirements);
  EXPECT_TRUE(device) << device.message();
  if (!device) return r;
  auto exec = runtime::Executor::create(*device, std::move(*plan), codegen::weight_source(t.weights));
  EXPECT_TRUE(exec) << exec.message();
  if (!exec) return r;
  r.y = Tensor(t.graph.value(t.graph.outputs()[0]).type.shape);
  std::vector<std::span<const std::byte>> in;
  for (const Tensor& x : t.inputs) in.push_back(std::as_bytes(std::span(x.data)));
  std::vector<std::span<std::byte>> out = {std::as_writable_bytes(std::span(r.y.data))};
  Status s = (*exec)->run(in, out);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return r;
}

struct Case {
  int64_t n, k, m;
  bool bias;
  DType out;
};

TEST(CodegenGemmCoop, LinearIsTheOneByOneConvBitForBitAndCloseToTheInterpreter) {
  // Partial row tiles (45, 70 rows of 32), partial column tiles (40, 72 of 32), a
  // partial K chunk (K = 40: chunks of 32), f16 and f32 results (VEC_OUT on and off).
  // The two kernel variants are the ones zimage_small's f16 plan runs
  // (test_zimage_coop.cpp), so lavapipe compiles no extra emulated kernel for CI.
  const std::vector<Case> cases = {{45, 40, 72, false, DType::f16}, {70, 32, 40, false, DType::f16},
                                    {33, 64, 48, true, DType::f32}};
  const codegen::Target target = emulated_target();
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("linear [{}, {}] x [{}, {}]ᵀ{} -> {}", c.n, c.k, c.m, c.k, c.bias ? " + b" : "",
                             dtype_name(c.out)));
    const Built lin = build_linear(c.n, c.k, c.m, c.bias, DType::f16, c.out);
    const Ran got = run(lin, target);
    EXPECT_NE(got.pipelines.find("conv_gemm_coop.comp"), std::string::npos) << got.pipelines;
    EXPECT_EQ(got.pipelines.find("gemm.comp["), std::string::npos) << got.pipelines;
    // 16-byte stores: 8 f16 or 4 f32 outputs (VEC_F32), against the conv's scalar f32
    // stores below.
    EXPECT_NE(got.pipelines.find("VEC_OUT=1"), std::string::npos) << got.pipelines;
    EXPECT_EQ(got.pipelines.find("VEC_F32=1") != std::string::npos, c.out == DType::f32) << got.pipelines;
    const Ran conv = run(build_conv(c.n, c.k, c.m, c.bias, c.out), target);
    Tensor conv_y(got.y.shape);  // the map [1, M, 1, N] back to tokens [N, M]
    ASSERT_EQ(conv.y.data.size(), conv_y.data.size());
    for (int64_t i = 0; i < c.n; ++i)
      for (int64_t j = 0; j < c.m; ++j)
        conv_y.data[static_cast<size_t>(i * c.m + j)] = conv.y.data[static_cast<size_t>(j * c.n + i)];
    testing::expect_identical(got.y, conv_y);
    auto want = interpret(lin.graph, lin.weights, lin.inputs);
    ASSERT_TRUE(want) << want.message();
    double scale = 0.0;
    for (float v : (*want)[0].data) scale = std::max(scale, double(std::fabs(v)));
    testing::expect_close(got.y, (*want)[0], 1e-3, 1e-5 * scale);
  }
}

TEST(CodegenGemmCoop, F32OperandsKeepThePortableGemm) {
  const Built lin = build_linear(20, 32, 24, true, DType::f32, DType::f32);
  const Ran got = run(lin, emulated_target());
  EXPECT_EQ(got.pipelines.find("conv_gemm_coop.comp"), std::string::npos) << got.pipelines;
  EXPECT_NE(got.pipelines.find("gemm.comp"), std::string::npos) << got.pipelines;
}

TEST(CodegenGemmCoop, ConvTileOptionSetsTheLinearsTile) {
  // Only compiled (shaderc), not run: the emulated variant is not one CI otherwise builds.
  const Built lin = build_linear(45, 64, 72, false, DType::f16, DType::f16);
  const codegen::Target target = emulated_target();
  codegen::CodegenOptions options;
  options.conv_tile = "2x1x1x1x16x2";
  auto plan = codegen::compile_plan(lin.graph, lin.weights, target, options);
  ASSERT_TRUE(plan) << plan.message();
  std::string pipelines;
  for (const auto& p : plan->pipelines) pipelines += p.name + "\n";
  for (const char* define : {"conv_gemm_coop.comp", "BK=16", "STAGES=2", "WC=1", "WP=2"})
    EXPECT_NE(pipelines.find(define), std::string::npos) << define << " in\n" << pipelines;

  options.conv_tile = "2x2x9";  // not a tile
  auto bad = codegen::compile_plan(lin.graph, lin.weights, target, options);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("(linear)"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("conv tile '2x2x9'"), std::string::npos) << bad.message();
}

// On the H200's kind of target (native cooperative matrices, 32 × 32 fragments), a
// linear of few tiles takes 64 input features per step where its reduction is long
// (the attention output of passes/attention_gemms.cpp) and half-height tiles where it
// is short; one of many tiles keeps the default. Compiled only (native variants, f16
// and the f32 vector epilogue), not run.
TEST(CodegenGemmCoop, FewTilesTakeLongerStepsOrShorterTiles) {
  codegen::Target nv = emulated_target();
  nv.tensor_cores = codegen::TensorCores::nv_coopmat;
  nv.coopmat_flexible = true;
  nv.subgroup_size = 32;
  nv.max_shared_memory_bytes = 48 << 10;
  struct Case {
    int64_t n, k, m;
    DType out;
    const char *fp, *bk;
  };
  for (const Case& c : {Case{4096, 16384, 384, DType::f16, "FP=2,", "BK=64,"},  // 96 tiles, long K
                        Case{256, 64, 64, DType::f32, "FP=1,", "BK=32,"},        // 2 tiles, short K
                        Case{8192, 512, 512, DType::f16, "FP=2,", "BK=32,"}}) {  // 256 tiles
    SCOPED_TRACE(fmt::format("linear [{}, {}] x [{}, {}]ᵀ", c.n, c.k, c.m, c.k));
    Graph g;
    WeightStore weights;
    Builder b(g, &weights);
    ValueId x = b.input("x", {c.n, c.k}, DType::f16);
    ASSERT_TRUE(weights.add_owned("w", {c.m, c.k}, std::vector<float>(static_cast<size_t>(c.m * c.k), 0.01f)));
    ValueId w = b.constant("w", TensorType{{c.m, c.k}, DType::f16, {}});
    b.output(b.op(Op::linear, {x, w}, Attrs{{"dtype", std::string(c.out == DType::f16 ? "f16" : "f32")}}));
    ASSERT_TRUE(b.ok()) << b.status().message();
    auto plan = codegen::compile_plan(g, weights, nv, {});
    ASSERT_TRUE(plan) << plan.message();
    std::string names;
    for (const auto& p : plan->pipelines) names += p.name + "\n";
    EXPECT_NE(names.find(c.fp), std::string::npos) << names;
    EXPECT_NE(names.find(c.bk), std::string::npos) << names;
    EXPECT_EQ(names.find("VEC_F32=1") != std::string::npos, c.out == DType::f32) << names;
  }
}

}  // namespace
}  // namespace strata

// Codegen: conv_gemm (kernels/conv_gemm.comp) on Vulkan against the interpreter, on
// random inputs and weights: 3×3 and 1×1 kernels, strides, the upsample2x gather
// (padding at the virtual 2× border), bias, residual and the three scales, channel
// counts 3 / 16 / 96 / 144, both weight layouts, x / residual / y in logical NCHW or
// NHWC (padded or not), f32 or f16. The interpreter rounds f16 values exactly as the
// kernels store them, so the differences are f32 accumulation order only: ≤ 1e-5
// relative for f32 outputs, ≤ 1e-3 (about one half ULP) for f16 outputs. Also: the
// padding slots of an NHWC output are written as exact zeros, and a conv_gemm too
// large for one binding is an error naming the node.
#include "codegen/vk_test_util.h"

#include "ir/builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace strata {
namespace {

using testing::random_tensor;

const Layout kLogical{};
Layout nhwc(int64_t padded = 0) { return Layout{LayoutKind::nhwc, padded}; }

struct Case {
  int64_t n = 1, ci = 8, co = 8, h = 7, w = 5;
  int64_t k = 3, pad = 1, stride = 1;
  bool upsample = false, packed = false, bias = true, residual = false;
  double acc_scale = 1.0, residual_scale = 1.0, out_scale = 1.0;
  DType dtype = DType::f32;               // x, residual and y
  Layout x_layout, r_layout, y_layout;
};

std::string describe(const Case& c) {
  return fmt::format("x[{},{},{},{}]{} -> {} ch, k{} pad {} stride {}{}{}{}{}{} scales {}/{}/{} y{}", c.n, c.ci,
                     c.h, c.w, layout_str(c.x_layout), c.co, c.k, c.pad, c.stride, c.upsample ? " upsample2x" : "",
                     c.packed ? " o_hwi" : " oihw", c.bias ? " +bias" : "", c.residual ? " +residual" : "",
                     c.residual ? layout_str(c.r_layout) : "", c.dtype == DType::f16 ? " f16" : "", c.acc_scale,
                     c.residual_scale, c.out_scale, layout_str(c.y_layout));
}

struct Built {
  Graph graph;
  WeightStore weights;
  std::vector<Tensor> inputs;
  ValueId y = kNoValue;
};

// x (and the residual) are graph inputs of the case's dtype and layout: codegen
// stages them from f32 host slots, the interpreter rounds them to the dtype.
void build(Built& t, const Case& c) {
  Builder b(t.graph, &t.weights);
  uint64_t seed = 1;
  auto input = [&](const std::string& name, Shape shape, const Layout& layout) {
    t.inputs.push_back(random_tensor(shape, seed++, -2.0f, 2.0f));
    ValueId v = b.input(name, std::move(shape), c.dtype);
    t.graph.value(v).type.layout = layout;
    return v;
  };
  auto weight = [&](const std::string& name, Shape shape, float range) {
    Tensor v = random_tensor(shape, seed++, -range, range);
    EXPECT_TRUE(t.weights.add_owned(name, shape, std::move(v.data)));
    return b.constant(name, TensorType{std::move(shape), DType::f32, {}});
  };
  const int64_t up = c.upsample ? 2 : 1;
  const int64_t ho = (c.h * up + 2 * c.pad - c.k) / c.stride + 1, wo = (c.w * up + 2 * c.pad - c.k) / c.stride + 1;
  ValueId x = input("x", {c.n, c.ci, c.h, c.w}, c.x_layout);
  const float wr = 1.0f / std::sqrt(static_cast<float>(c.ci * c.k * c.k));
  ValueId w = c.packed ? weight("w", {c.co, c.k * c.k * c.ci}, wr) : weight("w", {c.co, c.ci, c.k, c.k}, wr);
  std::vector<ValueId> operands = {x, w, c.bias ? weight("b", {c.co}, 1.0f) : kNoValue};
  if (c.residual) operands.push_back(input("r", {c.n, c.co, ho, wo}, c.r_layout));
  Attrs a = {{"kernel", std::vector<int64_t>{c.k, c.k}},
             {"pad", std::vector<int64_t>{c.pad, c.pad}},
             {"stride", std::vector<int64_t>{c.stride, c.stride}},
             {"weight_layout", std::string(c.packed ? "o_hwi" : "oihw")},
             {"gather", std::string(c.upsample ? "upsample2x" : "plain")}};
  if (c.acc_scale != 1.0) a.set("acc_scale", c.acc_scale);
  if (c.residual_scale != 1.0) a.set("residual_scale", c.residual_scale);
  if (c.out_scale != 1.0) a.set("out_scale", c.out_scale);
  t.y = b.op(Op::conv_gemm, operands, a);
  ASSERT_TRUE(b.ok()) << b.status().message();
  t.graph.value(t.y).type.layout = c.y_layout;
  b.output(t.y);
}

void check(const Case& c) {
  SCOPED_TRACE(describe(c));
  Built t;
  build(t, c);
  testing::BothResults r = testing::run_both(t.graph, t.weights, t.inputs);
  ASSERT_EQ(r.vulkan.size(), 1u);
  double scale = 0.0;
  for (float v : r.interpreter[0].data) scale = std::max(scale, double(std::fabs(v)));
  if (c.dtype == DType::f16) testing::expect_close(r.vulkan[0], r.interpreter[0], 1e-3, 1e-5 * scale);
  else testing::expect_close(r.vulkan[0], r.interpreter[0], 1e-5, 1e-5 * scale);
}

TEST(CodegenConvGemm, KernelsStridesAndChannelCounts) {
  for (int64_t ci : {3, 16, 96, 144})
    for (int64_t co : {3, 16, 96, 144}) {
      if (ci == co && ci != 16) continue;  // the diagonal once is enough
      Case c;
      c.ci = ci, c.co = co, c.h = 9, c.w = 6;
      check(c);
    }
  for (int64_t k : {1, 3}) {
    for (int64_t stride : {1, 2}) {
      Case c;
      c.k = k, c.pad = k / 2, c.stride = stride, c.ci = 5, c.co = 33, c.n = 2, c.h = 11, c.w = 14;
      check(c);
    }
  }
  Case tiny;  // a 1×1 frame: every tap but the centre reads padding
  tiny.h = tiny.w = 1, tiny.bias = false;
  check(tiny);
  Case no_pad;  // a 3×3 conv without padding, odd sizes
  no_pad.pad = 0, no_pad.h = 8, no_pad.w = 13, no_pad.ci = 17, no_pad.co = 9;
  check(no_pad);
}

TEST(CodegenConvGemm, Upsample2xGather) {
  // The padding belongs to the virtual 2H × 2W image: the taps at its border read
  // zeros, the taps inside read x[(y + dy) >> 1].
  for (int64_t stride : {1, 2})
    for (bool packed : {false, true}) {
      Case c;
      c.upsample = true, c.stride = stride, c.packed = packed, c.ci = 12, c.co = 20, c.h = 5, c.w = 7;
      check(c);
    }
  Case one;  // 1×1 conv on the upsampled image
  one.upsample = true, one.k = 1, one.pad = 0, one.ci = 16, one.co = 3;
  check(one);
}

TEST(CodegenConvGemm, ResidualAndScales) {
  Case c;
  c.ci = 24, c.co = 40, c.residual = true;
  check(c);
  c.acc_scale = 4.0, c.residual_scale = 0.25, c.out_scale = 0.5;
  check(c);
  c.bias = false, c.upsample = true;
  check(c);
}

TEST(CodegenConvGemm, LayoutsAndF16Storage) {
  // After assign_layout and lower_precision: NHWC f16 x, residual and y with padded
  // channels, packed weights.
  for (bool packed : {false, true}) {
    Case c;
    c.ci = 16, c.co = 96, c.h = 10, c.w = 9, c.packed = packed, c.residual = true;
    c.dtype = DType::f16, c.x_layout = nhwc(64), c.r_layout = nhwc(), c.y_layout = nhwc(128);
    c.acc_scale = 2.0, c.out_scale = 0.5;
    check(c);
  }
  Case mixed;  // NCHW f16 in, NHWC f16 out, an upsample gather
  mixed.dtype = DType::f16, mixed.upsample = true, mixed.ci = 3, mixed.co = 16, mixed.y_layout = nhwc(64);
  check(mixed);
  Case f32_nhwc;  // NHWC without the f16 store
  f32_nhwc.ci = 144, f32_nhwc.co = 3, f32_nhwc.x_layout = nhwc(192), f32_nhwc.y_layout = nhwc(4);
  f32_nhwc.packed = true, f32_nhwc.stride = 2;
  check(f32_nhwc);
}

// The padding slots of an NHWC f16 output hold exact zeros: the output value is read
// back raw (its binding of the conv_gemm dispatch, added as an extra plan output).
TEST(CodegenConvGemm, NhwcPaddingSlotsAreZero) {
  Case c;
  c.ci = 8, c.co = 5, c.h = 4, c.w = 3, c.dtype = DType::f16, c.y_layout = nhwc(8);
  Built t;
  build(t, c);
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  auto plan = codegen::compile_plan(t.graph, t.weights, codegen::target_for((*device)->info()));
  ASSERT_TRUE(plan) << plan.message();
  const runtime::DispatchDesc* conv = nullptr;
  for (const auto& d : plan->dispatches)
    if (d.label == t.graph.nodes().back().name) conv = &d;
  ASSERT_NE(conv, nullptr) << runtime::describe(*plan);
  const runtime::BindingDesc y = conv->bindings.back();
  const int64_t slots = c.n * c.h * c.w * 8;
  ASSERT_EQ(y.range, static_cast<uint64_t>(slots) * 2);
  plan->outputs.push_back(runtime::TensorIO{"raw", {slots}, runtime::DType::f16, "", y.buffer, y.offset, y.range});
  auto exec = runtime::Executor::create(*device, *plan, codegen::weight_source(t.weights));
  ASSERT_TRUE(exec) << exec.message();
  Tensor out({c.n, c.co, c.h, c.w});
  std::vector<uint16_t> raw(static_cast<size_t>(slots));
  ASSERT_TRUE((*exec)->run({std::as_bytes(std::span(t.inputs[0].data))},
                           {std::as_writable_bytes(std::span(out.data)), std::as_writable_bytes(std::span(raw))}));
  int nonzero_real = 0;
  for (int64_t p = 0; p < c.n * c.h * c.w; ++p)
    for (int64_t ch = 0; ch < 8; ++ch) {
      const uint16_t bits = raw[static_cast<size_t>(p * 8 + ch)];
      if (ch >= c.co) { EXPECT_EQ(bits, 0u) << "pixel " << p << " slot " << ch; }
      else nonzero_real += bits != 0;
    }
  EXPECT_GT(nonzero_real, 0);
}

TEST(CodegenConvGemm, TooLargeForOneBindingNamesTheNode) {
  Case c;
  c.ci = 16, c.co = 16, c.h = 64, c.w = 64;
  Built t;
  build(t, c);
  codegen::Target target;
  target.max_storage_buffer_range = 64 << 10;  // x is 256 KiB
  auto plan = codegen::compile_plan(t.graph, t.weights, target);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.message().find(t.graph.nodes().back().name), std::string::npos) << plan.message();
  EXPECT_NE(plan.message().find("storage-buffer range"), std::string::npos) << plan.message();
}

}  // namespace
}  // namespace strata

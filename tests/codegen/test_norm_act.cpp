// Codegen: norm_act (kernels/norm_act_{stats,apply,rms}.comp with
// group_norm_reduce.comp) on Vulkan against the interpreter: group and RMS norms,
// with and without β, the producing conv's bias added on read, in_scale, SiLU,
// `channels` below C (the padding channels come out exactly 0), x and y in logical
// NCHW or NHWC (padded or not), f32 or f16, independently. Tolerances as for
// conv_gemm: ≤ 1e-5 relative (f32 statistics against the interpreter's f64) for f32
// outputs, ≤ 1e-3 for f16 outputs.
#include "codegen/vk_test_util.h"

#include "ir/builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace strata {
namespace {

using testing::random_tensor;

Layout nhwc(int64_t padded = 0) { return Layout{LayoutKind::nhwc, padded}; }

struct Case {
  bool rms = false;
  int64_t n = 1, c = 16, h = 6, w = 5, groups = 4;
  int64_t channels = 0;  // 0: all
  bool beta = true, bias = false, silu = false;
  double in_scale = 1.0;
  DType x_dtype = DType::f32, y_dtype = DType::f32;
  Layout x_layout, y_layout;
};

std::string describe(const Case& c) {
  return fmt::format("{} x[{},{},{},{}]{} {} groups {} channels {}{}{}{} in_scale {} -> {}{}", c.rms ? "rms" : "group",
                     c.n, c.c, c.h, c.w, layout_str(c.x_layout), dtype_name(c.x_dtype), c.groups, c.channels,
                     c.beta ? " +beta" : "", c.bias ? " +bias" : "", c.silu ? " silu" : "", c.in_scale,
                     dtype_name(c.y_dtype), layout_str(c.y_layout));
}

void check(const Case& c) {
  SCOPED_TRACE(describe(c));
  Graph g;
  WeightStore weights;
  Builder b(g, &weights);
  uint64_t seed = 7;
  auto weight = [&](const std::string& name, float lo, float hi) {
    Tensor v = random_tensor({c.c}, seed++, lo, hi);
    EXPECT_TRUE(weights.add_owned(name, {c.c}, std::move(v.data)));
    return b.constant(name, TensorType{{c.c}, DType::f32, {}});
  };
  const Shape shape = {c.n, c.c, c.h, c.w};
  // Offset inputs (mean ~3): the statistics must not cancel.
  std::vector<Tensor> inputs = {random_tensor(shape, seed++, 1.0f, 5.0f)};
  ValueId x = b.input("x", shape, c.x_dtype);
  g.value(x).type.layout = c.x_layout;
  std::vector<ValueId> operands = {x, weight("gamma", 0.5f, 1.5f), c.beta ? weight("beta", -1.0f, 1.0f) : kNoValue};
  if (c.bias) operands.push_back(weight("bias", -2.0f, 2.0f));
  Attrs a = {{"norm", std::string(c.rms ? "rms" : "group")}, {"eps", c.rms ? 1e-12 : 1e-6}};
  if (!c.rms) a.set("groups", c.groups);
  if (c.channels) a.set("channels", c.channels);
  if (c.silu) a.set("silu", int64_t{1});
  if (c.in_scale != 1.0) a.set("in_scale", c.in_scale);
  if (c.y_dtype != c.x_dtype) a.set("dtype", std::string(dtype_name(c.y_dtype)));
  ValueId y = b.op(Op::norm_act, operands, a);
  ASSERT_TRUE(b.ok()) << b.status().message();
  g.value(y).type.layout = c.y_layout;
  b.output(y);

  testing::BothResults r = testing::run_both(g, weights, inputs);
  ASSERT_EQ(r.vulkan.size(), 1u);
  double scale = 0.0;
  for (float v : r.interpreter[0].data) scale = std::max(scale, double(std::fabs(v)));
  testing::expect_close(r.vulkan[0], r.interpreter[0], c.y_dtype == DType::f16 ? 1e-3 : 1e-5, 1e-5 * scale);
  // Channels past `channels` are exact zeros.
  const int64_t real = c.channels ? c.channels : c.c, spatial = c.h * c.w;
  int64_t bad = 0;
  for (int64_t i = 0; i < r.vulkan[0].elements(); ++i)
    if ((i / spatial) % c.c >= real && r.vulkan[0].data[static_cast<size_t>(i)] != 0.0f) ++bad;
  EXPECT_EQ(bad, 0) << "padding channels not zero";
}

TEST(CodegenNormAct, GroupNorm) {
  check(Case{});
  Case c;
  c.n = 2, c.c = 96, c.groups = 32, c.h = 17, c.w = 9, c.silu = true, c.bias = true;
  check(c);
  c.beta = false, c.in_scale = 0.25;
  check(c);
  Case big;  // several statistics chunks per group
  big.c = 8, big.groups = 2, big.h = 70, big.w = 61;
  check(big);
}

TEST(CodegenNormAct, GroupNormPaddedChannels) {
  Case c;
  c.c = 64, c.channels = 3, c.groups = 1, c.silu = true, c.bias = true;
  check(c);
  c.c = 160, c.channels = 144, c.groups = 16, c.x_layout = nhwc(), c.y_layout = nhwc(192);
  check(c);
}

TEST(CodegenNormAct, RmsNorm) {
  Case c;
  c.rms = true;
  check(c);
  c.n = 2, c.c = 96, c.silu = true, c.bias = true, c.beta = false, c.in_scale = 2.0;
  check(c);
  c.c = 64, c.channels = 16, c.x_layout = nhwc(), c.y_layout = nhwc(64);
  check(c);
}

TEST(CodegenNormAct, LayoutsAndF16) {
  for (bool rms : {false, true}) {
    Case c;
    c.rms = rms, c.c = 48, c.groups = 8, c.silu = true, c.bias = true;
    c.x_dtype = DType::f16, c.y_dtype = DType::f16, c.x_layout = nhwc(64), c.y_layout = nhwc(64);
    check(c);
    c.x_dtype = DType::f32, c.x_layout = Layout{};  // f32 NCHW in, f16 NHWC out
    check(c);
    c.x_dtype = DType::f16, c.y_dtype = DType::f32, c.x_layout = nhwc(), c.y_layout = Layout{};
    check(c);
  }
}

}  // namespace
}  // namespace strata

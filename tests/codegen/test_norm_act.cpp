// Codegen: norm_act (kernels/norm_act_{stats,apply,rms}.comp with
// group_norm_reduce.comp) on Vulkan against the interpreter: group and RMS norms,
// with and without β, the producing conv's bias added on read, in_scale, SiLU,
// `channels` below C (the padding channels come out exactly 0), x and y in logical
// NCHW or NHWC (padded or not), f32 or f16, independently. Tolerances as for
// conv_gemm: ≤ 1e-5 relative (f32 statistics against the interpreter's f64) for f32
// outputs, ≤ 1e-3 for f16 outputs. Cases that name a variant also check which kernels
// the plan chose: the vector ones (norm_act_*_vec.comp: nhwc, 8-slot vectors) or the
// portable scalar ones, so a vector path silently not taken fails.
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
  // Kernel files the plan must use / must not use (empty: not checked).
  std::vector<std::string> kernels, not_kernels;
};

// The kernel files of a plan's pipelines (pipeline names are "file[defines]").
std::vector<std::string> kernel_files(const runtime::Plan& plan) {
  std::vector<std::string> out;
  for (const runtime::PipelineDesc& p : plan.pipelines) out.push_back(p.name.substr(0, p.name.find('[')));
  return out;
}

codegen::Target device_target() {
  auto device = testing::test_device();
  EXPECT_TRUE(device) << device.message();
  return device ? codegen::target_for((*device)->info()) : codegen::Target{};
}

void expect_kernels(const Graph& g, const WeightStore& weights, const std::vector<std::string>& used,
                    const std::vector<std::string>& unused) {
  if (used.empty() && unused.empty()) return;
  auto plan = codegen::compile_plan(g, weights, device_target());
  ASSERT_TRUE(plan) << plan.message();
  const std::vector<std::string> files = kernel_files(*plan);
  std::string all;
  for (const std::string& f : files) all += " " + f;
  for (const std::string& k : used)
    EXPECT_NE(std::find(files.begin(), files.end(), k), files.end()) << k << " not among" << all;
  for (const std::string& k : unused)
    EXPECT_EQ(std::find(files.begin(), files.end(), k), files.end()) << k << " among" << all;
}

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
  expect_kernels(g, weights, c.kernels, c.not_kernels);

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

const std::vector<std::string> kGroupVec = {"norm_act_stats_vec.comp", "norm_act_apply_vec.comp"};
const std::vector<std::string> kGroupScalar = {"norm_act_stats.comp", "norm_act_apply.comp"};

TEST(CodegenNormAct, GroupNormVectorPath) {
  // nhwc f16 in and out (the decoders' layout): 8-slot uvec4 loads and stores.
  Case c;
  c.c = 128, c.groups = 32, c.h = 9, c.w = 7, c.silu = true, c.bias = true;  // group size 4: 2 per vector
  c.x_dtype = c.y_dtype = DType::f16, c.x_layout = c.y_layout = nhwc();
  c.kernels = kGroupVec, c.not_kernels = kGroupScalar;
  check(c);
  c.c = 256, c.groups = 8, c.n = 2;  // group size 32: 4 columns per group, two images
  check(c);
  c.c = 16, c.groups = 16, c.n = 1, c.beta = false, c.in_scale = 0.25;  // group size 1
  check(c);
  c.c = 64, c.groups = 8, c.h = 70, c.w = 61, c.beta = true;  // group size 8; 5 chunks, the last short
  check(c);
  Case f32 = c;  // f32 in and out (two vec4 per vector), padded y slots
  f32.c = 32, f32.groups = 16, f32.h = 11, f32.w = 13;
  f32.x_dtype = f32.y_dtype = DType::f32, f32.y_layout = nhwc(48);
  check(f32);
  Case mixed = c;  // f16 in, f32 out; real channels below C, both padded
  mixed.c = 48, mixed.channels = 40, mixed.groups = 5, mixed.h = 6, mixed.w = 10;
  mixed.y_dtype = DType::f32, mixed.x_layout = nhwc(56), mixed.y_layout = nhwc(64);
  check(mixed);
}

TEST(CodegenNormAct, GroupNormVectorApplyScalarStats) {
  // Group size 3 (96 channels in 32 groups, as Qwen's narrowest stage would have):
  // a vector's channels straddle groups unevenly, so the statistics run scalar while
  // the apply pass stays vector.
  Case c;
  c.c = 96, c.groups = 32, c.h = 10, c.w = 9, c.silu = true, c.bias = true;
  c.x_dtype = c.y_dtype = DType::f16, c.x_layout = nhwc(), c.y_layout = nhwc(128);
  c.kernels = {"norm_act_stats.comp", "norm_act_apply_vec.comp"};
  c.not_kernels = {"norm_act_stats_vec.comp", "norm_act_apply.comp"};
  check(c);
  c.groups = 12;  // group size 8: vector statistics, 12 columns in 10 lanes (not a power of two)
  c.kernels = kGroupVec, c.not_kernels = kGroupScalar;
  check(c);
}

TEST(CodegenNormAct, ScalarPathWhereLayoutsForbidVectors) {
  Case c;
  c.c = 64, c.groups = 8, c.h = 9, c.w = 7, c.silu = true, c.bias = true;
  c.x_dtype = c.y_dtype = DType::f16;
  c.x_layout = Layout{}, c.y_layout = nhwc();  // logical NCHW x: channels are not contiguous
  c.kernels = kGroupScalar, c.not_kernels = kGroupVec;
  check(c);
  c.c = 12, c.groups = 4, c.x_layout = nhwc(), c.y_layout = nhwc();  // 12 slots: not whole vectors
  check(c);
  c.c = 16, c.y_layout = nhwc(20);  // x vectors but y's 20 slots are not: vector stats, scalar apply
  c.kernels = {"norm_act_stats_vec.comp", "norm_act_apply.comp"};
  c.not_kernels = {"norm_act_stats.comp", "norm_act_apply_vec.comp"};
  check(c);
  Case rms = c;  // rms with NCHW y
  rms.rms = true, rms.c = 64, rms.y_layout = Layout{};
  rms.kernels = {"norm_act_rms.comp"}, rms.not_kernels = {"norm_act_rms_vec.comp"};
  check(rms);
}

TEST(CodegenNormAct, RmsNormVectorPath) {
  Case c;
  c.rms = true, c.c = 96, c.h = 9, c.w = 11, c.silu = true, c.bias = true;  // Qwen's 96 of 128 slots
  c.x_dtype = c.y_dtype = DType::f16, c.x_layout = nhwc(128), c.y_layout = nhwc(128);
  c.kernels = {"norm_act_rms_vec.comp"}, c.not_kernels = {"norm_act_rms.comp"};
  check(c);
  c.c = 384, c.n = 2, c.bias = false, c.in_scale = 2.0, c.x_layout = c.y_layout = nhwc();  // 48 lanes a position
  check(c);
  c.c = 24, c.channels = 16, c.x_dtype = c.y_dtype = DType::f32, c.y_layout = nhwc(40);  // f32, padding slots
  check(c);
}

// The vector kernels under attr band_rows: windows give the bytes of one dispatch.
void expect_bands_identical(const Case& c, int64_t band_rows, const std::string& kernel) {
  SCOPED_TRACE(describe(c) + fmt::format(" band_rows {}", band_rows));
  Graph g;
  WeightStore weights;
  Builder b(g, &weights);
  uint64_t seed = 11;
  auto weight = [&](const std::string& name) {
    Tensor v = random_tensor({c.c}, seed++, 0.5f, 1.5f);
    EXPECT_TRUE(weights.add_owned(name, {c.c}, std::move(v.data)));
    return b.constant(name, TensorType{{c.c}, DType::f32, {}});
  };
  const Shape shape = {1, c.c, c.h, c.w};
  std::vector<Tensor> inputs = {random_tensor(shape, seed++, -3.0f, 5.0f)};
  ValueId x = b.input("x", shape, c.x_dtype);
  g.value(x).type.layout = c.x_layout;
  Attrs a = {{"norm", std::string(c.rms ? "rms" : "group")}, {"eps", 1e-6}, {"silu", int64_t{1}}};
  if (!c.rms) a.set("groups", c.groups);
  if (c.y_dtype != c.x_dtype) a.set("dtype", std::string(dtype_name(c.y_dtype)));
  ValueId y = b.op(Op::norm_act, {x, weight("gamma"), weight("beta"), weight("bias")}, a);
  ASSERT_TRUE(b.ok()) << b.status().message();
  g.value(y).type.layout = c.y_layout;
  b.output(y);
  const codegen::Target target = device_target();
  auto whole = testing::run_for_target_graph(g, weights, inputs, target);
  ASSERT_TRUE(whole) << whole.message();
  g.nodes().back().attrs.set("band_rows", band_rows);
  expect_kernels(g, weights, {kernel}, {});
  auto banded = testing::run_for_target_graph(g, weights, inputs, target);
  ASSERT_TRUE(banded) << banded.message();
  testing::expect_identical((*banded)[0], (*whole)[0]);
}

TEST(CodegenNormAct, VectorPathBandsAreBitIdentical) {
  Case c;  // 128 channels: chunks of 128 positions, so bands of 3 rows × 50 hold one chunk
  c.c = 128, c.groups = 32, c.h = 23, c.w = 50;
  c.x_dtype = c.y_dtype = DType::f16, c.x_layout = nhwc(), c.y_layout = nhwc(136);
  expect_bands_identical(c, 3, "norm_act_stats_vec.comp");
  c.x_dtype = DType::f32, c.y_layout = nhwc();  // f32 x, f16 y
  expect_bands_identical(c, 7, "norm_act_apply_vec.comp");
  c.rms = true;
  expect_bands_identical(c, 4, "norm_act_rms_vec.comp");
}

// group_moments: one statistics chunk per row, straight to its result [G, R, 2] — the
// vector kernel on nhwc f16 and f32, the scalar one on NCHW (or groups that straddle
// vectors unevenly); within 1e-5 of the interpreter's f64 (mean relative, M2 against
// its scale), and bit-identical when banded.
struct MomentsCase {
  int64_t c = 32, h = 9, w = 13, groups = 8;
  DType dtype = DType::f16;
  Layout layout = nhwc();
  double in_scale = 1.0;
  std::string kernel = "norm_act_stats_vec.comp";
};

void check_moments(const MomentsCase& m) {
  SCOPED_TRACE(fmt::format("group_moments x[1,{},{},{}]{} {} groups {} in_scale {}", m.c, m.h, m.w,
                           layout_str(m.layout), dtype_name(m.dtype), m.groups, m.in_scale));
  Graph g;
  WeightStore weights;
  Builder b(g, &weights);
  const Shape shape = {1, m.c, m.h, m.w};
  std::vector<Tensor> inputs = {random_tensor(shape, 21, 1.0f, 5.0f)};
  if (m.dtype == DType::f16)  // the interpreter reads the f16 values the device stores
    for (float& v : inputs[0].data) v = static_cast<float>(static_cast<_Float16>(v));
  ValueId x = b.input("x", shape, m.dtype);
  g.value(x).type.layout = m.layout;
  Attrs a = {{"groups", m.groups}};
  if (m.in_scale != 1.0) a.set("in_scale", m.in_scale);
  ValueId y = b.op(Op::group_moments, {x}, a);
  ASSERT_TRUE(b.ok()) << b.status().message();
  b.output(y);
  expect_kernels(g, weights, {m.kernel}, {});
  testing::BothResults r = testing::run_both(g, weights, inputs);
  ASSERT_EQ(r.vulkan.size(), 1u);
  ASSERT_EQ(r.vulkan[0].shape, (Shape{m.groups, m.h, 2}));
  for (size_t i = 0; i < r.vulkan[0].data.size(); i += 2) {
    const double mean = r.interpreter[0].data[i], m2 = r.interpreter[0].data[i + 1];
    EXPECT_NEAR(r.vulkan[0].data[i], mean, 1e-5 * std::fabs(mean) + 1e-6) << "mean " << i / 2;
    EXPECT_NEAR(r.vulkan[0].data[i + 1], m2, 1e-5 * m2 + 1e-5) << "M2 " << i / 2;
  }
  const codegen::Target target = device_target();
  auto whole = testing::run_for_target_graph(g, weights, inputs, target);
  ASSERT_TRUE(whole) << whole.message();
  g.nodes().back().attrs.set("band_rows", int64_t{2});
  auto banded = testing::run_for_target_graph(g, weights, inputs, target);
  if (m.layout.kind != LayoutKind::nhwc) {  // rows of NCHW are not one run: no bands
    ASSERT_FALSE(banded);
    EXPECT_NE(banded.message().find("band_rows needs row-contiguous x"), std::string::npos) << banded.message();
    return;
  }
  ASSERT_TRUE(banded) << banded.message();
  testing::expect_identical((*banded)[0], (*whole)[0]);
}

TEST(CodegenNormAct, GroupMomentsPerRow) {
  check_moments({});  // group size 4: vector statistics
  check_moments({.c = 64, .h = 7, .w = 40, .groups = 8, .dtype = DType::f32, .in_scale = 0.25,
                 .kernel = "norm_act_stats_vec.comp"});
  check_moments({.c = 16, .h = 5, .w = 9, .groups = 4, .dtype = DType::f32, .layout = Layout{},
                 .kernel = "norm_act_stats.comp"});  // NCHW: channels not contiguous
  check_moments({.c = 24, .h = 6, .w = 11, .groups = 8, .kernel = "norm_act_stats.comp"});  // group size 3
}

// norm_act with a statistics operand: the apply pass alone, reading the given (mean,
// rstd); the interpreter does the same, so the two agree as an applied norm does.
TEST(CodegenNormAct, GivenStatisticsSkipTheStatisticsPasses) {
  for (bool vec : {true, false}) {
    SCOPED_TRACE(vec ? "vector apply" : "scalar apply");
    Graph g;
    WeightStore weights;
    Builder b(g, &weights);
    const int64_t c = 32, groups = 8;
    const Shape shape = {1, c, 6, 10};
    auto weight = [&](const std::string& name, uint64_t seed) {
      Tensor v = random_tensor({c}, seed, 0.5f, 1.5f);
      EXPECT_TRUE(weights.add_owned(name, {c}, std::move(v.data)));
      return b.constant(name, TensorType{{c}, DType::f32, {}});
    };
    std::vector<Tensor> inputs = {random_tensor(shape, 31, -2.0f, 4.0f), random_tensor({groups, 2}, 32, 0.5f, 2.0f)};
    ValueId x = b.input("x", shape, DType::f16);
    g.value(x).type.layout = vec ? nhwc() : Layout{};
    ValueId stats = b.input("stats", {groups, 2});
    ValueId y = b.op(Op::norm_act, {x, weight("gamma", 33), weight("beta", 34), kNoValue, stats},
                     {{"norm", std::string("group")}, {"groups", groups}, {"eps", 1e-6}, {"silu", int64_t{1}}});
    ASSERT_TRUE(b.ok()) << b.status().message();
    g.value(y).type.layout = vec ? nhwc() : Layout{};
    b.output(y);
    expect_kernels(g, weights, {vec ? "norm_act_apply_vec.comp" : "norm_act_apply.comp"},
                   {"norm_act_stats.comp", "norm_act_stats_vec.comp", "group_norm_reduce.comp"});
    for (float& v : inputs[0].data) v = static_cast<float>(static_cast<_Float16>(v));
    testing::BothResults r = testing::run_both(g, weights, inputs);
    ASSERT_EQ(r.vulkan.size(), 1u);
    testing::expect_close(r.vulkan[0], r.interpreter[0], 1e-5, 1e-5);
  }
}

}  // namespace
}  // namespace strata

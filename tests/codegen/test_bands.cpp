// Banded conv_gemm and norm_act (attr band_rows, set by passes/split_bands.cpp): the
// node becomes one dispatch per band of output rows, each binding only windows of its
// activations, and the output is bit-identical to the one-dispatch node. Each case
// runs the same graph twice on the test device, whole (no attr) and banded, checks
// that every binding of the banded node stays within a bound worked out here (below
// the whole tensor's bytes) and compares the bytes. (Whole decoders under a small
// binding limit, with split_bands choosing the bands: tests/e2e.)
#include "tests/codegen/vk_test_util.h"

#include "codegen/strided.h"
#include "ir/band_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace strata {
namespace {

using testing::random_tensor;

Layout nhwc(int64_t padded = 0) { return Layout{LayoutKind::nhwc, padded}; }

struct Built {
  Graph graph;
  WeightStore weights;
  std::vector<Tensor> inputs;
  ValueId y = kNoValue;
  uint64_t seed = 1;

  ValueId input(const std::string& name, Shape shape, DType dtype, const Layout& layout) {
    inputs.push_back(random_tensor(shape, seed++, -2.0f, 2.0f));
    Builder b(graph, &weights);
    ValueId v = b.input(name, std::move(shape), dtype);
    graph.value(v).type.layout = layout;
    return v;
  }
  ValueId weight(Builder& b, const std::string& name, Shape shape, float range) {
    Tensor v = random_tensor(shape, seed++, -range, range);
    EXPECT_TRUE(weights.add_owned(name, shape, std::move(v.data)));
    return b.constant(name, TensorType{std::move(shape), DType::f32, {}});
  }
  const Node& node() const { return graph.nodes().back(); }
  void set_band_rows(int64_t rows) { graph.nodes().back().attrs.set("band_rows", rows); }
};

struct ConvCase {
  int64_t ci = 16, co = 24, h = 13, w = 9, k = 3, pad = 1, stride = 1;
  bool upsample = false, residual = false;
  DType dtype = DType::f16;
};

void build_conv(Built& t, const ConvCase& c) {
  ValueId x = t.input("x", {1, c.ci, c.h, c.w}, c.dtype, nhwc(c.ci + 8));
  Builder b(t.graph, &t.weights);  // after the inputs: one builder per stretch of nodes
  const int64_t up = c.upsample ? 2 : 1;
  const int64_t ho = (c.h * up + 2 * c.pad - c.k) / c.stride + 1, wo = (c.w * up + 2 * c.pad - c.k) / c.stride + 1;
  const float wr = 1.0f / std::sqrt(static_cast<float>(c.ci * c.k * c.k));
  std::vector<ValueId> ops = {x, t.weight(b, "w", {c.co, c.k * c.k * c.ci}, wr), t.weight(b, "b", {c.co}, 1.0f)};
  if (c.residual) ops.push_back(t.input("r", {1, c.co, ho, wo}, c.dtype, nhwc()));
  Builder b2(t.graph, &t.weights);
  Attrs a = {{"kernel", std::vector<int64_t>{c.k, c.k}},  {"pad", std::vector<int64_t>{c.pad, c.pad}},
             {"stride", std::vector<int64_t>{c.stride, c.stride}}, {"weight_layout", std::string("o_hwi")},
             {"gather", std::string(c.upsample ? "upsample2x" : "plain")}, {"dtype", std::string(c.dtype == DType::f16 ? "f16" : "f32")}};
  if (c.residual) a.set("residual_scale", 0.5);
  t.y = b2.op(Op::conv_gemm, ops, a);
  ASSERT_TRUE(b2.ok()) << b2.status().message();
  t.graph.value(t.y).type.layout = nhwc(c.co + 8);
  b2.output(t.y);
}

// The largest binding of any dispatch of `plan` labelled with `node` (or a step of it).
uint64_t largest_binding(const runtime::Plan& plan, const std::string& node, size_t* dispatches) {
  uint64_t most = 0;
  *dispatches = 0;
  for (const runtime::DispatchDesc& d : plan.dispatches) {
    if (d.label != node && d.label.rfind(node + ":", 0) != 0) continue;
    ++*dispatches;
    for (const runtime::BindingDesc& b : d.bindings) most = std::max(most, b.range);
  }
  return most;
}

codegen::Target device_target() {
  auto device = testing::test_device();
  EXPECT_TRUE(device) << device.message();
  return device ? codegen::target_for((*device)->info()) : codegen::Target{};
}

// Bytes of `rows` rows of a rank-4 nhwc value (padding slots included).
uint64_t row_bytes(const TensorType& t, int64_t rows = 1) {
  const int64_t slots = t.layout.padded_channels > 0 ? t.layout.padded_channels : t.shape[1];
  return static_cast<uint64_t>(rows * t.shape[3] * slots) * (t.dtype == DType::f16 ? 2 : 4);
}

// Runs t whole, then with band_rows = rows, and expects identical bytes,
// `expected_dispatches` dispatches of the banded node and none of its bindings above
// `bound` bytes (which must be below a whole binding of the first input or the output).
void expect_banded_identical(Built& t, int64_t rows, uint64_t bound, size_t expected_dispatches) {
  const codegen::Target target = device_target();
  auto whole = testing::run_for_target_graph(t.graph, t.weights, t.inputs, target);
  ASSERT_TRUE(whole) << whole.message();
  const TensorType &xt = t.graph.value(t.graph.inputs()[0]).type, &yt = t.graph.value(t.y).type;
  ASSERT_LT(bound, std::max(row_bytes(xt, xt.shape[2]), row_bytes(yt, yt.shape[2])))
      << "the bound must be below a whole binding";

  t.set_band_rows(rows);
  auto plan = codegen::compile_plan(t.graph, t.weights, target);
  ASSERT_TRUE(plan) << plan.message();
  size_t dispatches = 0;
  EXPECT_LE(largest_binding(*plan, t.node().name, &dispatches), bound);
  EXPECT_EQ(dispatches, expected_dispatches);
  auto banded = testing::run_for_target_graph(t.graph, t.weights, t.inputs, target);
  ASSERT_TRUE(banded) << banded.message();
  ASSERT_EQ(banded->size(), whole->size());
  testing::expect_identical((*banded)[0], (*whole)[0]);
}

TEST(CodegenBands, ConvGemmBandsAreBitIdentical) {
  struct Named {
    const char* what;
    ConvCase c;
    int64_t rows;
  };
  ConvCase plain, up, strided, one, res, f32, tall;
  for (ConvCase* c : {&plain, &up, &strided, &one, &res, &f32}) c->w = 40;  // windows larger than the weights
  up.upsample = true;                              // input rows halve, rounded outward
  strided.stride = 2, strided.h = 15;              // stride-2 taps
  one.k = 1, one.pad = 0;                          // no halo
  res.residual = true;                             // residual windows follow y's rows
  f32.dtype = DType::f32, f32.upsample = true;     // f32 storage, gather
  tall.h = 40, tall.w = 30, tall.ci = tall.co = 4;  // many one-row bands
  for (const Named& n : {Named{"3x3", plain, 4}, Named{"upsample2x", up, 5}, Named{"stride 2", strided, 3},
                         Named{"1x1", one, 4}, Named{"residual", res, 4}, Named{"f32 gather", f32, 7},
                         Named{"one-row bands", tall, 1}}) {
    SCOPED_TRACE(n.what);
    Built t;
    build_conv(t, n.c);
    const Shape& ys = t.graph.value(t.y).type.shape;
    const int64_t bands = (ys[2] + n.rows - 1) / n.rows;
    ASSERT_GE(bands, 3);
    // The bound: the largest window any band binds (y's rows, x's rows with halos,
    // worked out here with band_math) plus the alignment slack, and the weights.
    const TensorType &xt = t.graph.value(t.graph.inputs()[0]).type, &yt = t.graph.value(t.y).type;
    std::vector<RowOp> ops;
    if (n.c.upsample) ops.push_back(RowOp::make_upsample(2));
    ops.push_back(RowOp::make_conv(n.c.k, n.c.pad, n.c.stride));
    const TensorType& wt = t.graph.value(t.node().inputs[1]).type;
    uint64_t range = std::max<uint64_t>(row_bytes(yt, n.rows), static_cast<uint64_t>(wt.elements()) * 4);
    for (int64_t r0 = 0; r0 < ys[2]; r0 += n.rows)
      range = std::max(range, row_bytes(xt, needed_rows(ops, xt.shape[2], {r0, std::min(ys[2], r0 + n.rows)}).size()));
    expect_banded_identical(t, n.rows, range + 256, static_cast<size_t>(bands));
  }
}

void build_norm(Built& t, const std::string& norm, int64_t c, int64_t groups, int64_t h, int64_t w, bool bias) {
  ValueId x = t.input("x", {1, c, h, w}, DType::f16, nhwc(c + 16));
  Builder b(t.graph, &t.weights);
  std::vector<ValueId> ops = {x, t.weight(b, "gamma", {c}, 1.0f), t.weight(b, "beta", {c}, 1.0f)};
  if (bias) ops.push_back(t.weight(b, "bias", {c}, 0.5f));
  Attrs a = {{"norm", norm}, {"eps", 1e-6}, {"silu", int64_t{1}}, {"dtype", std::string("f16")}};
  if (norm == "group") a.set("groups", groups);
  t.y = b.op(Op::norm_act, ops, a);
  ASSERT_TRUE(b.ok()) << b.status().message();
  t.graph.value(t.y).type.layout = nhwc(c + 16);
  b.output(t.y);
}

TEST(CodegenBands, GroupNormActWindowsAreBitIdentical) {
  // 16 channels in 4 groups: statistics chunks of 1024 positions (4096 values), so a
  // 96 × 40 image has 4 chunks per group; bands of 24 rows (960 positions) give 4
  // apply windows and statistics windows of one chunk each (4 dispatches).
  Built t;
  build_norm(t, "group", 16, 4, 96, 40, true);
  // dispatches: 4 statistics windows, 1 reduce, 4 apply windows. The largest window:
  // a statistics chunk of 1024 positions (64 KiB).
  expect_banded_identical(t, 24, 1024 * 32 * 2 + 256, 9);
}

TEST(CodegenBands, RmsNormActWindowsAreBitIdentical) {
  Built t;
  build_norm(t, "rms", 24, 1, 17, 21, false);
  expect_banded_identical(t, 5, row_bytes(t.graph.value(t.y).type, 5) + 256, 4);
}

TEST(CodegenBands, BandRowsNeedRowContiguousOperands) {
  Built t;
  ValueId x = t.input("x", {1, 8, 12, 6}, DType::f32, Layout{});  // logical NCHW: rows are not one run
  Builder b(t.graph, &t.weights);
  std::vector<ValueId> ops = {x, t.weight(b, "w", {8, 72}, 0.1f)};
  Attrs a = {{"kernel", std::vector<int64_t>{3, 3}}, {"pad", std::vector<int64_t>{1, 1}},
             {"weight_layout", std::string("o_hwi")}, {"band_rows", int64_t{4}}};
  t.y = b.op(Op::conv_gemm, ops, a);
  b.output(t.y);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto plan = codegen::compile_plan(t.graph, t.weights, device_target());
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.message().find(t.node().name), std::string::npos) << plan.message();
  EXPECT_NE(plan.message().find("row-contiguous"), std::string::npos) << plan.message();
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(CodegenBands, SplitBoxesCoverTheLoopOnceWithinTheSpans) {
  // An nhwc-padded [C=3 of 4 slots, H=5, W=6] read in logical order: strides (1, 24, 4).
  const codegen::StridedLoop loop{{3, 5, 6}, {{1, 24, 4}, {30, 6, 1}}};
  for (uint64_t room : {uint64_t{1000}, uint64_t{50}, uint64_t{21}, uint64_t{7}, uint64_t{1}}) {
    SCOPED_TRACE(room);
    const auto boxes = codegen::split_boxes(loop, {room, room});
    ASSERT_FALSE(boxes.empty());
    std::vector<int> seen(3 * 5 * 6, 0);
    for (const auto& box : boxes) {
      for (size_t k = 0; k < 2; ++k) EXPECT_LE(codegen::box_span(loop.strides[k], box.shape), room);
      for (int64_t c = 0; c < box.shape[0]; ++c)
        for (int64_t h = 0; h < box.shape[1]; ++h)
          for (int64_t w = 0; w < box.shape[2]; ++w)
            ++seen[static_cast<size_t>((box.origin[0] + c) * 30 + (box.origin[1] + h) * 6 + box.origin[2] + w)];
    }
    for (int s : seen) ASSERT_EQ(s, 1);
    if (room == 1000) { EXPECT_EQ(boxes.size(), 1u); }
  }
  EXPECT_TRUE(codegen::split_boxes(loop, {0, 10}).empty());
}

TEST(CodegenBands, SlicesAndConversionsRunInWindowBoxes) {
  // x (logical f32) → slice of channels 1..3 into an nhwc value → the output,
  // converted back to a logical f32 host slot: under a range far below each tensor,
  // the slice and the output conversion run in boxes, bit-identical to whole runs.
  Built t;
  ValueId x = t.input("x", {1, 6, 20, 30}, DType::f32, Layout{});
  Builder b(t.graph, &t.weights);
  t.y = b.op(Op::slice, {x}, {{"axis", int64_t{1}}, {"start", int64_t{1}}, {"end", int64_t{4}}});
  ASSERT_TRUE(b.ok()) << b.status().message();
  t.graph.value(t.y).type.layout = nhwc(4);
  b.output(t.y);
  codegen::Target whole_target = device_target(), narrow = device_target();
  narrow.max_storage_buffer_range = 1024;  // x is 14 400 bytes, the output slot 7 200
  auto whole = testing::run_for_target_graph(t.graph, t.weights, t.inputs, whole_target);
  ASSERT_TRUE(whole) << whole.message();
  auto plan = codegen::compile_plan(t.graph, t.weights, narrow);
  ASSERT_TRUE(plan) << plan.message();
  size_t slices = 0, stages = 0;
  for (const runtime::DispatchDesc& d : plan->dispatches) {
    for (const runtime::BindingDesc& bd : d.bindings) EXPECT_LE(bd.range, 1024u) << d.label;
    slices += d.label.rfind(t.node().name, 0) == 0;
    stages += d.label.rfind("output.", 0) == 0;
  }
  EXPECT_GT(slices, 1u);
  EXPECT_GT(stages, 1u);
  auto boxed = testing::run_for_target_graph(t.graph, t.weights, t.inputs, narrow);
  ASSERT_TRUE(boxed) << boxed.message();
  testing::expect_identical((*boxed)[0], (*whole)[0]);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// More workgroups than the target allows along x fold into grid y (grid_1d): with
// at most 7 groups along x, conversions, a unary op and a group norm's passes all
// run on 2-D grids and must give the bytes of 1-D grids. (Before linear_index()
// became a macro it read gl_WorkGroupSize before the kernel declared it, and rows
// y > 0 of such grids wrote the wrong elements.)
TEST(CodegenBands, TwoDimensionalGridsGiveTheBytesOfOneDimensionalOnes) {
  for (const char* what : {"silu", "group norm"}) {
    SCOPED_TRACE(what);
    Built t;
    if (std::string(what) == "silu") {
      ValueId x = t.input("x", {1, 16, 96, 40}, DType::f16, nhwc(32));
      Builder b(t.graph, &t.weights);
      t.y = b.op(Op::silu, {x}, {});
      ASSERT_TRUE(b.ok());
      t.graph.value(t.y).type.layout = nhwc(32);
      b.output(t.y);
    } else {
      build_norm(t, "group", 16, 4, 96, 40, true);
    }
    codegen::Target narrow = device_target();
    narrow.max_workgroup_count_x = 7;
    auto plan = codegen::compile_plan(t.graph, t.weights, narrow);
    ASSERT_TRUE(plan) << plan.message();
    size_t two_d = 0;
    for (const runtime::DispatchDesc& d : plan->dispatches) two_d += d.grid[1] > 1;
    EXPECT_GE(two_d, 3u) << "the narrow target must fold grids into y";
    auto wide = testing::run_for_target_graph(t.graph, t.weights, t.inputs, device_target());
    auto folded = testing::run_for_target_graph(t.graph, t.weights, t.inputs, narrow);
    ASSERT_TRUE(wide && folded);
    testing::expect_identical((*folded)[0], (*wide)[0]);
  }
}

}  // namespace
}  // namespace strata

// Data movement through codegen + Vulkan against the interpreter, bit for bit:
// reshape (aliased, and copied when it is a graph output), upsample_nearest on the
// trailing dims of ranks 3 to 5, permute up to rank 6, slice on every axis, concat of
// several operands on every axis.
#include "codegen/vk_test_util.h"

#include "ir/builder.h"

#include <gtest/gtest.h>

#include <functional>

namespace strata {
namespace {

using testing::expect_identical;
using testing::random_tensor;
using testing::run_both;

// Builds a graph with `build` from inputs of `shapes`, runs both backends and
// compares every output exactly (graphs may use exact pointwise ops: scale by
// powers of two).
void check(const std::vector<Shape>& shapes, const std::function<void(Builder&, std::vector<ValueId>&)>& build,
           uint64_t seed = 1) {
  Graph g;
  Builder b(g, nullptr);
  std::vector<ValueId> xs;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    xs.push_back(b.input("x" + std::to_string(i), shapes[i]));
    inputs.push_back(random_tensor(shapes[i], seed + i));
  }
  build(b, xs);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto r = run_both(g, WeightStore(), inputs);
  ASSERT_EQ(r.vulkan.size(), g.outputs().size());
  for (size_t i = 0; i < r.vulkan.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    expect_identical(r.vulkan[i], r.interpreter[i]);
  }
}

TEST(CodegenShuffle, ReshapeAliasesAndCopiesWhenAnOutput) {
  // Reshape feeding an op: aliased (no dispatch). Reshape as an output: copied.
  check({{1, 6, 5, 7}}, [](Builder& b, std::vector<ValueId>& x) {
    ValueId r = b.reshape(x[0], {6, 35});
    b.output(b.scale(b.reshape(b.scale(r, 2.0), {1, 210}), 0.5));
    b.output(b.reshape(r, {2, 3, 35}));
    b.output(b.reshape(x[0], {210}));
  });
}

TEST(CodegenShuffle, UpsampleNearest) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{1, 3, 5, 7}, {2, 2}},       {{2, 5, 1, 1}, {2, 2}},    {{1, 4, 3, 2, 5}, {1, 2, 2}},
      {{1, 3, 2, 3, 4}, {2, 2, 2}}, {{3, 5, 7}, {3}},          {{1, 2, 3, 4, 5}, {2, 1, 3, 1}},
      {{1, 13, 9, 4}, {2, 3}}};
  for (const auto& [shape, factors] : cases) {
    SCOPED_TRACE(shape_str(shape) + " x " + shape_str(factors));
    check({shape}, [f = factors](Builder& b, std::vector<ValueId>& x) { b.output(b.upsample_nearest(x[0], f)); });
  }
}

TEST(CodegenShuffle, Permute) {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{1, 3, 5, 7}, {0, 2, 3, 1}}, {{1, 3, 5, 7}, {0, 3, 1, 2}}, {{7, 9}, {1, 0}},
      {{2, 3, 4, 5, 6}, {0, 2, 1, 4, 3}}, {{2, 3, 1, 5, 2, 3}, {5, 4, 3, 2, 1, 0}}, {{4, 1, 3}, {1, 0, 2}},
      {{2, 3, 4}, {0, 1, 2}}};
  for (const auto& [shape, perm] : cases) {
    SCOPED_TRACE(shape_str(shape) + " perm " + shape_str(perm));
    check({shape}, [p = perm](Builder& b, std::vector<ValueId>& x) { b.output(b.permute(x[0], p)); });
  }
}

TEST(CodegenShuffle, Slice) {
  const Shape shape = {2, 7, 5, 9};
  for (int64_t axis = 0; axis < 4; ++axis)
    for (auto [start, end] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, shape[axis]}, {0, shape[axis]}}) {
      SCOPED_TRACE(fmt::format("axis {} [{}, {})", axis, start, end));
      check({shape}, [=](Builder& b, std::vector<ValueId>& x) { b.output(b.slice(x[0], axis, start, end)); });
    }
}

TEST(CodegenShuffle, Concat) {
  for (int64_t axis = 0; axis < 4; ++axis) {
    SCOPED_TRACE(fmt::format("axis {}", axis));
    std::vector<Shape> shapes = {{2, 3, 5, 7}, {2, 3, 5, 7}, {2, 3, 5, 7}};
    shapes[1][static_cast<size_t>(axis)] = 1;
    shapes[2][static_cast<size_t>(axis)] = 4;
    check(shapes, [=](Builder& b, std::vector<ValueId>& x) { b.output(b.concat(x, axis)); });
  }
  // Concat of values from the arena, the input buffer and an alias.
  check({{1, 5, 3, 3}, {1, 2, 9}}, [](Builder& b, std::vector<ValueId>& x) {
    ValueId y = b.reshape(x[1], {1, 2, 3, 3});
    b.output(b.scale(b.concat({b.scale(x[0], -2.0), y, x[0]}, 1), 4.0));
  });
}

// HunyuanVideo's temporal upsample on NHWC values (assign_layout keeps the frame
// stack's regrouping reshapes NHWC): the upsample along H and the slice along H copy
// in the output's memory order, whole runs of pixels with their channels (a
// strided_copy of rank 1, an upsample of rank 2), not one element per channel stride;
// the bits are the interpreter's.
TEST(CodegenShuffle, NhwcCopiesRunInMemoryOrder) {
  Graph g;
  Builder b(g, nullptr);
  const int64_t c = 8;
  ValueId x = b.input("x", {1, c, 4, 5});
  ValueId r = b.reshape(x, {1, c, 4, 5});          // relayout to NHWC
  ValueId t = b.reshape(r, {1, c, 2, 10});         // 2 frames of 2 rows of 5: an alias
  ValueId u = b.upsample_nearest(t, {2, 1});       // each frame twice
  ValueId s = b.slice(u, 2, 1, 4);                 // the first dropped
  ValueId v = b.reshape(s, {1, c, 6, 5});          // an alias
  b.output(b.reshape(v, {1, c, 6, 5}));            // relayout to logical
  ASSERT_TRUE(b.ok()) << b.status().message();
  for (ValueId n : {r, t, u, s, v}) g.value(n).type.layout = Layout{LayoutKind::nhwc, c};
  const std::vector<Tensor> inputs{random_tensor({1, c, 4, 5}, 3)};
  auto r2 = run_both(g, WeightStore(), inputs);
  ASSERT_EQ(r2.vulkan.size(), 1u);
  expect_identical(r2.vulkan[0], r2.interpreter[0]);
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  auto plan = codegen::compile_plan(g, WeightStore(), codegen::target_for((*device)->info()), {});
  ASSERT_TRUE(plan) << plan.message();
  std::string names;
  for (const auto& p : plan->pipelines) names += p.name + "\n";
  // The upsample: frames × the duplicate × one run of a frame's pixels with their
  // channels, 16-byte units (4 f32 words); the slice: one run.
  EXPECT_NE(names.find("strided_copy.comp[RANK=3,VEC=4]"), std::string::npos) << names;
  EXPECT_NE(names.find("strided_copy.comp[RANK=1"), std::string::npos) << names;
  EXPECT_EQ(names.find("upsample_nearest.comp"), std::string::npos) << names;
}

// Upsamples of NHWC maps (f16 and f32, channels in 16-byte units or not, factors on H
// and W, a 5-D frame stack) give the interpreter's bits; those whose channel runs fill
// 16-byte units take strided_copy's VEC path, the others the upsample kernel.
TEST(CodegenShuffle, NhwcUpsamplesInSixteenByteUnits) {
  struct Case {
    Shape shape;
    std::vector<int64_t> factors;
    DType dtype;
    bool units;
  };
  for (const Case& c : {Case{{1, 16, 3, 5}, {2, 2}, DType::f16, true}, Case{{1, 8, 4, 3}, {2, 2}, DType::f32, true},
                        Case{{1, 12, 3, 4}, {2, 2}, DType::f16, false}, Case{{1, 6, 3, 4}, {1, 2}, DType::f32, false}}) {
    SCOPED_TRACE(shape_str(c.shape) + " x " + shape_str(c.factors));
    Graph g;
    Builder b(g, nullptr);
    ValueId x = b.input("x", c.shape, c.dtype);
    ValueId r = b.reshape(x, c.shape);  // relayout to NHWC
    ValueId u = b.upsample_nearest(r, c.factors);
    ValueId back = b.reshape(u, b.shape(u));  // relayout to logical
    b.output(back);
    ASSERT_TRUE(b.ok()) << b.status().message();
    for (ValueId n : {r, u}) g.value(n).type.layout = Layout{LayoutKind::nhwc, 0};
    const std::vector<Tensor> inputs{random_tensor(c.shape, 5)};
    auto r2 = run_both(g, WeightStore(), inputs);
    ASSERT_EQ(r2.vulkan.size(), 1u);
    expect_identical(r2.vulkan[0], r2.interpreter[0]);
    auto device = testing::test_device_f16();
    ASSERT_TRUE(device) << device.message();
    auto plan = codegen::compile_plan(g, WeightStore(), codegen::target_for((*device)->info()), {});
    ASSERT_TRUE(plan) << plan.message();
    std::string names;
    for (const auto& p : plan->pipelines) names += p.name + "\n";
    EXPECT_EQ(names.find("upsample_nearest.comp") == std::string::npos, c.units) << names;
    EXPECT_EQ(names.find(c.dtype == DType::f16 ? "VEC=8" : "VEC=4") != std::string::npos, c.units) << names;
  }
}

// Relayouts that transpose (NHWC <-> logical: the contiguous dim of one side is strided
// on the other) run in 32 × 32 tiles through shared memory (unary.comp TILED), with
// sizes that leave partial tiles: Wan's DupUp3D regrouping (NHWC [1, C, H, W] ->
// logical [C/2, 2, H, W] -> NHWC [1, C/2, 2H, W]), a cast to f16 into NHWC and a scale
// between layouts. The interpreter's bits; the tiled kernel in the plan, and not for
// a relayout whose other side has fewer than 8 channels.
TEST(CodegenShuffle, TransposingRelayoutsRunInTiles) {
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  const codegen::Target target = codegen::target_for((*device)->info());
  struct Case {
    const char* what;
    int64_t c;
    bool tiled;
  };
  for (const Case& k : {Case{"40 channels", 40, true}, Case{"6 channels", 6, false}}) {
    SCOPED_TRACE(k.what);
    const int64_t c = k.c, h = 9, w = 37;
    Graph g;
    Builder b(g, nullptr);
    ValueId x = b.input("x", {1, c, h, w});
    ValueId n = b.cast(x, DType::f16);                             // logical f32 -> NHWC f16
    ValueId r = b.reshape(n, {c / 2, 2, h, w});                    // NHWC -> logical
    ValueId p = b.permute(r, {0, 2, 1, 3});                        // [c/2, h, 2, w]
    ValueId m = b.reshape(p, {1, c / 2, 2 * h, w});                // logical -> NHWC
    ValueId s = b.scale(m, 2.0);                                   // NHWC -> logical
    b.output(b.cast(s, DType::f32));
    ASSERT_TRUE(b.ok()) << b.status().message();
    for (ValueId v : {n, m}) g.value(v).type.layout = Layout{LayoutKind::nhwc, 0};
    const std::vector<Tensor> inputs{random_tensor({1, c, h, w}, 11)};
    auto both = run_both(g, WeightStore(), inputs);
    ASSERT_EQ(both.vulkan.size(), 1u);
    expect_identical(both.vulkan[0], both.interpreter[0]);
    auto plan = codegen::compile_plan(g, WeightStore(), target, {});
    ASSERT_TRUE(plan) << plan.message();
    int tiled = 0;
    for (const auto& d : plan->dispatches)
      if (plan->pipelines[d.pipeline].name.find("TILED=1") != std::string::npos) ++tiled;
    // The cast into NHWC, the regrouping's two reshapes and the scale out of NHWC.
    EXPECT_EQ(tiled, k.tiled ? 4 : 0);
  }
}

TEST(CodegenShuffle, ChainReusesTheArena) {
  // A long chain: intermediates share memory, results stay exact.
  check({{1, 4, 6, 6}}, [](Builder& b, std::vector<ValueId>& x) {
    ValueId h = x[0];
    for (int i = 0; i < 6; ++i) {
      h = b.upsample_nearest(b.permute(h, {0, 1, 3, 2}), {1, 1});
      h = b.concat({b.slice(h, 1, 0, 2), b.slice(h, 1, 2, 4)}, 1);
    }
    b.output(h);
  });
}

// 16 bytes per invocation (strided_copy.comp VEC): the transformers' head permute
// [T, H, D] -> [H, T, D] and back moves whole runs of D, 4 f32 words or 8 halves at a
// time; a slice starting inside a 16-byte unit and a permute that moves the innermost
// dim copy element by element. Every case bit for bit against the interpreter.
TEST(CodegenShuffle, SixteenBytesPerInvocation) {
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  const codegen::Target target = codegen::target_for((*device)->info());
  struct Case {
    const char* what;
    Shape shape;
    std::function<ValueId(Builder&, ValueId)> build;
    const char* vec;  // the VEC define expected on the copy, or nullptr: none
  };
  const std::vector<Case> cases = {
      {"head permute f32", {6, 3, 16}, [](Builder& b, ValueId x) { return b.permute(x, {1, 0, 2}); }, "VEC=4"},
      {"head permute f16 and back",
       {6, 3, 16},
       [](Builder& b, ValueId x) {
         ValueId h = b.permute(b.cast(x, DType::f16), {1, 0, 2});
         return b.cast(b.permute(b.scale(h, 2.0), {1, 0, 2}), DType::f32);
       },
       "VEC=8"},
      {"slice from element 3", {4, 20}, [](Builder& b, ValueId x) { return b.slice(x, 1, 3, 19); }, nullptr},
      {"transpose", {8, 12}, [](Builder& b, ValueId x) { return b.permute(x, {1, 0}); }, nullptr},
  };
  uint64_t seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Graph g;
    Builder b(g, nullptr);
    b.output(c.build(b, b.input("x", c.shape)));
    ASSERT_TRUE(b.ok()) << b.status().message();
    auto plan = codegen::compile_plan(g, WeightStore(), target);
    ASSERT_TRUE(plan) << plan.message();
    size_t copies = 0, vec = 0;
    for (const auto& d : plan->dispatches) {
      const std::string& name = plan->pipelines[d.pipeline].name;
      if (name.rfind("strided_copy.comp", 0) != 0) continue;
      ++copies;
      vec += c.vec && name.find(c.vec) != std::string::npos;
      if (!c.vec) { EXPECT_EQ(name.find("VEC="), std::string::npos) << name; }
    }
    EXPECT_GT(copies, 0u) << runtime::describe(*plan);
    if (c.vec) { EXPECT_EQ(vec, copies) << runtime::describe(*plan); }
    std::vector<Tensor> in = {random_tensor(c.shape, seed++)};
    auto got = testing::run_for_target_graph(g, WeightStore(), in, target);
    ASSERT_TRUE(got) << got.message();
    auto want = interpret(g, WeightStore(), in);
    ASSERT_TRUE(want) << want.message();
    testing::expect_identical((*got)[0], (*want)[0]);
  }
}

}  // namespace
}  // namespace strata

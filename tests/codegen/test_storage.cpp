// Codegen: how values are stored (codegen/storage.h) — f16 as half, NHWC and padded
// channel layouts — through the pointwise, data-movement and token families; the
// staging of graph inputs and outputs through f32 logical host slots; the plan's
// 16-bit requirements; f16 conv_gemm weights uploaded as half; and buffer offsets
// planned by passes/plan_buffers (Value::buffer), used when present and checked, and
// the same offsets from the memory planner when absent.
#include "codegen/vk_test_util.h"

#include "codegen/placement.h"
#include "ir/builder.h"
#include "passes/decoder_like.h"
#include "passes/passes.h"
#include "passes/plan_buffers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace strata {
namespace {

using testing::expect_close;
using testing::expect_identical;
using testing::random_tensor;

Layout nhwc(int64_t padded = 0) { return Layout{LayoutKind::nhwc, padded}; }

void set_layout(Graph& g, ValueId v, Layout l) { g.value(v).type.layout = l; }

TEST(CodegenStorage, PointwiseOpsOnNhwcHalfValues) {
  Graph g;
  Builder b(g, nullptr);
  const Shape shape = {2, 6, 5, 3};
  ValueId x = b.input("x", shape, DType::f16), s = b.input("s", {6, 1, 1});
  set_layout(g, x, nhwc(8));
  ValueId h = b.silu(x);  // f16, logical
  ValueId y = b.add(h, s);
  set_layout(g, y, nhwc());
  ValueId z = b.mul(b.scale(y, 0.5, 0.25), x);
  set_layout(g, z, nhwc(16));
  ValueId c = b.clamp(b.cast(z, DType::f32), -1.0, 1.0);
  set_layout(g, c, nhwc(7));
  b.output(z);
  b.output(c);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto r = testing::run_both(g, WeightStore(), {random_tensor(shape, 1), random_tensor({6, 1, 1}, 2)});
  ASSERT_EQ(r.vulkan.size(), 2u);
  expect_close(r.vulkan[0], r.interpreter[0], 1e-3, 1e-6);  // f16 results: one half ULP at most
  expect_close(r.vulkan[1], r.interpreter[1], 1e-3, 1e-6);
}

TEST(CodegenStorage, DataMovementAcrossLayoutsIsExact) {
  Graph g;
  Builder b(g, nullptr);
  const Shape shape = {1, 5, 4, 6};
  ValueId x = b.input("x", shape, DType::f16);
  set_layout(g, x, nhwc(8));
  ValueId up = b.upsample_nearest(x, {2, 2});
  set_layout(g, up, nhwc(8));
  ValueId sl = b.slice(up, 1, 1, 4);  // channels 1..3, logical
  ValueId cat = b.concat({sl, b.slice(up, 1, 0, 2)}, 1);
  set_layout(g, cat, nhwc());
  ValueId p = b.permute(cat, {0, 2, 3, 1});  // [1, 8, 12, 5]
  ValueId tokens = b.reshape(p, {96, 5});
  ValueId back = b.reshape(x, {1, 5, 24});  // a reshape out of a padded layout: a copy
  b.output(tokens);
  b.output(back);
  b.output(up);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto r = testing::run_both(g, WeightStore(), {random_tensor(shape, 3)});
  ASSERT_EQ(r.vulkan.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    expect_identical(r.vulkan[i], r.interpreter[i]);
  }
}

TEST(CodegenStorage, TokensInHalf) {
  // The mid-block attention after the passes: NHWC f16 image -> [T, C] f16 tokens ->
  // linear (f16 out) -> attention (f16 in and out) -> back to the image.
  Graph g;
  WeightStore w;
  const int64_t c = 24, hw = 20;
  ASSERT_TRUE(w.add_owned("wq", {c, c}, random_tensor({c, c}, 5, -0.3f, 0.3f).data));
  ASSERT_TRUE(w.add_owned("bq", {c}, random_tensor({c}, 6).data));
  Builder b(g, &w);
  ValueId x = b.input("x", {1, c, 4, 5}, DType::f16);
  set_layout(g, x, nhwc(32));
  ValueId t = b.permute(b.reshape(x, {c, hw}), {1, 0});
  ValueId q = b.linear(t, b.weight("wq"), b.weight("bq"));
  ValueId a = b.attention(q, t, t, 0.2);
  ValueId img = b.reshape(b.permute(a, {1, 0}), {1, c, 4, 5});
  set_layout(g, img, nhwc(32));
  b.output(b.add(img, x));
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto r = testing::run_both(g, w, {random_tensor({1, c, 4, 5}, 7, -1.0f, 1.0f)});
  ASSERT_EQ(r.vulkan.size(), 1u);
  expect_close(r.vulkan[0], r.interpreter[0], 2e-3, 2e-3);  // several f16 roundings in a row
}

TEST(CodegenStorage, RequirementsFollowHalfStorage) {
  Graph g;
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 4, 3, 3});
  b.output(b.silu(x));
  auto f32_plan = codegen::compile_plan(g, WeightStore(), codegen::Target{});
  ASSERT_TRUE(f32_plan) << f32_plan.message();
  EXPECT_FALSE(f32_plan->requirements.shader_float16);
  EXPECT_FALSE(f32_plan->requirements.storage_buffer_16bit_access);
  b.output(b.cast(x, DType::f16));
  auto f16_plan = codegen::compile_plan(g, WeightStore(), codegen::Target{});
  ASSERT_TRUE(f16_plan) << f16_plan.message();
  EXPECT_TRUE(f16_plan->requirements.shader_float16);
  EXPECT_TRUE(f16_plan->requirements.storage_buffer_16bit_access);
  // bf16 is stored as f32 holding bfloat16 numbers: no 16-bit storage.
  Graph g2;
  Builder b2(g2, nullptr);
  b2.output(b2.silu(b2.cast(b2.input("x", {5}), DType::bf16)));
  auto bf16_plan = codegen::compile_plan(g2, WeightStore(), codegen::Target{});
  ASSERT_TRUE(bf16_plan) << bf16_plan.message();
  EXPECT_FALSE(bf16_plan->requirements.storage_buffer_16bit_access);
}

TEST(CodegenStorage, HalfInputsAreStagedAndWindowed) {
  // f16 graph input and output, pointwise ops split into windows (a tiny binding
  // range): window offsets must stay aligned for 2- and 4-byte elements alike.
  Graph g;
  Builder b(g, nullptr);
  const Shape shape = {3, 7, 11};
  ValueId x = b.input("x", shape, DType::f16);
  ValueId h = b.gelu(b.add(x, x));
  b.output(b.cast(h, DType::f32));
  b.output(h);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  target.max_storage_buffer_range = 256;
  auto plan = codegen::compile_plan(g, WeightStore(), target);
  ASSERT_TRUE(plan) << plan.message();
  size_t second_windows = 0;  // one per windowed dispatch sequence
  for (const auto& d : plan->dispatches) second_windows += d.label.ends_with("w1");
  EXPECT_GE(second_windows, 5u) << runtime::describe(*plan);
  auto exec = runtime::Executor::create(*device, *plan);
  ASSERT_TRUE(exec) << exec.message();
  Tensor in = random_tensor(shape, 9);
  std::vector<Tensor> out = {Tensor(shape), Tensor(shape)};
  ASSERT_TRUE((*exec)->run({std::as_bytes(std::span(in.data))}, {std::as_writable_bytes(std::span(out[0].data)),
                                                                    std::as_writable_bytes(std::span(out[1].data))}));
  auto want = interpret(g, WeightStore(), {in});
  ASSERT_TRUE(want) << want.message();
  expect_close(out[0], (*want)[0], 1e-3, 1e-6);
  expect_close(out[1], (*want)[1], 1e-3, 1e-6);
}

// f32 -> f16 stores round to the nearest half, ties to even, exactly as the
// interpreter does (float_to_half): through the device's round-to-nearest-even
// conversion (F16_RTE, where the target has shaderRoundingModeRTEFloat16, as lavapipe
// and the H200 do) and through common.glsl's bit arithmetic. The values: ties and
// near-ties at every exponent from the half's subnormal range to beyond its largest
// value, the largest half and the overflow threshold, zeros, infinities, and random
// bit patterns over the same exponents.
TEST(CodegenStorage, HalfRoundingMatchesTheInterpreterBitForBit) {
  auto from_bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  std::vector<float> values = {0.0f, -0.0f, 65504.0f, 65519.99609375f, 65520.0f, -65520.0f, 1e30f, -1e30f,
                               INFINITY, -INFINITY, 6.103515625e-5f, 6.1035152e-5f, 2.98023224e-8f, 8.94069672e-8f};
  for (uint32_t e = 98; e <= 145; ++e)  // 2^-29 .. 2^18
    for (uint32_t m : {0x000000u, 0x001000u, 0x003000u, 0x000fffu, 0x001001u, 0x002fffu, 0x7fe000u, 0x7ff000u,
                       0x7fffffu, 0x2aaaaau})
      for (uint32_t sign : {0u, 0x80000000u}) values.push_back(from_bits(sign | (e << 23) | m));
  uint64_t z = 12345;
  for (int i = 0; i < 4000; ++i) {
    z += 0x9e3779b97f4a7c15ull;
    uint64_t r = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    r = (r ^ (r >> 27)) * 0x94d049bb133111ebull;
    r ^= r >> 31;
    const uint32_t e = 98 + static_cast<uint32_t>(r % 48);
    values.push_back(from_bits(static_cast<uint32_t>(r >> 32 & 0x807fffffu) | (e << 23)));
  }
  Graph g;
  Builder b(g, nullptr);
  const Shape shape = {static_cast<int64_t>(values.size())};
  ValueId x = b.input("x", shape);
  b.output(b.cast(x, DType::f16));
  ASSERT_TRUE(b.ok()) << b.status().message();
  Tensor in(shape);
  in.data = values;
  auto want = interpret(g, WeightStore(), {in});
  ASSERT_TRUE(want) << want.message();

  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  const codegen::Target native = codegen::target_for((*device)->info());
  // Three ways to round: the conversion with denormals kept (F16_DENORM, where the
  // device has shaderDenormPreserveFloat16, as the H200 does and lavapipe does not),
  // the conversion in the normal range only (F16_RTE), the bit arithmetic.
  for (const int mode : {2, 1, 0}) {
    const bool rte = mode >= 1, denorm = mode == 2;
    if (rte && !native.f16_rounding_rte) continue;  // nothing to compare on this device
    if (denorm && !native.f16_denorm_preserve) continue;
    SCOPED_TRACE(denorm ? "F16_DENORM" : rte ? "F16_RTE" : "bit arithmetic");
    codegen::Target target = native;
    target.f16_rounding_rte = rte;
    target.f16_denorm_preserve = denorm;
    auto plan = codegen::compile_plan(g, WeightStore(), target);
    ASSERT_TRUE(plan) << plan.message();
    EXPECT_EQ(plan->requirements.f16_rounding_rte, rte);
    EXPECT_EQ(plan->requirements.f16_denorm_preserve, denorm);
    bool named = false, named_denorm = false;
    for (const auto& p : plan->pipelines) {
      named |= p.name.find("F16_RTE=1") != std::string::npos;
      named_denorm |= p.name.find("F16_DENORM=1") != std::string::npos;
    }
    EXPECT_EQ(named, rte);
    EXPECT_EQ(named_denorm, denorm);
    auto exec = runtime::Executor::create(*device, *plan);
    ASSERT_TRUE(exec) << exec.message();
    Tensor out(shape);
    ASSERT_TRUE((*exec)->run({std::as_bytes(std::span(in.data))}, {std::as_writable_bytes(std::span(out.data))}));
    expect_identical(out, (*want)[0]);
  }
}

// A target whose device keeps 16-bit denormals (shaderDenormPreserveFloat16) compiles
// its f16 kernels with F16_DENORM: one conversion rounds, subnormals included, and the
// plan asks the device for the property, so a device without it refuses the plan by
// name. Compiled here without running: lavapipe lacks the property (the H200 runs the
// kernels in HalfRoundingMatchesTheInterpreterBitForBit).
TEST(CodegenStorage, DenormPreservingTargetsRoundWithOneConversion) {
  Graph g;
  Builder b(g, nullptr);
  ValueId x = b.input("x", {64});
  b.output(b.cast(x, DType::f16));
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto f16_pipelines = [](const runtime::Plan& plan, const char* define) {
    size_t n = 0;
    for (const auto& p : plan.pipelines) n += p.name.find(define) != std::string::npos;
    return n;
  };
  codegen::Target target;
  target.f16_rounding_rte = true;
  target.f16_denorm_preserve = true;
  auto plan = codegen::compile_plan(g, WeightStore(), target);
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_TRUE(plan->requirements.f16_denorm_preserve);
  EXPECT_GE(f16_pipelines(*plan, "F16_DENORM=1"), 1u) << runtime::describe(*plan);
  EXPECT_EQ(f16_pipelines(*plan, "F16_DENORM=1"), f16_pipelines(*plan, "F16_RTE=1"));

  runtime::DeviceInfo lacking;
  lacking.name = "no-denormals";
  lacking.shader_float16 = lacking.storage_buffer_16bit_access = lacking.f16_rounding_rte = true;
  lacking.subgroup_size = 8;
  lacking.max_storage_buffer_range = 128ull << 20;
  lacking.max_compute_shared_memory_size = 32 << 10;
  lacking.subgroup_operations = ~0u;
  Status refused = runtime::check_requirements(lacking, plan->requirements);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.message().find("lacks shaderDenormPreserveFloat16"), std::string::npos) << refused.message();

  // The property alone does not make the conversion exact: F16_DENORM needs F16_RTE.
  target.f16_rounding_rte = false;
  plan = codegen::compile_plan(g, WeightStore(), target);
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_FALSE(plan->requirements.f16_denorm_preserve);
  EXPECT_EQ(f16_pipelines(*plan, "F16_DENORM=1"), 0u);
}

TEST(CodegenStorage, HalfConvGemmWeightsUploadAsHalf) {
  Graph g;
  WeightStore w;
  std::vector<uint8_t> half;
  for (float v : random_tensor({4, 3, 3, 3}, 11, -0.5f, 0.5f).data) {
    const uint16_t h = float_to_half(v);
    half.push_back(static_cast<uint8_t>(h & 0xff));
    half.push_back(static_cast<uint8_t>(h >> 8));
  }
  ASSERT_TRUE(w.add_owned_bytes("conv.w", DType::f16, {4, 3, 3, 3}, half));
  ASSERT_TRUE(w.add_owned("conv.w32", {4, 3, 3, 3}, random_tensor({4, 3, 3, 3}, 12).data));
  Builder b(g, &w);
  ValueId x = b.input("x", {1, 3, 6, 6}, DType::f16);
  Attrs a = {{"kernel", std::vector<int64_t>{3, 3}}, {"pad", std::vector<int64_t>{1, 1}},
             {"weight_layout", std::string("oihw")}};
  ValueId y = b.op(Op::conv_gemm, {x, b.weight("conv.w")}, a);
  // The same f32 tensor typed f16 (rounded on upload) feeding conv_gemm, and read
  // again by a pointwise op (so stored as f32).
  ValueId w16 = b.constant("w16", TensorType{{4, 3, 3, 3}, DType::f16, {}});
  g.value(w16).weight = "conv.w32";
  ValueId y2 = b.op(Op::conv_gemm, {x, w16}, a);
  ValueId w16b = b.constant("w16b", TensorType{{4, 3, 3, 3}, DType::f16, {}});
  g.value(w16b).weight = "conv.w32";
  b.output(b.add(y, y2));
  b.output(b.op(Op::conv_gemm, {x, w16b}, a));
  b.output(b.scale(w16b, 2.0));
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto plan = codegen::compile_plan(g, w, codegen::Target{});
  ASSERT_TRUE(plan) << plan.message();
  ASSERT_EQ(plan->weights.size(), 3u);
  EXPECT_EQ(describe(plan->weights[0].transform), "f16");
  EXPECT_EQ(plan->weights[0].bytes, 108u * 2);
  EXPECT_EQ(describe(plan->weights[1].transform), "f32->f16");
  EXPECT_EQ(describe(plan->weights[2].transform), "f32->f16->f32");
  auto r = testing::run_both(g, w, {random_tensor({1, 3, 6, 6}, 13)});
  ASSERT_EQ(r.vulkan.size(), 3u);
  for (size_t i = 0; i < 2; ++i) expect_close(r.vulkan[i], r.interpreter[i], 1e-3, 1e-4);
  expect_identical(r.vulkan[2], r.interpreter[2]);
}

// The weight source converts stored bf16 and f32 tensors to f16 on every core, each
// value rounded once from its exact value: for bf16 and f32 sources (an odd size,
// specials, values past f16's range and under its normals) every half is float_to_half
// of the stored value.
TEST(CodegenStorage, WeightSourceRoundsEachStoredValueToHalfOnce) {
  std::vector<float> values = random_tensor({1001}, 21, -70000.0f, 70000.0f).data;
  const float specials[] = {0.0f, -0.0f, 1e-7f, -3e-5f, 6.1e-5f, 65504.0f, 65520.0f, 1e30f,
                            std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 0.1f};
  for (size_t i = 0; i < std::size(specials); ++i) values[i * 37] = specials[i];
  for (size_t i = 500; i < 700; ++i) values[i] *= 1e-9f;  // subnormal halves
  for (const DType stored : {DType::bf16, DType::f32}) {
    SCOPED_TRACE(dtype_name(stored));
    WeightStore w;
    std::vector<uint8_t> bytes(values.size() * dtype_size(stored));
    std::vector<float> exact(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (stored == DType::bf16) {
        const uint16_t b = float_to_bf16(values[i]);
        std::memcpy(&bytes[2 * i], &b, 2);
        exact[i] = bf16_to_float(b);
      } else {
        std::memcpy(&bytes[4 * i], &values[i], 4);
        exact[i] = values[i];
      }
    }
    ASSERT_TRUE(w.add_owned_bytes("t", stored, {static_cast<int64_t>(values.size())}, bytes));
    runtime::WeightUpload up;
    up.source = "t";
    up.transform.stored = stored == DType::bf16 ? runtime::DType::bf16 : runtime::DType::f32;
    up.transform.upload = runtime::DType::f16;
    up.bytes = values.size() * 2;
    std::vector<std::byte> dst(up.bytes);
    ASSERT_TRUE(codegen::weight_source(w)(up, dst));
    size_t bad = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t got;
      std::memcpy(&got, &dst[2 * i], 2);
      const uint16_t want = float_to_half(exact[i]);
      const bool both_nan = std::isnan(exact[i]) && std::isnan(half_to_float(got));
      if (got != want && !both_nan && bad++ < 5) ADD_FAILURE() << "value " << i << " (" << exact[i] << "): " << got << " != " << want;
    }
    EXPECT_EQ(bad, 0u);
  }
}

// A chain a -> b -> c -> d of f16 values with plan_buffers-style offsets.
struct Chain {
  Graph g;
  std::vector<ValueId> v;
  Chain() {
    Builder b(g, nullptr);
    ValueId x = b.input("x", {1, 8, 4, 4});
    for (int i = 0; i < 4; ++i) {
      x = i == 0 ? b.cast(x, DType::f16) : b.silu(x);
      v.push_back(x);
    }
    b.output(b.cast(x, DType::f32));
  }
};

TEST(CodegenStorage, PlannedBuffersAreUsed) {
  Chain c;
  // 256 bytes each (128 halves); a and c share offset 0, b and d offset 256.
  for (int i = 0; i < 4; ++i) c.g.value(c.v[static_cast<size_t>(i)]).buffer = BufferAssignment{"act", i % 2 ? 256u : 0u};
  auto plan = codegen::compile_plan(c.g, WeightStore(), codegen::Target{});
  ASSERT_TRUE(plan) << plan.message();
  const runtime::BufferDesc* arena = nullptr;
  for (const auto& buf : plan->buffers)
    if (buf.name == "activations") arena = &buf;
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->size_bytes, 512u);
  auto r = testing::run_both(c.g, WeightStore(), {random_tensor({1, 8, 4, 4}, 4)});
  ASSERT_EQ(r.vulkan.size(), 1u);
  expect_close(r.vulkan[0], r.interpreter[0], 1e-3, 1e-6);

  // b and c alive together at one offset: refused, naming both.
  c.g.value(c.v[2]).buffer = BufferAssignment{"act", 256};
  auto bad = codegen::compile_plan(c.g, WeightStore(), codegen::Target{});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("%" + c.g.value(c.v[1]).name), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("%" + c.g.value(c.v[2]).name), std::string::npos) << bad.message();
}

// A graph without buffer assignments (plan_buffers did not run) is placed by the same
// memory planner: at the pass's alignment, its plan is the plan of the graph
// plan_buffers planned, offset for offset. Reshapes alias (%r, %q share %a's bytes),
// %n is written in place over %q (whose storage dies there), and the results are the
// interpreter's.
constexpr const char* kPlannerGraph = R"(graph @planner(%x: f32[1,4,8,8]) {
  %a: f32[1,4,8,8] = silu "a" (%x)
  %r: f32[4,64] = reshape "r" (%a) {shape = [4, 64]}
  %q: f32[1,4,8,8] = reshape "q" (%r) {shape = [1, 4, 8, 8]}
  %g: f32[4] = weight "g"
  %n: f32[1,4,8,8] = norm_act "n" (%q, %g) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  %b: f32[1,4,8,8] = silu "b" (%x)
  %u: f32[1,4,16,16] = upsample_nearest "u" (%n) {factors = [2, 2]}
  %v: f32[1,4,16,16] = silu "v" (%u)
  %w: f32[1,4,8,8] = add "w" (%n, %b)
  return %v, %w
}
)";

TEST(CodegenStorage, UnplannedGraphIsPlacedAsPlanBuffersPlansIt) {
  WeightStore w;
  Graph raw = testing::parse_with_weights(kPlannerGraph, w);
  codegen::Target target;
  target.min_storage_buffer_offset_alignment = kBufferAlignment;
  auto from_raw = codegen::compile_plan(raw, w, target);
  ASSERT_TRUE(from_raw) << from_raw.message();

  Graph planned = raw;
  CompileOptions options;
  PassContext ctx{options, w, {}};
  ASSERT_TRUE(run_plan_buffers(planned, ctx).is_ok());
  auto value = [&](const char* name) { return planned.value(planned.find_value(name)); };
  ASSERT_EQ(value("n").buffer, value("a").buffer);  // in place
  ASSERT_EQ(value("q").buffer, value("a").buffer);  // alias
  auto from_planned = codegen::compile_plan(planned, w, target);
  ASSERT_TRUE(from_planned) << from_planned.message();
  EXPECT_EQ(runtime::describe(*from_raw), runtime::describe(*from_planned));

  // %a (with %r, %q, %n: nodes 0-7), %b (4-7) and %u (5-6) are alive together:
  // 1 + 1 + 4 KiB.
  const runtime::BufferDesc* arena = nullptr;
  for (const auto& buf : from_raw->buffers)
    if (buf.name == "activations") arena = &buf;
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->size_bytes, 6144u);
  EXPECT_EQ(summarize_buffers(planned).arena_bytes("act"), 6144u);
  // The reshapes dispatch nothing (dispatches are labelled by node name).
  for (const auto& d : from_raw->dispatches) {
    EXPECT_NE(d.label.substr(0, d.label.find(':')), "r");
    EXPECT_NE(d.label.substr(0, d.label.find(':')), "q");
  }

  auto r = testing::run_both(raw, w, {random_tensor({1, 4, 8, 8}, 21)});
  ASSERT_EQ(r.vulkan.size(), 2u);
  for (size_t i = 0; i < 2; ++i) expect_close(r.vulkan[i], r.interpreter[i], 1e-5, 1e-5);
}

// The validation layer (synchronization validation included) sees nothing wrong in
// a plan of the fused kernels on NHWC f16 values with planned-style staging. Skipped
// where the layer is not installed.
TEST(CodegenStorage, FusedKernelsPassTheValidationLayer) {
  runtime::DeviceOptions opts;
  opts.validation = true;
  runtime::DeviceRequirements f16;
  f16.shader_float16 = f16.storage_buffer_16bit_access = true;
  auto dev = runtime::open_device(opts, f16);
  ASSERT_TRUE(dev) << dev.message();
  if (!(*dev)->instance().validation_enabled()) GTEST_SKIP() << "validation layer not installed";
  Graph g;
  WeightStore w;
  const int64_t c = 16;
  ASSERT_TRUE(w.add_owned("gamma", {c}, random_tensor({c}, 1, 0.5f, 1.5f).data));
  ASSERT_TRUE(w.add_owned("beta", {c}, random_tensor({c}, 2).data));
  ASSERT_TRUE(w.add_owned("conv", {c, 9 * c}, random_tensor({c, 9 * c}, 3, -0.1f, 0.1f).data));
  Builder b(g, &w);
  ValueId x = b.input("x", {1, c, 6, 5}, DType::f16);
  set_layout(g, x, nhwc(32));
  ValueId h = b.op(Op::norm_act, {x, b.weight("gamma"), b.weight("beta"), b.weight("beta")},
                   {{"norm", std::string("group")}, {"groups", int64_t{4}}, {"eps", 1e-6}, {"silu", int64_t{1}}});
  set_layout(g, h, nhwc(32));
  ValueId y = b.op(Op::conv_gemm, {h, b.weight("conv"), b.weight("beta"), x},
                   {{"kernel", std::vector<int64_t>{3, 3}}, {"pad", std::vector<int64_t>{1, 1}},
                    {"weight_layout", std::string("o_hwi")}});
  set_layout(g, y, nhwc(32));
  ValueId z = b.op(Op::norm_act, {y, b.weight("gamma")},
                   {{"norm", std::string("rms")}, {"eps", 1e-12}, {"dtype", std::string("f32")}});
  b.output(z);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto plan = codegen::compile_plan(g, w, codegen::target_for((*dev)->info()));
  ASSERT_TRUE(plan) << plan.message();
  auto exec = runtime::Executor::create(*dev, *plan, codegen::weight_source(w));
  ASSERT_TRUE(exec) << exec.message();
  Tensor in = random_tensor({1, c, 6, 5}, 4), out({1, c, 6, 5});
  for (int run = 0; run < 2; ++run)
    ASSERT_TRUE((*exec)->run({std::as_bytes(std::span(in.data))}, {std::as_writable_bytes(std::span(out.data))}));
  auto want = interpret(g, w, {in});
  ASSERT_TRUE(want) << want.message();
  expect_close(out, (*want)[0], 2e-3, 2e-3);
  std::vector<std::string> messages = (*dev)->instance().take_validation_messages();
  std::string all;
  for (const auto& m : messages) all += m + "\n";
  EXPECT_TRUE(messages.empty()) << all;
}

}  // namespace
}  // namespace strata

// Codegen: W8A8 linears (ir/ops.h linear {quant = "w8a8"}; codegen/lower_gemm_int8.cpp):
// the row quantizer (kernels/quantize_rows.comp) and the int8 GEMM
// (kernels/gemm_int8.comp), here through its plain-GLSL emulation on lavapipe
// (Target::tensor_cores = emulated), the same tiling and epilogue as natively.
//
// What must hold:
//   - the int8 GEMM is exact: with integer operands whose row maxima are 127 (every
//     scale is then 1, so the codes are the values and y = float(Σ x·w) exactly, the
//     sums below 2²⁴) y equals an integer reference bit for bit; tails in every dim
//     (R, N not multiples of the 32 × 32 emulated tile, K not a multiple of the 64-code
//     step), one exact tile (no bounds checks), and with steps of 32 and 128 codes on
//     another tile (kernel_defines);
//   - the quantizer rounds x / sx half to even and keeps zero rows zero: x with
//     fractional parts of exactly ½ (and scale 1) gives Σ roundEven(x)·w bit for bit;
//   - a whole quantized linear (f16 x, f16 weights stored f32, f32 bias, f16 or f32
//     y) is within f16 rounding of the interpreter's linear {quant = "w8a8"}: the same
//     codes and scales, so the only differences are the f32 epilogue's three roundings
//     against the interpreter's f64, and y's one f16 rounding;
//   - the weight is uploaded quantized: one u8 upload of N·KP codes and N scales,
//     whose bytes are codegen::pack_w8a8_rows of the f16-rounded weights;
//   - linears reading one x quantize it once, and each still gives its output;
//   - a target without int8 matrices (none, or NV cooperative matrices without the
//     s8 shape) refuses the plan with one line naming the node; the native kernel
//     (ICOOPMAT = 1) compiles.
#include "codegen/vk_test_util.h"

#include "codegen/w8a8.h"
#include "ir/builder.h"
#include "ir/quant.h"
#include "ir/types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

// linear(x[r, k], w[n, k], bias[n]?) {quant = "w8a8"} with the given values.
Built build(const Tensor& x, DType x_dtype, const Tensor& w, DType w_dtype, const Tensor* bias, DType out) {
  Built t;
  const int64_t r = x.shape[0], k = x.shape[1], n = w.shape[0];
  Builder b(t.graph, &t.weights);
  t.inputs.push_back(x);
  const ValueId xv = b.input("x", {r, k}, x_dtype);
  EXPECT_TRUE(t.weights.add_owned("w", {n, k}, std::vector<float>(w.data)));
  const ValueId wv = b.constant("w", TensorType{{n, k}, w_dtype, {}});
  ValueId bv = kNoValue;
  if (bias) {
    EXPECT_TRUE(t.weights.add_owned("b", {n}, std::vector<float>(bias->data)));
    bv = b.constant("b", TensorType{{n}, DType::f32, {}});
  }
  const ValueId y = b.op(Op::linear, {xv, wv, bv},
                         Attrs{{"dtype", std::string(out == DType::f16 ? "f16" : "f32")}, {"quant", std::string("w8a8")}});
  EXPECT_TRUE(b.ok()) << b.status().message();
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
  runtime::Plan plan;
};

Ran run(const Built& t, const codegen::Target& target, const codegen::CodegenOptions& options = {}) {
  Ran r;
  auto plan = codegen::compile_plan(t.graph, t.weights, target, options);
  EXPECT_TRUE(plan) << plan.message();
  if (!plan) return r;
  for (const auto& p : plan->pipelines) r.pipelines += p.name + "\n";
  r.plan = *plan;
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

// Integers in [−127, 127] with ±127 in every row (so every row's scale is exactly 1),
// the fraction `frac` added to the others (0 or ½: exact halves, rounded to even).
Tensor integer_rows(int64_t rows, int64_t k, uint64_t seed, float frac = 0.0f) {
  Tensor t = random_tensor({rows, k}, seed, -127.0f, 127.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i) {
      float& v = t.data[static_cast<size_t>(r * k + i)];
      v = std::trunc(v);
      if (i == (r * 7) % k) v = (r % 2) ? 127.0f : -127.0f;
      else if (frac != 0.0f && std::fabs(v) < 126.0f) v += v < 0 ? -frac : frac;
    }
  return t;
}

// Σ_k roundEven(x)·w in int64 (the codes of scale-1 rows), as f32.
Tensor integer_reference(const Tensor& x, const Tensor& w) {
  const int64_t r = x.shape[0], k = x.shape[1], n = w.shape[0];
  Tensor y({r, n});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t c = 0; c < k; ++c)
        s += static_cast<int64_t>(std::nearbyint(x.data[static_cast<size_t>(i * k + c)])) *
             static_cast<int64_t>(w.data[static_cast<size_t>(j * k + c)]);
      y.data[static_cast<size_t>(i * n + j)] = static_cast<float>(s);
    }
  return y;
}

// y = f32(Σ xq·wq) · sx · sw + bias in f64 from ir/quant.h's codes of the f16-rounded
// operands, rounded once to `out`.
Tensor host_w8a8(const Tensor& x, const Tensor& w, const Tensor& bias, DType out) {
  const int64_t r = x.shape[0], k = x.shape[1], n = w.shape[0];
  std::vector<float> xr = x.data, wr = w.data;
  for (float& v : xr) v = half_to_float(float_to_half(v));
  for (float& v : wr) v = half_to_float(float_to_half(v));
  const Int8Rows xq = quantize_rows_int8(xr.data(), r, k), wq = quantize_rows_int8(wr.data(), n, k);
  Tensor y({r, n});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int32_t acc = 0;
      for (int64_t c = 0; c < k; ++c)
        acc += int32_t(xq.q[static_cast<size_t>(i * k + c)]) * int32_t(wq.q[static_cast<size_t>(j * k + c)]);
      const double v = double(acc) * xq.scale[static_cast<size_t>(i)] * wq.scale[static_cast<size_t>(j)] +
                       bias.data[static_cast<size_t>(j)];
      const float f = static_cast<float>(v);
      y.data[static_cast<size_t>(i * n + j)] = out == DType::f16 ? half_to_float(float_to_half(f)) : f;
    }
  return y;
}

struct Dims {
  int64_t r, n, k;
};
// Partial row and column tiles (32 × 32 emulated), K off the 64-code step.
// The last is one exact tile and step (EDGE = 0); N = 38 takes y's element stores
// (VEC_Y = 0), the others its 16-byte stores.
const std::vector<Dims> kDims = {{45, 72, 200}, {33, 38, 40}, {32, 32, 64}};

TEST(CodegenW8A8, Int8GemmMatchesTheIntegerReferenceBitForBit) {
  const codegen::Target target = emulated_target();
  for (const Dims& d : kDims) {
    SCOPED_TRACE(fmt::format("x [{}, {}] · w [{}, {}]ᵀ", d.r, d.k, d.n, d.k));
    ASSERT_LT(127.0 * 127.0 * double(d.k), double(1 << 24));  // every sum is exact in f32
    const Tensor x = integer_rows(d.r, d.k, 31), w = integer_rows(d.n, d.k, 32);
    const Ran got = run(build(x, DType::f32, w, DType::f32, nullptr, DType::f32), target);
    EXPECT_NE(got.pipelines.find("quantize_rows.comp"), std::string::npos) << got.pipelines;
    EXPECT_NE(got.pipelines.find("gemm_int8.comp"), std::string::npos) << got.pipelines;
    EXPECT_NE(got.pipelines.find("ICOOPMAT=2"), std::string::npos) << got.pipelines;
    testing::expect_identical(got.y, integer_reference(x, w));
  }
  // Steps of 32 codes (KS = 1: rows of 3 uvec4s, no swizzle) and of 128 (KS = 4) over
  // K = 200 (KP = 224: the last step partly past KP, read as zeros), on a 2 × 1 tile of
  // subgroups.
  for (const char* ks : {"1", "4"}) {
    codegen::CodegenOptions options;
    options.kernel_defines["gemm_int8.comp"] = {{"KS", ks}, {"WN", "1"}};
    const Tensor x = integer_rows(45, 200, 33), w = integer_rows(72, 200, 34);
    const Ran got = run(build(x, DType::f32, w, DType::f32, nullptr, DType::f32), target, options);
    EXPECT_NE(got.pipelines.find(std::string("KS=") + ks), std::string::npos) << got.pipelines;
    testing::expect_identical(got.y, integer_reference(x, w));
  }
}

TEST(CodegenW8A8, QuantizerRoundsHalvesToEvenAndKeepsZeroRowsZero) {
  // f32 x takes the element path, f16 x (the halves are exact in f16; K % 8 == 0) the
  // 16-byte path (VEC); both decide every exact half by the correctly rounded quotient.
  const Dims d{37, 48, 72};
  Tensor x = integer_rows(d.r, d.k, 41, 0.5f);
  for (int64_t i = 0; i < d.k; ++i) x.data[static_cast<size_t>(5 * d.k + i)] = 0.0f;  // a zero row
  const Tensor w = integer_rows(d.n, d.k, 42);
  const Tensor want = integer_reference(x, w);
  for (int64_t j = 0; j < d.n; ++j) ASSERT_EQ(want.data[static_cast<size_t>(5 * d.n + j)], 0.0f);
  for (DType xt : {DType::f32, DType::f16}) {
    SCOPED_TRACE(dtype_name(xt));
    const Ran got = run(build(x, xt, w, DType::f32, nullptr, DType::f32), emulated_target());
    EXPECT_EQ(got.pipelines.find("VEC=1") != std::string::npos, xt == DType::f16) << got.pipelines;
    testing::expect_identical(got.y, want);
  }
}

TEST(CodegenW8A8, QuantizedLinearIsWithinF16RoundingOfTheInterpreter) {
  const codegen::Target target = emulated_target();
  for (const Dims& d : kDims) {
    for (DType out : {DType::f16, DType::f32}) {
      SCOPED_TRACE(fmt::format("x [{}, {}] · w [{}, {}]ᵀ + b -> {}", d.r, d.k, d.n, d.k, dtype_name(out)));
      Tensor x = random_tensor({d.r, d.k}, 51, -3.0f, 3.0f);
      x.data[3] = 40.0f;  // an outlier: its row's other codes are small
      const float bound = 1.0f / std::sqrt(float(d.k));
      const Tensor w = random_tensor({d.n, d.k}, 52, -bound, bound);
      const Tensor bias = random_tensor({d.n}, 53, -1.0f, 1.0f);
      const Built t = build(x, DType::f16, w, DType::f16, &bias, out);
      const Ran got = run(t, target);
      auto want = interpret(t.graph, t.weights, t.inputs);
      ASSERT_TRUE(want) << want.message();
      double scale = 0.0;
      for (float v : (*want)[0].data) scale = std::max(scale, double(std::fabs(v)));
      // One f16 rounding of y (2⁻¹¹ relative, doubled for a tie decided the other
      // way by the f32 epilogue), and the epilogue's f32 roundings of terms up to
      // max |y| where the bias cancels the product.
      const double rel = out == DType::f16 ? 1.0 / 1024 : 1e-6;
      testing::expect_close(got.y, (*want)[0], rel, 1e-6 * scale);
      // And against ir/quant.h's arithmetic directly (the interpreter's own inputs).
      testing::expect_close(got.y, host_w8a8(x, w, bias, out), rel, 1e-6 * scale);
    }
  }
}

TEST(CodegenW8A8, WeightIsUploadedAsInt8RowsAndScales) {
  const int64_t n = 24, k = 40;
  const Tensor x = random_tensor({5, k}, 61);
  const Tensor w = random_tensor({n, k}, 62, -0.3f, 0.3f);
  const Built t = build(x, DType::f16, w, DType::f16, nullptr, DType::f16);
  auto plan = codegen::compile_plan(t.graph, t.weights, emulated_target(), {});
  ASSERT_TRUE(plan) << plan.message();
  ASSERT_EQ(plan->weights.size(), 1u);
  const runtime::WeightUpload& up = plan->weights[0];
  EXPECT_EQ(up.transform.upload, runtime::DType::u8);
  EXPECT_EQ(runtime::describe(up.transform), "f32->f16->u8");
  const uint64_t bytes = static_cast<uint64_t>(n * 64 + 4 * n);  // K padded to 64 codes
  EXPECT_EQ(up.bytes, bytes);
  std::vector<std::byte> got(bytes);
  ASSERT_TRUE(codegen::weight_source(t.weights)(up, got).is_ok());
  std::vector<float> rounded = w.data;
  for (float& v : rounded) v = half_to_float(float_to_half(v));
  std::vector<std::byte> want(bytes);
  codegen::pack_w8a8_rows(rounded.data(), n, k, want);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0);
  // Spot checks against ir/quant.h's rule, independent of the packing.
  for (int64_t r : {0, 7, 23}) {
    float amax = 0.0f;
    for (int64_t i = 0; i < k; ++i) amax = std::max(amax, std::fabs(rounded[static_cast<size_t>(r * k + i)]));
    float s;
    std::memcpy(&s, got.data() + n * 64 + 4 * r, 4);
    EXPECT_EQ(s, amax / 127.0f);
    for (int64_t i = k; i < 64; ++i) EXPECT_EQ(got[static_cast<size_t>(r * 64 + i)], std::byte{0});
  }
}

TEST(CodegenW8A8, TargetsWithoutInt8MatricesRefuseThePlan) {
  const Tensor x = random_tensor({5, 32}, 71);
  const Tensor w = random_tensor({8, 32}, 72);
  const Built t = build(x, DType::f16, w, DType::f16, nullptr, DType::f16);
  codegen::Target none = emulated_target();
  none.tensor_cores = codegen::TensorCores::none;
  codegen::Target no_int8 = none;
  no_int8.tensor_cores = codegen::TensorCores::nv_coopmat;
  no_int8.subgroup_size = 32;
  for (const codegen::Target& target : {none, no_int8}) {
    auto plan = codegen::compile_plan(t.graph, t.weights, target, {});
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.message().find("(linear)"), std::string::npos) << plan.message();
    EXPECT_NE(plan.message().find("needs int8 cooperative matrices"), std::string::npos) << plan.message();
    EXPECT_EQ(plan.message().find('\n'), std::string::npos) << plan.message();
  }
}

TEST(CodegenW8A8, NativeKernelCompiles) {
  // Compiled by shaderc only (lavapipe has no cooperative matrices): the native
  // variant's GLSL, its requirements and its 128 × 128 tile (2 × 2 subgroups of 4 × 4
  // fragments, 64 codes a step).
  const Tensor x = random_tensor({200, 96}, 81);
  const Tensor w = random_tensor({136, 96}, 82);
  const Tensor bias = random_tensor({136}, 83);
  const Built t = build(x, DType::f16, w, DType::f16, &bias, DType::f16);
  codegen::Target nv = emulated_target();
  nv.tensor_cores = codegen::TensorCores::nv_coopmat;
  nv.int8_coopmat = true;
  nv.subgroup_size = 32;
  nv.max_shared_memory_bytes = 48 << 10;
  auto plan = codegen::compile_plan(t.graph, t.weights, nv, {});
  ASSERT_TRUE(plan) << plan.message();
  std::string pipelines;
  for (const auto& p : plan->pipelines) pipelines += p.name + "\n";
  for (const char* define : {"ICOOPMAT=1", "WN=2", "FM=4", "FN=4", "KS=2", "quantize_rows.comp"})
    EXPECT_NE(pipelines.find(define), std::string::npos) << define << " in\n" << pipelines;
  const auto& shapes = plan->requirements.cooperative_matrix_shapes;
  EXPECT_NE(std::find(shapes.begin(), shapes.end(), codegen::kCoopShapeS8), shapes.end());
  EXPECT_TRUE(plan->requirements.cooperative_matrix_nv);
  EXPECT_EQ(plan->requirements.min_subgroup_size, 32u);
}

// Two W8A8 linears reading one x (as q, k and v do) quantize it once: one quantizer
// dispatch, and both outputs within f16 rounding of the interpreter's.
TEST(CodegenW8A8, LinearsReadingOneXQuantizeItOnce) {
  const int64_t r = 37, k = 72, n1 = 40, n2 = 24;
  Built t;
  Builder b(t.graph, &t.weights);
  t.inputs.push_back(random_tensor({r, k}, 101, -2.0f, 2.0f));
  const ValueId xv = b.input("x", {r, k}, DType::f16);
  const Tensor w1 = random_tensor({n1, k}, 102, -0.2f, 0.2f), w2 = random_tensor({n2, k}, 103, -0.2f, 0.2f);
  ASSERT_TRUE(t.weights.add_owned("w1", {n1, k}, std::vector<float>(w1.data)));
  ASSERT_TRUE(t.weights.add_owned("w2", {n2, k}, std::vector<float>(w2.data)));
  const Attrs attrs{{"dtype", std::string("f32")}, {"quant", std::string("w8a8")}};
  const ValueId y1 = b.op(Op::linear, {xv, b.constant("w1", TensorType{{n1, k}, DType::f16, {}})}, attrs);
  const ValueId y2 = b.op(Op::linear, {xv, b.constant("w2", TensorType{{n2, k}, DType::f16, {}})}, attrs);
  ASSERT_TRUE(b.ok()) << b.status().message();
  b.output(y1);
  b.output(y2);
  auto plan = codegen::compile_plan(t.graph, t.weights, emulated_target(), {});
  ASSERT_TRUE(plan) << plan.message();
  int quantizers = 0, gemms = 0;
  for (const runtime::DispatchDesc& d : plan->dispatches) {
    const std::string& name = plan->pipelines[d.pipeline].name;
    quantizers += name.find("quantize_rows.comp") != std::string::npos;
    gemms += name.find("gemm_int8.comp") != std::string::npos;
  }
  EXPECT_EQ(quantizers, 1);
  EXPECT_EQ(gemms, 2);
  auto device = testing::test_device_for(plan->requirements);
  ASSERT_TRUE(device) << device.message();
  auto exec = runtime::Executor::create(*device, std::move(*plan), codegen::weight_source(t.weights));
  ASSERT_TRUE(exec) << exec.message();
  Tensor got1({r, n1}), got2({r, n2});
  ASSERT_TRUE((*exec)->run({std::as_bytes(std::span(t.inputs[0].data))},
                           {std::as_writable_bytes(std::span(got1.data)), std::as_writable_bytes(std::span(got2.data))}));
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  testing::expect_close(got1, (*want)[0], 1e-6, 1e-6);
  testing::expect_close(got2, (*want)[1], 1e-6, 1e-6);
}

TEST(CodegenW8A8, ValidationLayerIsSilent) {
  // The quantizer's scratch written and read by the GEMM, the u8 weight upload, f16
  // storage: nothing the validation layer objects to.
  runtime::DeviceOptions opts;
  opts.validation = true;
  runtime::DeviceRequirements f16;
  f16.shader_float16 = f16.storage_buffer_16bit_access = true;
  auto dev = runtime::open_device(opts, f16);
  ASSERT_TRUE(dev) << dev.message();
  if (!(*dev)->instance().validation_enabled()) GTEST_SKIP() << "validation layer not installed";
  const Tensor x = random_tensor({33, 40}, 91), w = random_tensor({40, 40}, 92), bias = random_tensor({40}, 93);
  const Built t = build(x, DType::f16, w, DType::f16, &bias, DType::f16);
  codegen::Target target = codegen::target_for((*dev)->info());
  target.tensor_cores = codegen::TensorCores::emulated;
  auto plan = codegen::compile_plan(t.graph, t.weights, target);
  ASSERT_TRUE(plan) << plan.message();
  ASSERT_LE(plan->requirements.min_subgroup_size, (*dev)->info().subgroup_size);
  auto exec = runtime::Executor::create(*dev, *plan, codegen::weight_source(t.weights));
  ASSERT_TRUE(exec) << exec.message();
  Tensor y({33, 40});
  for (int run = 0; run < 2; ++run)
    ASSERT_TRUE((*exec)->run({std::as_bytes(std::span(x.data))}, {std::as_writable_bytes(std::span(y.data))}));
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  testing::expect_close(y, (*want)[0], 1.0 / 1024, 1e-5);
  std::string all;
  for (const auto& m : (*dev)->instance().take_validation_messages()) all += m + "\n";
  EXPECT_TRUE(all.empty()) << all;
}

}  // namespace
}  // namespace strata

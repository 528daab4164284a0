// Codegen: attention on the tensor-core kernel (kernels/attention_coop.comp), run on
// the test device through coopmat.glsl's plain-GLSL emulation (TensorCores::emulated)
// and compared with the interpreter (f64 softmax): token counts that are and are not
// multiples of the tiles, several heads, Tq != Tk, Dv != D, head dims 64 and 512,
// scores large enough that the running max changes block after block (the rescale of
// the accumulators), query chunks. Also: which kernel the lowering picks (tensor cores
// or not, f16 or not, key windows), and that the native variant (GL_NV_cooperative_
// matrix, subgroup 32) compiles to valid SPIR-V for an H200-like target.
#include "codegen/vk_test_util.h"

#include "codegen/codegen.h"
#include "codegen/shader_compiler.h"
#include "ir/builder.h"
#include "ir/interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace strata {
namespace {

struct Attn {
  Graph graph;
  WeightStore weights;
  Builder b{graph, &weights};
  std::vector<Tensor> inputs;
  double v_peak = 0;  // max |v|

  ValueId input(const std::string& name, Tensor t, DType dtype) {
    Shape shape = t.shape;
    inputs.push_back(std::move(t));
    return b.input(name, std::move(shape), dtype);
  }
};

// Uniform in [-1, 1) times `scale`; with `integers`, rounded to whole numbers (exact
// in f16, and their dot products exact in f32).
Tensor random_input(Shape shape, uint32_t seed, float scale = 1.0f, bool integers = false) {
  Tensor t = testing::random_tensor(std::move(shape), seed, -1.0f, 1.0f);
  for (float& v : t.data) v = integers ? std::round(v * scale) : v * scale;
  return t;
}

void build(Attn& t, Shape qs, Shape ks, Shape vs, uint32_t seed, DType dtype = DType::f16) {
  const double scale = 1.0 / std::sqrt(double(qs.back()));
  ValueId q = t.input("q", random_input(std::move(qs), seed), dtype);
  ValueId k = t.input("k", random_input(std::move(ks), seed + 1), dtype);
  Tensor vt = random_input(std::move(vs), seed + 2);
  for (float x : vt.data) t.v_peak = std::max(t.v_peak, double(std::fabs(x)));
  ValueId v = t.input("v", std::move(vt), dtype);
  t.b.output(t.b.attention(q, k, v, scale));
}

// The test device's target, with `tensor_cores`.
codegen::Target device_target(codegen::TensorCores tensor_cores) {
  auto device = testing::test_device();
  EXPECT_TRUE(device) << device.message();
  codegen::Target target = device ? codegen::target_for((*device)->info()) : codegen::Target{};
  target.tensor_cores = tensor_cores;
  return target;
}

// The test device, opened with cooperative matrices for plans that use them.
Expected<std::shared_ptr<runtime::Device>> device_for(const runtime::DeviceRequirements& needs) {
  if (!needs.cooperative_matrix_nv) return testing::test_device_for(needs);
  static Expected<std::shared_ptr<runtime::Device>> device = runtime::open_device({}, needs);
  return device;
}

// The names of the plan's pipelines that run attention.
std::vector<std::string> attention_kernels(const runtime::Plan& plan) {
  std::vector<std::string> names;
  for (const auto& p : plan.pipelines)
    if (p.name.rfind("attention", 0) == 0) names.push_back(p.name);
  return names;
}

bool uses(const runtime::Plan& plan, const std::string& file) {
  const std::vector<std::string> names = attention_kernels(plan);
  return !names.empty() && std::all_of(names.begin(), names.end(), [&](const std::string& n) {
    return n.rfind(file + "[", 0) == 0;
  });
}

// Compiles for `target`, checks the attention kernel is `file`, runs on the test device
// and compares with the interpreter.
//
// Tolerance (f16 q, k, v, out): scores are f32 sums of exact f16 products, and the
// softmax is f32 (exp_precise); what costs accuracy is P rounded to f16 for P·V and
// the f16 output. Every weight p_j / l then has a relative error of at most 2u
// (u = 2^-11: p_j rounded, and l sums the rounded p), which moves the output by at
// most 2u · max |v|; the f16 output adds u · |out| <= u · max |v|. So
// max |Δ| <= 3u · max |v| ≈ 1.5e-3 · max |v|; we allow 2e-3 · max |v| for the f32
// sums. (The portable kernel, with an f32 P, stays within u · |out| of the oracle.)
void expect_matches(Attn& t, const std::string& what, const codegen::Target& target,
                    const std::string& file = "attention_coop.comp", const codegen::CodegenOptions& options = {},
                    size_t expect_dispatches = 0) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(t.b.ok()) << t.b.status().message();
  auto plan = codegen::compile_plan(t.graph, t.weights, target, options);
  ASSERT_TRUE(plan.has_value()) << plan.message();
  std::string names;
  for (const std::string& n : attention_kernels(*plan)) names += n + " ";
  EXPECT_TRUE(uses(*plan, file)) << "attention kernels: " << names;
  if (expect_dispatches) {
    size_t n = 0;
    for (const auto& d : plan->dispatches) n += plan->pipelines[d.pipeline].name.rfind("attention", 0) == 0;
    EXPECT_EQ(n, expect_dispatches);
  }
  auto device = device_for(plan->requirements);
  ASSERT_TRUE(device.has_value()) << device.message();
  auto exec = runtime::Executor::create(*device, std::move(*plan), codegen::weight_source(t.weights));
  ASSERT_TRUE(exec.has_value()) << exec.message();
  std::vector<Tensor> got;
  for (ValueId v : t.graph.outputs()) got.emplace_back(t.graph.value(v).type.shape);
  std::vector<std::span<const std::byte>> in;
  for (const Tensor& x : t.inputs) in.push_back(std::as_bytes(std::span(x.data)));
  std::vector<std::span<std::byte>> out;
  for (Tensor& y : got) out.push_back(std::as_writable_bytes(std::span(y.data)));
  Status s = (*exec)->run(in, out);
  ASSERT_TRUE(s.is_ok()) << s.message();

  InterpretOptions io;
  io.threads = 2;
  auto want = interpret(t.graph, t.weights, t.inputs, io);
  ASSERT_TRUE(want.has_value()) << want.message();
  ASSERT_EQ(got.size(), 1u);
  double peak = 0;
  for (float x : want->front().data) peak = std::max(peak, double(std::fabs(x)));
  const double diff = max_abs_diff(got.front(), want->front());
  EXPECT_LE(diff, 2e-3 * t.v_peak) << "max |Δ| " << diff << ", max |out| " << peak;
  EXPECT_GT(peak, 0.0);
}

std::string describe(const Shape& q, const Shape& k, const Shape& v) {
  return fmt::format("attention q{} k{} v{}", shape_str(q), shape_str(k), shape_str(v));
}

TEST(CodegenAttentionCoop, MatchesInterpreter) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  struct Case {
    Shape q, k, v;
  };
  const Case cases[] = {
      {{16, 64}, {16, 64}, {16, 64}},                // one row tile, one key tile
      {{40, 64}, {40, 64}, {40, 64}},                // neither a multiple of the row nor the key block
      {{1, 100, 64}, {1, 100, 64}, {1, 100, 64}},    // several key blocks, a partial last one
      {{2, 77, 64}, {2, 77, 64}, {2, 77, 64}},       // two heads in one dispatch
      {{2, 3, 20, 16}, {2, 3, 20, 16}, {2, 3, 20, 16}},  // multi-dim heads, D = 16 (one subgroup)
      {{1, 50, 32}, {1, 130, 32}, {1, 130, 48}},     // Tq != Tk, Dv != D (3 subgroups)
      {{3, 1, 80}, {3, 37, 80}, {3, 37, 16}},        // one query, D = 80 (D chunks of 80)
  };
  uint32_t seed = 101;
  for (const auto& c : cases) {
    Attn t;
    build(t, c.q, c.k, c.v, seed += 3);
    expect_matches(t, describe(c.q, c.k, c.v), target);
  }
}

// D = Dv = 512, the Flux decoder's head dim: 16 and 40 tokens (the emulation is slow).
TEST(CodegenAttentionCoop, WideHead) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  for (int64_t tokens : {16, 40}) {
    Attn t;
    build(t, {1, tokens, 512}, {1, tokens, 512}, {1, tokens, 512}, 200 + uint32_t(tokens));
    expect_matches(t, fmt::format("D 512, {} tokens", tokens), target);
  }
}

// Scores rising along the keys, so the running max changes key block after key
// block and the accumulators are rescaled each time: integer q, k of magnitude up to
// 12 give scores in the hundreds (exp without the max subtracted would overflow, and
// every rescale factor is ~0); q, k up to 2 give scores of a few units (rescale
// factors between 0 and 1, so an accumulator element rescaled with another row's
// factor shows).
TEST(CodegenAttentionCoop, RisingScoresRescale) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  struct Case {
    float magnitude;
    bool integers;
    double scale;
  };
  for (const Case& c : {Case{12.0f, true, 0.5}, Case{2.0f, false, 0.25}}) {
    Attn t;
    const int64_t tq = 37, tk = 200, d = 64;
    Tensor q = random_input({1, tq, d}, 5, c.magnitude, c.integers);
    Tensor k = random_input({1, tk, d}, 6, c.magnitude, c.integers);
    for (int64_t j = 0; j < tk; ++j)  // key j scaled by 1 + j / 50 (whole numbers)
      for (int64_t i = 0; i < d; ++i) {
        float& x = k.data[size_t(j * d + i)];
        x = c.integers ? std::round(x * float(1 + j / 50)) : x * float(1 + j / 50);
      }
    ValueId qv = t.input("q", std::move(q), DType::f16);
    ValueId kv = t.input("k", std::move(k), DType::f16);
    Tensor v = random_input({1, tk, d}, 7);
    for (float x : v.data) t.v_peak = std::max(t.v_peak, double(std::fabs(x)));
    ValueId vv = t.input("v", std::move(v), DType::f16);
    t.b.output(t.b.attention(qv, kv, vv, c.scale));
    expect_matches(t, fmt::format("q, k up to {}", c.magnitude), target);
  }
}

// A target with little shared memory gets smaller tiles (BR = BC = 16 here, with two
// invocations per row in the softmax update), still on the tensor-core kernel.
TEST(CodegenAttentionCoop, SmallTiles) {
  codegen::Target target = device_target(codegen::TensorCores::emulated);
  target.max_shared_memory_bytes = 8 << 10;
  for (int64_t tokens : {40, 100}) {
    Attn t;
    build(t, {2, tokens, 64}, {2, tokens, 64}, {2, tokens, 64}, 600 + uint32_t(tokens));
    ASSERT_TRUE(t.b.ok());
    auto plan = codegen::compile_plan(t.graph, t.weights, target);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    ASSERT_TRUE(uses(*plan, "attention_coop.comp"));
    const std::string name = attention_kernels(*plan).front();
    EXPECT_NE(name.find("BR=16"), std::string::npos) << name;
    EXPECT_NE(name.find("BC=16"), std::string::npos) << name;
    if (!HasFailure()) expect_matches(t, fmt::format("{} tokens, 8 KiB shared memory", tokens), target);
  }
}

// Query chunks (attention_query_chunk) stay on the tensor-core kernel.
TEST(CodegenAttentionCoop, QueryChunks) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  Attn t;
  build(t, {3, 70, 32}, {3, 90, 32}, {3, 90, 48}, 21);
  codegen::CodegenOptions options;
  options.attention_query_chunk = 33;
  expect_matches(t, "query chunk 33", target, "attention_coop.comp", options, 9);  // 3 heads × 3 chunks
}

// The portable kernel runs when the target has no tensor cores, when the operands are
// f32, when the head dim is not a multiple of 16, and when keys need windows.
TEST(CodegenAttentionCoop, PortableFallbacks) {
  {
    Attn t;
    build(t, {1, 40, 64}, {1, 40, 64}, {1, 40, 64}, 31);
    expect_matches(t, "no tensor cores", device_target(codegen::TensorCores::none), "attention.comp");
  }
  {
    Attn t;
    build(t, {1, 40, 64}, {1, 40, 64}, {1, 40, 64}, 32, DType::f32);
    expect_matches(t, "f32 operands", device_target(codegen::TensorCores::emulated), "attention.comp");
  }
  {
    Attn t;
    build(t, {1, 40, 24}, {1, 40, 24}, {1, 40, 24}, 33);
    expect_matches(t, "D 24", device_target(codegen::TensorCores::emulated), "attention.comp");
  }
  {
    Attn t;
    build(t, {1, 20, 64}, {1, 300, 64}, {1, 300, 64}, 34);
    codegen::Target target = device_target(codegen::TensorCores::emulated);
    target.max_storage_buffer_range = 16 << 10;  // k is 76.8 KB (f32 sizing): key windows
    expect_matches(t, "key windows", target, "attention.comp");
  }
}

// The native variant for an H200-like target (subgroup 32, 48 KiB shared memory, 4 GiB
// bindings): compile_plan picks attention_coop.comp with COOPMAT=1, tiles that fit
// the shared memory, and glslang compiles it to SPIR-V the validator accepts. (It can
// only run on a device with VK_NV_cooperative_matrix.)
TEST(CodegenAttentionCoop, NativeVariantCompiles) {
  codegen::Target h200;
  h200.subgroup_size = 32;
  h200.max_shared_memory_bytes = 48 << 10;
  h200.max_storage_buffer_range = 4ull << 30;
  h200.min_storage_buffer_offset_alignment = 16;
  h200.max_workgroup_count_x = 1u << 31;
  h200.max_push_constants_bytes = 256;
  h200.tensor_cores = codegen::TensorCores::nv_coopmat;
  for (int64_t d : {512, 384, 64}) {
    SCOPED_TRACE("D " + std::to_string(d));
    Attn t;
    build(t, {1, 100, d}, {1, 100, d}, {1, 100, d}, 300);
    ASSERT_TRUE(t.b.ok());
    auto plan = codegen::compile_plan(t.graph, t.weights, h200);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    ASSERT_TRUE(uses(*plan, "attention_coop.comp"));
    EXPECT_TRUE(plan->requirements.cooperative_matrix_nv);
    EXPECT_EQ(plan->requirements.min_subgroup_size, 32u);
    for (const auto& p : plan->pipelines) {
      if (p.name.rfind("attention_coop.comp", 0) != 0) continue;
      EXPECT_NE(p.name.find("COOPMAT=1"), std::string::npos) << p.name;
      EXPECT_NE(p.name.find("CM_SG=32"), std::string::npos) << p.name;
      if (d == 512) {
        EXPECT_NE(p.name.find("BR=64"), std::string::npos) << p.name;
      }
      Status valid = codegen::validate_spirv(p.spirv);
      EXPECT_TRUE(valid.is_ok()) << p.name << ": " << valid.message();
    }
  }
  // And straight through the shader compiler.
  const codegen::Defines defines = {{"D", "512"},        {"DV", "512"},     {"BR", "64"},      {"BC", "32"},
                                    {"DC", "128"},       {"WG", "256"},     {"CM_SG", "32"},   {"COOPMAT", "1"},
                                    {"O_T", "float16_t"}, {"F16", "1"},     {"ROUND", "ROUND_F16"}};
  auto spirv = codegen::compile_kernel("attention_coop.comp", defines);
  ASSERT_TRUE(spirv.has_value()) << spirv.message();
  Status valid = codegen::validate_spirv(*spirv);
  EXPECT_TRUE(valid.is_ok()) << valid.message();
  // The variants NativeThroughput times (tiles; PF, SPLIT, VEC), at D = 512 and 384.
  const codegen::Defines variants[] = {
      {{"BC", "64"}, {"VC", "16"}, {"DC", "64"}},
      {{"BC", "32"}, {"VC", "32"}, {"DC", "64"}},
      {{"BC", "32"}, {"VC", "16"}, {"DC", "128"}},
      {{"PF", "0"}},
      {{"SPLIT", "1"}},
      {{"VEC", "0"}},
      {{"BC", "64"}, {"VC", "16"}, {"DC", "64"}, {"PF", "0"}},
  };
  for (const char* d : {"512", "384"}) {
    for (const auto& over : variants) {
      codegen::Defines v = defines;
      v["D"] = v["DV"] = d;
      for (const auto& [name, value] : over) v[name] = value;
      const std::string name = codegen::kernel_variant_name("attention_coop.comp", v);
      auto words = codegen::compile_kernel("attention_coop.comp", v);
      ASSERT_TRUE(words.has_value()) << name << ": " << words.message();
      Status ok = codegen::validate_spirv(*words);
      EXPECT_TRUE(ok.is_ok()) << name << ": " << ok.message();
    }
  }
}

// On a device with GL_NV_cooperative_matrix (target_for picks nv_coopmat; skipped
// elsewhere, e.g. on lavapipe): the native kernel against the interpreter.
TEST(CodegenAttentionCoop, NativeMatchesInterpreter) {
  const codegen::Target target = device_target(codegen::TensorCores::none);
  auto device = testing::test_device();
  ASSERT_TRUE(device.has_value()) << device.message();
  if (codegen::target_for((*device)->info()).tensor_cores != codegen::TensorCores::nv_coopmat)
    GTEST_SKIP() << "the test device has no GL_NV_cooperative_matrix";
  codegen::Target native = target;
  native.tensor_cores = codegen::TensorCores::nv_coopmat;
  struct Case {
    Shape q, k, v;
  };
  const Case cases[] = {
      {{40, 64}, {40, 64}, {40, 64}},
      {{2, 77, 64}, {2, 77, 64}, {2, 77, 64}},
      {{1, 50, 32}, {1, 130, 32}, {1, 130, 48}},
      {{1, 300, 512}, {1, 300, 512}, {1, 300, 512}},
      {{1, 260, 384}, {1, 260, 384}, {1, 260, 384}},
  };
  uint32_t seed = 401;
  for (const auto& c : cases) {
    Attn t;
    build(t, c.q, c.k, c.v, seed += 3);
    expect_matches(t, describe(c.q, c.k, c.v) + " (native)", native);
  }
}

// "file[A=1,B=2]" (kernel_variant_name) -> its defines.
codegen::Defines defines_of(const std::string& name) {
  codegen::Defines d;
  const size_t open = name.find('['), close = name.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return d;
  const std::string list = name.substr(open + 1, close - open - 1);
  for (size_t at = 0; at < list.size();) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(at, comma - at);
    const size_t eq = item.find('=');
    if (eq != std::string::npos) d[item.substr(0, eq)] = item.substr(eq + 1);
    at = comma + 1;
  }
  return d;
}

// Exact attention (f64) of the query rows `rows` of a one-head problem whose q, k, v
// are rounded to f16 as the device sees them; out[r·DV + c].
std::vector<double> reference_rows(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<int64_t>& rows,
                                   int64_t tk, int64_t d, int64_t dv, double scale) {
  auto h = [](float x) { return double(half_to_float(float_to_half(x))); };
  std::vector<double> kh(k.data.size()), vh(v.data.size());
  for (size_t i = 0; i < kh.size(); ++i) kh[i] = h(k.data[i]);
  for (size_t i = 0; i < vh.size(); ++i) vh[i] = h(v.data[i]);
  std::vector<double> out(rows.size() * static_cast<size_t>(dv), 0.0);
  std::vector<double> s(static_cast<size_t>(tk)), qr(static_cast<size_t>(d));
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    for (int64_t c = 0; c < d; ++c) qr[size_t(c)] = h(q.data[size_t(rows[ri] * d + c)]);
    double m = -1e300;
    for (int64_t j = 0; j < tk; ++j) {
      double acc = 0;
      const double* kr = &kh[size_t(j * d)];
      for (int64_t c = 0; c < d; ++c) acc += qr[size_t(c)] * kr[c];
      s[size_t(j)] = acc * scale;
      m = std::max(m, s[size_t(j)]);
    }
    double l = 0;
    double* o = &out[ri * size_t(dv)];
    for (int64_t j = 0; j < tk; ++j) {
      const double p = std::exp(s[size_t(j)] - m);
      l += p;
      const double* vr = &vh[size_t(j * dv)];
      for (int64_t c = 0; c < dv; ++c) o[c] += p * vr[c];
    }
    for (int64_t c = 0; c < dv; ++c) o[c] /= l;
  }
  return out;
}

// On a device with GL_NV_cooperative_matrix: the decoders' mid-block attention at
// 1024² (16 384 tokens; D = 512 Flux, 384 Qwen-Image) and at 2048² (65 536 tokens,
// D = 512), timed with the profiler and reported as TFLOP/s (4·T²·D per head); prints
// only, no threshold. Besides the lowering's choice it times kernel variants (tile
// shapes and attention_coop.comp's PF / SPLIT / VEC switches), swapped into the same
// plan: one line per variant, each checked against an f64 reference on sampled
// query rows (a wrong variant fails the test). Run on the H200 to pick the default
// (coop_tiles' kShapes in codegen/lower_attention.cpp, the kernel's PF / SPLIT / VEC
// defaults).
TEST(CodegenAttentionCoop, NativeThroughput) {
  auto device = testing::test_device();
  ASSERT_TRUE(device.has_value()) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  if (target.tensor_cores != codegen::TensorCores::nv_coopmat)
    GTEST_SKIP() << "the test device has no GL_NV_cooperative_matrix";
  struct Variant {
    const char* label;
    codegen::Defines set;  // over the lowering's defines ({}: the lowering's kernel)
  };
  const std::vector<Variant> variants = {
      {"lowering", {}},
      {"64x32 vc32 dc128", {{"BR", "64"}, {"BC", "32"}, {"VC", "32"}, {"DC", "128"}, {"PF", "1"}, {"SPLIT", "2"}, {"VEC", "1"}}},
      {"64x64 vc16 dc64", {{"BR", "64"}, {"BC", "64"}, {"VC", "16"}, {"DC", "64"}, {"PF", "1"}, {"SPLIT", "2"}, {"VEC", "1"}}},
      {"64x32 vc32 dc64", {{"BR", "64"}, {"BC", "32"}, {"VC", "32"}, {"DC", "64"}, {"PF", "1"}, {"SPLIT", "2"}, {"VEC", "1"}}},
      {"64x32 vc16 dc128", {{"BR", "64"}, {"BC", "32"}, {"VC", "16"}, {"DC", "128"}, {"PF", "1"}, {"SPLIT", "2"}, {"VEC", "1"}}},
      {"64x32 vc32 dc128 PF0", {{"BR", "64"}, {"BC", "32"}, {"VC", "32"}, {"DC", "128"}, {"PF", "0"}, {"SPLIT", "2"}, {"VEC", "1"}}},
      {"64x32 vc32 dc128 SPLIT1", {{"BR", "64"}, {"BC", "32"}, {"VC", "32"}, {"DC", "128"}, {"PF", "1"}, {"SPLIT", "1"}, {"VEC", "1"}}},
      {"64x32 vc32 dc128 VEC0", {{"BR", "64"}, {"BC", "32"}, {"VC", "32"}, {"DC", "128"}, {"PF", "1"}, {"SPLIT", "2"}, {"VEC", "0"}}},
      {"64x64 vc16 dc64 PF0", {{"BR", "64"}, {"BC", "64"}, {"VC", "16"}, {"DC", "64"}, {"PF", "0"}, {"SPLIT", "2"}, {"VEC", "1"}}},
  };
  struct Config {
    int64_t tokens, d;
  };
  for (const Config& cfg : {Config{16384, 512}, Config{16384, 384}, Config{65536, 512}}) {
    const int64_t tokens = cfg.tokens, d = cfg.d;
    SCOPED_TRACE(fmt::format("T {} D {}", tokens, d));
    Attn t;
    build(t, {1, tokens, d}, {1, tokens, d}, {1, tokens, d}, 500);
    ASSERT_TRUE(t.b.ok());
    codegen::CodegenOptions options;
    options.profile = true;
    auto plan = codegen::compile_plan(t.graph, t.weights, target, options);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    ASSERT_TRUE(uses(*plan, "attention_coop.comp"));
    std::vector<size_t> attention_dispatches;
    for (size_t i = 0; i < plan->dispatches.size(); ++i)
      if (plan->pipelines[plan->dispatches[i].pipeline].name.rfind("attention", 0) == 0)
        attention_dispatches.push_back(i);
    ASSERT_FALSE(attention_dispatches.empty());
    const uint32_t pipe = plan->dispatches[attention_dispatches.front()].pipeline;
    const codegen::Defines base = defines_of(plan->pipelines[pipe].name);

    // The reference: 12 query rows spread over the head (first and last included).
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < 12; ++i) rows.push_back(i * (tokens - 1) / 11);
    const std::vector<double> want = reference_rows(t.inputs[0], t.inputs[1], t.inputs[2], rows, tokens, d, d,
                                                    1.0 / std::sqrt(double(d)));

    auto dev = device_for(plan->requirements);
    ASSERT_TRUE(dev.has_value()) << dev.message();
    std::vector<std::span<const std::byte>> in;
    for (const Tensor& x : t.inputs) in.push_back(std::as_bytes(std::span(x.data)));
    for (const Variant& variant : variants) {
      runtime::Plan p = *plan;
      codegen::Defines defines = base;
      for (const auto& [name, value] : variant.set) defines[name] = value;
      if (!variant.set.empty()) {
        auto spirv = codegen::compile_kernel("attention_coop.comp", defines);
        ASSERT_TRUE(spirv.has_value()) << variant.label << ": " << spirv.message();
        const uint32_t wg = uint32_t(std::stoul(defines.at("WG"))), br = uint32_t(std::stoul(defines.at("BR")));
        p.pipelines[pipe].spirv = std::move(*spirv);
        p.pipelines[pipe].name = codegen::kernel_variant_name("attention_coop.comp", defines);
        p.pipelines[pipe].workgroup_size = {wg, 1, 1};
        for (size_t i : attention_dispatches) {
          auto& dd = p.dispatches[i];
          ASSERT_EQ(dd.pipeline, pipe);
          uint32_t heads = 0, nrows = 0;
          std::memcpy(&heads, dd.push_constants.data(), 4);
          std::memcpy(&nrows, dd.push_constants.data() + 4, 4);
          const uint64_t groups = uint64_t(heads) * ((nrows + br - 1) / br);
          const uint64_t max_x = std::max<uint32_t>(1, target.max_workgroup_count_x);
          dd.grid = groups <= max_x ? std::array<uint32_t, 3>{uint32_t(groups), 1, 1}
                                    : std::array<uint32_t, 3>{uint32_t(max_x), uint32_t((groups + max_x - 1) / max_x), 1};
        }
      }
      const std::string kernel = p.pipelines[pipe].name;
      runtime::ExecutorOptions eo;
      eo.profile = true;
      auto exec = runtime::Executor::create(*dev, std::move(p), codegen::weight_source(t.weights), eo);
      ASSERT_TRUE(exec.has_value()) << variant.label << ": " << exec.message();
      std::vector<Tensor> got;
      for (ValueId v : t.graph.outputs()) got.emplace_back(t.graph.value(v).type.shape);
      std::vector<std::span<std::byte>> out;
      for (Tensor& y : got) out.push_back(std::as_writable_bytes(std::span(y.data)));
      double best_us = 1e30;
      for (int rep = 0; rep < 4; ++rep) {
        Status s = (*exec)->run(in, out);
        ASSERT_TRUE(s.is_ok()) << variant.label << ": " << s.message();
        double us = 0;
        for (size_t i : attention_dispatches) us += (*exec)->last_profile().dispatch_us.at(i);
        best_us = std::min(best_us, us);
      }
      double diff = 0;
      bool finite = true;
      for (float x : got.front().data) finite = finite && std::isfinite(x);
      for (size_t ri = 0; ri < rows.size(); ++ri)
        for (int64_t c = 0; c < d; ++c)
          diff = std::max(diff, std::fabs(double(got.front().data[size_t(rows[ri] * d + c)]) - want[ri * size_t(d) + size_t(c)]));
      const double tflops = 4.0 * double(tokens) * double(tokens) * double(d) / (best_us * 1e-6) / 1e12;
      std::printf("attention_coop T=%lld D=%lld %-26s %9.1f us %6.1f TFLOP/s  max|err| %.2e%s  (%s)\n",
                  static_cast<long long>(tokens), static_cast<long long>(d), variant.label, best_us, tflops, diff,
                  diff <= 2e-3 * t.v_peak && finite ? "" : " WRONG", kernel.c_str());
      std::fflush(stdout);
      if (variant.set.empty())
        RecordProperty(fmt::format("tflops_t{}_d{}", tokens, d), std::to_string(tflops));
      EXPECT_TRUE(finite) << variant.label;
      EXPECT_LE(diff, 2e-3 * t.v_peak) << variant.label;
    }
  }
}

}  // namespace
}  // namespace strata

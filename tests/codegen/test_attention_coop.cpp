// Codegen: attention on the tensor-core kernels (kernels/attention_coop.comp and
// attention_coop_dsplit.comp), run on the test device through coopmat.glsl's
// plain-GLSL emulation (TensorCores::emulated)
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
#include <map>
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

// An H200-like target (subgroup 32, 48 KiB shared memory, 4 GiB bindings,
// GL_NV_cooperative_matrix), for compiling the native variants.
codegen::Target h200_target() {
  codegen::Target h200;
  h200.subgroup_size = 32;
  h200.max_shared_memory_bytes = 48 << 10;
  h200.max_storage_buffer_range = 4ull << 30;
  h200.min_storage_buffer_offset_alignment = 16;
  h200.max_workgroup_count_x = 1u << 31;
  h200.max_push_constants_bytes = 256;
  h200.tensor_cores = codegen::TensorCores::nv_coopmat;
  return h200;
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
// Expecting attention_coop.comp turns attention_dsplit off (the dsplit kernel takes
// every shape with a block of 32 query rows otherwise).
void expect_matches(Attn& t, const std::string& what, const codegen::Target& target,
                    const std::string& file = "attention_coop.comp", codegen::CodegenOptions options = {},
                    size_t expect_dispatches = 0) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(t.b.ok()) << t.b.status().message();
  if (file == "attention_coop.comp") options.attention_dsplit = false;
  if (file == "attention_coop_dsplit.comp" && options.attention_rows.empty()) options.attention_rows = "off";
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
  auto device = testing::test_device_for(plan->requirements);
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

// attention_coop_dsplit.comp (head dims split across the subgroups) where every block
// is whole: query rows and keys multiples of 32. D = 64 splits over 4 subgroups (one
// 16-column tile each, lavapipe's subgroup of 8: one lane per softmax row), Dv = 128
// gives each subgroup two output tiles; several heads, Tq != Tk, query chunks. (Two
// kernel variants only: lavapipe takes ~30 s to compile each emulated one.)
TEST(CodegenAttentionCoop, DsplitMatchesInterpreter) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  struct Case {
    Shape q, k, v;
  };
  const Case cases[] = {
      {{32, 64}, {32, 64}, {32, 64}},                   // one block
      {{1, 96, 64}, {1, 96, 64}, {1, 96, 64}},          // three row blocks, three key blocks
      {{2, 64, 64}, {2, 128, 64}, {2, 128, 128}},       // two heads, Tq != Tk, Dv = 2·D (two tiles per subgroup)
  };
  uint32_t seed = 701;
  for (const auto& c : cases) {
    Attn t;
    build(t, c.q, c.k, c.v, seed += 3);
    expect_matches(t, describe(c.q, c.k, c.v), target, "attention_coop_dsplit.comp");
  }
  Attn t;
  build(t, {3, 96, 64}, {3, 64, 64}, {3, 64, 64}, 777);
  codegen::CodegenOptions options;
  options.attention_query_chunk = 64;  // chunks of 64 and 32 rows
  expect_matches(t, "dsplit, query chunk 64", target, "attention_coop_dsplit.comp", options, 6);
  // Partial blocks without a mask (MiniMax-H3's tiles of 1796 tokens): the last row
  // block overlaps the one before, keys past a multiple of 32 are masked.
  Attn partial;
  build(partial, {2, 77, 64}, {2, 77, 64}, {2, 77, 64}, 779);
  expect_matches(partial, "dsplit, 77 tokens", target, "attention_coop_dsplit.comp");
}

// Frame-causal keys (HunyuanVideo's mid attention, frame_tokens) on the dsplit kernel,
// frames of 40 tokens (one kernel variant: lavapipe takes ~15 s to compile each):
// - 96 tokens: frames cut key blocks of 32 and row blocks of 32, so blocks are partly
//   masked, some workgroups span two frames, and the later key blocks are skipped;
// - partial blocks, which the dsplit kernel takes for masked attention only: 70 query
//   rows (the last block overlaps the one before) and 75 keys (PARTIAL_KEYS: keys past
//   75 masked, read as zeros), two heads, so the first head's keys past 75 would be the
//   second head's;
// - fewer query rows than a block go portable.
TEST(CodegenAttentionCoop, DsplitFrameCausal) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  auto masked = [](Attn& t, Shape qs, Shape kvs, uint32_t seed) {
    ValueId q = t.input("q", random_input(qs, seed), DType::f16);
    ValueId k = t.input("k", random_input(kvs, seed + 1), DType::f16);
    Tensor vt = random_input(kvs, seed + 2);
    for (float x : vt.data) t.v_peak = std::max(t.v_peak, double(std::fabs(x)));
    ValueId v = t.input("v", std::move(vt), DType::f16);
    t.b.output(t.b.attention(q, k, v, 1.0 / 8.0, 40));
  };
  {
    Attn t;
    masked(t, {1, 96, 64}, {1, 96, 64}, 801);
    expect_matches(t, "dsplit, 96 tokens in frames of 40", target, "attention_coop_dsplit.comp");
  }
  {
    Attn t;
    masked(t, {2, 70, 64}, {2, 75, 64}, 811);
    expect_matches(t, "dsplit, 70 rows, 75 keys, frames of 40", target, "attention_coop_dsplit.comp");
  }
  Attn few;
  masked(few, {1, 20, 64}, {1, 20, 64}, 821);
  auto plan = codegen::compile_plan(few.graph, few.weights, target);
  ASSERT_TRUE(plan.has_value()) << plan.message();
  EXPECT_TRUE(uses(*plan, "attention.comp")) << attention_kernels(*plan).front();
}

// CodegenOptions::kernel_defines reaches the pipelines: the dsplit kernel's load
// schedules PF 0, 1 and 2 (each fragment just before use; a block's K and V fragments
// loaded together; and the next block's K during P·V), with K and V staged through
// shared memory (KV_STAGE, the native default where PF >= 1) and without, compile to
// valid SPIR-V for an H200-like target. (They run only natively —
// NativeMatchesInterpreter runs the default — since lavapipe takes minutes to compile
// their emulation.)
TEST(CodegenAttentionCoop, DsplitPrefetchVariantsCompile) {
  const codegen::Target h200 = h200_target();
  const std::vector<std::map<std::string, std::string>> variants = {
      {{"PF", "0"}}, {{"PF", "1"}}, {{"PF", "2"}}, {{"PF", "1"}, {"KV_STAGE", "0"}}, {{"PF", "2"}, {"KV_STAGE", "0"}}};
  for (const auto& defines : variants) {
    Attn t;
    build(t, {1, 128, 512}, {1, 128, 512}, {1, 128, 512}, 880);
    ASSERT_TRUE(t.b.ok());
    codegen::CodegenOptions options;
    options.kernel_defines["attention_coop_dsplit.comp"] = defines;
    auto plan = codegen::compile_plan(t.graph, t.weights, h200, options);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    ASSERT_TRUE(uses(*plan, "attention_coop_dsplit.comp"));
    for (const auto& p : plan->pipelines) {
      if (p.name.rfind("attention_coop_dsplit.comp", 0) != 0) continue;
      for (const auto& [name, value] : defines)
        EXPECT_NE(p.name.find(name + "=" + value), std::string::npos) << p.name;
      Status valid = codegen::validate_spirv(p.spirv);
      EXPECT_TRUE(valid.is_ok()) << p.name << ": " << valid.message();
    }
  }
}

// The running max rising key block after key block (as RisingScoresRescale) on the
// dsplit kernel: its corr factors reach each accumulator element through the row map.
TEST(CodegenAttentionCoop, DsplitRisingScoresRescale) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  for (float magnitude : {12.0f, 2.0f}) {
    const bool integers = magnitude > 4;
    Attn t;
    const int64_t tq = 64, tk = 192, d = 64;
    Tensor q = random_input({1, tq, d}, 15, magnitude, integers);
    Tensor k = random_input({1, tk, d}, 16, magnitude, integers);
    for (int64_t j = 0; j < tk; ++j)
      for (int64_t i = 0; i < d; ++i) {
        float& x = k.data[size_t(j * d + i)];
        x = integers ? std::round(x * float(1 + j / 50)) : x * float(1 + j / 50);
      }
    ValueId qv = t.input("q", std::move(q), DType::f16);
    ValueId kv = t.input("k", std::move(k), DType::f16);
    Tensor v = random_input({1, tk, d}, 17);
    for (float x : v.data) t.v_peak = std::max(t.v_peak, double(std::fabs(x)));
    ValueId vv = t.input("v", std::move(v), DType::f16);
    t.b.output(t.b.attention(qv, kv, vv, integers ? 0.5 : 0.25));
    expect_matches(t, fmt::format("dsplit, q, k up to {}", magnitude), target, "attention_coop_dsplit.comp");
  }
}

// The dsplit kernel's subgroups on an H200-like target (subgroup 32): the fewest that
// hold at most 4 head-dim tiles each — head dim 128 (Z-Image): 2 (WG 64), so a score
// block sums 2 partials, not 8; 512 (the VAEs): 8 (WG 256), as tuned.
TEST(CodegenAttentionCoop, DsplitSubgroupsOnTheH200) {
  const codegen::Target h200 = h200_target();
  for (const auto& [d, wg] : {std::pair<int64_t, const char*>{128, "WG=64"}, {512, "WG=256"}}) {
    SCOPED_TRACE(d);
    Attn t;
    build(t, {2, 128, d}, {2, 128, d}, {2, 128, d}, 881);
    ASSERT_TRUE(t.b.ok());
    codegen::CodegenOptions rows_off;
    rows_off.attention_rows = "off";
    auto plan = codegen::compile_plan(t.graph, t.weights, h200, rows_off);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    bool found = false;
    for (const auto& p : plan->pipelines)
      if (p.name.rfind("attention_coop_dsplit.comp", 0) == 0) {
        found = true;
        EXPECT_NE(p.name.find(std::string(",") + wg + "]"), std::string::npos) << p.name;
      }
    EXPECT_TRUE(found);
  }
}

// Which cooperative-matrix kernel the lowering picks: dsplit where every dispatch has
// a block of 32 query rows (partial row and key blocks included) and the head dims
// split into at most 4 tiles per subgroup; attention_coop.comp for the rest, and
// wherever CodegenOptions::attention_dsplit is off. The dsplit plan asks for subgroup
// shuffles.
TEST(CodegenAttentionCoop, DsplitSelection) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  struct Case {
    Shape q, k, v;
    const char* file;
  };
  const Case cases[] = {
      {{1, 64, 64}, {1, 64, 64}, {1, 64, 64}, "attention_coop_dsplit.comp"},
      {{1, 60, 64}, {1, 64, 64}, {1, 64, 64}, "attention_coop_dsplit.comp"},  // partial row block
      {{1, 64, 64}, {1, 80, 64}, {1, 80, 64}, "attention_coop_dsplit.comp"},  // partial key block
      {{1, 20, 64}, {1, 64, 64}, {1, 64, 64}, "attention_coop.comp"},    // fewer rows than a block
      {{1, 64, 32}, {1, 64, 32}, {1, 64, 32}, "attention_coop.comp"},    // D = 32: 4 subgroups do not split it
      {{1, 64, 512}, {1, 64, 512}, {1, 64, 512}, "attention_coop.comp"},  // 8 tiles per subgroup of 4 (32 KiB)
  };
  codegen::CodegenOptions rows_off;  // the rows kernel would take the shapes with D <= 128
  rows_off.attention_rows = "off";
  for (const auto& c : cases) {
    SCOPED_TRACE(describe(c.q, c.k, c.v));
    Attn t;
    build(t, c.q, c.k, c.v, 40);
    ASSERT_TRUE(t.b.ok());
    auto plan = codegen::compile_plan(t.graph, t.weights, target, rows_off);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    EXPECT_TRUE(uses(*plan, c.file)) << attention_kernels(*plan).front();
    const bool shuffles = (plan->requirements.subgroup_operations & runtime::subgroup_ops::shuffle) != 0;
    EXPECT_EQ(shuffles, std::string(c.file) == "attention_coop_dsplit.comp");
  }
  Attn t;  // attention_dsplit off: attention_coop.comp for a whole-block shape
  build(t, {1, 64, 64}, {1, 64, 64}, {1, 64, 64}, 41);
  codegen::CodegenOptions off;
  off.attention_dsplit = false;
  auto plan = codegen::compile_plan(t.graph, t.weights, target, off);
  ASSERT_TRUE(plan.has_value()) << plan.message();
  EXPECT_TRUE(uses(*plan, "attention_coop.comp")) << attention_kernels(*plan).front();
}

// attention_coop_rows.comp (query rows split across the subgroups, K and V staged once
// per workgroup) against the interpreter, emulated: lavapipe's subgroup of 8 gives
// 16 / 8 = 2 softmax rows per lane. One block of 64 rows; several row and key blocks
// with the running max rising (q, k up to 12: the rescale through the row map); two
// heads with Tq != Tk and Dv = 2·D; partial row and key blocks (MiniMax-H3's tiles: the
// last row block overlaps the one before, keys past a multiple of 32 read as zeros
// and masked, so the first head's keys past 77 would be the second head's); query
// chunks. (Three kernel variants: lavapipe takes ~15 s to compile each.)
TEST(CodegenAttentionCoop, RowsMatchesInterpreter) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  {
    Attn t;
    build(t, {64, 64}, {64, 64}, {64, 64}, 901);
    expect_matches(t, "rows, one block", target, "attention_coop_rows.comp");
  }
  {
    Attn t;
    const int64_t tq = 128, tk = 192, d = 64;
    Tensor q = random_input({1, tq, d}, 903, 12.0f, true);
    Tensor k = random_input({1, tk, d}, 904, 12.0f, true);
    for (int64_t j = 0; j < tk; ++j)
      for (int64_t i = 0; i < d; ++i) k.data[size_t(j * d + i)] *= float(1 + j / 50);  // integers stay integers
    ValueId qv = t.input("q", std::move(q), DType::f16);
    ValueId kv = t.input("k", std::move(k), DType::f16);
    Tensor v = random_input({1, tk, d}, 905);
    for (float x : v.data) t.v_peak = std::max(t.v_peak, double(std::fabs(x)));
    ValueId vv = t.input("v", std::move(v), DType::f16);
    t.b.output(t.b.attention(qv, kv, vv, 0.5));
    expect_matches(t, "rows, rising scores", target, "attention_coop_rows.comp");
  }
  {
    Attn t;
    build(t, {2, 64, 64}, {2, 128, 64}, {2, 128, 128}, 907);
    expect_matches(t, "rows, two heads, Tq != Tk, Dv = 2 D", target, "attention_coop_rows.comp");
  }
  {
    // 16 × 32 accumulators (CM_N = 32: the flexible-dimension variant's tiling), rising
    // maxima across blocks so the rescale runs.
    Attn t;
    const int64_t tq = 64, tk = 96, d = 64;
    Tensor q = random_input({1, tq, d}, 913, 12.0f, true);
    Tensor k = random_input({1, tk, d}, 914, 12.0f, true);
    for (int64_t j = 0; j < tk; ++j)
      for (int64_t i = 0; i < d; ++i) k.data[size_t(j * d + i)] *= float(1 + j / 40);  // integers stay integers
    ValueId qv = t.input("q", std::move(q), DType::f16);
    ValueId kv = t.input("k", std::move(k), DType::f16);
    Tensor v = random_input({1, tk, 2 * d}, 915);
    for (float x : v.data) t.v_peak = std::max(t.v_peak, double(std::fabs(x)));
    ValueId vv = t.input("v", std::move(v), DType::f16);
    t.b.output(t.b.attention(qv, kv, vv, 0.5));
    codegen::CodegenOptions wide;
    wide.kernel_defines["attention_coop_rows.comp"] = {{"CM_N", "32"}};
    expect_matches(t, "rows, 16 x 32 accumulators", target, "attention_coop_rows.comp", wide);
  }
  {
    Attn t;
    build(t, {2, 77, 64}, {2, 77, 64}, {2, 77, 64}, 909);
    expect_matches(t, "rows, 77 tokens", target, "attention_coop_rows.comp");
  }
  {
    // 32 rows per subgroup (CM_M = 32) with P over the scores (P_ALIAS), 16 keys per
    // block: rising maxima across 7 blocks (the rescale), Dv = 2·D, and a partial last
    // block of rows (70 rows: the block of 64 ending at row 70 overlaps the first).
    Attn t;
    const int64_t tq = 70, tk = 112, d = 32;
    Tensor q = random_input({1, tq, d}, 917, 12.0f, true);
    Tensor k = random_input({1, tk, d}, 918, 12.0f, true);
    for (int64_t j = 0; j < tk; ++j)
      for (int64_t i = 0; i < d; ++i) k.data[size_t(j * d + i)] *= float(1 + j / 30);  // integers stay integers
    ValueId qv = t.input("q", std::move(q), DType::f16);
    ValueId kv = t.input("k", std::move(k), DType::f16);
    Tensor v = random_input({1, tk, 2 * d}, 919);
    for (float x : v.data) t.v_peak = std::max(t.v_peak, double(std::fabs(x)));
    ValueId vv = t.input("v", std::move(v), DType::f16);
    t.b.output(t.b.attention(qv, kv, vv, 0.5));
    codegen::CodegenOptions tall;
    tall.attention_rows = "2x16x32";
    expect_matches(t, "rows, 32 rows per subgroup", target, "attention_coop_rows.comp", tall);
  }
  Attn t;
  build(t, {3, 192, 64}, {3, 64, 64}, {3, 64, 64}, 911);
  codegen::CodegenOptions options;
  options.attention_query_chunk = 128;  // chunks of 128 and 64 rows
  expect_matches(t, "rows, query chunk 128", target, "attention_coop_rows.comp", options, 6);
}

// REG_SOFTMAX = 1 (the softmax on the score accumulators in registers, P·V's A fragments
// made from them in place), emulated, against the interpreter: several key blocks with
// the maxima rising (the rescale by row slot), 16 × 16 accumulators with two per block
// (BC = 32); a partial last key block and an overlapping last row block (77 tokens, two
// heads); 16 × 32 accumulators (CM_N = 32, two A fragments from one accumulator) with
// Dv = 2·D and the weights as natively (REG_FMA: raw maxima, exp2 of one multiply-add). Natively the same code reads NVIDIA's element layout (coopmat.glsl), which
// only the device tests reach. (Three kernel variants: ~15 s each to compile on lavapipe.)
Tensor rising_keys(int64_t tk, int64_t d, uint32_t seed, int64_t every) {
  Tensor k = random_input({1, tk, d}, seed, 12.0f, true);
  for (int64_t j = 0; j < tk; ++j)
    for (int64_t i = 0; i < d; ++i) k.data[size_t(j * d + i)] *= float(1 + j / every);  // integers stay integers
  return k;
}

TEST(CodegenAttentionCoop, RowsRegisterSoftmaxMatchesInterpreter) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  codegen::CodegenOptions regs;
  regs.kernel_defines["attention_coop_rows.comp"] = {{"REG_SOFTMAX", "1"}};
  {
    Attn t;
    const int64_t tq = 128, tk = 192, d = 64;
    ValueId qv = t.input("q", random_input({1, tq, d}, 931, 12.0f, true), DType::f16);
    ValueId kv = t.input("k", rising_keys(tk, d, 932, 50), DType::f16);
    Tensor v = random_input({1, tk, d}, 933);
    for (float x : v.data) t.v_peak = std::max(t.v_peak, double(std::fabs(x)));
    ValueId vv = t.input("v", std::move(v), DType::f16);
    t.b.output(t.b.attention(qv, kv, vv, 0.5));
    expect_matches(t, "registers, rising scores", target, "attention_coop_rows.comp", regs);
  }
  {
    Attn t;
    build(t, {2, 77, 64}, {2, 77, 64}, {2, 77, 64}, 935);
    expect_matches(t, "registers, 77 tokens", target, "attention_coop_rows.comp", regs);
  }
  {
    Attn t;
    const int64_t tq = 64, tk = 96, d = 64;
    ValueId qv = t.input("q", random_input({1, tq, d}, 937, 12.0f, true), DType::f16);
    ValueId kv = t.input("k", rising_keys(tk, d, 938, 40), DType::f16);
    Tensor v = random_input({1, tk, 2 * d}, 939);
    for (float x : v.data) t.v_peak = std::max(t.v_peak, double(std::fabs(x)));
    ValueId vv = t.input("v", std::move(v), DType::f16);
    t.b.output(t.b.attention(qv, kv, vv, 0.5));
    codegen::CodegenOptions wide = regs;
    wide.kernel_defines["attention_coop_rows.comp"]["CM_N"] = "32";
    wide.kernel_defines["attention_coop_rows.comp"]["REG_FMA"] = "1";  // the native weights' arithmetic
    expect_matches(t, "registers, 16 x 32 accumulators", target, "attention_coop_rows.comp", wide);
  }
}

// Which tile the rows kernel takes, and where it does not apply: 8 subgroups (128 rows)
// by default, fewer where a dispatch has fewer rows or the shared memory is short; CodegenOptions::attention_rows
// picks a tile or turns it off; head dims over 128 and frame masks go to the dsplit
// kernel; a malformed tile is an error naming the node. The plan asks for subgroup
// votes (the rescale flag) and shuffles. On an H200-like target the native variants
// compile to SPIR-V the validator accepts.
TEST(CodegenAttentionCoop, RowsSelection) {
  const codegen::Target target = device_target(codegen::TensorCores::emulated);
  struct Case {
    Shape q, kv;
    std::string rows;
    const char* file;
    const char* wg;  // lavapipe's subgroup of 8
  };
  const Case cases[] = {
      {{1, 64, 64}, {1, 64, 64}, "", "attention_coop_rows.comp", "WG=32"},
      {{1, 128, 64}, {1, 64, 64}, "", "attention_coop_rows.comp", "WG=32"},  // 8 subgroups need 38 400 bytes
      {{1, 40, 64}, {1, 64, 64}, "", "attention_coop_rows.comp", "WG=16"},   // 40 rows: 2 subgroups
      {{1, 20, 64}, {1, 64, 64}, "", "attention_coop_rows.comp", "WG=8"},    // 20 rows: 1 subgroup
      {{1, 128, 64}, {1, 64, 64}, "8x16", "attention_coop_rows.comp", "WG=64"},
      {{1, 128, 64}, {1, 64, 64}, "2x16x32", "attention_coop_rows.comp", "WG=16"},  // 64 rows a workgroup
      {{1, 64, 64}, {1, 64, 64}, "off", "attention_coop_dsplit.comp", nullptr},
      {{1, 64, 256}, {1, 64, 256}, "", "attention_coop_dsplit.comp", nullptr},  // D > 128
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(describe(c.q, c.kv, c.kv) + " rows '" + c.rows + "'");
    Attn t;
    build(t, c.q, c.kv, c.kv, 42);
    ASSERT_TRUE(t.b.ok());
    codegen::CodegenOptions options;
    options.attention_rows = c.rows;
    auto plan = codegen::compile_plan(t.graph, t.weights, target, options);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    EXPECT_TRUE(uses(*plan, c.file)) << attention_kernels(*plan).front();
    if (c.wg) {
      EXPECT_NE(attention_kernels(*plan).front().find(std::string(c.wg) + "]"), std::string::npos)
          << attention_kernels(*plan).front();
      EXPECT_NE(plan->requirements.subgroup_operations & runtime::subgroup_ops::vote, 0u);
    }
  }
  {
    Attn t;  // a frame mask: the dsplit kernel
    ValueId q = t.input("q", random_input({1, 64, 64}, 43), DType::f16);
    ValueId k = t.input("k", random_input({1, 64, 64}, 44), DType::f16);
    ValueId v = t.input("v", random_input({1, 64, 64}, 45), DType::f16);
    t.b.output(t.b.attention(q, k, v, 0.125, 32));
    auto plan = codegen::compile_plan(t.graph, t.weights, target);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    EXPECT_TRUE(uses(*plan, "attention_coop_dsplit.comp")) << attention_kernels(*plan).front();
  }
  {
    Attn t;  // an explicit tile that needs more shared memory than the target has
    build(t, {1, 128, 128}, {1, 128, 128}, {1, 128, 128}, 48);
    codegen::CodegenOptions options;
    options.attention_rows = "8x64";
    auto plan = codegen::compile_plan(t.graph, t.weights, target, options);
    ASSERT_FALSE(plan.has_value());
    EXPECT_NE(plan.message().find("attention tile '8x64' needs"), std::string::npos) << plan.message();
  }
  for (const char* bad : {"4", "4x20", "0x32", "x32", "4x32x1", "64x32", "4x32x24", "4x32x32x1"}) {
    SCOPED_TRACE(bad);
    Attn t;
    build(t, {1, 64, 64}, {1, 64, 64}, {1, 64, 64}, 46);
    codegen::CodegenOptions options;
    options.attention_rows = bad;
    auto plan = codegen::compile_plan(t.graph, t.weights, target, options);
    ASSERT_FALSE(plan.has_value());
    EXPECT_NE(plan.message().find(std::string("attention tile '") + bad + "' is not NxBC"), std::string::npos)
        << plan.message();
  }
  {
    // 32 rows per subgroup natively: only with flexible dimensions, where the plan
    // rewrites the SPIR-V to KHR (32 × 16 A fragments) and, as every native variant,
    // keeps the softmax in registers (REG_SOFTMAX).
    Attn t;
    build(t, {2, 200, 128}, {2, 200, 128}, {2, 200, 128}, 49);
    codegen::CodegenOptions options;
    options.attention_rows = "4x16x32";
    auto fixed = codegen::compile_plan(t.graph, t.weights, h200_target(), options);
    ASSERT_FALSE(fixed.has_value());
    EXPECT_NE(fixed.message().find("32 rows per subgroup need cooperative matrices of flexible dimensions"),
              std::string::npos)
        << fixed.message();
    codegen::Target flexible = h200_target();
    flexible.coopmat_flexible = true;
    auto plan = codegen::compile_plan(t.graph, t.weights, flexible, options);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    ASSERT_TRUE(uses(*plan, "attention_coop_rows.comp")) << attention_kernels(*plan).front();
    for (const auto& p : plan->pipelines) {
      if (p.name.rfind("attention_coop_rows.comp", 0) != 0) continue;
      for (const char* define : {"CM_M=32", "REG_SOFTMAX=1", "COOPMAT_KHR=1", "WG=128]"})
        EXPECT_NE(p.name.find(define), std::string::npos) << p.name;
      EXPECT_EQ(p.name.find("P_ALIAS"), std::string::npos) << p.name;  // no P in shared memory natively
      // Debian's SPIRV-Tools predates the KHR capability (6022): no validate_spirv (see
      // NativeVariantCompiles); the module must declare OpCapability CooperativeMatrixKHR.
      bool khr = false;
      for (size_t i = 5; i + 1 < p.spirv.size(); ++i) khr |= p.spirv[i] == ((2u << 16) | 17u) && p.spirv[i + 1] == 6022u;
      EXPECT_TRUE(khr) << p.name;
    }
    // By default every head dim takes 8 subgroups of 16 rows there, with the softmax in
    // registers (MiniMax-H3's 64 and Z-Image's 128): 32 keys per block at 64,
    // 64 keys above it.
    for (int64_t d : {64, 128}) {
      Attn u;
      build(u, {2, 200, d}, {2, 200, d}, {2, 200, d}, 50);
      auto by_default = codegen::compile_plan(u.graph, u.weights, flexible);
      ASSERT_TRUE(by_default.has_value()) << by_default.message();
      bool found = false;
      for (const auto& p : by_default->pipelines) {
        if (p.name.rfind("attention_coop_rows.comp", 0) != 0) continue;
        found = true;
        EXPECT_EQ(p.name.find("CM_M=32"), std::string::npos) << p.name;
        for (const char* define : {d == 64 ? "BC=32," : "BC=64,", "CM_N=32,", "REG_SOFTMAX=1,", "WG=256]"})
          EXPECT_NE(p.name.find(define), std::string::npos) << p.name;
      }
      EXPECT_TRUE(found);
    }
  }
  const codegen::Target h200 = h200_target();
  for (const auto& [d, rows] : {std::pair<int64_t, const char*>{128, ""}, {128, "8x32"}, {128, "2x64"},
                                {64, ""}, {64, "4x64"}, {64, "8x32"}}) {
    SCOPED_TRACE(fmt::format("native, D {}, rows '{}'", d, rows));
    Attn t;
    build(t, {2, 200, d}, {2, 200, d}, {2, 200, d}, 47);  // partial blocks: PARTIAL_KEYS
    codegen::CodegenOptions options;
    options.attention_rows = rows;
    auto plan = codegen::compile_plan(t.graph, t.weights, h200, options);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    ASSERT_TRUE(uses(*plan, "attention_coop_rows.comp")) << attention_kernels(*plan).front();
    for (const auto& p : plan->pipelines) {
      if (p.name.rfind("attention_coop_rows.comp", 0) != 0) continue;
      EXPECT_NE(p.name.find("COOPMAT=1"), std::string::npos) << p.name;
      // By default 8 subgroups at every head dim, the softmax in registers (no scores in
      // shared memory, so 64 no longer needs 4 to stay under the H200's 24 KiB line).
      if (std::string(rows).empty()) {
        EXPECT_NE(p.name.find("WG=256]"), std::string::npos) << p.name;
        EXPECT_NE(p.name.find("REG_SOFTMAX=1"), std::string::npos) << p.name;
        EXPECT_NE(p.name.find(d == 64 ? "BC=32," : "BC=64,"), std::string::npos) << p.name;  // 64 keys above 64
      }
      EXPECT_NE(p.name.find("PARTIAL_KEYS=1"), std::string::npos) << p.name;
      Status valid = codegen::validate_spirv(p.spirv);
      EXPECT_TRUE(valid.is_ok()) << p.name << ": " << valid.message();
    }
  }
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
  const codegen::Target h200 = h200_target();
  for (int64_t d : {512, 384, 64}) {
    SCOPED_TRACE("D " + std::to_string(d));
    Attn t;
    build(t, {1, 100, d}, {1, 100, d}, {1, 100, d}, 300);
    ASSERT_TRUE(t.b.ok());
    codegen::CodegenOptions coop;  // 100 rows would take the dsplit kernel
    coop.attention_dsplit = false;
    auto plan = codegen::compile_plan(t.graph, t.weights, h200, coop);
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
  // Whole blocks: the dsplit kernel, 8 subgroups for D = 512 and 384, 4 for 64.
  for (int64_t d : {512, 384, 64}) {
    SCOPED_TRACE("dsplit, D " + std::to_string(d));
    Attn t;
    build(t, {1, 128, d}, {1, 128, d}, {1, 128, d}, 301);
    ASSERT_TRUE(t.b.ok());
    codegen::CodegenOptions rows_off;  // D = 64 would take the rows kernel
    rows_off.attention_rows = "off";
    auto plan = codegen::compile_plan(t.graph, t.weights, h200, rows_off);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    ASSERT_TRUE(uses(*plan, "attention_coop_dsplit.comp"));
    for (const auto& p : plan->pipelines) {
      if (p.name.rfind("attention_coop_dsplit.comp", 0) != 0) continue;
      EXPECT_NE(p.name.find("COOPMAT=1"), std::string::npos) << p.name;
      EXPECT_NE(p.name.find(d == 64 ? "WG=128" : "WG=256"), std::string::npos) << p.name;
      Status valid = codegen::validate_spirv(p.spirv);
      EXPECT_TRUE(valid.is_ok()) << p.name << ": " << valid.message();
    }
  }
  // Partial blocks without a mask (MiniMax-H3's 1796-token tiles): dsplit, PARTIAL_KEYS.
  {
    Attn t;
    build(t, {2, 100, 64}, {2, 100, 64}, {2, 100, 64}, 302);
    ASSERT_TRUE(t.b.ok());
    codegen::CodegenOptions rows_off;
    rows_off.attention_rows = "off";
    auto plan = codegen::compile_plan(t.graph, t.weights, h200, rows_off);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    ASSERT_TRUE(uses(*plan, "attention_coop_dsplit.comp")) << attention_kernels(*plan).front();
    for (const auto& p : plan->pipelines) {
      if (p.name.rfind("attention_coop_dsplit.comp", 0) != 0) continue;
      EXPECT_NE(p.name.find("PARTIAL_KEYS=1"), std::string::npos) << p.name;
      Status valid = codegen::validate_spirv(p.spirv);
      EXPECT_TRUE(valid.is_ok()) << p.name << ": " << valid.message();
    }
  }
  // The lowering takes 16 × 32 accumulators for the rows kernel on devices with flexible
  // dimensions (rewritten to KHR), 16 × 16 without (head dim 128: up to 64 the flexible
  // default is 32 rows of 16 keys, RowsSelection).
  for (bool flexible : {false, true}) {
    SCOPED_TRACE(flexible ? "flexible dimensions" : "16x16 only");
    Attn t;
    build(t, {2, 128, 128}, {2, 128, 128}, {2, 128, 128}, 303);
    ASSERT_TRUE(t.b.ok());
    codegen::Target target = h200;
    target.coopmat_flexible = flexible;
    auto plan = codegen::compile_plan(t.graph, t.weights, target, {});
    ASSERT_TRUE(plan.has_value()) << plan.message();
    ASSERT_TRUE(uses(*plan, "attention_coop_rows.comp")) << attention_kernels(*plan).front();
    EXPECT_EQ(plan->requirements.cooperative_matrix_flexible, flexible);
    for (const auto& p : plan->pipelines) {
      if (p.name.rfind("attention_coop_rows.comp", 0) != 0) continue;
      EXPECT_EQ(p.name.find("COOPMAT_KHR=1") != std::string::npos, flexible) << p.name;
      EXPECT_EQ(p.name.find("CM_N=32") != std::string::npos, flexible) << p.name;
    }
  }
  // The rows kernel with 16 × 32 score and output accumulators, rewritten to KHR (the
  // flexible-dimension variant), straight through the shader compiler.
  {
    const codegen::Defines rows32 = {{"D", "128"},      {"DV", "128"},         {"BC", "32"},   {"WG", "256"},
                                     {"CM_SG", "32"},   {"COOPMAT", "1"},      {"CM_N", "32"}, {"COOPMAT_KHR", "1"},
                                     {"O_T", "float16_t"}, {"F16", "1"},       {"ROUND", "ROUND_F16"}};
    auto rows_spirv = codegen::compile_kernel("attention_coop_rows.comp", rows32);
    ASSERT_TRUE(rows_spirv.has_value()) << rows_spirv.message();
    // Debian's SPIRV-Tools predates the KHR capability (6022), so no validate_spirv
    // here (test_spirv_khr_rewrite.cpp checks the rewrite's structure); the module must
    // declare it: OpCapability (opcode 17, 2 words) CooperativeMatrixKHR.
    bool khr = false;
    for (size_t i = 5; i + 1 < rows_spirv->size(); ++i)
      khr |= (*rows_spirv)[i] == ((2u << 16) | 17u) && (*rows_spirv)[i + 1] == 6022u;
    EXPECT_TRUE(khr);
  }
  // And straight through the shader compiler.
  const codegen::Defines defines = {{"D", "512"},        {"DV", "512"},     {"BR", "64"},      {"BC", "32"},
                                    {"DC", "128"},       {"WG", "256"},     {"CM_SG", "32"},   {"COOPMAT", "1"},
                                    {"O_T", "float16_t"}, {"F16", "1"},     {"ROUND", "ROUND_F16"}};
  auto spirv = codegen::compile_kernel("attention_coop.comp", defines);
  ASSERT_TRUE(spirv.has_value()) << spirv.message();
  Status valid = codegen::validate_spirv(*spirv);
  EXPECT_TRUE(valid.is_ok()) << valid.message();
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
    const char* file;
  };
  const char* kCoop = "attention_coop.comp";
  const char* kDsplit = "attention_coop_dsplit.comp";
  const char* kRows = "attention_coop_rows.comp";
  const Case cases[] = {
      {{40, 64}, {40, 64}, {40, 64}, kCoop},
      {{2, 77, 64}, {2, 77, 64}, {2, 77, 64}, kCoop},
      {{1, 50, 32}, {1, 130, 32}, {1, 130, 48}, kCoop},
      {{1, 300, 512}, {1, 300, 512}, {1, 300, 512}, kCoop},
      {{1, 260, 384}, {1, 260, 384}, {1, 260, 384}, kCoop},
      {{2, 64, 64}, {2, 96, 64}, {2, 96, 64}, kDsplit},
      {{1, 256, 512}, {1, 256, 512}, {1, 256, 512}, kDsplit},
      {{1, 320, 384}, {1, 320, 384}, {1, 320, 384}, kDsplit},
      {{2, 64, 64}, {2, 96, 64}, {2, 96, 64}, kRows},
      {{2, 77, 64}, {2, 77, 64}, {2, 77, 64}, kRows},        // partial row and key blocks
      {{1, 50, 32}, {1, 130, 32}, {1, 130, 48}, kRows},      // 2 subgroups (50 rows), Dv != D
      {{3, 200, 128}, {3, 200, 128}, {3, 200, 128}, kRows},  // Z-Image's head dim
  };
  uint32_t seed = 401;
  for (const auto& c : cases) {
    Attn t;
    build(t, c.q, c.k, c.v, seed += 3);
    expect_matches(t, describe(c.q, c.k, c.v) + " (native)", native, c.file);
  }
  // 32 rows per subgroup (P over the scores) where the device has flexible dimensions.
  native.coopmat_flexible = codegen::target_for((*device)->info()).coopmat_flexible;
  if (!native.coopmat_flexible) return;
  const std::pair<Shape, const char*> tall[] = {{{3, 200, 128}, "4x16x32"}, {{3, 200, 128}, "4x32x32"},
                                                {{2, 77, 64}, "2x32x32"}, {{2, 300, 64}, "8x16x32"}};
  for (const auto& [shape, rows] : tall) {
    Attn t;
    build(t, shape, shape, shape, seed += 3);
    codegen::CodegenOptions options;
    options.attention_rows = rows;
    expect_matches(t, describe(shape, shape, shape) + " (native, " + rows + ")", native, kRows, options);
  }
  // The softmax in registers (REG_SOFTMAX): the kernel reads NVIDIA's element layout,
  // checks it and writes NaN if it does not hold, which fails here. The default tiles
  // (16 × 32 accumulators at D = 128, 32 × 16 at D = 64), 32 × 32 ones, 16 × 16 ones
  // (BC = 16: GL_NV_cooperative_matrix without the KHR rewrite), and D = 32 (zimage_small's
  // heads: the check's codes need more than the staged K and V).
  const std::pair<Shape, const char*> in_registers[] = {{{3, 200, 128}, ""},    {{2, 77, 64}, ""},
                                                        {{2, 300, 64}, ""},     {{3, 200, 128}, "4x32x32"},
                                                        {{1, 130, 128}, "8x32"},  {{2, 96, 128}, "4x16"},
                                                        {{2, 80, 32}, ""}};
  for (const auto& [shape, rows] : in_registers) {
    Attn t;
    build(t, shape, shape, shape, seed += 3);
    codegen::CodegenOptions options;
    options.attention_rows = rows;
    options.kernel_defines[kRows] = {{"REG_SOFTMAX", "1"}};
    expect_matches(t, describe(shape, shape, shape) + " (native, REG_SOFTMAX, '" + rows + "')", native, kRows,
                   options);
  }
}

// On a device with GL_NV_cooperative_matrix: attention at the models' shapes, timed
// with the profiler and reported as TFLOP/s (4·heads·T²·D); prints only, no threshold
// (docs/PERFORMANCE.md keeps the numbers). The decoders' mid-block attention at 1024²
// (16 384 tokens; D = 512 Flux, 384 Qwen-Image) on the dsplit kernel; Z-Image's at
// 1024² (30 heads of 4224 tokens, D = 128) and one MiniMax-H3 720p clip's (28 tiles ×
// 32 heads of 1796 tokens, D = 64) on the rows kernel and, for comparison, the dsplit
// kernel.
TEST(CodegenAttentionCoop, NativeThroughput) {
  auto device = testing::test_device();
  ASSERT_TRUE(device.has_value()) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  if (target.tensor_cores != codegen::TensorCores::nv_coopmat)
    GTEST_SKIP() << "the test device has no GL_NV_cooperative_matrix";
  struct Case {
    int64_t heads, tokens, d;
    std::string rows;  // CodegenOptions::attention_rows
    const char* file;
    bool regs = false;  // REG_SOFTMAX
  };
  const Case cases[] = {
      {1, 16384, 512, "", "attention_coop_dsplit.comp"},
      {1, 16384, 384, "", "attention_coop_dsplit.comp"},
      {30, 4224, 128, "", "attention_coop_rows.comp"},
      {30, 4224, 128, "2x32", "attention_coop_rows.comp"},
      {30, 4224, 128, "8x32", "attention_coop_rows.comp"},
      {30, 4224, 128, "2x64", "attention_coop_rows.comp"},
      {30, 4224, 128, "off", "attention_coop_dsplit.comp"},
      {30, 4224, 128, "", "attention_coop_rows.comp", true},
      {30, 4224, 128, "4x32", "attention_coop_rows.comp", true},
      {30, 4224, 128, "8x16", "attention_coop_rows.comp", true},
      {30, 4224, 128, "4x32x32", "attention_coop_rows.comp", true},
      {28 * 32, 1796, 64, "", "attention_coop_rows.comp"},
      {28 * 32, 1796, 64, "4x64", "attention_coop_rows.comp"},
      {28 * 32, 1796, 64, "8x32", "attention_coop_rows.comp"},
      {28 * 32, 1796, 64, "off", "attention_coop_dsplit.comp"},
      {28 * 32, 1796, 64, "", "attention_coop_rows.comp", true},
      {28 * 32, 1796, 64, "4x32x32", "attention_coop_rows.comp", true},
      {28 * 32, 1796, 64, "8x32", "attention_coop_rows.comp", true},
      {28 * 32, 1796, 64, "8x16x32", "attention_coop_rows.comp", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} heads of {} tokens, D {}, rows '{}'{}", c.heads, c.tokens, c.d, c.rows,
                             c.regs ? ", REG_SOFTMAX" : ""));
    Attn t;
    const Shape shape = c.heads == 1 ? Shape{1, c.tokens, c.d} : Shape{c.heads, c.tokens, c.d};
    build(t, shape, shape, shape, 500);
    ASSERT_TRUE(t.b.ok());
    codegen::CodegenOptions options;
    options.profile = true;
    options.attention_rows = c.rows;
    if (c.regs) options.kernel_defines["attention_coop_rows.comp"] = {{"REG_SOFTMAX", "1"}};
    auto plan = codegen::compile_plan(t.graph, t.weights, target, options);
    ASSERT_TRUE(plan.has_value()) << plan.message();
    ASSERT_TRUE(uses(*plan, c.file)) << attention_kernels(*plan).front();
    std::vector<size_t> attention_dispatches;
    for (size_t i = 0; i < plan->dispatches.size(); ++i)
      if (plan->pipelines[plan->dispatches[i].pipeline].name.rfind("attention", 0) == 0)
        attention_dispatches.push_back(i);
    std::string kernel = attention_kernels(*plan).front();
    auto dev = testing::test_device_for(plan->requirements);
    ASSERT_TRUE(dev.has_value()) << dev.message();
    runtime::ExecutorOptions eo;
    eo.profile = true;
    auto exec = runtime::Executor::create(*dev, std::move(*plan), codegen::weight_source(t.weights), eo);
    ASSERT_TRUE(exec.has_value()) << exec.message();
    std::vector<Tensor> got;
    for (ValueId v : t.graph.outputs()) got.emplace_back(t.graph.value(v).type.shape);
    std::vector<std::span<const std::byte>> in;
    for (const Tensor& x : t.inputs) in.push_back(std::as_bytes(std::span(x.data)));
    std::vector<std::span<std::byte>> out;
    for (Tensor& y : got) out.push_back(std::as_writable_bytes(std::span(y.data)));
    double best_us = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      Status s = (*exec)->run(in, out);
      ASSERT_TRUE(s.is_ok()) << s.message();
      double us = 0;
      for (size_t i : attention_dispatches) us += (*exec)->last_profile().dispatch_us.at(i);
      best_us = std::min(best_us, us);
    }
    const double tflops =
        4.0 * double(c.heads) * double(c.tokens) * double(c.tokens) * double(c.d) / (best_us * 1e-6) / 1e12;
    std::printf("attention heads=%lld T=%lld D=%lld: %.1f us, %.1f TFLOP/s (%s)\n", static_cast<long long>(c.heads),
                static_cast<long long>(c.tokens), static_cast<long long>(c.d), best_us, tflops, kernel.c_str());
    bool finite = true;
    for (float x : got.front().data) finite = finite && std::isfinite(x);
    EXPECT_TRUE(finite);
  }
}

}  // namespace
}  // namespace strata

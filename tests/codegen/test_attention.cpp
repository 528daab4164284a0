// Codegen: attention and softmax (kernels/attention.comp, softmax.comp) on Vulkan
// against the interpreter (f64 softmax), on random inputs: sequence lengths that are
// not multiples of the tiles, several and multi-dim heads, Tq != Tk, Dv != D, head
// dims up to 512, query chunks, windowed dispatches, and scores / logits large
// enough that an exp without the max subtracted would overflow.
#include "compiled_graph.h"
#include "codegen/vk_test_util.h"

#include "codegen/codegen.h"
#include "ir/builder.h"
#include "ir/interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <string>

namespace strata {
namespace {

struct OneNode {
  Graph graph;
  WeightStore weights;
  Builder b{graph, &weights};
  std::vector<Tensor> inputs;

  ValueId input(const std::string& name, Tensor t) {
    Shape shape = t.shape;
    inputs.push_back(std::move(t));
    return b.input(name, std::move(shape));
  }
};

// Uniform in [-1, 1) times `scale`; with `integers`, rounded to whole numbers (so
// that dot products are exact in f32 and the test isolates the softmax).
Tensor random_input(Shape shape, uint32_t seed, float scale = 1.0f, bool integers = false) {
  Tensor t = testing::random_tensor(std::move(shape), seed, -1.0f, 1.0f);
  for (float& v : t.data) v = integers ? std::round(v * scale) : v * scale;
  return t;
}

// Compiles for the device with `options` and, if non-zero, `max_range` as the
// binding limit; runs once. Also reports the plan's dispatch count.
Expected<std::vector<Tensor>> run_with(const OneNode& t, const codegen::CodegenOptions& options, uint64_t max_range,
                                       size_t* dispatches) {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Device> device, testing::test_device());
  codegen::Target target = codegen::target_for(device->info());
  if (max_range) target.max_storage_buffer_range = max_range;
  STRATA_ASSIGN_OR_RETURN(runtime::Plan plan, codegen::compile_plan(t.graph, t.weights, target, options));
  *dispatches = plan.dispatches.size();
  STRATA_ASSIGN_OR_RETURN(auto exec, runtime::Executor::create(device, plan, codegen::weight_source(t.weights)));
  std::vector<Tensor> outputs;
  for (ValueId v : t.graph.outputs()) outputs.emplace_back(t.graph.value(v).type.shape);
  std::vector<std::span<const std::byte>> in;
  for (const Tensor& x : t.inputs) in.push_back(std::as_bytes(std::span(x.data)));
  std::vector<std::span<std::byte>> out;
  for (Tensor& y : outputs) out.push_back(std::as_writable_bytes(std::span(y.data)));
  STRATA_RETURN_IF_ERROR(exec->run(in, out));
  return outputs;
}

struct Check {
  double abs_tol = 2e-5;  // max |Δ| allowed
  double rel_tol = 0;     // ... or this fraction of the output's peak, if larger
  codegen::CodegenOptions options;
  uint64_t max_range = 0;
};

// Runs on the interpreter and on Vulkan and compares; returns the dispatch count.
size_t expect_matches_interpreter(OneNode& t, const std::string& what, const Check& check = {}) {
  EXPECT_TRUE(t.b.ok()) << what << ": " << t.b.status().message();
  if (!t.b.ok()) return 0;
  InterpretOptions io;
  io.threads = 2;
  auto want = interpret(t.graph, t.weights, t.inputs, io);
  EXPECT_TRUE(want.has_value()) << what << ": " << want.message();
  size_t dispatches = 0;
  auto got = check.max_range == 0 && check.options.attention_query_chunk == 0
                 ? testing::run_vulkan(t.graph, t.weights, t.inputs)
                 : run_with(t, check.options, check.max_range, &dispatches);
  EXPECT_TRUE(got.has_value()) << what << ": " << got.message();
  if (!want || !got) return 0;
  EXPECT_EQ(got->size(), want->size());
  for (size_t i = 0; i < std::min(got->size(), want->size()); ++i) {
    double peak = 0;
    for (float v : (*want)[i].data) peak = std::max(peak, double(std::fabs(v)));
    const double diff = max_abs_diff((*got)[i], (*want)[i]);
    EXPECT_LE(diff, std::max(check.abs_tol, check.rel_tol * peak)) << what << ": max |Δ| " << diff;
  }
  return dispatches;
}

// ---- attention -----------------------------------------------------------------

struct AttentionCase {
  Shape q, k, v;
};

std::string describe(const AttentionCase& c) {
  return fmt::format("attention q{} k{} v{}", shape_str(c.q), shape_str(c.k), shape_str(c.v));
}

void build_attention(OneNode& t, const AttentionCase& c, uint32_t seed, float magnitude = 1.0f,
                     bool integers = false) {
  ValueId q = t.input("q", random_input(c.q, seed, magnitude, integers));
  ValueId k = t.input("k", random_input(c.k, seed + 1, magnitude, integers));
  ValueId v = t.input("v", random_input(c.v, seed + 2));
  t.b.output(t.b.attention(q, k, v, 1.0 / std::sqrt(double(c.q.back()))));
}

TEST(CodegenAttention, MatchesInterpreter) {
  const AttentionCase cases[] = {
      {{100, 64}, {100, 64}, {100, 64}},                // one head, T not a multiple of the tiles
      {{1, 100, 64}, {1, 100, 64}, {1, 100, 64}},
      {{2, 77, 64}, {2, 77, 64}, {2, 77, 64}},          // two heads
      {{2, 3, 40, 16}, {2, 3, 40, 16}, {2, 3, 40, 16}}, // multi-dim heads, small D
      {{1, 50, 32}, {1, 300, 32}, {1, 300, 48}},        // Tq != Tk, Dv != D
      {{3, 1, 80}, {3, 129, 80}, {3, 129, 24}},         // one query, D not a multiple of 64
      {{1, 256, 512}, {1, 256, 512}, {1, 256, 512}},    // D = 512
  };
  uint32_t seed = 1;
  for (const auto& c : cases) {
    OneNode t;
    build_attention(t, c, seed += 3);
    expect_matches_interpreter(t, describe(c));
  }
}

// Integer q, k of magnitude up to 12 at D = 64 give scores in the hundreds, rising
// along the keys so the running max is replaced block after block: exp without the
// max subtracted would overflow, and a wrong rescaling of the running sums shows.
TEST(CodegenAttention, LargeScoresAreStable) {
  OneNode t;
  const int64_t tq = 37, tk = 200, d = 64;
  Tensor q = random_input({1, tq, d}, 5, 12.0f, true);
  Tensor k = random_input({1, tk, d}, 6, 12.0f, true);
  // Scale key j by (1 + j / 50) in whole numbers: later keys score larger.
  for (int64_t j = 0; j < tk; ++j)
    for (int64_t i = 0; i < d; ++i) k.data[size_t(j * d + i)] = std::round(k.data[size_t(j * d + i)] * (1 + j / 50));
  ValueId qv = t.input("q", std::move(q));
  ValueId kv = t.input("k", std::move(k));
  ValueId vv = t.input("v", random_input({1, tk, d}, 7));
  t.b.output(t.b.attention(qv, kv, vv, 0.5));
  expect_matches_interpreter(t, "attention with scores in the hundreds");
}

// Query chunks (attention_query_chunk) and windows of a small binding range give the
// same results as one dispatch.
TEST(CodegenAttention, QueryChunksAndWindowsMatch) {
  {
    OneNode t;
    const AttentionCase c{{3, 70, 32}, {3, 90, 32}, {3, 90, 40}};
    build_attention(t, c, 21);
    Check check;
    check.options.attention_query_chunk = 33;
    EXPECT_EQ(expect_matches_interpreter(t, describe(c) + " query chunk 33", check), 9u);  // 3 heads × 3 chunks
  }
  {
    OneNode t;
    const AttentionCase c{{4, 60, 64}, {4, 100, 64}, {4, 100, 64}};
    build_attention(t, c, 31);
    Check check;
    check.max_range = 64 << 10;  // two heads of k (25.6 KB each) per window
    EXPECT_EQ(expect_matches_interpreter(t, describe(c) + " 64 KiB bindings", check), 2u);
  }
  {
    OneNode t;
    const AttentionCase c{{1, 300, 64}, {1, 40, 64}, {1, 40, 64}};
    build_attention(t, c, 41);
    Check check;
    check.max_range = 16 << 10;  // 63 query rows per window
    EXPECT_EQ(expect_matches_interpreter(t, describe(c) + " 16 KiB bindings", check), 5u);
  }
}

// The brief's size target: D = 512, Tq = Tk = 1024 on lavapipe in a few seconds.
TEST(CodegenAttention, LongSequenceWideHead) {
  OneNode t;
  const AttentionCase c{{1, 1024, 512}, {1, 1024, 512}, {1, 1024, 512}};
  build_attention(t, c, 51);
  ASSERT_TRUE(t.b.ok());
  auto device = testing::test_device();
  ASSERT_TRUE(device.has_value()) << device.message();
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto cg = testing::CompiledGraph::create(*device, t.graph, t.weights);
  ASSERT_TRUE(cg.has_value()) << cg.message();
  const auto t1 = Clock::now();
  auto got = (*cg)->run(t.inputs);
  ASSERT_TRUE(got.has_value()) << got.message();
  const auto t2 = Clock::now();
  const double compile_s = std::chrono::duration<double>(t1 - t0).count();
  const double run_s = std::chrono::duration<double>(t2 - t1).count();
  RecordProperty("compile_seconds", std::to_string(compile_s));
  RecordProperty("run_seconds", std::to_string(run_s));
  std::printf("attention D=512 Tq=Tk=1024: compile %.2f s, run %.2f s\n", compile_s, run_s);
  InterpretOptions io;
  io.threads = 2;
  auto want = interpret(t.graph, t.weights, t.inputs, io);
  ASSERT_TRUE(want.has_value()) << want.message();
  EXPECT_LE(max_abs_diff(got->front(), want->front()), 2e-5);
}

// Keys and values larger than one binding: dispatches walk key windows (32 keys, a
// multiple of the key block) carrying the softmax state; the result is the bytes of
// one dispatch over all keys.
TEST(CodegenAttention, KeyWindowsAreBitIdentical) {
  OneNode t;
  const AttentionCase c{{1, 70, 64}, {1, 300, 64}, {1, 300, 48}};
  build_attention(t, c, 61);
  ASSERT_TRUE(t.b.ok());
  size_t whole_dispatches = 0, windowed_dispatches = 0;
  auto whole = run_with(t, {}, 0, &whole_dispatches);
  auto windowed = run_with(t, {}, 16 << 10, &windowed_dispatches);  // k is 76.8 KB
  ASSERT_TRUE(whole.has_value()) << whole.message();
  ASSERT_TRUE(windowed.has_value()) << windowed.message();
  EXPECT_EQ(whole_dispatches, 1u);
  EXPECT_EQ(windowed_dispatches, 2u * 10u);  // 2 query chunks × 10 key windows
  testing::expect_identical(windowed->front(), whole->front());
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want.has_value()) << want.message();
  EXPECT_LE(max_abs_diff(windowed->front(), want->front()), 2e-5);
}

// One key block alone larger than the binding range is an error naming the node.
TEST(CodegenAttention, KeyBlockAboveBindingRangeIsAnError) {
  OneNode t;
  const AttentionCase c{{1, 8, 256}, {1, 100, 256}, {1, 100, 256}};
  build_attention(t, c, 61);
  codegen::Target target;
  target.max_storage_buffer_range = 16 << 10;  // 32 keys × 256 floats = 32 KiB
  auto plan = codegen::compile_plan(t.graph, t.weights, target);
  ASSERT_FALSE(plan.has_value());
  EXPECT_NE(plan.message().find("attention"), std::string::npos) << plan.message();
  EXPECT_NE(plan.message().find("storage-buffer range"), std::string::npos) << plan.message();
}

// ---- softmax -------------------------------------------------------------------

TEST(CodegenSoftmax, MatchesInterpreter) {
  struct Case {
    Shape x;
    float magnitude;
  };
  // Rows of 5000 and 40 000 stay in registers (ROW_REGS: 20 per invocation of 256, 40 of
  // 1024, both partial); 70 000 and 140 000 are past 64 per invocation of 1024: 32 + 5
  // per invocation kept (lavapipe's 32 KiB of shared memory), the rest (32 112 and
  // 102 112) in two online sweeps.
  const Case cases[] = {{{5, 3}, 1.0f},     {{4, 7, 1000}, 100.0f}, {{2, 129}, 500.0f}, {{3, 5000}, 30.0f},
                        {{2, 40000}, 30.0f}, {{1, 70000}, 30.0f},  {{1}, 1.0f},        {{6, 1}, 1000.0f},
                        {{2, 140000}, 30.0f}};
  uint32_t seed = 70;
  for (const auto& c : cases) {
    OneNode t;
    ValueId x = t.input("x", random_input(c.x, seed++, c.magnitude));
    t.b.output(t.b.softmax(x));
    Check check;
    check.abs_tol = 0;
    check.rel_tol = 1e-5;
    expect_matches_interpreter(t, fmt::format("softmax x{} logits ×{}", shape_str(c.x), c.magnitude), check);
  }
}

// The variant per row length: the three sweeps below 2048 columns, the row in
// registers up to 64 per invocation of 1024 (65 536 columns), the online variant
// beyond: 32 per invocation in registers and, in the default target's 32 KiB of shared
// memory after 9 KiB of partials, 5 more (5 × 1024 floats), the rest in online sweeps.
TEST(CodegenSoftmax, RowLengthPicksTheVariant) {
  struct Case {
    int64_t cols;
    const char* variant;  // in the pipeline's name; nullptr: neither ROW_REGS nor ONLINE
  };
  for (const Case& c : {Case{1000, nullptr}, Case{20000, "ROW_REGS=20,"}, Case{32769, "ROW_REGS=33,"},
                        Case{65536, "ROW_REGS=64,"}, Case{65537, "ONLINE=1,"}, Case{65537, "ROW_REGS=32,"},
                        Case{65537, "SH_ROW=5,"}, Case{70000, "SH_ROW=5,"}}) {
    SCOPED_TRACE(c.cols);
    OneNode t;
    ValueId x = t.input("x", random_input({2, c.cols}, 90, 10.0f));
    t.b.output(t.b.softmax(x));
    auto plan = codegen::compile_plan(t.graph, t.weights, codegen::Target{});
    ASSERT_TRUE(plan) << plan.message();
    std::string names;
    for (const auto& p : plan->pipelines) names += p.name + "\n";
    ASSERT_NE(names.find("softmax.comp["), std::string::npos) << names;
    if (c.variant) {
      EXPECT_NE(names.find(c.variant), std::string::npos) << names;
    } else {
      EXPECT_EQ(names.find("ROW_REGS"), std::string::npos) << names;
      EXPECT_EQ(names.find("ONLINE"), std::string::npos) << names;
    }
  }
}

TEST(CodegenSoftmax, WindowedDispatchesMatch) {
  OneNode t;
  ValueId x = t.input("x", random_input({50, 300}, 80, 20.0f));
  t.b.output(t.b.softmax(x));
  Check check;
  check.abs_tol = 0;
  check.rel_tol = 1e-5;
  check.max_range = 8 << 10;  // 6 rows per window
  EXPECT_EQ(expect_matches_interpreter(t, "softmax (8 KiB bindings)", check), 9u);
}

}  // namespace
}  // namespace strata

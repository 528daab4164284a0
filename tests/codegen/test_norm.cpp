// Codegen: group_norm, rms_norm and layer_norm (kernels/group_norm_*.comp,
// rms_norm.comp, layer_norm.comp) on Vulkan against the interpreter (f64 statistics),
// on random inputs with mean offsets (x = 3 + N(0, 1)), over awkward shapes: 1×1 and
// non-square frames, channel counts that are not multiples of 4, rank 5, and tensors
// split over several windowed dispatches by a small binding range.
#include "codegen/vk_test_util.h"

#include "codegen/codegen.h"
#include "ir/builder.h"
#include "ir/interpreter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace strata {
namespace {

// A graph of one node, its weights, and the inputs to run it on.
struct OneNode {
  Graph graph;
  WeightStore weights;
  Builder b{graph, &weights};
  std::vector<Tensor> inputs;
  uint32_t seed = 1;

  ValueId input(const std::string& name, Tensor t) {
    Shape shape = t.shape;
    inputs.push_back(std::move(t));
    return b.input(name, std::move(shape));
  }
  ValueId weight(const std::string& name, Shape shape) {
    Tensor t = testing::random_tensor(shape, seed++, -1.0f, 1.0f);
    Status s = weights.add_owned(name, shape, std::move(t.data));
    EXPECT_TRUE(s.is_ok()) << s.message();
    return b.constant(name, TensorType{std::move(shape), DType::f32, Layout{}});
  }
};

// mean + N(0, std²) by Box-Muller over testing::random_tensor's uniforms (the same
// values on every platform, unlike <random>'s distributions).
Tensor normal_tensor(Shape shape, uint32_t seed, float mean = 3.0f, float stddev = 1.0f) {
  Tensor t(shape);
  const Tensor u1 = testing::random_tensor(shape, seed, 0.0f, 1.0f);
  const Tensor u2 = testing::random_tensor(shape, seed + 1000003, 0.0f, 1.0f);
  for (size_t i = 0; i < t.data.size(); ++i) {
    const double r = std::sqrt(-2.0 * std::log(1.0 - double(u1.data[i])));
    t.data[i] = mean + stddev * static_cast<float>(r * std::cos(6.283185307179586 * double(u2.data[i])));
  }
  return t;
}

// Compiles for the device's target with `max_range` (if non-zero) as the binding
// limit, so large tensors take the windowed path, and runs once; `dispatches` gets
// the plan's dispatch count.
Expected<std::vector<Tensor>> run_with_range(const OneNode& t, uint64_t max_range, size_t* dispatches) {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Device> device, testing::test_device());
  codegen::Target target = codegen::target_for(device->info());
  if (max_range) target.max_storage_buffer_range = max_range;
  STRATA_ASSIGN_OR_RETURN(runtime::Plan plan, codegen::compile_plan(t.graph, t.weights, target));
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

// Runs on the interpreter and on Vulkan; the largest difference must be within
// `rel` of the output's largest magnitude. Returns the plan's dispatch count.
size_t expect_matches_interpreter(OneNode& t, const std::string& what, double rel = 1e-5, uint64_t max_range = 0) {
  EXPECT_TRUE(t.b.ok()) << what << ": " << t.b.status().message();
  if (!t.b.ok()) return 0;
  InterpretOptions io;
  io.threads = 2;
  auto want = interpret(t.graph, t.weights, t.inputs, io);
  EXPECT_TRUE(want.has_value()) << what << ": " << want.message();
  size_t dispatches = 0;
  auto got = run_with_range(t, max_range, &dispatches);
  EXPECT_TRUE(got.has_value()) << what << ": " << got.message();
  if (!want || !got) return 0;
  EXPECT_EQ(got->size(), want->size());
  for (size_t i = 0; i < std::min(got->size(), want->size()); ++i) {
    const Tensor& w = (*want)[i];
    const Tensor& g = (*got)[i];
    double peak = 0;
    for (float v : w.data) peak = std::max(peak, double(std::fabs(v)));
    const double diff = max_abs_diff(g, w);
    EXPECT_LE(diff, rel * peak) << what << ": max |Δ| " << diff << " vs peak " << peak;
  }
  return dispatches;
}

// ---- group_norm ----------------------------------------------------------------

struct GroupNormCase {
  Shape x;
  int64_t groups;
};

std::string describe(const GroupNormCase& c) {
  return fmt::format("group_norm x{} groups {}", shape_str(c.x), c.groups);
}

void build_group_norm(OneNode& t, const GroupNormCase& c, uint32_t seed) {
  ValueId x = t.input("x", normal_tensor(c.x, seed));
  ValueId gamma = t.weight("gamma", {c.x[1]});
  ValueId beta = t.weight("beta", {c.x[1]});
  t.b.output(t.b.group_norm(x, gamma, beta, c.groups, 1e-6));
}

TEST(CodegenGroupNorm, MatchesInterpreterOnMeanOffsetData) {
  const GroupNormCase cases[] = {
      {{1, 16, 1, 1}, 8},    {{2, 16, 1, 1}, 8},    {{1, 64, 7, 5}, 32},   {{2, 96, 7, 5}, 8},
      {{1, 96, 64, 64}, 32}, {{1, 64, 64, 64}, 8},  {{1, 16, 64, 64}, 8},  {{1, 32, 3, 9, 11}, 8},
  };
  uint32_t seed = 100;
  for (const auto& c : cases) {
    OneNode t;
    build_group_norm(t, c, seed++);
    expect_matches_interpreter(t, describe(c));
  }
}

// The accuracy target's largest case: 128×128 frames of 64 channels, offset data.
TEST(CodegenGroupNorm, LargeFrameStaysWithinTolerance) {
  OneNode t;
  const GroupNormCase c{{1, 64, 128, 128}, 32};
  build_group_norm(t, c, 7);
  expect_matches_interpreter(t, describe(c));
}

// A large offset relative to the spread (x = 30 + N(0, 0.1)): a one-pass E[x²] - E[x]²
// in f32 would lose most digits of the variance here; Welford / Chan keeps them. (What
// remains is the f32 rounding of the mean itself, ulp(30)/2 ≈ 1e-5 of a std.)
TEST(CodegenGroupNorm, LargeMeanSmallSpread) {
  OneNode t;
  ValueId x = t.input("x", normal_tensor({1, 32, 40, 40}, 9, 30.0f, 0.1f));
  ValueId gamma = t.weight("gamma", {32});
  ValueId beta = t.weight("beta", {32});
  t.b.output(t.b.group_norm(x, gamma, beta, 8, 1e-6));
  expect_matches_interpreter(t, "group_norm mean 30 std 0.1");
}

// A binding range of 64 KiB splits x into many windows (chunks of different
// segments share a window; windows start mid-segment) with the same results.
TEST(CodegenGroupNorm, WindowedDispatchesMatch) {
  OneNode t;
  const GroupNormCase c{{2, 24, 50, 37}, 8};
  build_group_norm(t, c, 11);
  const size_t dispatches = expect_matches_interpreter(t, describe(c) + " (64 KiB bindings)", 1e-5, 64 << 10);
  EXPECT_GT(dispatches, 3u) << "expected the stats and apply passes to be split";
}

// ---- rms_norm ------------------------------------------------------------------

struct RmsCase {
  Shape x;
  Shape gamma;
  bool beta;
};

TEST(CodegenRmsNorm, MatchesInterpreterRank4And5) {
  const RmsCase cases[] = {
      {{1, 96, 7, 5}, {96}, false},          {{2, 96, 7, 5}, {96, 1, 1}, true},
      {{1, 64, 3, 8, 9}, {64, 1, 1, 1}, false}, {{2, 12, 2, 5, 3}, {12, 1, 1, 1}, true},
      {{1, 384, 1, 1}, {384}, true},         {{1, 3, 33, 17}, {3}, false},
  };
  uint32_t seed = 200;
  for (const auto& c : cases) {
    OneNode t;
    ValueId x = t.input("x", normal_tensor(c.x, seed++, 0.5f, 2.0f));
    ValueId gamma = t.weight("gamma", c.gamma);
    ValueId beta = c.beta ? t.weight("beta", {c.x[1]}) : kNoValue;
    t.b.output(t.b.rms_norm(x, gamma, beta));
    expect_matches_interpreter(t, fmt::format("rms_norm x{} gamma{}{}", shape_str(c.x), shape_str(c.gamma),
                                              c.beta ? " +beta" : ""));
  }
}

TEST(CodegenRmsNorm, WindowedDispatchesMatch) {
  OneNode t;
  ValueId x = t.input("x", normal_tensor({5, 16, 20, 30}, 3));
  ValueId gamma = t.weight("gamma", {16});
  t.b.output(t.b.rms_norm(x, gamma));
  EXPECT_EQ(expect_matches_interpreter(t, "rms_norm (40 KiB bindings)", 1e-5, 40 << 10), 5u);  // a sample each
}

// ---- layer_norm ----------------------------------------------------------------

TEST(CodegenLayerNorm, MatchesInterpreter) {
  struct Case {
    Shape x;
    bool gamma, beta;
  };
  const Case cases[] = {{{3, 5, 300}, true, true}, {{7, 1000}, false, false}, {{4, 33}, true, false},
                        {{2, 3, 3072}, false, true}, {{1, 1}, true, true}};
  uint32_t seed = 300;
  for (const auto& c : cases) {
    OneNode t;
    ValueId x = t.input("x", normal_tensor(c.x, seed++));
    ValueId gamma = c.gamma ? t.weight("gamma", {c.x.back()}) : kNoValue;
    ValueId beta = c.beta ? t.weight("beta", {c.x.back()}) : kNoValue;
    t.b.output(t.b.layer_norm(x, gamma, beta, 1e-5));
    expect_matches_interpreter(t, fmt::format("layer_norm x{}{}{}", shape_str(c.x), c.gamma ? " +gamma" : "",
                                              c.beta ? " +beta" : ""));
  }
}

// Short rows share a workgroup (LANES invocations per row, 128 / LANES rows): the
// transformers' per-head q and k norms. Rows read as 4-vectors take about 4 vectors
// per lane: rows of 64 take 8 lanes, 16 rows per workgroup, the only workgroup partly
// empty (13 rows); rows of 512 take 32 lanes; rows of 2048 keep 128 lanes.
TEST(CodegenLayerNorm, ShortRowsShareAWorkgroup) {
  for (const auto& [cols, lanes] :
       {std::pair<int64_t, const char*>{64, "LANES=8,"}, {512, "LANES=32,"}, {2048, nullptr}}) {
    SCOPED_TRACE(cols);
    OneNode t;
    ValueId x = t.input("x", normal_tensor({13, cols}, 77));
    t.b.output(t.b.token_rms_norm(x, t.weight("gamma", {cols}), 1e-5));
    ASSERT_TRUE(t.b.ok());
    auto device = testing::test_device();
    ASSERT_TRUE(device) << device.message();
    auto plan = codegen::compile_plan(t.graph, t.weights, codegen::target_for((*device)->info()));
    ASSERT_TRUE(plan) << plan.message();
    std::string names;
    for (const auto& p : plan->pipelines)
      if (p.name.rfind("layer_norm.comp", 0) == 0) names += p.name;
    if (lanes) {
      EXPECT_NE(names.find(lanes), std::string::npos) << names;
    } else {
      EXPECT_EQ(names.find("LANES"), std::string::npos) << names;
    }
    expect_matches_interpreter(t, fmt::format("token_rms_norm rows of {}", cols));
  }
}

TEST(CodegenLayerNorm, WindowedDispatchesMatch) {
  OneNode t;
  ValueId x = t.input("x", normal_tensor({300, 100}, 5));
  t.b.output(t.b.layer_norm(x, kNoValue, kNoValue, 1e-5));
  EXPECT_GE(expect_matches_interpreter(t, "layer_norm (16 KiB bindings)", 1e-5, 16 << 10), 8u);
}

// A row larger than the binding range is an error naming the node.
TEST(CodegenLayerNorm, RowAboveBindingRangeIsAnError) {
  OneNode t;
  ValueId x = t.input("x", normal_tensor({2, 5000}, 5));
  t.b.output(t.b.layer_norm(x, kNoValue, kNoValue, 1e-5));
  ASSERT_TRUE(t.b.ok());
  codegen::Target target;
  target.max_storage_buffer_range = 16 << 10;
  auto plan = codegen::compile_plan(t.graph, t.weights, target);
  ASSERT_FALSE(plan.has_value());
  EXPECT_NE(plan.message().find("layer_norm"), std::string::npos) << plan.message();
  EXPECT_NE(plan.message().find("storage-buffer range"), std::string::npos) << plan.message();
}

// ---- all of them, under the validation layer ------------------------------------

// The validation layer (with synchronization validation) sees nothing wrong in a
// chain of every kernel of lower_norm and lower_attention, replayed twice: group-norm
// scratch reused by the next group norm (write after read), windows that share an
// aligned block at their seams, and with a 1 KiB binding range several dispatches per
// node. Skipped where the layer is not installed.
TEST(CodegenNorm, ValidationLayerIsSilent) {
  runtime::DeviceOptions opts;
  opts.validation = true;
  auto dev = runtime::open_device(opts, {});
  ASSERT_TRUE(dev) << dev.message();
  if (!(*dev)->instance().validation_enabled()) GTEST_SKIP() << "validation layer not installed";
  for (uint64_t range : {uint64_t(0), uint64_t(1) << 10}) {
    SCOPED_TRACE(range ? "1 KiB bindings" : "whole bindings");
    OneNode t;
    ValueId x = t.input("x", normal_tensor({4, 8, 4, 6}, 1));
    ValueId h = t.b.group_norm(x, t.weight("g1", {8}), t.weight("b1", {8}), 4, 1e-6);
    h = t.b.rms_norm(h, t.weight("g2", {8}), t.weight("b2", {8}));
    h = t.b.group_norm(h, t.weight("g3", {8}), t.weight("b3", {8}), 2, 1e-6);
    h = t.b.reshape(h, {4, 8, 24});
    ValueId ln = t.b.layer_norm(h, t.weight("g4", {24}), kNoValue, 1e-5);
    t.b.output(t.b.attention(ln, t.b.softmax(ln), h, 0.25));
    ASSERT_TRUE(t.b.ok()) << t.b.status().message();
    codegen::Target target = codegen::target_for((*dev)->info());
    if (range) target.max_storage_buffer_range = range;
    auto plan = codegen::compile_plan(t.graph, t.weights, target);
    ASSERT_TRUE(plan) << plan.message();
    if (range) {
      EXPECT_GT(plan->dispatches.size(), 20u);
    }
    auto exec = runtime::Executor::create(*dev, *plan, codegen::weight_source(t.weights));
    ASSERT_TRUE(exec) << exec.message();
    Tensor out({4, 8, 24});
    for (int run = 0; run < 2; ++run)
      ASSERT_TRUE((*exec)->run({std::as_bytes(std::span(t.inputs[0].data))},
                               {std::as_writable_bytes(std::span(out.data))}));
    auto want = interpret(t.graph, t.weights, t.inputs);
    ASSERT_TRUE(want) << want.message();
    testing::expect_close(out, want->front(), 1e-4, 1e-5);
  }
  std::vector<std::string> messages = (*dev)->instance().take_validation_messages();
  std::string all;
  for (const auto& m : messages) all += m + "\n";
  EXPECT_TRUE(messages.empty()) << all;
}

}  // namespace
}  // namespace strata

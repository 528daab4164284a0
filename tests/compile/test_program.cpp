// Programs end to end on the test device: plans compiled by compile() and linked over
// shared buffers, run in the caller's order by the runtime with their states kept on
// the device, against the reference interpreter running the same program
// (ProgramInterpreter) and against values worked out by hand.
#include "compile/compile.h"
#include "ir/builder.h"
#include "ir/program.h"
#include "ir/program_interpreter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <tuple>

namespace strata {
namespace {

const Shape kShape{1, 8, 4, 4};

Tensor filled(const Shape& shape, float (*f)(size_t, float), float k) {
  Tensor t(shape);
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = f(i, k);
  return t;
}

// The device tests run on, as an f32 target: the arithmetic below is exact in f32.
Target f32_target() {
  auto device = find_device();
  EXPECT_TRUE(device) << device.message();
  auto target = make_target(*device, {.precision = Precision::f32});
  EXPECT_TRUE(target) << target.message();
  return *target;
}

std::unique_ptr<LoadedProgram> compile_and_load(const ProgramGraph& p, WeightStore& weights, const Target& target,
                                                CompilerOptions options = {}) {
  std::ostringstream log;
  auto program = compile(p, weights, target, options, log);
  EXPECT_TRUE(program) << program.message() << "\n" << log.str();
  if (!program) return nullptr;
  auto loaded = LoadedProgram::load(std::move(*program), {}, log);
  EXPECT_TRUE(loaded) << loaded.message() << "\n" << log.str();
  return loaded ? std::move(*loaded) : nullptr;
}

// accumulate(x): sum += x, returns the new sum.
ProgramGraph running_sum() {
  ProgramGraph p;
  p.name = "running_sum";
  Graph g;
  g.name = "accumulate";
  Builder b(g, nullptr);
  ValueId x = b.input("x", kShape);
  ValueId acc = b.state_input("acc", TensorType{kShape, DType::f32, {}}, "sum");
  ValueId next = b.add(acc, x);
  g.mark_output(next);
  b.state_output(next, "sum");
  p.plans.push_back(std::move(g));
  return p;
}

TEST(Program, RunningSumKeptInStateOverFiveCalls) {
  const Target target = f32_target();
  WeightStore weights;
  ProgramGraph p = running_sum();
  auto loaded = compile_and_load(p, weights, target);
  ASSERT_TRUE(loaded);
  auto oracle = ProgramInterpreter::create(p, weights);
  ASSERT_TRUE(oracle) << oracle.message();
  ASSERT_EQ(loaded->plan().states.size(), 1u);

  std::vector<float> expected(static_cast<size_t>(num_elements(kShape)), 0.0f);
  for (int call = 1; call <= 5; ++call) {
    const Tensor x = filled(kShape, [](size_t i, float k) { return static_cast<float>(i % 7) * k - 3.0f; },
                            static_cast<float>(call));
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += x.data[i];  // small integers: exact
    auto got = loaded->run({x});
    ASSERT_TRUE(got) << got.message();
    auto want = oracle->run("accumulate", {x});
    ASSERT_TRUE(want) << want.message();
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ((*got)[0].data, expected) << "call " << call;
    EXPECT_EQ((*want)[0].data, expected) << "call " << call << " (interpreter)";
    auto state = loaded->state("sum");
    ASSERT_TRUE(state) << state.message();
    EXPECT_EQ(state->data, expected) << "call " << call;
  }
  // The host can reset the state; the next call starts from there.
  ASSERT_TRUE(loaded->set_state("sum", Tensor(kShape)).is_ok());
  const Tensor one = filled(kShape, [](size_t, float k) { return k; }, 1.0f);
  auto after_reset = loaded->run({one});
  ASSERT_TRUE(after_reset) << after_reset.message();
  EXPECT_EQ((*after_reset)[0].data, one.data);
}

// Two plans that differ only in which states they read and write, alternating like
// the Wan decoder's: ping reads "a" and writes "b" = a + x, pong reads "b" and writes
// "a" = b + x. They compile once, and each plan's writes land in the state it names.
TEST(Program, PlansEqualUpToStateNamesCompileOnceAndKeepTheirStates) {
  const Target target = f32_target();
  WeightStore weights;
  ProgramGraph p;
  for (auto [name, from, to] : {std::tuple{"ping", "a", "b"}, std::tuple{"pong", "b", "a"}}) {
    Graph g;
    g.name = name;
    Builder b(g, nullptr);
    ValueId x = b.input("x", kShape);
    ValueId acc = b.state_input("acc", TensorType{kShape, DType::f32, {}}, from);
    ValueId next = b.add(acc, x);
    g.mark_output(next);
    b.state_output(b.scale(next, 1.0), to);
    p.plans.push_back(std::move(g));
  }
  std::ostringstream log;
  auto program = compile(p, weights, target, {}, log);
  ASSERT_TRUE(program) << program.message();
  EXPECT_NE(log.str().find("plan 'pong': the graph of plan 'ping' up to state names; compiled once"),
            std::string::npos)
      << log.str();
  auto loaded = LoadedProgram::load(std::move(*program), {}, log);
  ASSERT_TRUE(loaded) << loaded.message();
  std::vector<float> sum(static_cast<size_t>(num_elements(kShape)), 0.0f);
  for (int call = 1; call <= 4; ++call) {
    const Tensor x = filled(kShape, [](size_t i, float k) { return static_cast<float>(i % 5) + k; },
                            static_cast<float>(call));
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += x.data[i];
    auto got = (*loaded)->run(call % 2 ? "ping" : "pong", {x});
    ASSERT_TRUE(got) << got.message();
    EXPECT_EQ((*got)[0].data, sum) << "call " << call;
    auto state = (*loaded)->state(call % 2 ? "b" : "a");  // the state this call wrote
    ASSERT_TRUE(state) << state.message();
    EXPECT_EQ(state->data, sum) << "call " << call;
  }
}

// prepare(p): ctx = silu(conv3x3(p) + bias), written to state; use(q) = q + ctx.
ProgramGraph prepare_then_use(WeightStore& weights) {
  std::vector<float> w(8 * 8 * 3 * 3), bias(8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i * 29 % 17) - 8) / 64.0f;
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i) / 8.0f - 0.5f;
  EXPECT_TRUE(weights.add_owned("conv.weight", {8, 8, 3, 3}, w).is_ok());
  EXPECT_TRUE(weights.add_owned("conv.bias", {8}, bias).is_ok());
  ProgramGraph p;
  p.name = "prepare_then_use";
  {
    Graph g;
    g.name = "prepare";
    Builder b(g, &weights);
    ValueId x = b.input("p", kShape);
    ValueId h = b.conv2d(x, b.weight("conv.weight"), b.weight("conv.bias"), {.pad = 1});
    b.state_output(b.silu(h), "ctx");
    p.plans.push_back(std::move(g));
  }
  {
    Graph g;
    g.name = "use";
    Builder b(g, &weights);
    ValueId q = b.input("q", kShape);
    ValueId ctx = b.state_input("ctx", TensorType{kShape, DType::f32, {}}, "ctx");
    g.mark_output(b.add(q, ctx));
    p.plans.push_back(std::move(g));
  }
  return p;
}

TEST(Program, OnePlanRunsOnceAndFourRunsOfAnotherReadItsState) {
  const Target target = f32_target();
  WeightStore weights;
  ProgramGraph p = prepare_then_use(weights);
  auto oracle = ProgramInterpreter::create(p, weights);
  ASSERT_TRUE(oracle) << oracle.message();
  auto loaded = compile_and_load(p, weights, target);
  ASSERT_TRUE(loaded);

  // "use" binds the state; none of the conv's work is in its dispatches.
  const auto& entries = loaded->executor().entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].name, "use");
  for (uint32_t d = entries[1].first_dispatch; d < entries[1].first_dispatch + entries[1].dispatch_count; ++d)
    EXPECT_EQ(loaded->plan().dispatches[d].label.find("conv"), std::string::npos) << loaded->plan().dispatches[d].label;

  const Tensor pin = filled(kShape, [](size_t i, float) { return std::sin(static_cast<float>(i)); }, 0.0f);
  auto prepared = loaded->run("prepare", {pin});
  ASSERT_TRUE(prepared) << prepared.message();
  EXPECT_TRUE(prepared->empty());
  ASSERT_TRUE(oracle->run("prepare", {pin}));
  auto ctx = loaded->state("ctx");
  ASSERT_TRUE(ctx) << ctx.message();
  auto want_ctx = oracle->state("ctx");
  ASSERT_TRUE(want_ctx) << want_ctx.message();
  EXPECT_LE(max_abs_diff(*ctx, *want_ctx), 1e-5);

  for (int run = 0; run < 4; ++run) {
    const Tensor q = filled(kShape, [](size_t i, float k) { return std::cos(static_cast<float>(i) * k); },
                            static_cast<float>(run + 1));
    auto got = loaded->run("use", {q});
    ASSERT_TRUE(got) << got.message();
    auto want = oracle->run("use", {q});
    ASSERT_TRUE(want) << want.message();
    EXPECT_LE(max_abs_diff((*got)[0], (*want)[0]), 1e-5) << "run " << run;
    // q + ctx, with the ctx the device holds: exact.
    for (size_t i = 0; i < q.data.size(); ++i) ASSERT_EQ((*got)[0].data[i], q.data[i] + ctx->data[i]) << i;
  }
  auto still = loaded->state("ctx");
  ASSERT_TRUE(still);
  EXPECT_EQ(still->data, ctx->data) << "reading a state does not change it";
}

TEST(Program, ErrorsNameThePlansAndStates) {
  const Target target = f32_target();
  WeightStore weights;
  ProgramGraph p = prepare_then_use(weights);
  auto loaded = compile_and_load(p, weights, target);
  ASSERT_TRUE(loaded);
  const Tensor t(kShape);
  auto unnamed = loaded->run({t});
  ASSERT_FALSE(unnamed);
  EXPECT_EQ(unnamed.message(), "the program has 2 plans ('prepare', 'use'); name the one to run");
  auto unknown = loaded->run("decode", {t});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.message(), "no plan 'decode' in the program (it has 'prepare', 'use')");
  auto state = loaded->state("cache");
  ASSERT_FALSE(state);
  EXPECT_EQ(state.message(), "no state 'cache' in the program (it has 'ctx')");
  auto wrong = loaded->run("use", {Tensor({1, 8, 4, 5})});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.message().find("input 'q'"), std::string::npos) << wrong.message();
  Status bad_set = loaded->set_state("ctx", Tensor({8}));
  EXPECT_FALSE(bad_set.is_ok());
}

TEST(Program, ACachedProgramKeepsItsPlansAndStates) {
  const Target target = f32_target();
  WeightStore weights;
  ProgramGraph p = prepare_then_use(weights);
  const std::string dir = ::testing::TempDir() + "strata-program-cache";
  std::filesystem::remove_all(dir);
  CompilerOptions options;
  options.cache_dir = dir;
  auto cold = compile_and_load(p, weights, target, options);
  ASSERT_TRUE(cold);
  EXPECT_FALSE(cold->program().from_cache);
  auto warm = compile_and_load(p, weights, target, options);
  ASSERT_TRUE(warm);
  EXPECT_TRUE(warm->program().from_cache);
  EXPECT_EQ(warm->plan().entries, cold->plan().entries);
  const Tensor pin(kShape, std::vector<float>(static_cast<size_t>(num_elements(kShape)), 0.25f));
  for (LoadedProgram* l : {cold.get(), warm.get()}) ASSERT_TRUE(l->run("prepare", {pin}));
  const Tensor q(kShape, std::vector<float>(static_cast<size_t>(num_elements(kShape)), 1.0f));
  auto a = cold->run("use", {q}), b = warm->run("use", {q});
  ASSERT_TRUE(a && b);
  EXPECT_EQ((*a)[0].data, (*b)[0].data);
  std::filesystem::remove_all(dir);
}

// Outputs of 4 MiB and more are made on another thread while the device runs
// (LoadedProgram::run): the same values as a small run of the same graph, twice over,
// and every value written (the output is made afresh for each run).
TEST(Program, LargeOutputsMadeDuringTheRunHoldEveryValue) {
  const Target target = f32_target();
  for (const int64_t n : {int64_t{1} << 10, int64_t{1} << 21}) {  // 4 KiB, 8 MiB
    SCOPED_TRACE(n);
    ProgramGraph p;
    p.name = "double_plus_one";
    Graph g;
    g.name = "once";
    Builder b(g, nullptr);
    ValueId x = b.input("x", Shape{n});
    g.mark_output(b.scale(x, 2.0, 1.0));
    p.plans.push_back(std::move(g));
    WeightStore weights;
    auto loaded = compile_and_load(p, weights, target);
    ASSERT_TRUE(loaded);
    for (int call = 0; call < 2; ++call) {
      Tensor x_in(Shape{n});
      for (size_t i = 0; i < x_in.data.size(); ++i) x_in.data[i] = static_cast<float>(i % 1001) - 500.0f + call;
      auto got = loaded->run({x_in});
      ASSERT_TRUE(got) << got.message();
      ASSERT_EQ(got->size(), 1u);
      ASSERT_EQ((*got)[0].shape, Shape{n});
      for (size_t i = 0; i < x_in.data.size(); ++i)  // small integers: exact
        ASSERT_EQ((*got)[0].data[i], 2.0f * x_in.data[i] + 1.0f) << "value " << i << " of run " << call;
    }
  }
}

}  // namespace
}  // namespace strata

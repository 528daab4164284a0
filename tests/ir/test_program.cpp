// Programs (ir/program.h): plans that share state by name. verify_program, the text
// form (print_program / parse_program round trip), and ProgramInterpreter running
// plans in a caller-chosen order with states kept between runs.
#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/program.h"
#include "ir/program_interpreter.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TensorType f32(Shape s) { return TensorType{std::move(s), DType::f32, {}}; }

Tensor vec(std::vector<float> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return Tensor(std::move(s), std::move(v));
}

void expect_tensor(const Tensor& t, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(t.shape, (Shape{static_cast<int64_t>(want.size())})) << what;
  EXPECT_EQ(t.data, want) << what;
}

void expect_mentions(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "message: " << message << "\nmissing: " << part;
}

// accumulate(x, acc <- "sum"): next = acc + x, returned and written back to "sum".
Graph accumulate() {
  Graph g;
  g.name = "accumulate";
  Builder b(g, nullptr);
  ValueId x = b.input("x", {4});
  ValueId acc = b.state_input("acc", f32({4}), "sum");
  ValueId next = b.op(Op::add, {acc, x}, {}, "next");
  b.output(next);
  b.state_output(next, "sum");
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

// prepare(p): ctx = 2·p, written to "ctx", nothing returned.
// use(ctx <- "ctx", q): returns q + ctx, writes nothing.
ProgramGraph once_then_many(Shape shape = {3}) {
  ProgramGraph p;
  p.name = "otm";
  {
    Graph g;
    g.name = "prepare";
    Builder b(g, nullptr);
    ValueId in = b.input("p", shape);
    b.state_output(b.scale(in, 2.0), "ctx");
    EXPECT_TRUE(b.ok()) << b.status().message();
    p.plans.push_back(std::move(g));
  }
  {
    Graph g;
    g.name = "use";
    Builder b(g, nullptr);
    ValueId ctx = b.state_input("ctx", f32(shape), "ctx");
    ValueId q = b.input("q", shape);
    b.output(b.add(q, ctx));
    EXPECT_TRUE(b.ok()) << b.status().message();
    p.plans.push_back(std::move(g));
  }
  return p;
}

TEST(Program, FindAndStates) {
  ProgramGraph p = once_then_many();
  ASSERT_NE(p.find("use"), nullptr);
  EXPECT_EQ(p.find("use")->name, "use");
  EXPECT_EQ(p.find("nope"), nullptr);
  auto states = program_states(p);
  ASSERT_TRUE(states.has_value()) << states.message();
  ASSERT_EQ(states->size(), 1u);
  EXPECT_EQ(states->at("ctx"), f32({3}));
  EXPECT_TRUE(verify_program(p).is_ok()) << verify_program(p).message();
}

TEST(Program, StateTypeMismatchAcrossPlansNamesBothPlans) {
  ProgramGraph p = once_then_many();
  ProgramGraph other = once_then_many({5});
  p.plans[1] = std::move(other.plans[1]);  // "use" reads ctx as f32[5]
  EXPECT_EQ(verify_program(p).message(),
            "program @otm: state 'ctx' is f32[3] in plan 'prepare' (%scale) but f32[5] in plan 'use' (%ctx)");
}

TEST(Program, ReadButNeverWritten) {
  ProgramGraph p = once_then_many();
  p.plans.erase(p.plans.begin());  // drop "prepare"
  EXPECT_EQ(verify_program(p).message(), "program @otm: state 'ctx' is read by plan 'use' but no plan writes it");
}

TEST(Program, WrittenButNeverReadIsAllowed) {
  ProgramGraph p = once_then_many();
  p.plans.pop_back();  // drop "use"
  EXPECT_TRUE(verify_program(p).is_ok()) << verify_program(p).message();
}

TEST(Program, DuplicateAndEmptyPlanNames) {
  ProgramGraph p = once_then_many();
  p.plans[1].name = "prepare";
  EXPECT_EQ(verify_program(p).message(), "program @otm: two plans are named 'prepare'");
  p.plans[1].name = "";
  EXPECT_EQ(verify_program(p).message(), "program @otm: a plan has an empty name");
}

TEST(Program, PlanFailingVerificationIsNamed) {
  ProgramGraph p = once_then_many();
  Graph& use = p.plans[1];
  use.mark_state_output(use.inputs()[1], "ctx");
  use.mark_state_output(use.inputs()[1], "ctx");
  std::string m = verify_program(p).message();
  EXPECT_EQ(m.rfind("program @otm: plan 'use': state 'ctx' is bound to graph output 1", 0), 0u) << m;
}

const char* const kProgramText =
    "program @otm {\n"
    "  graph @prepare(%p: f32[3]) {\n"
    "    %scale: f32[3] = scale \"scale\" (%p) {add = 0.0, mul = 2.0}\n"
    "    return %scale state \"ctx\"\n"
    "  }\n"
    "  graph @use(%ctx: f32[3] state \"ctx\", %q: f32[3]) {\n"
    "    %add: f32[3] = add \"add\" (%q, %ctx)\n"
    "    return %add\n"
    "  }\n"
    "}\n";

TEST(ProgramText, GoldenAndRoundTrip) {
  ProgramGraph p = once_then_many();
  EXPECT_EQ(print_program(p), kProgramText);
  auto parsed = parse_program(kProgramText);
  ASSERT_TRUE(parsed.has_value()) << parsed.message();
  EXPECT_EQ(print_program(*parsed), kProgramText);
  EXPECT_EQ(parsed->name, "otm");
  ASSERT_EQ(parsed->plans.size(), 2u);
  EXPECT_EQ(parsed->plans[0].state_writes(), (std::vector<StateBinding>{{"ctx", 0}}));
  EXPECT_EQ(parsed->plans[1].state_reads(), (std::vector<StateBinding>{{"ctx", 0}}));
}

TEST(ProgramText, EmptyProgramRoundTrips) {
  ProgramGraph p;
  EXPECT_EQ(print_program(p), "program @program {\n}\n");
  auto parsed = parse_program("program @program {\n}\n");
  ASSERT_TRUE(parsed.has_value()) << parsed.message();
  EXPECT_TRUE(parsed->plans.empty());
}

void expect_program_error(const std::string& text, const std::string& message) {
  auto p = parse_program(text);
  ASSERT_FALSE(p.has_value()) << "parsed:\n" << text;
  EXPECT_EQ(p.message(), message) << text;
}

TEST(ProgramText, Errors) {
  expect_program_error("graph @g() {\n  return\n}", "1:1: expected 'program' at the start of a program, got 'graph'");
  expect_program_error("program p {}", "1:9: expected '@' and the program's name after 'program', got 'p'");
  expect_program_error("program @p {\n  %x\n}",
                       "2:3: expected '}' to close the program body (or 'graph' to start another plan), got '%x'");
  // A second plan of the same name: at its 'graph' keyword.
  expect_program_error("program @p {\n  graph @a() {\n    return\n  }\n  graph @a() {\n    return\n  }\n}",
                       "5:3: plan @a is already defined (at 2:3)");
  // Errors inside a plan keep the program text's line and column.
  expect_program_error("program @p {\n  graph @a(%x: f32[2]) {\n    return %x state 3\n  }\n}",
                       "3:21: expected the state's name (a string) after 'state', got '3'");
  expect_program_error("program @p {}\nx", "2:1: expected end of input after the program, got 'x'");
  // Whole-program checks run after parsing.
  expect_program_error("program @p {\n  graph @a(%x: f32[2] state \"s\") {\n    return %x\n  }\n}",
                       "parsed program fails verification: program @p: state 's' is read by plan 'a' but no "
                       "plan writes it");
}

// The running sum: five runs of "accumulate"; each returns the sum so far, and the
// state holds it after the run. Sums worked out by hand (all exact in f32).
TEST(ProgramInterpreter, RunningSum) {
  ProgramGraph p;
  p.name = "sum";
  p.plans.push_back(accumulate());
  WeightStore weights;
  auto pi = ProgramInterpreter::create(std::move(p), weights);
  ASSERT_TRUE(pi.has_value()) << pi.message();
  auto s0 = pi->state("sum");
  ASSERT_TRUE(s0.has_value()) << s0.message();
  expect_tensor(*s0, {0, 0, 0, 0}, "initial state");

  const std::vector<std::vector<float>> xs = {
      {1, 2, 3, 4}, {10, 20, 30, 40}, {-1, -2, -3, -4}, {0.5f, 0.25f, 0.125f, 0}, {100, 0, -100, 2}};
  const std::vector<std::vector<float>> sums = {
      {1, 2, 3, 4}, {11, 22, 33, 44}, {10, 20, 30, 40}, {10.5f, 20.25f, 30.125f, 40}, {110.5f, 20.25f, -69.875f, 42}};
  for (size_t k = 0; k < xs.size(); ++k) {
    auto out = pi->run("accumulate", {vec(xs[k])});
    ASSERT_TRUE(out.has_value()) << out.message();
    ASSERT_EQ(out->size(), 1u);  // the state write is not returned
    expect_tensor((*out)[0], sums[k], "returned sum after run " + std::to_string(k + 1));
    auto st = pi->state("sum");
    ASSERT_TRUE(st.has_value());
    expect_tensor(*st, sums[k], "state after run " + std::to_string(k + 1));
  }
}

TEST(ProgramInterpreter, OnceThenMany) {
  WeightStore weights;
  auto pi = ProgramInterpreter::create(once_then_many(), weights);
  ASSERT_TRUE(pi.has_value()) << pi.message();

  // Before "prepare" the state is zeros, so "use" returns q itself.
  auto before = pi->run("use", {vec({1, 2, 3})});
  ASSERT_TRUE(before.has_value()) << before.message();
  expect_tensor((*before)[0], {1, 2, 3}, "use before prepare");

  auto prep = pi->run("prepare", {vec({1, -2, 3.5f})});
  ASSERT_TRUE(prep.has_value()) << prep.message();
  EXPECT_TRUE(prep->empty());
  expect_tensor(*pi->state("ctx"), {2, -4, 7}, "ctx after prepare");

  const std::vector<std::vector<float>> qs = {{0, 0, 0}, {1, 1, 1}, {-2, 4, -7}, {0.5f, 0.5f, 0.5f}};
  const std::vector<std::vector<float>> want = {{2, -4, 7}, {3, -3, 8}, {0, 0, 0}, {2.5f, -3.5f, 7.5f}};
  for (size_t k = 0; k < qs.size(); ++k) {
    auto out = pi->run("use", {vec(qs[k])});
    ASSERT_TRUE(out.has_value()) << out.message();
    ASSERT_EQ(out->size(), 1u);
    expect_tensor((*out)[0], want[k], "use run " + std::to_string(k + 1));
    expect_tensor(*pi->state("ctx"), {2, -4, 7}, "ctx unchanged by use");
  }
}

// A plan that swaps two states: both reads see the states from before the run.
TEST(ProgramInterpreter, ReadsSeeStatesFromBeforeTheRun) {
  auto parsed = parse_program(
      "program @swap {\n"
      "  graph @swap(%a: f32[2] state \"a\", %b: f32[2] state \"b\") {\n"
      "    return %b state \"a\", %a state \"b\"\n"
      "  }\n"
      "}\n");
  ASSERT_TRUE(parsed.has_value()) << parsed.message();
  WeightStore weights;
  auto pi = ProgramInterpreter::create(std::move(*parsed), weights);
  ASSERT_TRUE(pi.has_value()) << pi.message();
  ASSERT_TRUE(pi->set_state("a", vec({1, 2})).is_ok());
  ASSERT_TRUE(pi->set_state("b", vec({3, 4})).is_ok());
  auto out = pi->run("swap", {});
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_TRUE(out->empty());
  expect_tensor(*pi->state("a"), {3, 4}, "a");
  expect_tensor(*pi->state("b"), {1, 2}, "b");
}

TEST(ProgramInterpreter, Errors) {
  WeightStore weights;
  auto pi = ProgramInterpreter::create(once_then_many(), weights);
  ASSERT_TRUE(pi.has_value()) << pi.message();

  auto unknown = pi->run("step", {});
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.message(), "program @otm: no plan 'step' (plans: 'prepare', 'use')");

  auto count = pi->run("use", {vec({1, 2, 3}), vec({1, 2, 3})});
  ASSERT_FALSE(count.has_value());
  EXPECT_EQ(count.message(), "program @otm, plan 'use': takes 1 inputs besides its states, got 2");

  auto shape = pi->run("use", {vec({1, 2})});
  ASSERT_FALSE(shape.has_value());
  EXPECT_EQ(shape.message(), "program @otm, plan 'use': input %q: expected shape [3], got [2]");

  auto st = pi->state("nope");
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.message(), "program @otm: no state 'nope' (states: 'ctx')");

  Status bad = pi->set_state("ctx", vec({1, 2}));
  EXPECT_EQ(bad.message(), "program @otm: state 'ctx' is f32[3], got a tensor of shape [2]");
  expect_tensor(*pi->state("ctx"), {0, 0, 0}, "ctx unchanged by a failed set_state");

  ProgramGraph broken = once_then_many();
  broken.plans.erase(broken.plans.begin());
  auto fails = ProgramInterpreter::create(std::move(broken), weights);
  ASSERT_FALSE(fails.has_value());
  expect_mentions(fails.message(), "state 'ctx' is read by plan 'use' but no plan writes it");
}

}  // namespace
}  // namespace strata

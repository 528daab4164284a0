// State in the IR (ir/graph.h StateBinding): the Graph and Builder API, the text form
// (` state "NAME"` on inputs and returned values; print -> parse -> print identical),
// parser errors with LINE:COL, and the verifier's state checks.
#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TensorType f32(Shape s) { return TensorType{std::move(s), DType::f32, {}}; }

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

const char* const kAccumulateText =
    "graph @accumulate(%x: f32[4], %acc: f32[4] state \"sum\") {\n"
    "  %next: f32[4] = add \"next\" (%acc, %x)\n"
    "  return %next, %next state \"sum\"\n"
    "}\n";

TEST(StateGraph, BindingsArePositions) {
  Graph g = accumulate();
  EXPECT_TRUE(g.has_state());
  ASSERT_EQ(g.inputs().size(), 2u);
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.state_reads(), (std::vector<StateBinding>{{"sum", 1}}));
  EXPECT_EQ(g.state_writes(), (std::vector<StateBinding>{{"sum", 1}}));
  EXPECT_EQ(g.input_state(0), nullptr);
  ASSERT_NE(g.input_state(1), nullptr);
  EXPECT_EQ(*g.input_state(1), "sum");
  EXPECT_EQ(g.output_state(0), nullptr);
  ASSERT_NE(g.output_state(1), nullptr);
  EXPECT_EQ(*g.output_state(1), "sum");
  EXPECT_EQ(g.input_state(2), nullptr);
  EXPECT_FALSE(Graph().has_state());
  EXPECT_EQ(to_string(g.state_reads()[0]), "state \"sum\" at 1");
}

TEST(StateGraph, CompactKeepsBindingsValid) {
  Graph g;
  g.add_input("x", f32({4}));
  ValueId acc = g.add_state_input("acc", f32({4}), "s");
  g.add_constant("dead", f32({4}), "dead.w");  // removed by compact
  ValueId y = g.add_value("y", f32({4}));
  g.add_node(Node{Op::silu, "y", {}, {acc}, {y}});
  g.mark_output(acc);
  g.mark_state_output(y, "s");
  g.compact();
  EXPECT_EQ(g.values().size(), 3u);
  EXPECT_EQ(g.value(g.inputs()[g.state_reads()[0].index]).name, "acc");
  EXPECT_EQ(g.value(g.outputs()[g.state_writes()[0].index]).name, "y");
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
}

TEST(StateGraph, BuilderRejectsEmptyStateName) {
  Graph g;
  Builder b(g, nullptr);
  EXPECT_EQ(b.state_input("acc", f32({4}), ""), kNoValue);
  EXPECT_EQ(b.status().message(), "state input %acc: the state name is empty");

  Graph g2;
  Builder b2(g2, nullptr);
  ValueId x = b2.input("x", {4});
  b2.state_output(x, "");
  EXPECT_EQ(b2.status().message(), "state output %x: the state name is empty");
  EXPECT_TRUE(g2.outputs().empty());
}

TEST(StatePrinter, Golden) { EXPECT_EQ(print_graph(accumulate()), kAccumulateText); }

TEST(StatePrinter, StateAfterBufferAndQuoted) {
  Graph g;
  g.name = "g";
  ValueId kv = g.add_state_input("kv", f32({2}), "odd \"name\"");
  g.value(kv).buffer = BufferAssignment{"in", 256};
  ValueId y = g.add_value("y", f32({2}));
  g.add_node(Node{Op::silu, "y", {}, {kv}, {y}});
  g.mark_state_output(y, "odd \"name\"");
  const std::string text =
      "graph @g(%kv: f32[2] @in+256 state \"odd \\\"name\\\"\") {\n"
      "  %y: f32[2] = silu \"y\" (%kv)\n"
      "  return %y state \"odd \\\"name\\\"\"\n"
      "}\n";
  EXPECT_EQ(print_graph(g), text);
  auto parsed = parse_graph(text);
  ASSERT_TRUE(parsed.has_value()) << parsed.message();
  EXPECT_EQ(print_graph(*parsed), text);
  EXPECT_EQ(parsed->value(parsed->inputs()[0]).buffer, (BufferAssignment{"in", 256}));
  EXPECT_EQ(parsed->state_reads(), (std::vector<StateBinding>{{"odd \"name\"", 0}}));
}

TEST(StateParser, RoundTripKeepsBindings) {
  auto parsed = parse_graph(kAccumulateText);
  ASSERT_TRUE(parsed.has_value()) << parsed.message();
  EXPECT_EQ(print_graph(*parsed), kAccumulateText);
  EXPECT_EQ(parsed->state_reads(), (std::vector<StateBinding>{{"sum", 1}}));
  EXPECT_EQ(parsed->state_writes(), (std::vector<StateBinding>{{"sum", 1}}));
  EXPECT_EQ(parsed->outputs()[0], parsed->outputs()[1]);
}

TEST(StateParser, StatesInAnyPositionRoundTrip) {
  // Two states, read in the middle of the input list, written in swapped order, one
  // state written back by the input value itself.
  const std::string text =
      "graph @swap(%x: f32[3], %a: f32[3] state \"a\", %b: f32[3] state \"b\", %z: f32[3]) {\n"
      "  %s: f32[3] = add \"s\" (%x, %z)\n"
      "  return %b state \"a\", %s, %a state \"b\"\n"
      "}\n";
  auto parsed = parse_graph(text);
  ASSERT_TRUE(parsed.has_value()) << parsed.message();
  EXPECT_EQ(print_graph(*parsed), text);
  EXPECT_EQ(parsed->state_reads(), (std::vector<StateBinding>{{"a", 1}, {"b", 2}}));
  EXPECT_EQ(parsed->state_writes(), (std::vector<StateBinding>{{"a", 0}, {"b", 2}}));
}

void expect_error(const std::string& text, const std::string& message) {
  auto g = parse_graph(text);
  ASSERT_FALSE(g.has_value()) << "parsed:\n" << text;
  EXPECT_EQ(g.message(), message) << text;
}

TEST(StateParser, ErrorsCarryLineColumn) {
  // Columns: "graph @g(" is 9 characters, so %acc starts at 1:10, and in
  // "graph @g(%acc: f32[4] state " the state name starts at 1:29.
  expect_error("graph @g(%acc: f32[4] state sum) {\n  return\n}",
               "1:29: expected the state's name (a string) after 'state', got 'sum'");
  expect_error("graph @g(%acc: f32[4] state 7) {\n  return\n}",
               "1:29: expected the state's name (a string) after 'state', got '7'");
  expect_error("graph @g(%acc: f32[4] state \"\") {\n  return\n}", "1:29: empty state name");
  // `state` on a constant and on a node result: at the 'state' keyword (2:14).
  expect_error("graph @g(%x: f32[4]) {\n  %w: f32[4] state \"s\" = weight \"w\"\n  return %w\n}",
               "2:14: 'state' on the constant %w: only graph inputs and returned values carry a state");
  expect_error("graph @g(%x: f32[4]) {\n  %y: f32[4] state \"s\" = silu (%x)\n  return %y\n}",
               "2:14: 'state' on the node result %y: only graph inputs and returned values carry a state");
  // In the return list: "  return %x state " puts the name at 2:19.
  expect_error("graph @g(%x: f32[4]) {\n  return %x state s\n}",
               "2:19: expected the state's name (a string) after 'state', got 's'");
  // A state read twice (second 'state' at 1:43), written twice (second at 2:27).
  expect_error("graph @g(%a: f32[4] state \"s\", %b: f32[4] state \"s\") {\n  return\n}",
               "1:43: state 's' is already read by an input (at 1:21)");
  expect_error("graph @g(%x: f32[4]) {\n  return %x state \"s\", %x state \"s\"\n}",
               "2:27: state 's' is already written by a returned value (at 2:13)");
  // Written back with another shape than it is read: at the returned value (2:10).
  expect_error("graph @g(%acc: f32[4] state \"s\", %x: f32[2]) {\n  return %x state \"s\"\n}",
               "2:10: state 's' is read as %acc: f32[4] but written back as %x: f32[2]");
}

// The verifier, on graphs built through the API (the parser rejects these earlier).
TEST(StateVerifier, ReadTwiceNamesBothInputs) {
  Graph g;
  g.add_state_input("a", f32({4}), "s");
  g.add_state_input("b", f32({4}), "s");
  EXPECT_EQ(verify(g).message(), "state 's' is bound to graph input 0, value %a (#0), and to graph input 1, value %b (#1)");
}

TEST(StateVerifier, WrittenTwice) {
  Graph g;
  ValueId x = g.add_input("x", f32({4}));
  g.mark_state_output(x, "s");
  g.mark_state_output(x, "s");
  EXPECT_EQ(verify(g).message(),
            "state 's' is bound to graph output 0, value %x (#0), and to graph output 1, value %x (#0)");
}

TEST(StateVerifier, TypeMismatchNamesStateAndValues) {
  Graph g;
  ValueId acc = g.add_state_input("acc", f32({4}), "sum");
  ValueId x = g.add_input("x", TensorType{{4}, DType::f16, {}});
  (void)acc;
  g.mark_state_output(x, "sum");
  EXPECT_EQ(verify(g).message(), "state 'sum' is read as value %acc (#0): f32[4] but written back as value %x (#1): f16[4]");
}

TEST(StateVerifier, EmptyStateName) {
  Graph g;
  g.add_state_input("acc", f32({4}), "");
  EXPECT_EQ(verify(g).message(), "graph input 0, value %acc (#0), is bound to a state with an empty name");
}

TEST(StateVerifier, LayoutMayDiffer) {
  Graph g;
  ValueId acc = g.add_state_input("acc", f32({1, 4, 2, 2}), "s");
  TensorType nhwc = f32({1, 4, 2, 2});
  nhwc.layout.kind = LayoutKind::nhwc;
  ValueId y = g.add_value("y", nhwc);
  g.add_node(Node{Op::silu, "y", {}, {acc}, {y}});
  g.mark_state_output(y, "s");
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
}

TEST(StateVerifier, BindingOutOfRangeAfterOutputsShrink) {
  Graph g = accumulate();
  g.outputs().pop_back();  // a pass that drops an output without its binding
  EXPECT_EQ(verify(g).message(), "state 'sum' is bound to graph output 1, the graph has 1");
}

}  // namespace
}  // namespace strata

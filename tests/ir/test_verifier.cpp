// The verifier (ir/verifier.h): each broken invariant is reported with the node (by
// name and op) or value that breaks it.
#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <functional>
#include <utility>

namespace strata {
namespace {

TensorType f32(Shape s) { return TensorType{std::move(s), DType::f32, {}}; }

// x -> conv_in -> norm -> silu -> conv_out (+ x): a small resnet-like block. Values:
// x #0, conv_in.weight #1, conv_in.bias #2, conv_in #3, norm.weight #4, norm.bias #5,
// norm #6, silu #7, conv_out.weight #8, conv_out #9, add #10.
Graph block() {
  Graph g;
  g.name = "block";
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 8, 4, 4});
  ValueId w = b.constant("conv_in.weight", f32({8, 8, 3, 3}));
  ValueId bias = b.constant("conv_in.bias", f32({8}));
  ValueId h = b.conv2d(x, w, bias, {.pad = 1});
  ValueId gamma = b.constant("norm.weight", f32({8}));
  ValueId beta = b.constant("norm.bias", f32({8}));
  h = b.op(Op::group_norm, {h, gamma, beta}, {{"groups", int64_t{4}}, {"eps", 1e-6}}, "norm");
  h = b.silu(h);
  ValueId w_out = b.constant("conv_out.weight", f32({8, 8, 1, 1}));
  h = b.conv2d(h, w_out, kNoValue);
  b.output(b.add(h, x));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

// The index of the node called `name`.
size_t node_index(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (g.nodes()[i].name == name) return i;
  ADD_FAILURE() << "no node " << name;
  return 0;
}

void expect_error(const Graph& g, const std::string& message) {
  Status s = verify(g);
  ASSERT_FALSE(s.is_ok()) << "verified:\n" << g;
  EXPECT_EQ(s.message(), message) << g;
}

TEST(VerifierTest, AcceptsBuilderGraphs) {
  Graph g = block();
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
  EXPECT_TRUE(verify(Graph{}).is_ok());
}

TEST(VerifierTest, LayoutsAreNotCompared) {
  Graph g = block();
  g.value(g.nodes()[1].outputs[0]).type.layout = Layout{LayoutKind::nhwc, 64};
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
}

TEST(VerifierTest, OutOfOrderNode) {
  Graph g = block();
  std::swap(g.nodes()[node_index(g, "norm")], g.nodes()[node_index(g, "silu")]);
  expect_error(g, "node 'silu' (silu, #1): operand 0 %norm is used before it is defined by node 'norm' "
                  "(group_norm, #2) (nodes out of topological order)");
}

TEST(VerifierTest, WrongDeclaredShape) {
  Graph g = block();
  g.value(g.nodes()[node_index(g, "conv_in")].outputs[0]).type.shape = {1, 8, 2, 2};
  expect_error(g, "node 'conv_in' (conv2d, #0): result %conv_in is declared f32[1,8,2,2], inferred f32[1,8,4,4]");
}

TEST(VerifierTest, WrongDeclaredDtype) {
  Graph g = block();
  g.value(g.nodes()[node_index(g, "silu")].outputs[0]).type.dtype = DType::f16;
  expect_error(g, "node 'silu' (silu, #2): result %silu is declared f16[1,8,4,4], inferred f32[1,8,4,4]");
}

TEST(VerifierTest, MissingAttribute) {
  Graph g = block();
  g.nodes()[node_index(g, "norm")].attrs.erase("groups");
  expect_error(g, "node 'norm' (group_norm, #1): group_norm needs attribute 'groups'");
}

TEST(VerifierTest, WrongAttributeKindAndUnknownAttribute) {
  Graph g = block();
  g.nodes()[node_index(g, "norm")].attrs.set("groups", 4.0);
  expect_error(g, "node 'norm' (group_norm, #1): group_norm attribute 'groups' must be int, got float");
  g = block();
  g.nodes()[node_index(g, "silu")].attrs.set("slope", 0.1);
  expect_error(g, "node 'silu' (silu, #2): silu has no attribute 'slope'");
}

TEST(VerifierTest, ShapesThatDoNotFit) {
  Graph g = block();
  g.value(g.find_value("conv_out.weight")).type.shape = {8, 4, 1, 1};
  expect_error(g, "node 'conv_out' (conv2d, #3): conv2d input channels 8 != weight's 4 (weight [8,4,1,1])");
}

TEST(VerifierTest, GivenNormStatisticsAndMomentsShapes) {
  Graph g;
  g.name = "stats";
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 8, 4, 4});
  ValueId stats = b.input("stats", {3, 2});  // 4 groups need [4, 2]
  b.output(b.group_norm(x, b.constant("gn.weight", f32({8})), b.constant("gn.bias", f32({8})), 4, 1e-6, stats));
  EXPECT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("group_norm statistics must be f32 [4, 2] (mean, rstd per sample and group), "
                                      "got f32 [3,2]"),
            std::string::npos)
      << b.status().message();
  Graph g2;
  Builder b2(g2, nullptr);
  b2.group_moments(b2.input("v", {2, 8, 4, 4}), 4);
  EXPECT_FALSE(b2.ok());
  EXPECT_NE(b2.status().message().find("group_moments needs batch 1, got [2,8,4,4]"), std::string::npos)
      << b2.status().message();
}

// The folded softmax's forms (ir/ops.h): blocks that do not divide the features, block
// weights of the wrong shape, exp_blocks rows of the wrong width.
TEST(VerifierTest, FoldedSoftmaxShapes) {
  struct Case {
    const char* what;
    std::function<void(Builder&)> make;
    const char* message;
  };
  const Case cases[] = {
      {"exp_blocks not dividing the features",
       [](Builder& b) {
         b.op(Op::linear, {b.input("x", {4, 8}), b.constant("w", f32({6, 8}))}, {{"exp_blocks", int64_t(4)}}, "s");
       },
       "exp_blocks 4 does not divide the 6 output features"},
      {"block weights of the wrong shape",
       [](Builder& b) {
         b.op(Op::linear, {b.input("e", {4, 12}), b.constant("w", f32({3, 8})), b.input("c", {4, 3})},
              {{"scale_blocks", int64_t(4)}}, "o");
       },
       "linear with scale_blocks needs f16 block weights [4, 2] as its third operand"},
      {"rows not of exp_blocks width",
       [](Builder& b) {
         b.op(Op::linear, {b.input("e", {4, 8}), b.constant("w", f32({3, 8})), b.input("c", {4, 2})},
              {{"scale_blocks", int64_t(4)}}, "o");
       },
       "linear with scale_blocks 4 reads exp_blocks rows of 12 columns (8 input features), got [4,8]"},
      {"block_softmax of a row that is no exp_blocks row",
       [](Builder& b) { b.op(Op::block_softmax, {b.input("e", {4, 13})}, {{"block", int64_t(4)}}, "w"); },
       "block_softmax reads exp_blocks rows (N + 2·N/4 columns), got [4,13]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Graph g;
    Builder b(g, nullptr);
    c.make(b);
    EXPECT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find(c.message), std::string::npos) << b.status().message();
  }
}

TEST(VerifierTest, UndefinedOperand) {
  Graph g = block();
  ValueId ghost = g.add_value("ghost", f32({1, 8, 4, 4}));
  g.nodes()[node_index(g, "add")].inputs[1] = ghost;
  expect_error(g, "node 'add' (add, #4): operand 1 %ghost is undefined (no node produces it)");
}

TEST(VerifierTest, OperandOutOfRange) {
  Graph g = block();
  g.nodes()[node_index(g, "silu")].inputs[0] = 1000;
  expect_error(g, "node 'silu' (silu, #2): operand 0 is not a value of the graph (id 1000)");
  g = block();
  g.nodes()[node_index(g, "silu")].outputs[0] = -3;
  expect_error(g, "node 'silu' (silu, #2): result 0 is not a value of the graph (id -3)");
}

TEST(VerifierTest, AbsentRequiredOperand) {
  Graph g = block();
  g.nodes()[node_index(g, "add")].inputs[0] = kNoValue;
  expect_error(g, "node 'add' (add, #4): add operand 0 is required");
}

TEST(VerifierTest, ValueProducedTwice) {
  Graph g = block();
  size_t silu = node_index(g, "silu");
  g.nodes()[node_index(g, "add")].outputs[0] = g.nodes()[silu].outputs[0];
  expect_error(g, "node 'add' (add, #4): result %silu is also produced by node 'silu' (silu, #2)");
}

TEST(VerifierTest, NodeWritesInputOrConstant) {
  Graph g = block();
  g.nodes()[node_index(g, "add")].outputs[0] = g.inputs()[0];
  expect_error(g, "node 'add' (add, #4): result 0 %x is a graph input (only intermediates are produced by nodes)");
  g = block();
  g.nodes()[node_index(g, "add")].outputs[0] = g.find_value("conv_in.bias");
  expect_error(g, "node 'add' (add, #4): result 0 %conv_in.bias is a constant (only intermediates are produced "
                  "by nodes)");
}

TEST(VerifierTest, WrongResultCount) {
  Graph g = block();
  Node& silu = g.nodes()[node_index(g, "silu")];
  silu.outputs.push_back(g.add_value("extra", f32({1})));
  expect_error(g, "node 'silu' (silu, #2): has 2 results, the op defines 1");
}

TEST(VerifierTest, UnknownOp) {
  Graph g = block();
  g.nodes()[node_index(g, "silu")].op = static_cast<Op>(99);
  expect_error(g, "node 'silu' (#2) has an unknown op (99)");
}

TEST(VerifierTest, DuplicateAndEmptyNames) {
  Graph g = block();
  g.value(g.find_value("silu")).name = "norm";
  expect_error(g, "value %norm (#7) has the same name as value #6");
  g = block();
  g.value(g.find_value("silu")).name = "";
  expect_error(g, "value #7 has an empty name");
}

TEST(VerifierTest, ValueIdsAndDims) {
  Graph g = block();
  g.value(3).id = 5;
  expect_error(g, "value %conv_in at index 3 has id 5");
  g = block();
  g.value(g.inputs()[0]).type.shape = {1, -8, 4, 4};
  expect_error(g, "value %x (#0): negative dimension in f32[1,-8,4,4]");
}

TEST(VerifierTest, ConstantWithoutWeightName) {
  Graph g = block();
  g.value(g.find_value("norm.bias")).weight = "";
  expect_error(g, "value %norm.bias (#5): constant names no weight");
}

TEST(VerifierTest, GraphInputs) {
  Graph g = block();
  g.add_constant("c", f32({1}), "c");
  g.add_input("y", f32({1}));
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
  Graph bad = g;
  bad.value(bad.find_value("y")).kind = ValueKind::constant;
  bad.value(bad.find_value("y")).weight = "y";
  expect_error(bad, "graph input 1, value %y (#12), is a constant");
}

TEST(VerifierTest, DanglingIntermediate) {
  Graph g = block();
  g.add_value("orphan", f32({2}));
  expect_error(g, "value %orphan (#11): intermediate produced by no node");
}

TEST(VerifierTest, Outputs) {
  Graph g = block();
  g.outputs().push_back(42);
  expect_error(g, "graph output 1 is not a value of the graph (id 42)");
  g = block();
  g.outputs().push_back(g.find_value("norm.weight"));  // constants and inputs may be outputs
  g.outputs().push_back(g.inputs()[0]);
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
}

}  // namespace
}  // namespace strata

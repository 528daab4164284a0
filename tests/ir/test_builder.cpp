// The builder (ir/builder.h): shape errors name the node, the first error sticks,
// and what it builds verifies.
#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <functional>

namespace strata {
namespace {

TensorType f32(Shape s) { return TensorType{std::move(s), DType::f32, {}}; }

TEST(BuilderTest, ConvChannelMismatchNamesTheNode) {
  Graph g;
  Builder b(g, nullptr);
  ValueId z = b.input("z", {1, 16, 8, 8});
  ValueId w = b.constant("decoder.conv_in.weight", f32({64, 32, 3, 3}));
  ValueId bias = b.constant("decoder.conv_in.bias", f32({64}));
  EXPECT_EQ(b.conv2d(z, w, bias, {.pad = 1}), kNoValue);
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "node 'decoder.conv_in' (conv2d): conv2d input channels 16 != weight's 32 (weight [64,32,3,3])");
  EXPECT_TRUE(g.nodes().empty());
}

TEST(BuilderTest, ErrorsInOtherOpsNameTheNode) {
  struct Case {
    std::function<ValueId(Builder&, ValueId x)> build;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](Builder& b, ValueId x) {
         auto s = b.scope("attn");
         return b.matmul(x, x);
       },
       "node 'attn.matmul' (matmul): matmul shapes [1,4,6,5] and [1,4,6,5] do not fit"},
      {[](Builder& b, ValueId x) { return b.reshape(x, {7, -1}); },
       "node 'reshape' (reshape): reshape of [1,4,6,5] (120 elements) to [7,-1]"},
      {[](Builder& b, ValueId x) {
         ValueId w = b.constant("proj.weight", f32({8, 4}));
         return b.linear(x, w);
       },
       "node 'proj' (linear): linear input [1,4,6,5] does not end in the weight's 4 input features"},
      {[](Builder& b, ValueId x) { return b.concat({x, b.permute(x, {0, 1, 3, 2})}, 1); },
       "node 'concat' (concat): concat operand [1,4,5,6] does not match [1,4,6,5] outside axis 1"},
      {[](Builder& b, ValueId x) { return b.slice(x, 3, 2, 9); },
       "node 'slice' (slice): slice [2, 9) out of range for dim 3 of [1,4,6,5]"},
      {[](Builder& b, ValueId x) {
         auto s = b.scope("up");
         return b.op(Op::group_norm, {x, kNoValue, kNoValue}, {{"groups", int64_t{3}}, {"eps", 1e-6}}, "norm");
       },
       "node 'up.norm' (group_norm): group_norm operand 1 is required"},
  };
  for (const Case& c : cases) {
    Graph g;
    Builder b(g, nullptr);
    ValueId x = b.input("x", {1, 4, 6, 5});
    EXPECT_EQ(c.build(b, x), kNoValue);
    EXPECT_EQ(b.status().message(), c.message);
  }
}

TEST(BuilderTest, FirstErrorSticks) {
  Graph g;
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 4, 8, 8});
  ValueId ok = b.silu(x);
  ASSERT_NE(ok, kNoValue);
  ValueId gamma = b.constant("norm.weight", f32({4}));
  ValueId beta = b.constant("norm.bias", f32({4}));
  EXPECT_EQ(b.op(Op::group_norm, {ok, gamma, beta}, {{"groups", int64_t{3}}, {"eps", 1e-6}}, "norm"), kNoValue);
  const std::string first = "node 'norm' (group_norm): group_norm: 4 channels do not split into 3 groups";
  EXPECT_EQ(b.status().message(), first);

  // Every later call is a no-op returning kNoValue; the first error is kept.
  size_t values = g.values().size();
  EXPECT_EQ(b.silu(ok), kNoValue);
  EXPECT_EQ(b.add(ok, kNoValue), kNoValue);  // would be a second, different error
  EXPECT_EQ(b.input("y", {1}), kNoValue);
  EXPECT_EQ(b.constant("c", f32({1})), kNoValue);
  EXPECT_EQ(b.weight("w"), kNoValue);
  b.output(ok);
  EXPECT_EQ(b.status().message(), first);
  EXPECT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.values().size(), values);
  EXPECT_TRUE(g.outputs().empty());
  // What was built before the error is still a valid graph.
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
}

TEST(BuilderTest, WeightWithoutStoreNamesTheTensor) {
  Graph g;
  Builder b(g, nullptr);
  EXPECT_EQ(b.weight("decoder.conv_in.weight", Shape{64, 16, 3, 3}), kNoValue);
  EXPECT_EQ(b.status().message(), "weight 'decoder.conv_in.weight': no weight store given");
}

TEST(BuilderTest, NamesScopesAndOperands) {
  Graph g;
  g.name = "names";
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 4, 8, 8});
  ValueId t = b.input("t", {1, 3, 5, 8, 8});
  {
    auto s = b.scope("decoder");
    auto s2 = b.scope("mid");
    ValueId w = b.constant("decoder.mid.conv.weight", f32({4, 4, 1, 1}));
    ValueId h = b.conv2d(x, w, kNoValue);  // trailing absent bias dropped
    ValueId a = b.silu(h);
    ValueId c = b.silu(a);                  // same node name, unique value name
    ValueId beta = b.constant("decoder.mid.ln.bias", f32({8}));
    ValueId ln = b.op(Op::layer_norm, {c, kNoValue, beta}, {{"eps", 1e-5}}, "ln");  // absent middle kept
    b.output(ln);
  }
  ValueId w3 = b.constant("vid.conv.weight", f32({2, 3, 3, 3, 3}));
  b.output(b.conv3d(t, w3, kNoValue, {.pad = 1}));
  ValueId w3b = b.constant("vid.conv2.weight", f32({2, 3, 3, 1, 1}));
  b.output(b.conv3d(t, w3b, kNoValue, {.causal = false}));
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(print_graph(g),
            "graph @names(%x: f32[1,4,8,8], %t: f32[1,3,5,8,8]) {\n"
            "  %decoder.mid.conv.weight: f32[4,4,1,1] = weight \"decoder.mid.conv.weight\"\n"
            "  %decoder.mid.conv: f32[1,4,8,8] = conv2d \"decoder.mid.conv\" (%x, %decoder.mid.conv.weight) "
            "{pad = [0, 0], stride = [1, 1]}\n"
            "  %decoder.mid.silu: f32[1,4,8,8] = silu \"decoder.mid.silu\" (%decoder.mid.conv)\n"
            "  %decoder.mid.silu.1: f32[1,4,8,8] = silu \"decoder.mid.silu\" (%decoder.mid.silu)\n"
            "  %decoder.mid.ln.bias: f32[8] = weight \"decoder.mid.ln.bias\"\n"
            "  %decoder.mid.ln: f32[1,4,8,8] = layer_norm \"decoder.mid.ln\" (%decoder.mid.silu.1, _, "
            "%decoder.mid.ln.bias) {eps = 1e-05}\n"
            "  %vid.conv.weight: f32[2,3,3,3,3] = weight \"vid.conv.weight\"\n"
            "  %vid.conv: f32[1,2,5,8,8] = conv3d \"vid.conv\" (%t, %vid.conv.weight) {pad = [2, 0, 1, 1]}\n"
            "  %vid.conv2.weight: f32[2,3,3,1,1] = weight \"vid.conv2.weight\"\n"
            "  %vid.conv2: f32[1,2,5,8,8] = conv3d \"vid.conv2\" (%t, %vid.conv2.weight) {pad = [1, 1, 0, 0]}\n"
            "  return %decoder.mid.ln, %vid.conv, %vid.conv2\n"
            "}\n");
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
}

TEST(BuilderTest, TypesFollowInference) {
  Graph g;
  Builder b(g, nullptr);
  ValueId x = b.input("x", {2, 6, 8}, DType::f16);
  ValueId h = b.cast(x, DType::f32);
  EXPECT_EQ(b.type(h).dtype, DType::f32);
  ValueId q = b.permute(h, {0, 2, 1});
  EXPECT_EQ(b.shape(q), (Shape{2, 8, 6}));
  ValueId up = b.upsample_nearest(b.reshape(h, {1, 2, 6, 8}), {2, 2});
  EXPECT_EQ(b.shape(up), (Shape{1, 2, 12, 16}));
  ValueId att = b.attention(h, h, h, 0.125);
  EXPECT_EQ(b.shape(att), (Shape{2, 6, 8}));
  EXPECT_EQ(g.nodes().back().attrs.get_float("scale"), 0.125);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
}

}  // namespace
}  // namespace strata

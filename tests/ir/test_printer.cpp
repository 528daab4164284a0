// Golden tests of the text form (ir/printer.h): exact expected text written by hand.
#include "ir/builder.h"
#include "ir/printer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

namespace strata {
namespace {

TensorType f32(Shape s) { return TensorType{std::move(s), DType::f32, {}}; }

// The graph of the example in ir/printer.h. Constants are created in another order
// than they are used: the printer places each before its first reader.
Graph header_example() {
  Graph g;
  g.name = "flux_decoder";
  Builder b(g, nullptr);
  ValueId z = b.input("z", {1, 16, 8, 8});
  ValueId beta = b.constant("ln.beta", f32({8}));
  ValueId bias = b.constant("decoder.conv_in.bias", f32({64}));
  ValueId w = b.constant("decoder.conv_in.weight", f32({64, 16, 3, 3}));
  ValueId h = b.conv2d(z, w, bias, {.pad = 1});
  ValueId ln = b.op(Op::layer_norm, {h, kNoValue, beta}, {{"eps", 1e-5}}, "ln");
  ValueId act = b.op(Op::cast, {ln}, {{"dtype", std::string("f16")}}, "act");
  ValueId odd = b.op(Op::silu, {ln}, {}, "odd name");
  b.output(act);
  b.output(odd);
  EXPECT_TRUE(b.ok()) << b.status().message();
  g.value(act).type.layout = Layout{LayoutKind::nhwc, 64};
  return g;
}

TEST(PrinterTest, HeaderExample) {
  const char* expected =
      "graph @flux_decoder(%z: f32[1,16,8,8]) {\n"
      "  %decoder.conv_in.weight: f32[64,16,3,3] = weight \"decoder.conv_in.weight\"\n"
      "  %decoder.conv_in.bias: f32[64] = weight \"decoder.conv_in.bias\"\n"
      "  %decoder.conv_in: f32[1,64,8,8] = conv2d \"decoder.conv_in\" (%z, %decoder.conv_in.weight, "
      "%decoder.conv_in.bias) {pad = [1, 1], stride = [1, 1]}\n"
      "  %ln.beta: f32[8] = weight \"ln.beta\"\n"
      "  %ln: f32[1,64,8,8] = layer_norm \"ln\" (%decoder.conv_in, _, %ln.beta) {eps = 1e-05}\n"
      "  %act: f16[1,64,8,8]{nhwc:cpad=64} = cast \"act\" (%ln) {dtype = \"f16\"}\n"
      "  %\"odd name\": f32[1,64,8,8] = silu \"odd name\" (%ln)\n"
      "  return %act, %\"odd name\"\n"
      "}\n";
  EXPECT_EQ(print_graph(header_example()), expected);
}

TEST(PrinterTest, ConstantsBeforeFirstReaderUnusedBeforeReturn) {
  Graph g;
  Builder b(g, nullptr);
  ValueId unused = b.constant("spare", f32({3}));
  ValueId shared = b.constant("shift", f32({4}));
  ValueId x = b.input("x", {2, 4});
  ValueId y = b.input("y", {2, 4});
  ValueId a = b.add(x, shared);
  ValueId m = b.mul(a, shared);        // reads `shift` again: printed once
  ValueId s = b.scale(m, 0.5, -1.0);
  ValueId c = b.clamp(s, -1.0, 1.0);
  ValueId d = b.add(c, y);             // second "add": value name made unique
  b.output(d);
  b.output(shared);
  ASSERT_TRUE(b.ok()) << b.status().message();
  (void)unused;
  const char* expected =
      "graph @main(%x: f32[2,4], %y: f32[2,4]) {\n"
      "  %shift: f32[4] = weight \"shift\"\n"
      "  %add: f32[2,4] = add \"add\" (%x, %shift)\n"
      "  %mul: f32[2,4] = mul \"mul\" (%add, %shift)\n"
      "  %scale: f32[2,4] = scale \"scale\" (%mul) {add = -1.0, mul = 0.5}\n"
      "  %clamp: f32[2,4] = clamp \"clamp\" (%scale) {max = 1.0, min = -1.0}\n"
      "  %add.1: f32[2,4] = add \"add\" (%clamp, %y)\n"
      "  %spare: f32[3] = weight \"spare\"\n"
      "  return %add.1, %shift\n"
      "}\n";
  EXPECT_EQ(print_graph(g), expected);
}

TEST(PrinterTest, EmptyGraph) {
  Graph g;
  g.name = "nothing";
  EXPECT_EQ(print_graph(g), "graph @nothing() {\n  return\n}\n");
}

TEST(PrinterTest, ScopesAndLayouts) {
  Graph g;
  g.name = "blk";
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 4, 2, 2}, DType::f16);
  {
    auto s = b.scope("mid");
    auto s2 = b.scope("res");
    ValueId gamma = b.constant("mid.res.norm.weight", f32({4}));
    ValueId beta = b.constant("mid.res.norm.bias", f32({4}));
    ValueId n = b.op(Op::group_norm, {x, gamma, beta}, {{"groups", int64_t{2}}, {"eps", 1e-6}}, "norm");
    b.output(b.silu(n));
  }
  ASSERT_TRUE(b.ok()) << b.status().message();
  g.value(g.nodes()[1].outputs[0]).type.layout = Layout{LayoutKind::logical, 8};
  const char* expected =
      "graph @blk(%x: f16[1,4,2,2]) {\n"
      "  %mid.res.norm.weight: f32[4] = weight \"mid.res.norm.weight\"\n"
      "  %mid.res.norm.bias: f32[4] = weight \"mid.res.norm.bias\"\n"
      "  %mid.res.norm: f16[1,4,2,2] = group_norm \"mid.res.norm\" (%x, %mid.res.norm.weight, "
      "%mid.res.norm.bias) {eps = 1e-06, groups = 2}\n"
      "  %mid.res.silu: f16[1,4,2,2]{logical:cpad=8} = silu \"mid.res.silu\" (%mid.res.norm)\n"
      "  return %mid.res.silu\n"
      "}\n";
  EXPECT_EQ(print_graph(g), expected);
}

TEST(PrinterTest, QuotesNamesAndEscapesStrings) {
  Graph g;
  g.name = "my graph";
  ValueId x = g.add_input("in put", f32({2}));
  ValueId w = g.add_constant("w\"q", f32({2}), "dir\\w\n\t\x01");
  ValueId y = g.add_value("ok.name-1_2", f32({2}));
  g.add_node(Node{Op::add, "a \"node\"", {}, {x, w}, {y}});
  g.mark_output(y);
  const char* expected =
      "graph @\"my graph\"(%\"in put\": f32[2]) {\n"
      "  %\"w\\\"q\": f32[2] = weight \"dir\\\\w\\n\\t\\x01\"\n"
      "  %ok.name-1_2: f32[2] = add \"a \\\"node\\\"\" (%\"in put\", %\"w\\\"q\")\n"
      "  return %ok.name-1_2\n"
      "}\n";
  EXPECT_EQ(print_graph(g), expected);
  EXPECT_EQ(name_token("a.b-c_9"), "a.b-c_9");
  EXPECT_EQ(name_token("a b"), "\"a b\"");
  EXPECT_EQ(name_token(""), "\"\"");
  EXPECT_EQ(name_token("π"), "\"π\"");
}

TEST(PrinterTest, FloatAttributesRoundTripExactly) {
  Attrs a{{"eps", 1e-6},
          {"mul", 0.1},
          {"add", 1.0 / 3.0},
          {"min", -std::numeric_limits<double>::infinity()},
          {"max", std::numeric_limits<double>::infinity()},
          {"scale", 2.0},
          {"factors", std::vector<double>{0.5, 2.0}},
          {"pad", std::vector<int64_t>{}}};
  EXPECT_EQ(to_string(a),
            "{add = 0.3333333333333333, eps = 1e-06, factors = [0.5, 2.0], max = inf, min = -inf, mul = 0.1, "
            "pad = [], scale = 2.0}");
}

TEST(PrinterTest, EveryObjectPrints) {
  Graph g = header_example();
  const Node& conv = g.nodes()[0];
  EXPECT_EQ(to_string(conv, g),
            "%decoder.conv_in: f32[1,64,8,8] = conv2d \"decoder.conv_in\" (%z, %decoder.conv_in.weight, "
            "%decoder.conv_in.bias) {pad = [1, 1], stride = [1, 1]}");
  EXPECT_EQ(to_string(g.nodes()[1]), "%#5 = layer_norm \"ln\" (%#4, _, %#1) {eps = 1e-05}");
  EXPECT_EQ(to_string(g.value(0)), "%z: f32[1,16,8,8]");
  EXPECT_EQ(to_string(g.value(1)), "%ln.beta: f32[8] = weight \"ln.beta\"");
  EXPECT_EQ(to_string(g.value(g.outputs()[0]).type), "f16[1,64,8,8]{nhwc:cpad=64}");
  EXPECT_EQ(to_string(Layout{}), "logical");
  EXPECT_EQ(to_string(Layout{LayoutKind::nhwc, 0}), "nhwc");
  EXPECT_EQ(to_string(DType::bf16), "bf16");
  EXPECT_EQ(to_string(Op::upsample_nearest), "upsample_nearest");
  EXPECT_EQ(to_string(ValueKind::constant), "constant");
  EXPECT_EQ(to_string(Attrs{}), "");
  EXPECT_EQ(to_string(g), print_graph(g));
  EXPECT_EQ(value_ref(g, 0), "%z");
  EXPECT_EQ(value_ref(g, kNoValue), "_");
  EXPECT_EQ(value_ref(g, 99), "%<bad id 99>");

  std::ostringstream os;
  os << g.value(0) << " | " << g.value(0).type << " | " << Op::conv2d << " | " << DType::f16 << " | "
     << ValueKind::input << " | " << Attrs{{"axis", int64_t{1}}} << " | " << conv;
  EXPECT_EQ(os.str(), "%z: f32[1,16,8,8] | f32[1,16,8,8] | conv2d | f16 | input | {axis = 1} | "
                      "%#4 = conv2d \"decoder.conv_in\" (%#0, %#3, %#2) {pad = [1, 1], stride = [1, 1]}");
  std::ostringstream gs;
  gs << g;
  EXPECT_EQ(gs.str(), print_graph(g));
}

TEST(PrinterTest, BrokenGraphStillPrints) {
  Graph g;
  ValueId x = g.add_input("x", f32({2}));
  ValueId y = g.add_value("y", f32({2}));
  g.add_node(Node{Op::add, "bad", {}, {x, 42}, {y}});
  g.add_node(Node{static_cast<Op>(200), "alien", {}, {y}, {}});
  g.mark_output(77);
  EXPECT_EQ(print_graph(g),
            "graph @main(%x: f32[2]) {\n"
            "  %y: f32[2] = add \"bad\" (%x, %<bad id 42>)\n"
            "   = <op 200> \"alien\" (%y)\n"
            "  return %<bad id 77>\n"
            "}\n");
}

}  // namespace
}  // namespace strata

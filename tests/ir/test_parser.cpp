// The parser (ir/parser.h): exact round trips print -> parse -> print on graphs that
// cover every op in the table, and errors that carry line:column and what was
// expected or which node is wrong.
#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

namespace strata {
namespace {

TensorType f32(Shape s) { return TensorType{std::move(s), DType::f32, {}}; }

// print -> parse -> print is identical, and the parsed graph has the same structure.
void expect_round_trip(const Graph& g) {
  std::string text = print_graph(g);
  auto parsed = parse_graph(text);
  ASSERT_TRUE(parsed.has_value()) << parsed.message() << "\n" << text;
  EXPECT_EQ(print_graph(*parsed), text);
  EXPECT_TRUE(verify(*parsed).is_ok()) << verify(*parsed).message();
  EXPECT_EQ(parsed->name, g.name);
  ASSERT_EQ(parsed->nodes().size(), g.nodes().size());
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& a = g.nodes()[i];
    const Node& b = parsed->nodes()[i];
    EXPECT_EQ(a.op, b.op);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(to_string(a.attrs), to_string(b.attrs)) << a.name;  // NaN != NaN
    ASSERT_EQ(a.inputs.size(), b.inputs.size());
    for (size_t k = 0; k < a.inputs.size(); ++k) {
      if (a.inputs[k] == kNoValue) {
        EXPECT_EQ(b.inputs[k], kNoValue);
        continue;
      }
      const Value& va = g.value(a.inputs[k]);
      const Value& vb = parsed->value(b.inputs[k]);
      EXPECT_EQ(va.name, vb.name);
      EXPECT_EQ(va.type, vb.type);
      EXPECT_EQ(va.kind, vb.kind);
      EXPECT_EQ(va.weight, vb.weight);
    }
  }
}

// One graph with a node of every op in the table (the map below must name them
// all: adding an op to the table without adding it here fails AllOpsCovered).
using OpCase = std::function<ValueId(Builder&, ValueId x, ValueId v, ValueId t)>;

const std::map<Op, OpCase>& op_cases() {
  static const std::map<Op, OpCase> cases = {
      {Op::conv2d, [](Builder& b, ValueId x, ValueId, ValueId) {
         return b.conv2d(x, b.constant("c2.weight", f32({8, 8, 3, 3})), b.constant("c2.bias", f32({8})),
                         {.pad = 1, .stride = 2});
       }},
      {Op::conv3d, [](Builder& b, ValueId, ValueId v, ValueId) {
         return b.conv3d(v, b.constant("c3.weight", f32({8, 8, 3, 3, 3})), kNoValue, {.pad = 1});
       }},
      {Op::linear, [](Builder& b, ValueId, ValueId, ValueId t) {
         return b.linear(t, b.constant("proj.weight", f32({16, 8})), b.constant("proj.bias", f32({16})));
       }},
      {Op::matmul, [](Builder& b, ValueId, ValueId, ValueId t) { return b.matmul(t, b.permute(t, {0, 2, 1})); }},
      {Op::group_norm, [](Builder& b, ValueId x, ValueId, ValueId) {
         return b.group_norm(x, b.constant("gn.weight", f32({8})), b.constant("gn.bias", f32({8})), 4, 1e-6);
       }},
      {Op::group_moments, [](Builder& b, ValueId x, ValueId, ValueId) {
         // [4, 4, 2] moments, then a norm applying given statistics (its stats operand).
         ValueId m = b.group_moments(x, 4);
         ValueId stats = b.reshape(b.slice(m, 1, 0, 1), {4, 2});
         return b.group_norm(x, b.constant("gm.weight", f32({8})), b.constant("gm.bias", f32({8})), 4, 1e-6, stats);
       }},
      {Op::rms_norm, [](Builder& b, ValueId, ValueId v, ValueId) {
         return b.rms_norm(v, b.constant("rms.gamma", f32({8, 1, 1, 1})));
       }},
      {Op::layer_norm, [](Builder& b, ValueId, ValueId, ValueId t) {
         return b.op(Op::layer_norm, {t, kNoValue, b.constant("ln.bias", f32({8}))}, {{"eps", 1e-5}}, "ln");
       }},
      // The fused form (passes/fuse_token_norm.cpp): no gamma, a row modulation and a
      // residual, so an absent operand before present ones round-trips too.
      {Op::token_rms_norm, [](Builder& b, ValueId, ValueId, ValueId t) {
         ValueId n = b.token_rms_norm(t, b.constant("trn.weight", f32({8})), 1e-5);
         return b.op(Op::token_rms_norm, {n, kNoValue, b.constant("trn.mul", f32({1, 8})), t}, {{"eps", 1e-6}}, "trn");
       }},
      {Op::silu_mul, [](Builder& b, ValueId, ValueId, ValueId t) {
         return b.op(Op::silu_mul, {t, b.constant("sm.gate", f32({8}))}, {{"dtype", std::string("f32")}}, "sm");
       }},
      {Op::silu, [](Builder& b, ValueId x, ValueId, ValueId) { return b.silu(x); }},
      {Op::gelu, [](Builder& b, ValueId, ValueId, ValueId t) { return b.gelu(t); }},
      {Op::tanh, [](Builder& b, ValueId, ValueId, ValueId t) { return b.tanh(t); }},
      {Op::add, [](Builder& b, ValueId x, ValueId, ValueId) { return b.add(x, b.constant("shift", f32({8, 1, 1}))); }},
      {Op::mul, [](Builder& b, ValueId x, ValueId, ValueId) { return b.mul(x, x); }},
      {Op::scale, [](Builder& b, ValueId x, ValueId, ValueId) { return b.scale(x, 0.18215, 0.1); }},
      {Op::clamp, [](Builder& b, ValueId x, ValueId, ValueId) {
         return b.clamp(x, -std::numeric_limits<double>::infinity(), 1.0);
       }},
      {Op::upsample_nearest, [](Builder& b, ValueId, ValueId v, ValueId) { return b.upsample_nearest(v, {2, 2, 2}); }},
      {Op::attention, [](Builder& b, ValueId, ValueId, ValueId t) { return b.attention(t, t, t, 1.0 / std::sqrt(8.0)); }},
      {Op::softmax, [](Builder& b, ValueId, ValueId, ValueId t) { return b.softmax(t); }},
      {Op::rope, [](Builder& b, ValueId, ValueId, ValueId t) {
         return b.rope(t, b.constant("rope.cos", f32({6, 4})), b.constant("rope.sin", f32({6, 4})));
       }},
      {Op::sinusoidal, [](Builder& b, ValueId, ValueId, ValueId t) {
         return b.sinusoidal(b.reshape(t, {96}), b.constant("freqs", f32({4})));
       }},
      {Op::reshape, [](Builder& b, ValueId x, ValueId, ValueId) { return b.reshape(x, {1, 8, -1}); }},
      {Op::permute, [](Builder& b, ValueId x, ValueId, ValueId) { return b.permute(x, {0, 2, 3, 1}); }},
      {Op::slice, [](Builder& b, ValueId, ValueId v, ValueId) { return b.slice(v, 2, 1, 3); }},
      {Op::concat, [](Builder& b, ValueId x, ValueId, ValueId) { return b.concat({x, x, x}, 1); }},
      {Op::cast, [](Builder& b, ValueId x, ValueId, ValueId) { return b.cast(x, DType::bf16); }},
      {Op::norm_act, [](Builder& b, ValueId x, ValueId, ValueId) {
         return b.op(Op::norm_act, {x, b.constant("na.gamma", f32({8})), kNoValue, b.constant("na.bias", f32({8}))},
                     {{"norm", std::string("group")}, {"groups", int64_t(2)}, {"eps", 1e-6}, {"silu", int64_t(1)},
                      {"channels", int64_t(6)}, {"dtype", std::string("f16")}},
                     "na");
       }},
      {Op::conv_gemm, [](Builder& b, ValueId x, ValueId, ValueId) {
         return b.op(Op::conv_gemm, {x, b.constant("cg.weight", f32({8, 72})), kNoValue, x},
                     {{"kernel", std::vector<int64_t>{3, 3}}, {"pad", std::vector<int64_t>{1, 1}},
                      {"stride", std::vector<int64_t>{2, 2}}, {"weight_layout", std::string("o_hwi")},
                      {"gather", std::string("upsample2x")}, {"out_scale", 0.25}},
                     "cg");
       }},
      // The folded softmax: linear {exp_blocks} → block_softmax → linear {scale_blocks}
      // (blocks of 2: exp_blocks rows of 4 + 2·2 columns).
      {Op::block_softmax, [](Builder& b, ValueId, ValueId, ValueId t) {
         ValueId e = b.op(Op::linear, {b.reshape(t, {12, 8}), b.constant("fold.wk", f32({4, 8}))},
                          {{"exp_blocks", int64_t(2)}}, "scores");
         ValueId c = b.op(Op::block_softmax, {e}, {{"block", int64_t(2)}}, "weights");
         return b.op(Op::linear, {e, b.constant("fold.wv", f32({3, 4})), c}, {{"scale_blocks", int64_t(2)}}, "out");
       }},
      // A two-frame Winograd conv of x (4×4: 4 tiles) with its bias and a residual.
      {Op::winograd_input, [](Builder& b, ValueId x, ValueId, ValueId) {
         return b.op(Op::winograd_input, {x}, {{"dtype", std::string("f16")}}, "wi");
       }},
      {Op::winograd_gemm, [](Builder& b, ValueId x, ValueId, ValueId) {
         ValueId v = b.op(Op::winograd_input, {x}, {}, "wv");
         return b.op(Op::winograd_gemm, {v, v, b.constant("wg.u", f32({16, 6, 16}))}, {}, "wg");
       }},
      {Op::winograd_output, [](Builder& b, ValueId x, ValueId, ValueId) {
         ValueId v = b.op(Op::winograd_input, {x}, {}, "wov");
         ValueId m = b.op(Op::winograd_gemm, {v, b.constant("wo.u", f32({16, 8, 8}))}, {}, "wom");
         return b.op(Op::winograd_output, {m, b.constant("wo.bias", f32({8})), x},
                     {{"height", int64_t(4)}, {"width", int64_t(4)}, {"dtype", std::string("f32")}}, "wo");
       }},
      // The U of two frames' o_hwi weights (8 channels) made in the graph.
      {Op::winograd_weights, [](Builder& b, ValueId, ValueId, ValueId) {
         ValueId w = b.constant("ww.w", f32({6, 72}));
         return b.op(Op::winograd_weights, {w, w}, {{"tile", int64_t(4)}}, "ww");
       }},
  };
  return cases;
}

Graph all_ops_graph() {
  Graph g;
  g.name = "all_ops";
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 8, 4, 4});
  ValueId v = b.input("video", {1, 8, 3, 4, 4});
  ValueId t = b.input("tokens", {2, 6, 8});
  for (const OpInfo& info : all_ops()) {
    auto it = op_cases().find(info.op);
    if (it == op_cases().end()) continue;
    auto s = b.scope(std::string(info.name));
    b.output(it->second(b, x, v, t));
  }
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

TEST(ParserTest, AllOpsCovered) {
  for (const OpInfo& info : all_ops()) EXPECT_TRUE(op_cases().count(info.op)) << "no round-trip case for " << info.name;
  Graph g = all_ops_graph();
  for (const OpInfo& info : all_ops()) {
    bool present = false;
    for (const Node& n : g.nodes()) present = present || n.op == info.op;
    EXPECT_TRUE(present) << info.name;
  }
}

TEST(ParserTest, RoundTripAllOps) { expect_round_trip(all_ops_graph()); }

TEST(ParserTest, RoundTripEachOpAlone) {
  for (const auto& [op, make] : op_cases()) {
    Graph g;
    g.name = std::string(op_name(op));
    Builder b(g, nullptr);
    ValueId x = b.input("x", {1, 8, 4, 4});
    ValueId v = b.input("v", {1, 8, 3, 4, 4});
    ValueId t = b.input("t", {2, 6, 8});
    b.output(make(b, x, v, t));
    ASSERT_TRUE(b.ok()) << b.status().message();
    SCOPED_TRACE(g.name);
    expect_round_trip(g);
  }
}

TEST(ParserTest, RoundTripOddNamesLayoutsAndStrings) {
  Graph g;
  g.name = "odd \"graph\"\n";
  ValueId x = g.add_input("in put", TensorType{{1, 3, 2, 2}, DType::f16, {LayoutKind::nhwc, 64}});
  ValueId w = g.add_constant("w\\eight", f32({3, 1, 1}), "dir/w\t\x01\"ß\"");
  ValueId y = g.add_value("7", TensorType{{1, 3, 2, 2}, DType::f16, {LayoutKind::logical, 8}});
  ValueId z = g.add_value("z", TensorType{{1, 3, 2, 2}, DType::f32, {}});
  ValueId s = g.add_value("s", TensorType{{}, DType::f32, {}});
  g.add_node(Node{Op::mul, "node with spaces", {}, {x, w}, {y}});
  g.add_node(Node{Op::cast, "c", {{"dtype", std::string("f32")}}, {y}, {z}});
  g.add_node(Node{Op::reshape, "r", {{"shape", std::vector<int64_t>{}}}, {g.add_constant("one", f32({1, 1}), "one")}, {s}});
  g.mark_output(z);
  g.mark_output(x);
  g.mark_output(s);
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message();
  expect_round_trip(g);
}

TEST(ParserTest, RoundTripSpecialFloats) {
  Graph g;
  Builder b(g, nullptr);
  ValueId x = b.input("x", {4});
  ValueId c = b.clamp(x, -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity());
  c = b.scale(c, std::numeric_limits<double>::quiet_NaN(), 5e-324);
  c = b.scale(c, 1e300, -0.0);
  b.output(b.op(Op::attention, {b.reshape(c, {1, 4}), b.reshape(c, {1, 4}), b.reshape(c, {1, 4})},
                {{"scale", int64_t{1}}}));  // an int where a float is declared
  ASSERT_TRUE(b.ok()) << b.status().message();
  std::string text = print_graph(g);
  EXPECT_NE(text.find("{max = inf, min = -inf}"), std::string::npos) << text;
  EXPECT_NE(text.find("{add = 5e-324, mul = nan}"), std::string::npos) << text;
  EXPECT_NE(text.find("{add = -0.0, mul = 1e+300}"), std::string::npos) << text;
  expect_round_trip(g);
  auto parsed = parse_graph(text);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_TRUE(std::signbit(parsed->nodes()[2].attrs.get_float("add")));
  EXPECT_TRUE(std::isnan(parsed->nodes()[1].attrs.get_float("mul")));
}

TEST(ParserTest, HandWrittenTextWithCommentsAndDefaults) {
  auto g = parse_graph(R"(// a comment line
graph @hand (%x: f32[1,4,2,2]) {   // inputs
  %w: f32[4,4,1,1] = weight "conv.weight"
  %h: f32[1,4,2,2] = conv2d (%x, %w) {pad = [0, 0]}
  %k: f32[1,4,2,2] = scale "k" (%h) {mul = 2, add = 0.5}
  %u: f32[1,4,2,2] = upsample_nearest (%k) {factors = []}
  return %k
})");
  // upsample_nearest with empty factors is rejected by its shape rule.
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.message().rfind("6:3: node 'u' (upsample_nearest): ", 0), 0u) << g.message();

  auto ok = parse_graph(R"(graph @hand(%x: f32[1,4,2,2]) {
  %w: f32[4,4,1,1] = weight "conv.weight"
  %h: f32[1,4,2,2] = conv2d (%x, %w) {}
  %k: f32[1,4,2,2] = scale "k" (%h) {mul = 2, add = 0.5}
  %l: f32[1,4] = slice (%k) {axis = 2, start = 0, end = 1}
  return %k
})");
  ASSERT_FALSE(ok.has_value());
  EXPECT_EQ(ok.message(), "5:3: node 'l' (slice): declared f32[1,4] for %l, inferred f32[1,4,1,2]");

  auto good = parse_graph("graph @hand(%x: f32[1,4,2,2]) {\n"
                          "  %w: f32[4,4,1,1] = weight \"conv.weight\"\n"
                          "  %h: f32[1,4,2,2] = conv2d (%x, %w)\n"
                          "  %k: f32[1,4,2,2] = scale \"k\" (%h) {mul = 2, add = 0.5}\n"
                          "  return %k, %h\n"
                          "}\n");
  ASSERT_TRUE(good.has_value()) << good.message();
  EXPECT_EQ(print_graph(*good),
            "graph @hand(%x: f32[1,4,2,2]) {\n"
            "  %w: f32[4,4,1,1] = weight \"conv.weight\"\n"
            "  %h: f32[1,4,2,2] = conv2d \"h\" (%x, %w)\n"
            "  %k: f32[1,4,2,2] = scale \"k\" (%h) {add = 0.5, mul = 2}\n"
            "  return %k, %h\n"
            "}\n");
}

// Parses `text` expecting an error whose message is exactly `message`.
void expect_error(const std::string& text, const std::string& message) {
  auto g = parse_graph(text);
  ASSERT_FALSE(g.has_value()) << "parsed:\n" << text;
  EXPECT_EQ(g.message(), message) << text;
}

TEST(ParserTest, SyntaxErrorsCarryLineColumnAndWhatWasExpected) {
  const std::string head = "graph @g(%x: f32[2,4]) {\n";
  expect_error("", "1:1: expected 'graph' at the start of a graph, got end of input");
  expect_error("graf @g() {\n  return\n}", "1:1: expected 'graph' at the start of a graph, got 'graf'");
  expect_error("graph g() {}", "1:7: expected '@' and the graph's name after 'graph', got 'g'");
  expect_error("graph @g(%x f32[2]) {}", "1:13: expected ':' and a type after %x, got 'f32'");
  expect_error("graph @g(%x: f64[2]) {}", "1:14: unknown dtype 'f64' (expected f32, f16 or bf16)");
  expect_error("graph @g(%x: f32[2,]) {}", "1:20: expected a dimension (an integer), got ']'");
  expect_error("graph @g(%x: f32[2,-3]) {}", "1:20: dimension -3 is negative");
  expect_error("graph @g(%x: f32[2]{nchw}) {}", "1:21: expected a layout ('nhwc' or 'logical'), got 'nchw'");
  expect_error(head + "  %y: f32[2,4] = frobnicate (%x)\n  return %y\n}", "2:18: unknown op 'frobnicate'");
  expect_error(head + "  %y: f32[2,4] = silu (%x\n  return %y\n}",
               "3:3: expected ')' after the operands (or ',' before another operand), got 'return'");
  expect_error(head + "  %y: f32[2,4] = silu (%nope)\n  return %y\n}", "2:24: undefined value %nope");
  expect_error(head + "  %y: f32[2,4] = silu (%x)\n  %y: f32[2,4] = silu (%x)\n  return %y\n}",
               "3:3: %y is already defined (at 2:3)");
  expect_error(head + "  %x: f32[2,4] = silu (%x)\n  return %x\n}", "2:3: %x is already defined (at 1:10)");
  expect_error(head + "  %y: f32[2,4] = silu (%x) {eps = }\n  return %y\n}",
               "2:35: expected an attribute value (number, string or [list]), got '}'");
  expect_error(head + "  %y: f32[2,4] = scale (%x) {mul = 1, mul = 2}\n  return %y\n}",
               "2:39: attribute 'mul' given twice");
  expect_error(head + "  %w: f32[4] = weight conv.w\n  return %w\n}",
               "2:23: expected the weight's tensor name (a non-empty string), got 'conv'");
  expect_error(head + "  %w: f32[4] = weight \"conv.w\n  return %w\n}",
               "2:23: unterminated string (expected '\"' before the end of the line)");
  expect_error(head + "  %w: f32[4] = weight \"a\\q\"\n  return %w\n}",
               "2:25: unknown escape \\q (expected \\\" \\\\ \\n \\t \\r or \\xHH)");
  expect_error(head + "  %y: f32[2,4] = silu (%x) $\n  return %y\n}", "2:28: unexpected character \"$\"");
  expect_error(head + "  silu (%x)\n  return %x\n}",
               "2:3: expected a statement ('%name: type = ...') or 'return', got 'silu'");
  expect_error(head + "  return %x\n}\n%junk", "4:1: expected end of input after the graph, got '%junk'");
  expect_error(head + "  return %x", "2:12: expected '}' to close the graph body, got end of input");
  expect_error(head + "  %y: f32[2,4] = scale (%x) {mul = 1e}\n  return %y\n}",
               "2:38: expected digits in the exponent of a number");
  expect_error(head + "  %y: f32[2,4] = scale (%x) {mul = 99999999999999999999}\n  return %y\n}",
               "2:36: integer 99999999999999999999 out of range");
  expect_error(head + "  %a: f32[2,4], %b: f32[2] = weight \"w\"\n  return %a\n}",
               "2:17: a weight defines exactly one value, got 2");
}

TEST(ParserTest, SemanticErrorsNameTheNode) {
  const std::string head = "graph @g(%x: f32[1,4,8,8]) {\n";
  // Declared shape differs from the inferred one.
  expect_error(head +
                   "  %w: f32[8,4,3,3] = weight \"conv.weight\"\n"
                   "  %conv: f32[1,8,8,8] = conv2d \"decoder.conv_in\" (%x, %w)\n"
                   "  return %conv\n}",
               "3:3: node 'decoder.conv_in' (conv2d): declared f32[1,8,8,8] for %conv, inferred f32[1,8,6,6]");
  // Declared dtype differs.
  expect_error(head + "  %y: f16[1,4,8,8] = silu \"act\" (%x)\n  return %y\n}",
               "2:3: node 'act' (silu): declared f16[1,4,8,8] for %y, inferred f32[1,4,8,8]");
  // Shapes that do not fit.
  expect_error(head +
                   "  %w: f32[8,3,3,3] = weight \"conv.weight\"\n"
                   "  %conv: f32[1,8,6,6] = conv2d \"decoder.conv_in\" (%x, %w)\n"
                   "  return %conv\n}",
               "3:3: node 'decoder.conv_in' (conv2d): conv2d input channels 4 != weight's 3 (weight [8,3,3,3])");
  // Missing and unknown attributes.
  expect_error(head +
                   "  %g: f32[4] = weight \"g\"\n"
                   "  %n: f32[1,4,8,8] = group_norm \"norm1\" (%x, %g, %g) {eps = 1e-06}\n"
                   "  return %n\n}",
               "3:3: node 'norm1' (group_norm): group_norm needs attribute 'groups'");
  expect_error(head + "  %y: f32[1,4,8,8] = silu \"act\" (%x) {alpha = 1.0}\n  return %y\n}",
               "2:3: node 'act' (silu): silu has no attribute 'alpha'");
  expect_error(head + "  %y: f32[1,4,8,8] = cast \"c\" (%x) {dtype = 16}\n  return %y\n}",
               "2:3: node 'c' (cast): cast attribute 'dtype' must be string, got int");
  // Operand counts, absent required operands, result counts.
  expect_error(head + "  %y: f32[1,4,8,8] = add \"a\" (%x)\n  return %y\n}",
               "2:3: node 'a' (add): add takes 2 operands, got 1");
  expect_error(head + "  %y: f32[1,4,8,8] = add \"a\" (_, %x)\n  return %y\n}",
               "2:3: node 'a' (add): add operand 0 is required");
  expect_error(head + "  %y: f32[1,8,8,8] = concat \"cat\" (%x, _) {axis = 1}\n  return %y\n}",
               "2:3: node 'cat' (concat): concat operand 1 is required");
  expect_error(head + "  %y: f32[1,4,8,8], %z: f32[1,4,8,8] = silu \"s\" (%x)\n  return %y\n}",
               "2:3: node 's' (silu): declares 2 results, the op defines 1");
}

TEST(ParserTest, ParsedGraphIsUsable) {
  auto g = parse_graph("graph @g(%x: f32[1,4,8,8], %y: f32[1,4,8,8]) {\n"
                       "  %s: f32[1,4,8,8] = add \"sum\" (%x, %y)\n"
                       "  return %s\n"
                       "}\n");
  ASSERT_TRUE(g.has_value()) << g.message();
  EXPECT_EQ(g->inputs().size(), 2u);
  EXPECT_EQ(g->value(g->inputs()[1]).name, "y");
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->nodes()[0].name, "sum");
  ASSERT_EQ(g->outputs().size(), 1u);
  EXPECT_EQ(g->value(g->outputs()[0]).kind, ValueKind::intermediate);
  // A parsed graph can be extended with the builder.
  Builder b(*g, nullptr);
  b.output(b.silu(g->outputs()[0]));
  EXPECT_TRUE(b.ok());
  EXPECT_TRUE(verify(*g).is_ok()) << verify(*g).message();
}

}  // namespace
}  // namespace strata

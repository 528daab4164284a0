// Interpreter driver: input, weight, layout and graph checks; outputs; the on_value
// hook; storage rounding; multithreaded runs equal single-threaded ones bit for bit.
#include "test_interp_util.h"

#include <cstring>

namespace strata {
namespace {

using testing::expect_exact;
using testing::InterpGraph;

// The error message contains `part` (printed in full when it does not).
void expect_mentions(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "message: " << message << "\nmissing: " << part;
}

// x -> conv2d(w) : the smallest graph with a weight.
void conv_graph(InterpGraph& t, bool add_weight_data = true) {
  ValueId x = t.b.input("x", {1, 1, 3, 3});
  ValueId w = add_weight_data ? t.weight("conv.weight", {1, 1, 3, 3}, std::vector<float>(9, 1.0f))
                              : t.b.constant("conv.weight", testing::f32_type({1, 1, 3, 3}));
  t.b.output(t.b.conv2d(x, w, kNoValue, {.pad = 1}));
}

TEST(Interpreter, WrongInputShapeNamesInputAndShapes) {
  InterpGraph t;
  conv_graph(t);
  auto out = t.run({Tensor({1, 1, 4, 4})});
  ASSERT_FALSE(out.has_value());
  expect_mentions(out.message(), "input 'x'");
  expect_mentions(out.message(), "[1,1,4,4]");
  expect_mentions(out.message(), "[1,1,3,3]");
}

TEST(Interpreter, WrongInputCount) {
  InterpGraph t;
  conv_graph(t);
  auto out = t.run({});
  ASSERT_FALSE(out.has_value());
  expect_mentions(out.message(), "takes 1 inputs, got 0");
}

TEST(Interpreter, MissingWeightNamesTensor) {
  InterpGraph t;
  conv_graph(t, /*add_weight_data=*/false);
  auto out = t.run({Tensor({1, 1, 3, 3})});
  ASSERT_FALSE(out.has_value());
  expect_mentions(out.message(), "conv.weight");
}

TEST(Interpreter, WeightOfWrongShapeNamesTensor) {
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 3, 3});
  ASSERT_TRUE(t.weights.add_owned("conv.weight", {9}, std::vector<float>(9, 1.0f)).is_ok());
  ValueId w = t.b.constant("conv.weight", testing::f32_type({1, 1, 3, 3}));
  t.b.output(t.b.conv2d(x, w, kNoValue, {.pad = 1}));
  auto out = t.run({Tensor({1, 1, 3, 3})});
  ASSERT_FALSE(out.has_value());
  expect_mentions(out.message(), "weight 'conv.weight' has shape [9]");
  expect_mentions(out.message(), "[1,1,3,3]");
}

TEST(Interpreter, F16WeightIsConverted) {
  // A weight stored as f16 bytes (1.5 = 0x3E00, -2 = 0xC000) is read as f32 values.
  InterpGraph t;
  ValueId x = t.b.input("x", {2});
  std::vector<uint8_t> bytes = {0x00, 0x3E, 0x00, 0xC0};  // little endian
  ASSERT_TRUE(t.weights.add_owned_bytes("s", DType::f16, {2}, bytes).is_ok());
  t.b.output(t.b.mul(x, t.b.constant("s", TensorType{{2}, DType::f16, Layout{}})));
  // f32 x times an f16 constant: the output takes x's dtype (f32), so 3·1.5 is exact.
  expect_exact(t.run1({Tensor({2}, {3, 0.25f})}), {2}, {4.5f, -0.5f});
}

TEST(Interpreter, LayoutsArePhysicalOnly) {
  // NHWC and padded-channel layouts change how a buffer stores a value, not the value:
  // the interpreter computes on logical shapes and gives the same result.
  InterpGraph t;
  conv_graph(t);
  Tensor x({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor want = t.run1({x});
  t.graph.value(t.graph.inputs()[0]).type.layout = Layout{LayoutKind::nhwc, 4};
  t.graph.value(t.graph.outputs()[0]).type.layout = Layout{LayoutKind::nhwc, 0};
  expect_exact(t.run1({x}), {1, 1, 3, 3}, want.data);
}

TEST(Interpreter, NodeWithMismatchedOutputTypeIsNamed) {
  InterpGraph t;
  conv_graph(t);
  t.graph.value(t.graph.outputs()[0]).type.shape = {1, 1, 2, 2};
  auto out = t.run({Tensor({1, 1, 3, 3})});
  ASSERT_FALSE(out.has_value());
  expect_mentions(out.message(), "node 'conv'");
  expect_mentions(out.message(), "f32[1,1,3,3]");
}

TEST(Interpreter, NodeReadingALaterValueIsRejected) {
  // Hand-built graph whose first node reads the output of the second.
  Graph g;
  ValueId x = g.add_input("x", testing::f32_type({2}));
  ValueId a = g.add_value("a", testing::f32_type({2}));
  ValueId b = g.add_value("b", testing::f32_type({2}));
  g.add_node(Node{Op::silu, "first", {}, {b}, {a}});
  g.add_node(Node{Op::silu, "second", {}, {x}, {b}});
  g.mark_output(a);
  WeightStore ws;
  auto out = interpret(g, ws, {Tensor({2})});
  ASSERT_FALSE(out.has_value());
  expect_mentions(out.message(), "node 'first'");
  expect_mentions(out.message(), "%b before it is computed");
}

TEST(Interpreter, OutputsMayRepeatOrBeInputs) {
  InterpGraph t;
  ValueId x = t.b.input("x", {2});
  ValueId y = t.b.scale(x, 2.0);
  t.b.output(y);
  t.b.output(x);
  t.b.output(y);
  auto out = t.run({Tensor({2}, {1, 2})});
  ASSERT_TRUE(out.has_value()) << out.message();
  ASSERT_EQ(out->size(), 3u);
  expect_exact((*out)[0], {2}, {2, 4});
  expect_exact((*out)[1], {2}, {1, 2});
  expect_exact((*out)[2], {2}, {2, 4});
}

TEST(Interpreter, F16InputIsRounded) {
  // An input of type f16 holds f16 numbers: 1 + 2^-11 arrives as 1.
  InterpGraph t;
  ValueId x = t.b.input("x", {1}, DType::f16);
  t.b.output(t.b.cast(x, DType::f32));
  expect_exact(t.run1({Tensor({1}, {1 + std::ldexp(1.0f, -11)})}), {1}, {1});
}

TEST(Interpreter, OnValueSeesEveryNodeOutput) {
  InterpGraph t;
  ValueId x = t.b.input("x", {2});
  ValueId dead = t.b.scale(x, 3.0);  // not an output and never read: still reported
  (void)dead;
  t.b.output(t.b.silu(t.b.scale(x, 2.0)));
  std::vector<std::pair<std::string, std::vector<float>>> seen;
  InterpretOptions options;
  options.threads = 1;
  options.on_value = [&](const Node& n, const Tensor& v) { seen.emplace_back(n.name, v.data); };
  auto out = t.run({Tensor({2}, {1, -1})}, options);
  ASSERT_TRUE(out.has_value()) << out.message();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], (std::pair<std::string, std::vector<float>>{"scale", {3, -3}}));
  EXPECT_EQ(seen[1], (std::pair<std::string, std::vector<float>>{"scale", {2, -2}}));
  EXPECT_EQ(seen[2].first, "silu");
  EXPECT_EQ(seen[2].second, (*out)[0].data);
}

// A small decoder-like graph touching every threaded kernel: conv2d (stride 1 and 2),
// group_norm, silu, rms_norm, upsample, linear q/k/v, attention, layer_norm, matmul,
// softmax, conv3d, broadcasting add / mul, gelu.
void mixed_graph(InterpGraph& t) {
  uint32_t seed = 100;
  auto w = [&](const std::string& name, Shape shape) {
    return t.weight(name, shape, testing::random_values(num_elements(shape), seed++));
  };
  Builder& b = t.b;
  ValueId x = b.input("x", {2, 8, 12, 10});
  ValueId h = b.conv2d(x, w("c1.weight", {16, 8, 3, 3}), w("c1.bias", {16}), {.pad = 1});
  h = b.silu(b.group_norm(h, w("gn.weight", {16}), w("gn.bias", {16}), 4, 1e-6));
  h = b.conv2d(h, w("c2.weight", {16, 16, 3, 3}), kNoValue, {.pad = 1, .stride = 2});  // [2,16,6,5]
  h = b.rms_norm(h, w("rms.gamma", {16, 1, 1}), w("rms.beta", {16, 1, 1}));
  h = b.upsample_nearest(h, {2, 2});                                                    // [2,16,12,10]
  ValueId tokens = b.permute(b.reshape(h, {2, 16, 120}), {0, 2, 1});                    // [2,120,16]
  ValueId q = b.linear(tokens, w("q.weight", {16, 16}), w("q.bias", {16}));
  ValueId k = b.linear(tokens, w("k.weight", {16, 16}));
  ValueId v = b.linear(tokens, w("v.weight", {16, 16}));
  ValueId a = b.layer_norm(b.attention(q, k, v, 0.25), w("ln.weight", {16}), w("ln.bias", {16}), 1e-5);
  ValueId scores = b.softmax(b.matmul(a, b.permute(a, {0, 2, 1})));                    // [2,120,120]
  b.output(b.matmul(scores, a));
  ValueId video = b.reshape(b.slice(h, 0, 0, 1), {1, 16, 3, 4, 10});
  video = b.conv3d(video, w("c3.weight", {8, 16, 3, 3, 3}), w("c3.bias", {8}), {.pad = 1});
  video = b.mul(b.add(video, w("shift", {8, 1, 1, 1})), w("gain", {1, 10}));
  b.output(b.gelu(b.concat({video, video}, 2)));
}

TEST(Interpreter, MultithreadedEqualsSingleThreadedBitForBit) {
  InterpGraph t;
  mixed_graph(t);
  ASSERT_TRUE(t.b.ok()) << t.b.status().message();
  Tensor x = testing::random_tensor({2, 8, 12, 10}, 1);
  auto reference = t.run({x}, testing::options_with(1));
  ASSERT_TRUE(reference.has_value()) << reference.message();
  for (int threads : {2, 3, 7}) {
    // min_work 1: every kernel splits, however small.
    auto out = t.run({x}, testing::options_with(threads, /*min_work=*/1));
    ASSERT_TRUE(out.has_value()) << out.message();
    ASSERT_EQ(out->size(), reference->size());
    for (size_t i = 0; i < out->size(); ++i) {
      const Tensor &got = (*out)[i], &want = (*reference)[i];
      ASSERT_EQ(got.shape, want.shape);
      EXPECT_EQ(std::memcmp(got.data.data(), want.data.data(), want.data.size() * sizeof(float)), 0)
          << "output " << i << " differs with " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace strata

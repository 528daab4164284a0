// The ops the diffusion transformer added (ir/ops.h): token_rms_norm, rope,
// sinusoidal and tanh. Each against values worked out by hand, its shape rule's
// errors, and the text form's round trip.
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/ir/test_interp_util.h"

#include <cmath>

namespace strata {
namespace {

using testing::InterpGraph;
using testing::f32_type;

TEST(TokenRmsNorm, NormalisesEachRowOverTheLastDim) {
  InterpGraph g;
  ValueId x = g.b.input("x", {2, 2});
  ValueId gamma = g.weight("gamma", {2}, {1.0f, 2.0f});
  g.b.output(g.b.token_rms_norm(x, gamma, 0.25));
  // Row (3, 4): mean of squares 12.5, + eps 0.25 = 12.75. Row (0, 0): all zero.
  const double r = 1.0 / std::sqrt(12.75);
  Tensor y = g.run1({Tensor({2, 2}, {3, 4, 0, 0})});
  testing::expect_near(y, {2, 2}, {float(3 * r), float(8 * r), 0.0f, 0.0f}, 1e-7);
}

TEST(TokenRmsNorm, WithoutGammaAndOnRank3) {
  InterpGraph g;
  ValueId x = g.b.input("x", {1, 3, 4});
  g.b.output(g.b.token_rms_norm(x, kNoValue, 0.0));
  // (1, 1, 1, 1) and (2, 0, 0, 0) both have RMS 1: unchanged; (2, 2, 2, 2) has RMS 2.
  Tensor y = g.run1({Tensor({1, 3, 4}, {1, 1, 1, 1, 2, 0, 0, 0, 2, 2, 2, 2})});
  testing::expect_near(y, {1, 3, 4}, {1, 1, 1, 1, 2, 0, 0, 0, 1, 1, 1, 1}, 1e-7);
}

TEST(TokenRmsNorm, ShapeRuleNamesAMismatchedGamma) {
  InterpGraph g;
  ValueId x = g.b.input("x", {2, 3});
  ValueId gamma = g.weight("gamma", {2}, {1, 1});
  g.b.token_rms_norm(x, gamma, 1e-5);
  ASSERT_FALSE(g.b.ok());
  EXPECT_NE(g.b.status().message().find("token_rms_norm gamma"), std::string::npos) << g.b.status().message();
}

TEST(Rope, RotatesInterleavedPairsPerToken) {
  InterpGraph g;
  ValueId x = g.b.input("x", {2, 2, 4});  // [heads, tokens, D]
  // Token 0: pair 0 by 90°, pair 1 unchanged; token 1: pair 0 by 180°, pair 1 by -90°.
  ValueId c = g.weight("cos", {2, 2}, {0, 1, -1, 0});
  ValueId s = g.weight("sin", {2, 2}, {1, 0, 0, -1});
  g.b.output(g.b.rope(x, c, s));
  Tensor in({2, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 0, 1, 0, 1, 1, 0});
  Tensor y = g.run1({in});
  // (a + ib)·i = -b + ia; (a + ib)·(-1) = -a - ib; (a + ib)·(-i) = b - ia.
  testing::expect_exact(y, {2, 2, 4},
                        {-2, 1, 3, 4, -5, -6, 8, -7,  //
                         0, 1, 0, 1, 0, -1, 0, -1});
}

TEST(Rope, ShapeRuleWantsTablesOfTokensByHalfD) {
  InterpGraph g;
  ValueId x = g.b.input("x", {2, 3, 4});
  ValueId c = g.weight("cos", {2, 2}, {1, 1, 1, 1});
  g.b.rope(x, c, c);
  ASSERT_FALSE(g.b.ok());
  EXPECT_NE(g.b.status().message().find("rope tables"), std::string::npos) << g.b.status().message();
  InterpGraph odd;
  ValueId y = odd.b.input("y", {2, 3});
  ValueId t = odd.weight("t", {2, 1}, {1, 1});
  odd.b.rope(y, t, t);
  ASSERT_FALSE(odd.b.ok());
  EXPECT_NE(odd.b.status().message().find("D even"), std::string::npos) << odd.b.status().message();
}

TEST(Sinusoidal, CosThenSinOfTheF32Product) {
  InterpGraph g;
  ValueId t = g.b.input("t", {2});
  ValueId f = g.weight("freqs", {2}, {1.0f, 0.5f});
  g.b.output(g.b.sinusoidal(t, f));
  Tensor y = g.run1({Tensor({2}, {0.0f, 3.0f})});
  testing::expect_near(y, {2, 4},
                       {1, 1, 0, 0,  //
                        float(std::cos(3.0)), float(std::cos(1.5)), float(std::sin(3.0)), float(std::sin(1.5))},
                       1e-7);
}

TEST(Sinusoidal, LargeArgumentsUseTheRoundedProduct) {
  // 370 · 0.1f: the f32 product differs from 37 by 1e-6 and the features follow it.
  InterpGraph g;
  ValueId t = g.b.input("t", {1});
  ValueId f = g.weight("freqs", {1}, {0.1f});
  g.b.output(g.b.sinusoidal(t, f));
  Tensor y = g.run1({Tensor({1}, {370.0f})});
  const float arg = 370.0f * 0.1f;
  testing::expect_near(y, {1, 2}, {float(std::cos(double(arg))), float(std::sin(double(arg)))}, 1e-7);
}

TEST(Tanh, MatchesTheFunction) {
  InterpGraph g;
  ValueId x = g.b.input("x", {4});
  g.b.output(g.b.tanh(x));
  Tensor y = g.run1({Tensor({4}, {0.0f, 0.5f, -2.0f, 30.0f})});
  testing::expect_near(y, {4}, {0.0f, float(std::tanh(0.5)), float(std::tanh(-2.0)), 1.0f}, 1e-7);
}

TEST(DitOps, PrintParsePrintRoundTripsAndVerifies) {
  InterpGraph g;
  ValueId x = g.b.input("x", {2, 3, 4});
  ValueId t = g.b.input("t", {1});
  ValueId gamma = g.weight("gamma", {4}, {1, 1, 1, 1});
  ValueId c = g.weight("cos", {3, 2}, {1, 1, 1, 1, 1, 1});
  ValueId f = g.weight("freqs", {2}, {1, 1});
  ValueId n = g.b.token_rms_norm(x, gamma, 1e-5);
  g.b.output(g.b.tanh(g.b.rope(n, c, c)));
  g.b.output(g.b.sinusoidal(t, f));
  ASSERT_TRUE(g.b.ok()) << g.b.status().message();
  ASSERT_TRUE(verify(g.graph).is_ok()) << verify(g.graph).message();
  const std::string text = print_graph(g.graph);
  for (const char* op : {"token_rms_norm", "rope", "sinusoidal", "tanh", "eps = "})
    EXPECT_NE(text.find(op), std::string::npos) << op << " in\n" << text;
  auto parsed = parse_graph(text);
  ASSERT_TRUE(parsed) << parsed.message() << "\n" << text;
  EXPECT_EQ(print_graph(*parsed), text);
  EXPECT_TRUE(verify(*parsed).is_ok());
}

TEST(DitOps, VerifierRejectsTokenRmsNormWithoutEps) {
  InterpGraph g;
  ValueId x = g.b.input("x", {2, 4});
  ValueId y = g.b.tanh(x);
  g.b.output(y);
  ASSERT_TRUE(g.b.ok());
  // Turn the tanh into a token_rms_norm missing its required eps.
  g.graph.nodes()[0].op = Op::token_rms_norm;
  Status s = verify(g.graph);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("eps"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace strata

// fuse_token_norm (passes/fuse_token_norm.cpp): a token norm takes the modulation and
// the residual add after it, a SwiGLU's mul(silu(a), b) becomes silu_mul; the fused
// graph computes what the chain did (f32: up to the dropped f32 roundings), and the
// pass leaves alone what it must not fuse (a norm read twice, a modulation that is a
// column, the option off).
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/decoder_like.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {
namespace {

// One Z-Image block's epilogue pattern: h = norm(a)·s; x1 = x + norm2(h)·g (the
// modulated residual); out = x1 + norm3(x1) (a plain residual, the context refiner's);
// and a SwiGLU gate f = silu(p)·q.
constexpr const char* kBlock = R"(graph @block(%a: f32[6,32], %x: f32[6,32], %s: f32[1,32], %g: f32[32], %p: f32[6,48], %q: f32[6,48]) {
  %w1: f32[32] = weight "w1"
  %w2: f32[32] = weight "w2"
  %w3: f32[32] = weight "w3"
  %n1: f32[6,32] = token_rms_norm "n1" (%a, %w1) {eps = 1e-05}
  %h: f32[6,32] = mul "h" (%n1, %s)
  %n2: f32[6,32] = token_rms_norm "n2" (%h, %w2) {eps = 1e-05}
  %m2: f32[6,32] = mul "m2" (%g, %n2)
  %x1: f32[6,32] = add "x1" (%x, %m2)
  %n3: f32[6,32] = token_rms_norm "n3" (%x1, %w3) {eps = 1e-06}
  %out: f32[6,32] = add "out" (%n3, %x1)
  %sp: f32[6,48] = silu "sp" (%p)
  %f: f32[6,48] = mul "f" (%sp, %q)
  return %out, %f
}
)";

Graph fused(const std::string& text, WeightStore& store, bool on, std::vector<std::string>* log = nullptr) {
  Graph g = testing::parse_with_weights(text, store);
  CompileOptions options;
  options.fuse_token_ops = on;
  PassContext ctx{options, store, {}};
  EXPECT_TRUE(run_fuse_token_norm(g, ctx).is_ok());
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
  if (log) *log = ctx.log;
  return g;
}

int64_t count(const Graph& g, Op op) {
  int64_t n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

const Node& node_named(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.name == name) return n;
  ADD_FAILURE() << "no node " << name;
  return g.nodes().front();
}

TEST(FuseTokenNorm, NormsTakeTheirModulationAndResidualAndSwigluBecomesSiluMul) {
  WeightStore store;
  std::vector<std::string> log;
  const Graph before = testing::parse_with_weights(kBlock, store);
  const Graph g = fused(kBlock, store, true, &log);
  EXPECT_EQ(count(g, Op::mul), 0) << print_graph(g);
  EXPECT_EQ(count(g, Op::add), 0) << print_graph(g);
  EXPECT_EQ(count(g, Op::silu), 0) << print_graph(g);
  EXPECT_EQ(count(g, Op::token_rms_norm), 3);
  EXPECT_EQ(count(g, Op::silu_mul), 1);
  EXPECT_EQ(node_named(g, "n1").inputs.size(), 3u);  // x, γ, the modulation
  EXPECT_EQ(node_named(g, "n2").inputs.size(), 4u);  // and the residual
  const Node& n3 = node_named(g, "n3");               // no mul: residual only
  ASSERT_EQ(n3.inputs.size(), 4u);
  EXPECT_EQ(n3.inputs[2], kNoValue);
  EXPECT_EQ(g.value(n3.inputs[3]).name, "x1");
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find("2 token norms take their modulation, 2 their residual add; 1 silu"), std::string::npos)
      << log.back();

  const auto in = testing::random_inputs(before, 11);
  auto want = interpret(before, store, in);
  auto got = interpret(g, store, in);
  ASSERT_TRUE(want && got);
  ASSERT_EQ(got->size(), 2u);
  for (size_t o = 0; o < 2; ++o)
    for (size_t i = 0; i < (*want)[o].data.size(); ++i) {
      const double w = (*want)[o].data[i], d = std::fabs((*got)[o].data[i] - w);
      // The chain rounds each intermediate to f32 (a few ULPs, amplified by the next
      // norm's 1/rms): well under 1e-5 of the values here (|v| ~ 1).
      EXPECT_LE(d, 1e-5 * std::max(1.0, std::fabs(w))) << "output " << o << " element " << i;
    }
}

TEST(FuseTokenNorm, LeavesANormReadTwiceAColumnModulationAndTheOptionOff) {
  constexpr const char* kText = R"(graph @no(%a: f32[6,32], %c: f32[6,1], %x: f32[6,32]) {
  %w: f32[32] = weight "w"
  %n: f32[6,32] = token_rms_norm "n" (%a, %w) {eps = 1e-05}
  %m: f32[6,32] = mul "m" (%n, %x)
  %r: f32[6,32] = add "r" (%n, %m)
  %k: f32[6,32] = token_rms_norm "k" (%x, %w) {eps = 1e-05}
  %col: f32[6,32] = mul "col" (%k, %c)
  return %r, %col
}
)";
  WeightStore store;
  const Graph g = fused(kText, store, true);
  EXPECT_EQ(print_graph(g), print_graph(testing::parse_with_weights(kText, store)));

  const Graph off = fused(kBlock, store, false);
  EXPECT_EQ(print_graph(off), print_graph(testing::parse_with_weights(kBlock, store)));
}

TEST(FuseTokenNorm, TheFusedNormWritesTheDtypeOfTheResultItTakesOver) {
  // After lower_precision: the norm and its modulation are f16, the stream f32.
  constexpr const char* kText = R"(graph @mixed(%a: f16[4,16], %x: f32[4,16], %s: f16[1,16]) {
  %w: f32[16] = weight "w"
  %n: f16[4,16] = token_rms_norm "n" (%a, %w) {dtype = "f16", eps = 1e-05}
  %m: f16[4,16] = mul "m" (%n, %s)
  %y: f32[4,16] = add "y" (%x, %m)
  return %y
}
)";
  WeightStore store;
  const Graph g = fused(kText, store, true);
  ASSERT_EQ(g.nodes().size(), 1u) << print_graph(g);
  EXPECT_EQ(g.nodes()[0].attrs.get_string("dtype"), "f32");
  EXPECT_EQ(g.value(g.nodes()[0].outputs[0]).type.dtype, DType::f32);
}

}  // namespace
}  // namespace strata

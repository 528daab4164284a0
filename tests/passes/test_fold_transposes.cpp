// fold_transposes: an NHWC map read as tokens (permute(reshape(map, [C, T]), [1, 0]))
// and tokens written back as a map (reshape(permute(tokens, [1, 0]), [1, C, H, W]))
// become reshape / permute / reshape chains whose every step keeps the bytes in
// place, so the memory planner stores them as one value.
//
// What must hold: the pass rewrites both directions (its log and the ops); the
// interpreter's result is the same bits before and after it; plan_buffers makes every
// step of both chains an alias, where without the pass each step was a copy; a
// reshape that other nodes read keeps its chain.
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "passes/decoder_like.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <regex>

namespace strata {
namespace {

constexpr int64_t kC = 8, kH = 4, kW = 6, kT = kH * kW;

// conv → tokens → attention → map → conv, as models/flux_decoder.cpp builds its
// mid-block attention (without the norm and projections).
Graph attention_block(WeightStore& store, bool channels_read_elsewhere = false) {
  const int64_t channels = kC;
  Graph g;
  Builder b(g, &store);
  ValueId x = b.input("x", {1, channels, kH, kW});
  ValueId w1 = testing::seeded_weight(b, store, "w1", {channels, channels, 1, 1}, 0.3f);
  ValueId map = b.conv2d(x, w1, kNoValue);
  ValueId flat = b.reshape(map, {channels, kT});
  ValueId tokens = b.permute(flat, {1, 0});
  if (channels_read_elsewhere) b.output(flat);
  ValueId h = b.attention(tokens, tokens, tokens, 0.5);
  ValueId back = b.reshape(b.permute(h, {1, 0}), {1, channels, kH, kW});
  ValueId w2 = testing::seeded_weight(b, store, "w2", {channels, channels, 1, 1}, 0.3f);
  b.output(b.conv2d(back, w2, kNoValue));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

Status passes_until(Graph& g, WeightStore& store, const std::string& last, int64_t channel_tile = 4) {
  CompileOptions options;
  options.channel_tile = channel_tile;
  options.stop_after = last;
  PassContext ctx{options, store, {}};
  return run_pipeline(g, ctx);
}

int64_t count(const Graph& g, Op op) {
  return std::count_if(g.nodes().begin(), g.nodes().end(), [op](const Node& n) { return n.op == op; });
}

TEST(FoldTransposes, BothDirectionsBecomeViewsWithTheSameBits) {
  WeightStore store;
  Graph g = attention_block(store);
  ASSERT_TRUE(passes_until(g, store, "attention_gemms").is_ok());
  const Graph before = g;
  CompileOptions options;
  PassContext ctx{options, store, {}};
  ASSERT_TRUE(run_fold_transposes(g, ctx).is_ok());
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message();
  EXPECT_EQ(ctx.log.back(), "fold_transposes: 1 map → tokens and 1 tokens → map transpose pairs now views");
  // Each direction: one permute of 4-D values between two reshapes.
  for (const Node& n : g.nodes())
    if (n.op == Op::permute) {
      EXPECT_EQ(n.attrs.get_ints("perm"), (std::vector<int64_t>{0, 3, 2, 1}));
      EXPECT_EQ(g.value(n.inputs[0]).type.rank(), 4);
    }
  EXPECT_EQ(count(g, Op::permute), 2);
  const auto in = testing::random_inputs(before, 3);
  EXPECT_TRUE(testing::bit_identical(testing::run_graph(g, store, in), testing::run_graph(before, store, in)));
}

// How many reshapes and permutes plan_buffers made aliases (its log's "N aliases").
int64_t aliases(const std::vector<std::string>& log) {
  for (const std::string& line : log) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex("([0-9]+) aliases"))) return std::stoll(m[1]);
  }
  ADD_FAILURE() << "no plan_buffers line in the log";
  return -1;
}

TEST(FoldTransposes, PlannedAsViews) {
  // With the pass, all six steps of the two chains are aliases; without it (the
  // pipeline's graph before the pass, planned alike) none of the four steps is.
  auto plan = [](bool fold) {
    WeightStore store;
    Graph g = attention_block(store);
    CompileOptions options;
    options.channel_tile = 4;
    PassContext ctx{options, store, {}};
    EXPECT_TRUE(passes_until(g, store, "attention_gemms").is_ok());
    if (fold) { EXPECT_TRUE(run_fold_transposes(g, ctx).is_ok()); }
    for (auto pass : {run_split_bands, run_schedule, run_plan_buffers}) EXPECT_TRUE(pass(g, ctx).is_ok());
    return aliases(ctx.log);
  };
  EXPECT_EQ(plan(true) - plan(false), 6);
}

TEST(FoldTransposes, AValueReadElsewhereKeepsItsCopy) {
  // The [C, T] reshape is also a graph output: the map → tokens chain stays; the
  // tokens → map chain is folded.
  WeightStore store;
  Graph g = attention_block(store, true);
  ASSERT_TRUE(passes_until(g, store, "attention_gemms").is_ok());
  CompileOptions options;
  PassContext ctx{options, store, {}};
  ASSERT_TRUE(run_fold_transposes(g, ctx).is_ok());
  EXPECT_EQ(ctx.log.back(), "fold_transposes: 0 map → tokens and 1 tokens → map transpose pairs now views");
}

}  // namespace
}  // namespace strata

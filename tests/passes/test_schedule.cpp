// schedule (passes/schedule.cpp) and plan_buffers writing in place
// (CompileOptions::write_in_place): a norm_act whose input dies there takes its input's
// place, the shortcut of a wide resnet runs first so that norm1 can, the interpreter
// computes the same bits, and the full-size Flux decoder's arena at 1024² and 2048²
// stays under bounds worked out from its tensor sizes.
#include "passes/plan_buffers.h"

#include "ir/printer.h"
#include "ir/verifier.h"
#include "models/vae.h"
#include "passes/decoder_like.h"
#include "passes/passes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace strata {
namespace {

// %a dies at norm_act %n (in place); %n is read by norm_act %m and again by %c (not in
// place: %n outlives %m); %c is the output.
constexpr const char* kNorms = R"(graph @norms(%x: f32[1,4,8,8]) {
  %a: f32[1,4,8,8] = silu "a" (%x)
  %g: f32[4] = weight "g"
  %b: f32[4] = weight "b"
  %n: f32[1,4,8,8] = norm_act "n" (%a, %g, %b) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  %m: f32[1,4,8,8] = norm_act "m" (%n, %g, %b) {eps = 1e-06, groups = 2, norm = "group", silu = 0}
  %c: f32[1,4,8,8] = add "c" (%m, %n)
  return %c
}
)";

Graph planned(const std::string& text, WeightStore& store, bool in_place, std::vector<std::string>* log = nullptr) {
  Graph g = testing::parse_with_weights(text, store);
  CompileOptions options;
  options.write_in_place = in_place;
  PassContext ctx{options, store, {}};
  EXPECT_TRUE(run_schedule(g, ctx).is_ok());
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
  EXPECT_TRUE(run_plan_buffers(g, ctx).is_ok());
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
  if (log) *log = ctx.log;
  return g;
}

const BufferAssignment& place(const Graph& g, const char* name) { return *g.value(g.find_value(name)).buffer; }

TEST(InPlace, NormWhoseInputDiesThereTakesItsPlace) {
  WeightStore store;
  std::vector<std::string> log;
  Graph g = planned(kNorms, store, true, &log);
  EXPECT_EQ(place(g, "n"), place(g, "a"));
  EXPECT_NE(place(g, "m"), place(g, "n"));
  EXPECT_EQ(place(g, "c").arena, "out");
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find("0 aliases, 1 in place"), std::string::npos) << log.back();
  // 4·8·8 f32 = 1 KiB per value: %a/%n and %m, alive together at %m and %c.
  EXPECT_EQ(summarize_buffers(g).arena_bytes("act"), 2048u);
  EXPECT_EQ(summarize_buffers(g).unshared_activation_bytes, 3072u);

  WeightStore store2;
  Graph off = planned(kNorms, store2, false);
  EXPECT_NE(place(off, "n"), place(off, "a"));
}

TEST(InPlace, OnlyNormActOfOneTypeWhoseOperandIsAnIntermediate) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kNorms, store);
  const Node& n = g.nodes()[1];
  ASSERT_EQ(n.name, "n");
  EXPECT_TRUE(may_run_in_place(g, n));
  EXPECT_FALSE(may_run_in_place(g, g.nodes()[0]));  // silu
  Graph cast = g;
  cast.value(cast.find_value("n")).type.dtype = DType::f16;  // y narrower than x
  EXPECT_FALSE(may_run_in_place(cast, cast.nodes()[1]));
  Graph from_input = testing::parse_with_weights(R"(graph @in(%x: f32[1,4,8,8]) {
  %g: f32[4] = weight "g"
  %n: f32[1,4,8,8] = norm_act "n" (%x, %g) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  %s: f32[1,4,8,8] = silu "s" (%n)
  return %s
}
)",
                                                 store);
  EXPECT_FALSE(may_run_in_place(from_input, from_input.nodes()[0]));  // x is a graph input
  Graph to_output = testing::parse_with_weights(R"(graph @out(%x: f32[1,4,8,8]) {
  %a: f32[1,4,8,8] = silu "a" (%x)
  %g: f32[4] = weight "g"
  %n: f32[1,4,8,8] = norm_act "n" (%a, %g) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  return %n
}
)",
                                                store);
  EXPECT_FALSE(may_run_in_place(to_output, to_output.nodes()[1]));  // y is a graph output
}

// A fused resnet from 8 to 4 channels as fuse_residual leaves Flux's (conv2 takes the
// 1×1 shortcut's result), with the shortcut after conv2, where the model builds it.
constexpr const char* kWideResnet = R"(graph @wide_resnet(%z: f32[1,8,8,8]) {
  %x: f32[1,8,8,8] = silu "x" (%z)
  %g8: f32[8] = weight "g8"
  %b8: f32[8] = weight "b8"
  %h: f32[1,8,8,8] = norm_act "norm1" (%x, %g8, %b8) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  %conv1.weight: f32[4,8,3,3] = weight "conv1.weight"
  %conv1: f32[1,4,8,8] = conv_gemm "conv1" (%h, %conv1.weight) {gather = "plain", kernel = [3, 3], pad = [1, 1], stride = [1, 1], weight_layout = "oihw"}
  %g4: f32[4] = weight "g4"
  %b4: f32[4] = weight "b4"
  %h2: f32[1,4,8,8] = norm_act "norm2" (%conv1, %g4, %b4) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  %sc.weight: f32[4,8,1,1] = weight "sc.weight"
  %s: f32[1,4,8,8] = conv_gemm "conv_shortcut" (%x, %sc.weight) {gather = "plain", kernel = [1, 1], pad = [0, 0], stride = [1, 1], weight_layout = "oihw"}
  %conv2.weight: f32[4,4,3,3] = weight "conv2.weight"
  %y: f32[1,4,8,8] = conv_gemm "conv2" (%h2, %conv2.weight, _, %s) {gather = "plain", kernel = [3, 3], pad = [1, 1], stride = [1, 1], weight_layout = "oihw"}
  return %y
}
)";

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (const Node& n : g.nodes()) names.push_back(n.name);
  return names;
}

TEST(Schedule, WideShortcutRunsFirstAndNorm1WritesOverTheBlockInput) {
  // Bytes (f32, 8×8 positions): x and h 2 KiB, conv1, h2, s 1 KiB. Model order: x, h,
  // conv1 alive together (x waits for the shortcut): 5 KiB. Shortcut first, norm1 in
  // place: x/h, s and conv1 at conv1: 4 KiB.
  WeightStore store;
  Graph before = testing::parse_with_weights(kWideResnet, store);
  std::vector<std::string> log;
  Graph g = planned(kWideResnet, store, true, &log);
  EXPECT_EQ(node_names(g),
            (std::vector<std::string>{"x", "conv_shortcut", "norm1", "conv1", "norm2", "conv2"}));
  EXPECT_EQ(place(g, "h"), place(g, "x"));
  EXPECT_EQ(summarize_buffers(g).arena_bytes("act"), 4096u);
  ASSERT_GE(log.size(), 2u);
  EXPECT_NE(log[0].find("schedule: 1 nodes run earlier, peak live activations 0.0 MiB (5120 bytes) -> 0.0 MiB "
                        "(4096 bytes)"),
            std::string::npos)
      << log[0];
  for (uint32_t seed : {3u, 4u}) {
    auto in = testing::random_inputs(before, seed);
    EXPECT_TRUE(testing::bit_identical(testing::run_graph(before, store, in), testing::run_graph(g, store, in)));
  }

  // Without writing in place the moved order holds as many bytes (x, s, h at norm1):
  // the order is kept.
  WeightStore store2;
  Graph kept = planned(kWideResnet, store2, false);
  EXPECT_EQ(node_names(kept), node_names(before));
  EXPECT_EQ(summarize_buffers(kept).arena_bytes("act"), 5120u);
}

// kWideResnet with conv2's weights computed from a constant in the model's order before
// everything (as winograd_weights makes a conv's U): a node that reads constants only.
// By bytes alone (576 B, under every activation) it would run first and hold its result
// across the block; it runs right before its reader instead.
constexpr const char* kWideResnetComputedWeight = R"(graph @wide_resnet_w(%z: f32[1,8,8,8]) {
  %conv2.weight: f32[4,4,3,3] = weight "conv2.weight"
  %w2: f32[4,4,3,3] = scale "w2_scaled" (%conv2.weight) {mul = 0.5}
  %x: f32[1,8,8,8] = silu "x" (%z)
  %g8: f32[8] = weight "g8"
  %b8: f32[8] = weight "b8"
  %h: f32[1,8,8,8] = norm_act "norm1" (%x, %g8, %b8) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  %conv1.weight: f32[4,8,3,3] = weight "conv1.weight"
  %conv1: f32[1,4,8,8] = conv_gemm "conv1" (%h, %conv1.weight) {gather = "plain", kernel = [3, 3], pad = [1, 1], stride = [1, 1], weight_layout = "oihw"}
  %g4: f32[4] = weight "g4"
  %b4: f32[4] = weight "b4"
  %h2: f32[1,4,8,8] = norm_act "norm2" (%conv1, %g4, %b4) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  %sc.weight: f32[4,8,1,1] = weight "sc.weight"
  %s: f32[1,4,8,8] = conv_gemm "conv_shortcut" (%x, %sc.weight) {gather = "plain", kernel = [1, 1], pad = [0, 0], stride = [1, 1], weight_layout = "oihw"}
  %y: f32[1,4,8,8] = conv_gemm "conv2" (%h2, %w2, _, %s) {gather = "plain", kernel = [3, 3], pad = [1, 1], stride = [1, 1], weight_layout = "oihw"}
  return %y
}
)";

TEST(Schedule, NodesReadingConstantsOnlyRunRightBeforeTheirReader) {
  WeightStore store;
  Graph before = testing::parse_with_weights(kWideResnetComputedWeight, store);
  Graph g = planned(kWideResnetComputedWeight, store, true);
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"x", "conv_shortcut", "norm1", "conv1", "norm2", "w2_scaled",
                                                     "conv2"}));
  // The block's 4 KiB as in WideShortcutRunsFirstAndNorm1WritesOverTheBlockInput; w2
  // (576 B) is alive at conv2 only, beside h2, s and y.
  EXPECT_EQ(summarize_buffers(g).arena_bytes("act"), 4096u);
  auto in = testing::random_inputs(before, 5);
  EXPECT_TRUE(testing::bit_identical(testing::run_graph(before, store, in), testing::run_graph(g, store, in)));
}

// Four independent chains (silu, tanh, add: one per layer's modulation vector, as in a
// diffusion transformer's per-step plan), then their sum. In chain order every node
// after a chain's first reads what was just written: 10 barriers by the runtime's rule
// (11 in the memory-aware order, which moves one node); level by level, 4. The level order is taken (the interpreter gives the same bits);
// not with a byte limit under its peak of live activations, nor with the option off.
constexpr const char* kChains = R"(graph @chains(%t: f32[1,16]) {
  %a0: f32[1,16] = silu "a0" (%t)
  %b0: f32[1,16] = tanh "b0" (%a0)
  %c0: f32[1,16] = add "c0" (%b0, %t)
  %a1: f32[1,16] = silu "a1" (%t)
  %b1: f32[1,16] = tanh "b1" (%a1)
  %c1: f32[1,16] = add "c1" (%b1, %t)
  %a2: f32[1,16] = silu "a2" (%t)
  %b2: f32[1,16] = tanh "b2" (%a2)
  %c2: f32[1,16] = add "c2" (%b2, %t)
  %a3: f32[1,16] = silu "a3" (%t)
  %b3: f32[1,16] = tanh "b3" (%a3)
  %c3: f32[1,16] = add "c3" (%b3, %t)
  %d: f32[1,16] = add "d" (%c0, %c1)
  %e: f32[1,16] = add "e" (%c2, %c3)
  %f: f32[1,16] = add "f" (%d, %e)
  return %f
}
)";

TEST(Schedule, IndependentChainsRunLevelByLevel) {
  WeightStore store;
  Graph before = testing::parse_with_weights(kChains, store);
  std::vector<std::string> log;
  Graph g = planned(kChains, store, true, &log);
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3", "c0", "c1",
                                                     "c2", "c3", "d", "e", "f"}));
  bool logged = false;
  for (const std::string& line : log)  // from the memory-aware order, which moves one node: 11
    logged = logged || line.find("level order, barriers 11 -> 4 (by values)") != std::string::npos;
  EXPECT_TRUE(logged) << fmt::format("{}", fmt::join(log, "\n"));
  auto in = testing::random_inputs(before, 7);
  EXPECT_TRUE(testing::bit_identical(testing::run_graph(before, store, in), testing::run_graph(g, store, in)));

  for (uint64_t limit : {uint64_t{0}, uint64_t{1}}) {
    SCOPED_TRACE(limit);
    WeightStore store2;
    Graph h = testing::parse_with_weights(kChains, store2);
    CompileOptions options;
    options.schedule_levels_max_bytes = limit;
    PassContext ctx{options, store2, {}};
    ASSERT_TRUE(run_schedule(h, ctx).is_ok());
    EXPECT_EQ(node_names(h)[1], "b0");  // chain order
    bool refused = false;
    for (const std::string& line : ctx.log) refused = refused || line.find("level order not taken") != std::string::npos;
    EXPECT_EQ(refused, limit == 1) << fmt::format("{}", fmt::join(ctx.log, "\n"));
  }
}

// Two chains of three from one input, as a transformer layer's q and k projections,
// norms and permutes, then a chain of four after them. In chain order 8 barriers, level
// by level 6 (a and b side by side, then a2 and b2, then a3 and b3): a quarter fewer.
// The default (schedule_levels_min_saving 0.2) takes the level order, with the same bits
// from the interpreter; the earlier rule (one half) keeps the chain order and says why.
constexpr const char* kTwoChains = R"(graph @two_chains(%t: f32[1,16]) {
  %a: f32[1,16] = silu "a" (%t)
  %a2: f32[1,16] = tanh "a2" (%a)
  %a3: f32[1,16] = silu "a3" (%a2)
  %b: f32[1,16] = silu "b" (%t)
  %b2: f32[1,16] = tanh "b2" (%b)
  %b3: f32[1,16] = silu "b3" (%b2)
  %c: f32[1,16] = add "c" (%a3, %b3)
  %d: f32[1,16] = tanh "d" (%c)
  %e: f32[1,16] = silu "e" (%d)
  %f: f32[1,16] = tanh "f" (%e)
  return %f
}
)";

TEST(Schedule, SideBySideChainsTakeTheLevelOrderForAFifthFewerBarriers) {
  for (double min_saving : {0.2, 0.5}) {
    SCOPED_TRACE(min_saving);
    WeightStore store;
    Graph before = testing::parse_with_weights(kTwoChains, store);
    Graph g = before;
    CompileOptions options;
    EXPECT_EQ(options.schedule_levels_min_saving, 0.2);  // the default
    options.schedule_levels_min_saving = min_saving;
    PassContext ctx{options, store, {}};
    ASSERT_TRUE(run_schedule(g, ctx).is_ok());
    const std::string log = fmt::format("{}", fmt::join(ctx.log, "\n"));
    if (min_saving == 0.2) {
      EXPECT_EQ(node_names(g), (std::vector<std::string>{"a", "b", "a2", "b2", "a3", "b3", "c", "d", "e", "f"}));
      EXPECT_NE(log.find("level order, barriers 8 -> 6 (by values)"), std::string::npos) << log;
    } else {
      EXPECT_EQ(node_names(g), node_names(before));
      EXPECT_NE(log.find("level order not taken (8 barriers -> 6: under 50 % fewer)"), std::string::npos) << log;
    }
    auto in = testing::random_inputs(before, 9);
    EXPECT_TRUE(testing::bit_identical(testing::run_graph(before, store, in), testing::run_graph(g, store, in)));
  }
}

// A seeded small Flux decoder whose last up block, like the full one's, starts with a
// resnet from more channels to fewer (block_out_channels 32, 64, 64, 64: up_blocks.3
// goes from 64 to 32 at the full resolution) through the whole pipeline, with and
// without writing in place: the same nodes, the same bits from the interpreter, a
// smaller arena.
TEST(Schedule, SmallFluxPipelineIsBitIdenticalWithASmallerArena) {
  FluxVaeConfig config = flux_small_config();
  config.block_out_channels = {32, 64, 64, 64};
  Vae vae = seeded_vae(config, 3);
  auto built = build_decoder(vae, {.latent_h = 8, .latent_w = 6});
  ASSERT_TRUE(built) << built.message();
  std::vector<Graph> graphs;
  for (bool in_place : {false, true}) {
    Graph g = *built;
    CompileOptions options;
    options.precision = Precision::f16;
    options.write_in_place = in_place;
    PassContext ctx{options, vae.weights, {}};
    Status s = run_pipeline(g, ctx);
    ASSERT_TRUE(s.is_ok()) << s.message();
    graphs.push_back(std::move(g));
  }
  const Graph &off = graphs[0], &on = graphs[1];
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(sorted(node_names(off)), sorted(node_names(on)));
  EXPECT_NE(node_names(off), node_names(on)) << "the shortcut of up_blocks.3.resnets.0 moves";
  EXPECT_LT(summarize_buffers(on).arena_bytes("act"), summarize_buffers(off).arena_bytes("act"));
  auto in = testing::random_inputs(off, 5);
  EXPECT_TRUE(testing::bit_identical(testing::run_graph(off, vae.weights, in), testing::run_graph(on, vae.weights, in)));
}

// The full-size Flux decoder (block_out_channels 128, 256, 512, 512), f16, the H200's
// 4 GiB binding limit (nothing banded), graph only. Worked out from the tensor sizes
// at 1024² (a 128×128 latent), f16 NHWC: up_blocks.3 runs at 1024² with 128 channels
// (256 MiB a map) after up_blocks.2's upsampler conv wrote 256 channels at 1024²
// (512 MiB). Its resnets.0 (256 → 128, 1×1 shortcut) in the model's order holds that
// input x (512) while norm1 writes h (512) and conv1 writes its result (256): 1280 MiB,
// the arena before. With the shortcut first (s, 256) and norm1 written over x, conv1
// holds h (512) + s (256) + its result (256) = 1024 MiB; conv2 holds h2, s and its
// result, 768; resnets.1 and .2 hold their input (the residual), h and conv1's result,
// 768; up_blocks.2's upsampler conv holds its 512² input (128) and its result (512),
// 640; everything at 512² and below is at most 256 MiB a map (512 channels at 512²)
// and holds at most 3 of them. So the arena is at most 1 GiB (if the packing leaves no
// gap), and 4 GiB at 2048² (every map 4×).
TEST(FullSizeFlux, ArenaAtMostOneGiBAt1024AndFourGiBAt2048) {
  for (int64_t latent : {128, 256}) {
    Vae vae = seeded_vae(flux_full_config(), 0);
    auto built = build_decoder(vae, {.latent_h = latent, .latent_w = latent});
    ASSERT_TRUE(built) << built.message();
    Graph g = std::move(*built);
    CompileOptions options;
    options.precision = Precision::f16;
    options.binding_limit = 4ull << 30;
    options.write_in_place = true;
    PassContext ctx{options, vae.weights, {}};
    Status s = run_pipeline(g, ctx);
    ASSERT_TRUE(s.is_ok()) << s.message();
    const uint64_t map_256 = static_cast<uint64_t>(latent * 8) * static_cast<uint64_t>(latent * 8) * 256 * 2;
    const uint64_t bound = 2 * map_256;  // 512 + 256 + 256 MiB at 1024²
    EXPECT_LE(summarize_buffers(g).arena_bytes("act"), bound) << "latent " << latent;
    // Where the old peak was: the block input of up_blocks.3.resnets.0 is norm1's
    // last reader and shares its place with norm1's result.
    const std::string block = "decoder.up_blocks.3.resnets.0";
    int64_t shortcut = -1, norm1 = -1;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (g.nodes()[i].name == block + ".conv_shortcut") shortcut = static_cast<int64_t>(i);
      if (g.nodes()[i].name == block + ".norm1") norm1 = static_cast<int64_t>(i);
    }
    ASSERT_GE(shortcut, 0);
    ASSERT_GE(norm1, 0);
    EXPECT_LT(shortcut, norm1);
    const Node& n = g.nodes()[static_cast<size_t>(norm1)];
    EXPECT_EQ(g.value(n.inputs[0]).buffer, g.value(n.outputs[0]).buffer);
  }
}

}  // namespace
}  // namespace strata

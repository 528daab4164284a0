// plan_buffers: golden before/after (offsets printed as ` @arena+offset`), the text form
// round-trips with buffers, no two values alive at once overlap, aliases share, the
// plan is deterministic, the interpreter is unaffected; and the bytes before / after
// on the full-size Flux decoder at 1024² (graph only).
#include "passes/plan_buffers.h"

#include "ir/verifier.h"
#include "models/vae.h"
#include "passes/decoder_like.h"
#include "passes/passes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

namespace strata {
namespace {

constexpr const char* kBefore = R"(graph @buffers(%x: f32[1,4,8,8]) {
  %a: f32[1,4,8,8] = silu "a" (%x)
  %b: f32[1,4,8,8] = silu "b" (%a)
  %c: f32[1,4,8,8] = add "c" (%b, %a)
  %r: f32[4,64] = reshape "r" (%c) {shape = [4, 64]}
  %s: f32[4,64] = softmax "s" (%r)
  %u: f32[1,4,16,16] = upsample_nearest "u" (%c) {factors = [2, 2]}
  %v: f32[1,4,16,16] = silu "v" (%u)
  %w: f32[1,4,16,16] = silu "w" (%v)
  %t: f16[4,64] = cast "t" (%s) {dtype = "f16"}
  return %w, %t
}
)";

// Lives (node indices): a 0-2, b 1-2, c 2-5 (extended by its alias %r), s 4-8, u 5-6,
// v 6-7. Largest first: %u at 0, %v at 4096 (alive with %u at node 6); then the 1 KiB
// values in definition order: %a at 0, %b at 1024, %c at 4096 (alive with %a, %b at
// node 2 and with %u at node 5), %s at 8192 (alive with %c, %u, %v). %v reuses %c's
// bytes, %a's are reused by %u. %r shares %c's place; inputs and outputs have arenas
// of their own.
constexpr const char* kAfter = R"(graph @buffers(%x: f32[1,4,8,8] @in+0) {
  %a: f32[1,4,8,8] @act+0 = silu "a" (%x)
  %b: f32[1,4,8,8] @act+1024 = silu "b" (%a)
  %c: f32[1,4,8,8] @act+4096 = add "c" (%b, %a)
  %r: f32[4,64] @act+4096 = reshape "r" (%c) {shape = [4, 64]}
  %s: f32[4,64] @act+8192 = softmax "s" (%r)
  %u: f32[1,4,16,16] @act+0 = upsample_nearest "u" (%c) {factors = [2, 2]}
  %v: f32[1,4,16,16] @act+4096 = silu "v" (%u)
  %w: f32[1,4,16,16] @out+0 = silu "w" (%v)
  %t: f16[4,64] @out+4096 = cast "t" (%s) {dtype = "f16"}
  return %w, %t
}
)";

TEST(PlanBuffersTest, Golden) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kBefore, store);
  ASSERT_EQ(print_graph(g), kBefore);
  CompileOptions options;
  PassContext ctx{options, store, {}};
  ASSERT_TRUE(run_plan_buffers(g, ctx).is_ok());
  EXPECT_EQ(print_graph(g), kAfter);
  ASSERT_EQ(ctx.log.size(), 1u);
  EXPECT_NE(ctx.log[0].find("(12288 bytes) in 6 buffers unshared -> arena act 0.0 MiB (9216 bytes)"), std::string::npos) << ctx.log[0];
  BufferSummary s = summarize_buffers(g);
  EXPECT_EQ(s.arena_bytes("act"), 9216u);
  EXPECT_EQ(s.arena_bytes("in"), 1024u);
  EXPECT_EQ(s.arena_bytes("out"), 4096u + 512u);
  EXPECT_EQ(s.aliases, 1);
}

// Lifetimes as plan_buffers defines them, recomputed: [writer, last reader of the
// value or of any alias], to check that placed values alive together do not overlap —
// except a norm_act's result written over its x (may_run_in_place) at the node where
// x's life ends, in x's place.
void expect_no_overlap(const Graph& g) {
  const size_t nv = g.values().size();
  std::vector<int64_t> first(nv, -1), last(nv, -1);
  std::vector<ValueId> root(nv);
  for (size_t v = 0; v < nv; ++v) root[v] = static_cast<ValueId>(v);
  const std::vector<ValueHome> homes = pass_request(g, false).homes;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    for (ValueId in : n.inputs)
      if (in != kNoValue) last[static_cast<size_t>(root[static_cast<size_t>(in)])] = static_cast<int64_t>(i);
    if (is_buffer_alias(g, n, homes)) {
      root[static_cast<size_t>(n.outputs[0])] = root[static_cast<size_t>(n.inputs[0])];
      continue;
    }
    for (ValueId out : n.outputs) first[static_cast<size_t>(out)] = last[static_cast<size_t>(out)] = static_cast<int64_t>(i);
  }
  std::vector<ValueId> placed;
  for (const Value& v : g.values()) {
    if (v.kind == ValueKind::constant) {
      EXPECT_FALSE(v.buffer.has_value()) << v.name;
      continue;
    }
    ASSERT_TRUE(v.buffer.has_value()) << v.name;
    EXPECT_EQ(v.buffer->offset % kBufferAlignment, 0u) << v.name;
    if (root[static_cast<size_t>(v.id)] != v.id) {
      EXPECT_EQ(v.buffer, g.value(root[static_cast<size_t>(v.id)]).buffer) << v.name;
      continue;
    }
    if (v.buffer->arena == "act") placed.push_back(v.id);
  }
  for (size_t i = 0; i < placed.size(); ++i)
    for (size_t j = i + 1; j < placed.size(); ++j) {
      const Value &a = g.value(placed[i]), &b = g.value(placed[j]);
      size_t ia = static_cast<size_t>(a.id), ib = static_cast<size_t>(b.id);
      bool alive_together = first[ia] <= last[ib] && first[ib] <= last[ia];
      for (auto [x, y] : {std::pair(ia, ib), std::pair(ib, ia)}) {
        if (last[x] != first[y] || last[x] < 0) continue;
        const Node& n = g.nodes()[static_cast<size_t>(last[x])];
        if (may_run_in_place(g, n) && n.outputs[0] == static_cast<ValueId>(y) &&
            root[static_cast<size_t>(n.inputs[0])] == static_cast<ValueId>(x) &&
            g.value(static_cast<ValueId>(x)).buffer == g.value(static_cast<ValueId>(y)).buffer)
          alive_together = false;
      }
      bool bytes_overlap = a.buffer->offset < b.buffer->offset + buffer_bytes(b.type) &&
                           b.buffer->offset < a.buffer->offset + buffer_bytes(a.type);
      EXPECT_FALSE(alive_together && bytes_overlap) << "%" << a.name << " and %" << b.name;
    }
}

Graph compiled_decoder_like(WeightStore& store, int64_t channels, Precision p, std::vector<std::string>* log = nullptr,
                            bool in_place = CompileOptions{}.write_in_place) {
  Graph g = testing::decoder_like(store, testing::DecoderLikeOptions{.channels = channels});
  CompileOptions options;
  options.precision = p;
  options.write_in_place = in_place;
  PassContext ctx{options, store, {}};
  EXPECT_TRUE(run_pad_channels(g, ctx).is_ok());
  EXPECT_TRUE(run_assign_layout(g, ctx).is_ok());
  EXPECT_TRUE(run_lower_precision(g, ctx).is_ok());
  Status s = run_plan_buffers(g, ctx);
  EXPECT_TRUE(s.is_ok()) << s.message();
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
  if (log) *log = ctx.log;
  return g;
}

// A budget that bounds the activation arena alone (a streamed program counts its shared
// slots and weights itself): kBefore's 9216-byte arena fits a 9216-byte budget
// unchanged, while the same budget counting the graph's 1024 input and 4608 output
// bytes too sends values to host memory.
TEST(PlanBuffersTest, BudgetForActivationsOnlyLeavesSlotsToTheCaller) {
  for (bool activations_only : {true, false}) {
    WeightStore store;
    Graph g = testing::parse_with_weights(kBefore, store);
    CompileOptions options;
    options.memory_budget = 9216;
    options.memory_budget_activations_only = activations_only;
    PassContext ctx{options, store, {}};
    ASSERT_TRUE(run_plan_buffers(g, ctx).is_ok());
    const std::string log = fmt::format("{}", fmt::join(ctx.log, "\n"));
    if (activations_only) {
      EXPECT_EQ(print_graph(g), kAfter);
      EXPECT_EQ(log.find("arena host"), std::string::npos) << log;
    } else {
      EXPECT_NE(log.find("values moved to arena host"), std::string::npos) << log;
      EXPECT_NE(print_graph(g).find("@host+"), std::string::npos);
    }
  }
}

TEST(PlanBuffersTest, NoOverlapAndAliasesShare) {
  for (bool in_place : {false, true})
    for (Precision p : {Precision::f32, Precision::f16}) {
      WeightStore store;
      std::vector<std::string> log;
      Graph g = compiled_decoder_like(store, 96, p, &log, in_place);
      expect_no_overlap(g);
      BufferSummary s = summarize_buffers(g);
      EXPECT_LT(s.arena_bytes("act"), s.unshared_activation_bytes);
      ASSERT_FALSE(log.empty());
      EXPECT_EQ(log.back().find(", 0 in place;") == std::string::npos, in_place) << log.back();
    }
}

TEST(PlanBuffersTest, RoundTripsThroughText) {
  WeightStore store;
  Graph g = compiled_decoder_like(store, 16, Precision::f16);
  std::string text = print_graph(g);
  ASSERT_NE(text.find(" @act+"), std::string::npos);
  auto parsed = parse_graph(text);
  ASSERT_TRUE(parsed) << parsed.message();
  EXPECT_EQ(print_graph(*parsed), text);
  for (const Value& v : g.values()) {
    ValueId p = parsed->find_value(v.name);
    ASSERT_NE(p, kNoValue) << v.name;
    EXPECT_EQ(parsed->value(p).buffer, v.buffer) << v.name;
  }
}

TEST(PlanBuffersTest, DeterministicAndInterpreterUnchanged) {
  WeightStore store;
  std::vector<std::string> log1, log2;
  Graph a = compiled_decoder_like(store, 144, Precision::f16, &log1);
  Graph b = compiled_decoder_like(store, 144, Precision::f16, &log2);
  EXPECT_EQ(print_graph(a), print_graph(b));
  EXPECT_EQ(log1, log2);
  Graph unplanned = a;
  for (ValueId v = 0; v < static_cast<ValueId>(unplanned.values().size()); ++v) unplanned.value(v).buffer.reset();
  auto in = testing::random_inputs(a, 9);
  EXPECT_TRUE(testing::bit_identical(testing::run_graph(a, store, in), testing::run_graph(unplanned, store, in)));
  // Re-planning a planned graph gives the same plan.
  CompileOptions options;
  PassContext ctx{options, store, {}};
  std::string once = print_graph(a);
  ASSERT_TRUE(run_plan_buffers(a, ctx).is_ok());
  EXPECT_EQ(print_graph(a), once);
}

TEST(PlanBuffersTest, ParserRejectsMalformedBuffer) {
  auto g = parse_graph("graph @g(%x: f32[2] @in) {\n  return %x\n}\n");
  ASSERT_FALSE(g);
  EXPECT_NE(g.message().find("byte offset"), std::string::npos) << g.message();
}

// The numbers for the issue: the full-size architectures (Flux block_out_channels
// 128..512, Qwen-Image base_dim 96) decoding a 128×128 latent to 1024², seeded
// weights, graph only (no interpreter run): activation bytes with one buffer per value
// against the planned arena, in f32 and f16.
class FullSizeBytes : public ::testing::TestWithParam<std::string> {};

TEST_P(FullSizeBytes, ArenaSmallerThanUnshared) {
  for (Precision p : {Precision::f32, Precision::f16}) {
    Vae vae = GetParam() == "flux" ? seeded_vae(flux_full_config(), 0) : seeded_vae(qwen_full_config(), 0);
    auto built = build_decoder(vae, {.latent_h = 128, .latent_w = 128});
    ASSERT_TRUE(built) << built.message();
    Graph g = std::move(*built);
    size_t nodes_before = g.nodes().size();
    CompileOptions options;
    options.precision = p;
    PassContext ctx{options, vae.weights, {}};
    Status s = run_pipeline(g, ctx);
    ASSERT_TRUE(s.is_ok()) << s.message();
    BufferSummary sum = summarize_buffers(g);
    EXPECT_LT(sum.arena_bytes("act"), sum.unshared_activation_bytes / 4);
    std::cout << GetParam() << " full 1024^2 " << (p == Precision::f16 ? "f16" : "f32") << ": nodes " << nodes_before
              << " -> " << g.nodes().size() << "; activations unshared " << sum.unshared_activation_bytes
              << " bytes (" << sum.activation_values << " values, " << sum.aliases << " aliases) -> arena act "
              << sum.arena_bytes("act") << " bytes; in " << sum.arena_bytes("in") << ", out "
              << sum.arena_bytes("out") << "\n";
    for (const std::string& line : ctx.log) std::cout << "  " << line << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, FullSizeBytes, ::testing::Values("flux", "qwen"));

}  // namespace
}  // namespace strata

// The memory planner (passes/memory_plan.h): sizes as codegen stores values, storage
// roots and lives through an alias chain, a norm_act written in place, pinned values
// that planned ones keep clear of, and the overlap check rejecting what the rules do
// not allow. (Codegen placing an unplanned graph as plan_buffers plans it:
// tests/codegen/test_storage.cpp.)
#include "passes/memory_plan.h"

#include "passes/decoder_like.h"
#include "passes/plan_buffers.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TensorType type(Shape shape, DType d = DType::f32, Layout l = {}) { return TensorType{std::move(shape), d, l}; }

TEST(MemoryPlan, SizesAreTheStoredBytes) {
  // bf16 is held in f32 (4 bytes), f16 as half; padding slots count in any layout.
  EXPECT_EQ(buffer_bytes(type({1, 3, 4, 4}, DType::bf16), 1), 1u * 3 * 16 * 4);
  EXPECT_EQ(buffer_bytes(type({1, 3, 4, 4}, DType::f16), 1), 1u * 3 * 16 * 2);
  EXPECT_EQ(buffer_bytes(type({1, 3, 4, 4}, DType::f16, Layout{LayoutKind::nhwc, 8}), 1), 16u * 8 * 2);
  EXPECT_EQ(buffer_bytes(type({1, 3, 4, 4}, DType::f32, Layout{LayoutKind::logical, 8}), 1), 16u * 8 * 4);
  EXPECT_EQ(buffer_bytes(type({3}), 1), 12u);
  EXPECT_EQ(buffer_bytes(type({3})), 256u);  // kBufferAlignment
  EXPECT_EQ(buffer_bytes(type({3}), 16), 16u);
}

TEST(MemoryPlan, SameStoredBytes) {
  const Layout nhwc{LayoutKind::nhwc, 0}, padded{LayoutKind::nhwc, 8};
  EXPECT_TRUE(same_stored_bytes(type({1, 4, 8, 8}), type({4, 64})));
  EXPECT_TRUE(same_stored_bytes(type({1, 4, 8, 8}, DType::bf16), type({4, 64})));  // both stored as f32
  EXPECT_FALSE(same_stored_bytes(type({1, 4, 8, 8}, DType::f16), type({4, 64})));
  // nhwc with H·W = 1 is in the logical order; with H·W > 1 it is not.
  EXPECT_TRUE(same_stored_bytes(type({2, 4, 1, 1}, DType::f32, nhwc), type({2, 4})));
  EXPECT_FALSE(same_stored_bytes(type({1, 4, 8, 8}, DType::f32, nhwc), type({4, 64})));
  EXPECT_TRUE(same_stored_bytes(type({1, 4, 8, 8}, DType::f32, nhwc), type({1, 4, 8, 8}, DType::f32, nhwc)));
  // Padding slots: only the same layout and shape.
  EXPECT_FALSE(same_stored_bytes(type({1, 4, 2, 2}, DType::f32, Layout{LayoutKind::logical, 8}), type({4, 4})));
  EXPECT_TRUE(same_stored_bytes(type({1, 4, 2, 2}, DType::f32, padded), type({1, 4, 2, 2}, DType::f32, padded)));
  // nhwc [N,C,H,W] and [N,C,H',W'] with H·W = H'·W' both store (N, H·W, C); not when C or
  // the pixel count differs, nor nhwc against logical.
  EXPECT_TRUE(same_stored_bytes(type({1, 4, 6, 5}, DType::f16, nhwc), type({1, 4, 3, 10}, DType::f16, nhwc)));
  EXPECT_FALSE(same_stored_bytes(type({1, 4, 6, 5}, DType::f16, nhwc), type({1, 8, 3, 5}, DType::f16, nhwc)));
  EXPECT_FALSE(same_stored_bytes(type({1, 4, 6, 5}, DType::f16, nhwc), type({1, 4, 3, 5}, DType::f16, nhwc)));
  EXPECT_FALSE(same_stored_bytes(type({1, 4, 6, 5}, DType::f16, nhwc), type({1, 4, 3, 10}, DType::f16)));
}

// %a is read only by the reshape %r, but its storage (%a, %r, %q) lives to %s.
constexpr const char* kChain = R"(graph @chain(%x: f32[1,4,8,8]) {
  %a: f32[1,4,8,8] = silu "a" (%x)
  %r: f32[4,64] = reshape "r" (%a) {shape = [4, 64]}
  %q: f32[1,4,8,8] = reshape "q" (%r) {shape = [1, 4, 8, 8]}
  %b: f32[1,4,8,8] = silu "b" (%x)
  %s: f32[1,4,8,8] = add "s" (%q, %b)
  return %s
}
)";

ValueId id(const Graph& g, const char* name) { return g.find_value(name); }
size_t at(const Graph& g, const char* name) { return static_cast<size_t>(g.find_value(name)); }

TEST(MemoryPlan, AliasChainSharesOneStorageAndLife) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kChain, store);
  const MemoryRequest request = pass_request(g, true);
  const StorageLives lives = storage_lives(g, request.homes, true);
  EXPECT_EQ(lives.root[at(g, "r")], id(g, "a"));
  EXPECT_EQ(lives.root[at(g, "q")], id(g, "a"));
  EXPECT_EQ(lives.first[at(g, "a")], 0);
  EXPECT_EQ(lives.last[at(g, "a")], 4);  // %s reads %q
  EXPECT_EQ(lives.first[at(g, "b")], 3);
  EXPECT_EQ(lives.first[at(g, "x")], -1);  // written before the first node
  EXPECT_EQ(lives.last[at(g, "x")], 3);
  EXPECT_EQ(lives.last[at(g, "s")], 5);  // a graph output: read after the last node
  EXPECT_TRUE(lives.alive_together(id(g, "a"), id(g, "b")));

  const MemoryPlan plan = plan_memory(g, request);
  EXPECT_EQ(plan.place[at(g, "r")], plan.place[at(g, "a")]);
  EXPECT_EQ(plan.place[at(g, "q")], plan.place[at(g, "a")]);
  EXPECT_NE(plan.place[at(g, "b")], plan.place[at(g, "a")]);
  EXPECT_EQ(plan.arena_bytes("act"), 2048u);  // %a and %b, 1 KiB each, alive together
  EXPECT_EQ(plan.place[at(g, "x")], (BufferAssignment{"in", 0}));
  EXPECT_EQ(plan.place[at(g, "s")], (BufferAssignment{"out", 0}));
  EXPECT_TRUE(check_memory_plan(g, request.homes, plan.place, kBufferAlignment).is_ok());

  // A reshape whose result is not planned (here: a graph output in "out") has a
  // storage of its own.
  Graph out = testing::parse_with_weights(R"(graph @o(%x: f32[1,4,8,8]) {
  %a: f32[1,4,8,8] = silu "a" (%x)
  %r: f32[4,64] = reshape "r" (%a) {shape = [4, 64]}
  return %r
}
)",
                                          store);
  EXPECT_EQ(storage_lives(out, pass_request(out, true).homes, true).root[at(out, "r")], id(out, "r"));
}

// %a dies at norm_act %n, which writes %n over it; %c is the output.
constexpr const char* kNorm = R"(graph @norm(%x: f32[1,4,8,8]) {
  %a: f32[1,4,8,8] = silu "a" (%x)
  %g: f32[4] = weight "g"
  %n: f32[1,4,8,8] = norm_act "n" (%a, %g) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  %m: f32[1,4,8,8] = silu "m" (%n)
  %c: f32[1,4,8,8] = add "c" (%m, %x)
  return %c
}
)";

TEST(MemoryPlan, InPlaceWriteTakesTheOperandsPlace) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kNorm, store);
  const MemoryPlan on = plan_memory(g, pass_request(g, true));
  ASSERT_EQ(on.lives.in_place, std::vector<size_t>{1});  // nodes: a, n, m, c
  EXPECT_EQ(on.lives.root[at(g, "n")], id(g, "a"));
  EXPECT_EQ(on.lives.last[at(g, "a")], 2);  // %m reads %n
  EXPECT_EQ(on.place[at(g, "n")], on.place[at(g, "a")]);
  EXPECT_EQ(on.arena_bytes("act"), 2048u);  // %a/%n, then %m beside it
  EXPECT_EQ(on.unshared_bytes, 3072u);
  EXPECT_EQ(on.planned_roots, 2);

  const MemoryPlan off = plan_memory(g, pass_request(g, false));
  EXPECT_TRUE(off.lives.in_place.empty());
  EXPECT_NE(off.place[at(g, "n")], off.place[at(g, "a")]);  // alive together at %n

  // Not over an operand still read later: %a is read again by %c.
  Graph later = testing::parse_with_weights(R"(graph @later(%x: f32[1,4,8,8]) {
  %a: f32[1,4,8,8] = silu "a" (%x)
  %g: f32[4] = weight "g"
  %n: f32[1,4,8,8] = norm_act "n" (%a, %g) {eps = 1e-06, groups = 2, norm = "group", silu = 1}
  %c: f32[1,4,8,8] = add "c" (%n, %a)
  return %c
}
)",
                                            store);
  EXPECT_TRUE(plan_memory(later, pass_request(later, true)).lives.in_place.empty());
}

TEST(MemoryPlan, OverlapsTheRulesDoNotAllowAreRejected) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kNorm, store);
  const MemoryRequest request = pass_request(g, false);
  std::vector<std::optional<BufferAssignment>> place = plan_memory(g, request).place;
  ASSERT_TRUE(check_memory_plan(g, request.homes, place, kBufferAlignment).is_ok());

  // %n written in place over %a (dies at %n): legal at %a's offset...
  place[at(g, "n")] = place[at(g, "a")];
  place[at(g, "m")] = BufferAssignment{"act", 2048};
  EXPECT_TRUE(check_memory_plan(g, request.homes, place, kBufferAlignment).is_ok());
  // ...but not overlapping it at another offset.
  place[at(g, "n")]->offset += 256;
  Status shifted = check_memory_plan(g, request.homes, place, kBufferAlignment);
  ASSERT_FALSE(shifted.is_ok());
  EXPECT_NE(shifted.message().find("%a"), std::string::npos) << shifted.message();
  EXPECT_NE(shifted.message().find("%n"), std::string::npos) << shifted.message();

  // %n and %m are alive together at %m: never at one place (%m is no in-place write).
  place = plan_memory(g, request).place;
  place[at(g, "m")] = place[at(g, "n")];
  Status together = check_memory_plan(g, request.homes, place, kBufferAlignment);
  ASSERT_FALSE(together.is_ok());
  EXPECT_NE(together.message().find("%m"), std::string::npos) << together.message();
  EXPECT_NE(together.message().find("%n"), std::string::npos) << together.message();

  // Offsets the alignment does not divide.
  place = plan_memory(g, request).place;
  place[at(g, "m")]->offset += 16;
  Status unaligned = check_memory_plan(g, request.homes, place, kBufferAlignment);
  ASSERT_FALSE(unaligned.is_ok());
  EXPECT_NE(unaligned.message().find("alignment"), std::string::npos) << unaligned.message();

  // An alias placed away from its root.
  Graph chain = testing::parse_with_weights(kChain, store);
  const MemoryRequest cr = pass_request(chain, false);
  place = plan_memory(chain, cr).place;
  place[at(chain, "q")] = BufferAssignment{"act", 4096};
  Status alias = check_memory_plan(chain, cr.homes, place, kBufferAlignment);
  ASSERT_FALSE(alias.is_ok());
  EXPECT_NE(alias.message().find("%q"), std::string::npos) << alias.message();
}

TEST(MemoryPlan, PlannedValuesKeepClearOfPinnedOnes) {
  // A later Program pins values (state, another plan's) at fixed offsets of a shared
  // arena: here %x at act+0 and %b at act+1024, alive from before the first node and
  // at nodes 3..4. %a (nodes 0..4) is alive with both: it goes past them.
  WeightStore store;
  Graph g = testing::parse_with_weights(kChain, store);
  MemoryRequest request = pass_request(g, true);
  request.homes[at(g, "x")] = ValueHome{Storage::fixed, {"act", 0}};
  request.homes[at(g, "b")] = ValueHome{Storage::fixed, {"act", 1024}};
  const MemoryPlan plan = plan_memory(g, request);
  EXPECT_EQ(plan.place[at(g, "x")], (BufferAssignment{"act", 0}));
  EXPECT_EQ(plan.place[at(g, "b")], (BufferAssignment{"act", 1024}));
  EXPECT_EQ(plan.place[at(g, "a")], (BufferAssignment{"act", 2048}));
  EXPECT_EQ(plan.place[at(g, "q")], plan.place[at(g, "a")]);
  EXPECT_EQ(plan.arena_bytes("act"), 3072u);
  EXPECT_TRUE(check_memory_plan(g, request.homes, plan.place, kBufferAlignment).is_ok());
  // A pin the caller puts over a planned value's bytes is caught by the check.
  std::vector<std::optional<BufferAssignment>> place = plan.place;
  place[at(g, "b")] = BufferAssignment{"act", 2048};
  EXPECT_FALSE(check_memory_plan(g, request.homes, place, kBufferAlignment).is_ok());
}

}  // namespace
}  // namespace strata

// Plan validation, printing, and barrier placement (pure; no device needed).
#include "runtime/barriers.h"
#include "runtime/plan.h"

#include <gtest/gtest.h>

namespace strata::runtime {
namespace {

// A plan with one 2-binding pipeline and fake (but well-formed) SPIR-V: enough for
// validate() and plan_barriers(), which never look inside the module.
Plan two_buffer_plan() {
  Plan p;
  p.compiler_version = "test";
  PipelineDesc pd;
  pd.name = "k";
  pd.spirv = {0x07230203u, 0x00010500u, 0, 1, 0};
  pd.binding_count = 2;
  p.pipelines.push_back(pd);
  p.buffers = {BufferDesc{"a", 4096}, BufferDesc{"b", 4096}};
  return p;
}

DispatchDesc dispatch(BindingDesc in, BindingDesc out) {
  DispatchDesc d;
  d.bindings = {in, out};
  return d;
}

BindingDesc r(uint32_t buf, uint64_t off, uint64_t n) { return {buf, off, n, Access::read}; }
BindingDesc w(uint32_t buf, uint64_t off, uint64_t n) { return {buf, off, n, Access::write}; }

TEST(RuntimeBarriers, ReadAfterWriteGetsOneBarrier) {
  Plan p = two_buffer_plan();
  p.dispatches = {dispatch(r(0, 0, 1024), w(1, 0, 1024)),   // b = f(a)
                  dispatch(r(1, 0, 1024), w(0, 1024, 1024))};  // a' = g(b)
  ASSERT_TRUE(validate(p).is_ok()) << validate(p).message();
  std::vector<BarrierPoint> bs = plan_barriers(p);
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].before_dispatch, 1u);
  EXPECT_EQ(bs[0].writes, (std::vector<ByteRange>{{1, 0, 1024}}));
  EXPECT_EQ(bs[0].reason, "dispatch 1 reads buffer 'b' [0, 1024) written by dispatch 0");
}

TEST(RuntimeBarriers, DisjointWindowsAndSharedReadsNeedNone) {
  Plan p = two_buffer_plan();
  p.dispatches = {dispatch(r(0, 0, 1024), w(1, 0, 512)),     // two halves of b
                  dispatch(r(0, 0, 1024), w(1, 512, 512)),   // from the same input
                  dispatch(r(0, 512, 512), w(1, 1024, 512))};
  EXPECT_TRUE(plan_barriers(p).empty());
}

TEST(RuntimeBarriers, WriteAfterReadAndWriteAfterWrite) {
  Plan p = two_buffer_plan();
  p.dispatches = {dispatch(r(0, 0, 1024), w(1, 0, 1024)),
                  dispatch(r(1, 2048, 16), w(0, 512, 16)),     // WAR on a (read by 0)
                  dispatch(r(1, 2048, 16), w(0, 1000, 100))};  // misses [512, 528)
  std::vector<BarrierPoint> bs = plan_barriers(p);
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].before_dispatch, 1u);
  EXPECT_EQ(bs[0].reason, "dispatch 1 writes buffer 'a' [512, 528) read by dispatch 0");
  p.dispatches[2].bindings[1] = w(0, 520, 100);  // now overlaps dispatch 1's write
  bs = plan_barriers(p);
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(bs[1].before_dispatch, 2u);
  EXPECT_EQ(bs[1].writes, (std::vector<ByteRange>{{0, 512, 16}}));
  EXPECT_EQ(bs[1].reason, "dispatch 2 writes buffer 'a' [520, 620) written by dispatch 1");
}

TEST(RuntimeBarriers, PendingWritesAreMergedPerBuffer) {
  Plan p = two_buffer_plan();
  p.dispatches = {dispatch(r(0, 0, 16), w(1, 0, 256)), dispatch(r(0, 0, 16), w(1, 256, 256)),
                  dispatch(r(0, 0, 16), w(1, 1024, 256)), dispatch(r(1, 0, 16), w(0, 64, 16))};
  std::vector<BarrierPoint> bs = plan_barriers(p);
  ASSERT_EQ(bs.size(), 1u);
  EXPECT_EQ(bs[0].writes, (std::vector<ByteRange>{{1, 0, 512}, {1, 1024, 256}}));
}

TEST(RuntimePlan, ValidateNamesTheBrokenPart) {
  Plan p = two_buffer_plan();
  p.dispatches = {dispatch(r(0, 0, 1024), w(1, 4000, 200))};
  Status s = validate(p);
  EXPECT_EQ(s.message(), "dispatch 0 binding 1: window [4000, 4200) exceeds buffer 'b' of 4096 bytes");

  p.dispatches = {dispatch(r(0, 0, 16), w(1, 0, 16))};
  p.dispatches[0].push_constants = {1, 2, 3, 4};
  EXPECT_EQ(validate(p).message(), "dispatch 0: 4 push-constant bytes, pipeline 'k' takes 0");

  p.dispatches[0].push_constants.clear();
  p.dispatches[0].bindings.pop_back();
  EXPECT_EQ(validate(p).message(), "dispatch 0: 1 bindings, pipeline 'k' has 2");

  p = two_buffer_plan();
  p.pipelines[0].spirv = {1, 2, 3};
  EXPECT_NE(validate(p).message().find("pipeline 0 'k': no SPIR-V module"), std::string::npos);

  p = two_buffer_plan();
  p.inputs = {TensorIO{"latent", {1, 16, 8, 8}, DType::f32, "", 0, 0, 5000}};
  EXPECT_EQ(validate(p).message(), "input 'latent': window [0, 5000) exceeds buffer 'a' of 4096 bytes");

  p = two_buffer_plan();
  p.weights = {WeightUpload{"conv.weight", {}, 3, 0, 16}};
  EXPECT_EQ(validate(p).message(), "weight 'conv.weight': buffer index 3 out of range (2 buffers)");
}

TEST(RuntimePlan, DescribeShowsDispatchesAndBarriers) {
  Plan p = two_buffer_plan();
  p.requirements.shader_float16 = true;
  p.dispatches = {dispatch(r(0, 0, 1024), w(1, 0, 1024)), dispatch(r(1, 0, 1024), w(0, 0, 16))};
  p.dispatches[1].label = "conv_out";
  p.inputs = {TensorIO{"x", {256}, DType::f32, "", 0, 0, 1024}};
  std::string s = describe(p);
  EXPECT_NE(s.find("requires: shaderFloat16"), std::string::npos) << s;
  EXPECT_NE(s.find("input 'x': f32[256] in 'a' @0 (1024 bytes)"), std::string::npos) << s;
  EXPECT_NE(s.find("  -- barrier: dispatch 1 reads buffer 'b' [0, 1024) written by dispatch 0\n"
                   "dispatch 1 'conv_out': pipeline 0 grid 1x1x1 r:1@0+1024 w:0@0+16"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace strata::runtime

namespace strata::runtime {
namespace {

// A program of two entries over the two-buffer plan, with one state in buffer 2.
Plan two_entry_program() {
  Plan p = two_buffer_plan();
  p.buffers.push_back(BufferDesc{"state", 1024, BufferUsage::state});
  p.dispatches = {dispatch(r(0, 0, 1024), w(1, 0, 1024)), dispatch(r(1, 0, 1024), w(0, 1024, 1024))};
  p.states = {StateDesc{"s", {256}, DType::f32, "", 2, 0, 1024}};
  p.entries = {EntryDesc{"one", 0, 1, {}, {}, {}}, EntryDesc{"two", 1, 1, {}, {}, {StateWrite{0, 0, 1024}}}};
  return p;
}

TEST(RuntimeProgram, EntriesTileTheDispatchListAndNameWhatTheyUse) {
  Plan p = two_entry_program();
  ASSERT_TRUE(validate(p).is_ok()) << validate(p).message();
  EXPECT_EQ(entry_list(p).size(), 2u);
  auto broken = [&](auto edit) {
    Plan q = two_entry_program();
    edit(q);
    Status s = validate(q);
    return s.is_ok() ? std::string("(valid)") : s.message();
  };
  EXPECT_EQ(broken([](Plan& q) { q.entries[1].first_dispatch = 0; }),
            "plan 1 'two': starts at dispatch 0, the previous plan ends at 1");
  EXPECT_EQ(broken([](Plan& q) { q.entries[1].dispatch_count = 0; }),
            "the program's plans cover 1 of its 2 dispatches");
  EXPECT_EQ(broken([](Plan& q) { q.entries[1].name = "one"; }), "plan 1 'one': the name is taken by plan 0");
  EXPECT_EQ(broken([](Plan& q) { q.entries[0].inputs = {3}; }), "plan 0 'one': input index 3 out of range");
  EXPECT_EQ(broken([](Plan& q) { q.entries[1].state_writes[0].state = 1; }),
            "plan 1 'two': state index 1 out of range");
  EXPECT_EQ(broken([](Plan& q) { q.entries[1].state_writes[0].offset = 3584; }),
            "plan 1 'two': the write-back of state 's': window [3584, 4608) exceeds buffer 'a' of 4096 bytes");
  EXPECT_EQ(broken([](Plan& q) { q.states[0].buffer = 1; }), "state 's': buffer 'b' is not a state buffer");
}

TEST(RuntimeProgram, BarriersAreComputedPerEntry) {
  // Dispatch 1 reads what dispatch 0 wrote: one barrier in a single plan, none across
  // entries (each entry's command buffer starts with a full barrier of its own).
  Plan p = two_entry_program();
  EXPECT_EQ(plan_barriers(p).size(), 1u);
  EXPECT_TRUE(plan_barriers(p, 0, 1).empty());
  EXPECT_TRUE(plan_barriers(p, 1, 1).empty());
  const std::string text = describe(p);
  EXPECT_NE(text.find("state 's': f32[256] in 'state' @0 (1024 bytes)"), std::string::npos) << text;
  EXPECT_NE(text.find("plan 'two': dispatches [1, 2); inputs () outputs (); writes back s <- 0@1024"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace strata::runtime

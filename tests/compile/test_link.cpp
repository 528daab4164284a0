// link_program on hand-made plans (no device): what the linked buffers hold and
// where each plan's bindings land.
#include "compile/link.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

using namespace runtime;

PipelineDesc pipeline(const std::string& name) {
  PipelineDesc p;
  p.name = name;
  p.spirv = {0x07230203u, 0x00010500u, 0, 1, 0};
  p.binding_count = 4;
  return p;
}

// weights (w0 @0, w1 @256), activations, input and output; one dispatch reading
// `weight_at` of the weights and the input, writing activations and the output.
Plan part(const std::string& kernel, uint64_t act_bytes, uint64_t weight_at, bool two_weights) {
  Plan p;
  p.compiler_version = "test";
  p.pipelines = {pipeline(kernel)};
  p.buffers = {BufferDesc{"weights", 512, BufferUsage::weights}, BufferDesc{"activations", act_bytes},
               BufferDesc{"input", 256, BufferUsage::input}, BufferDesc{"output", 256, BufferUsage::output}};
  if (two_weights) p.weights = {WeightUpload{"w0", {}, 0, 0, 256}, WeightUpload{"w1", {}, 0, 256, 256}};
  else p.weights = {WeightUpload{"w1", {}, 0, 0, 256}};
  DispatchDesc d;
  d.bindings = {{0, weight_at, 256, Access::read}, {2, 0, 256, Access::read}, {1, 0, act_bytes, Access::write},
                {3, 0, 256, Access::write}};
  d.label = kernel;
  p.dispatches = {d};
  p.inputs = {TensorIO{"x", {64}, runtime::DType::f32, "", 2, 0, 256}};
  p.outputs = {TensorIO{"y", {64}, runtime::DType::f32, "", 3, 0, 256}};
  return p;
}

TEST(Link, SharesWeightsAndActivationsPlacesSlotsSideBySideAndBindsStates) {
  // "make" writes state s from its output; "take" reads s as its input, uses w1 only.
  LinkPart make{"make", part("k", 1024, 0, true), {}, {StateBinding{"s", 0}}};
  LinkPart take{"take", part("k", 2048, 0, false), {StateBinding{"s", 0}}, {}};
  auto linked = link_program({make, take}, 256);
  ASSERT_TRUE(linked) << linked.message();
  const Plan& p = *linked;
  ASSERT_EQ(p.buffers.size(), 5u);
  EXPECT_EQ(p.buffers[0].usage, BufferUsage::state);
  EXPECT_EQ(p.buffers[0].size_bytes, 256u);
  auto buffer = [&](const std::string& name) {
    for (uint32_t i = 0; i < p.buffers.size(); ++i)
      if (p.buffers[i].name == name) return i;
    ADD_FAILURE() << "no buffer " << name;
    return 0u;
  };
  const uint32_t weights = buffer("weights"), act = buffer("activations"), in = buffer("input"), out = buffer("output");
  EXPECT_EQ(p.buffers[weights].size_bytes, 512u) << "w1 is uploaded once";
  EXPECT_EQ(p.weights.size(), 2u);
  EXPECT_EQ(p.buffers[act].size_bytes, 2048u) << "the larger plan's activations";
  EXPECT_EQ(p.buffers[out].size_bytes, 256u) << "take's output slot; make writes the state in place";
  EXPECT_EQ(p.pipelines.size(), 1u) << "the same kernel is one pipeline";

  ASSERT_EQ(p.entries.size(), 2u);
  const EntryDesc &m = p.entries[0], &t = p.entries[1];
  EXPECT_EQ(m.inputs, std::vector<uint32_t>{0});
  EXPECT_TRUE(m.outputs.empty()) << "its only output is the state's";
  EXPECT_TRUE(m.state_writes.empty()) << "make does not read s, so it writes s in its window: no copy";
  EXPECT_EQ(p.dispatches[0].bindings[3].buffer, 0u);
  EXPECT_EQ(p.dispatches[0].bindings[3].offset, 0u);
  EXPECT_TRUE(t.inputs.empty()) << "its only input is the state";
  EXPECT_EQ(t.outputs, std::vector<uint32_t>{0});
  EXPECT_EQ(p.outputs[0].offset, 0u);

  // take's dispatch: w1 at its place in the merged weights, x bound to the state.
  const DispatchDesc& d = p.dispatches[1];
  EXPECT_EQ(d.bindings[0].buffer, weights);
  EXPECT_EQ(d.bindings[0].offset, 256u);
  EXPECT_EQ(d.bindings[1].buffer, 0u);
  EXPECT_EQ(d.bindings[1].offset, 0u);
  EXPECT_EQ(d.bindings[3].buffer, out);
  EXPECT_EQ(d.bindings[3].offset, 0u);
  EXPECT_EQ(p.dispatches[0].bindings[1].buffer, in);
}

// A plan that reads and writes a state computes the new value in its output slot and
// copies it into the state at the end (its reads see the old value); a plan that only
// writes it computes it in place.
TEST(Link, SharedIoSlotsOverlapAcrossPlans) {
  // Three plans, each with one input and one output slot of 256 bytes: side by side by
  // default (768 bytes each), at the same offsets with shared_io_slots (256).
  std::vector<LinkPart> parts = {{"a", part("k", 1024, 0, false), {}, {}},
                                 {"b", part("k", 1024, 0, false), {}, {}},
                                 {"c", part("k", 1024, 0, false), {}, {}}};
  for (bool shared : {false, true}) {
    auto linked = link_program(parts, 256, LinkOptions{.shared_io_slots = shared});
    ASSERT_TRUE(linked) << linked.message();
    for (const BufferDesc& b : linked->buffers) {
      if (b.usage == BufferUsage::input || b.usage == BufferUsage::output) {
        EXPECT_EQ(b.size_bytes, shared ? 256u : 768u) << b.name;
      }
    }
    // The third plan's input binding (its dispatch's second binding) lands at 0 or 512.
    EXPECT_EQ(linked->dispatches[2].bindings[1].offset, shared ? 0u : 512u);
  }
}

TEST(Link, AStateReadAndWrittenByOnePlanIsCopiedAtItsEnd) {
  LinkPart init{"init", part("k", 1024, 0, true), {}, {StateBinding{"s", 0}}};
  LinkPart step{"step", part("k", 1024, 0, true), {StateBinding{"s", 0}}, {StateBinding{"s", 0}}};
  auto linked = link_program({init, step}, 256);
  ASSERT_TRUE(linked) << linked.message();
  const Plan& p = *linked;
  ASSERT_EQ(p.entries.size(), 2u);
  EXPECT_TRUE(p.entries[0].state_writes.empty());
  ASSERT_EQ(p.entries[1].state_writes.size(), 1u);
  const StateWrite& w = p.entries[1].state_writes[0];
  EXPECT_EQ(p.buffers[w.buffer].usage, BufferUsage::output);
  // step's dispatch writes its output slot, not the state it reads.
  const DispatchDesc& d = p.dispatches[1];
  EXPECT_EQ(d.bindings[3].buffer, w.buffer);
  EXPECT_EQ(d.bindings[3].offset, w.offset);
  EXPECT_EQ(p.buffers[d.bindings[1].buffer].usage, BufferUsage::state);
}

TEST(Link, AStateStoredTwoWaysIsAnError) {
  Plan wide = part("k", 1024, 0, true);
  wide.outputs[0].shape = {32, 2};
  LinkPart make{"make", wide, {}, {StateBinding{"s", 0}}};
  LinkPart take{"take", part("k", 1024, 0, false), {StateBinding{"s", 0}}, {}};
  auto linked = link_program({make, take}, 256);
  ASSERT_FALSE(linked);
  EXPECT_EQ(linked.message(), "state 's': plan 'make' stores it as f32[32,2] (256 bytes), plan 'take' as f32[64] (256 bytes)");
}

TEST(Link, AWindowAcrossTwoWeightsIsAnError) {
  Plan p = part("k", 1024, 128, true);  // straddles w0 and w1
  auto linked = link_program({LinkPart{"only", p, {}, {}}}, 256);
  ASSERT_FALSE(linked);
  EXPECT_NE(linked.message().find("is not within one weight upload"), std::string::npos) << linked.message();
}

}  // namespace
}  // namespace strata

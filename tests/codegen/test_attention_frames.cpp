// Frame-causal attention (attention's frame_tokens, HunyuanVideo's mid attention):
// the interpreter against an independent oracle (each query attends to the sliced
// keys of its frame and earlier ones), attention.comp against the interpreter, and
// query chunks plus key windows under a small binding range bit-identical to one
// dispatch (masked keys and skipped key blocks add exactly nothing).
#include "codegen/vk_test_util.h"

#include "codegen/codegen.h"
#include "ir/builder.h"
#include "ir/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {
namespace {

constexpr int64_t kTokens = 300, kFrame = 48, kDim = 64;  // 7 frames, the last partial

struct Attn {
  Graph graph;
  WeightStore weights;
  std::vector<Tensor> inputs;
};

Attn build() {
  Attn t;
  Builder b(t.graph, &t.weights);
  ValueId qkv[3];
  for (int i = 0; i < 3; ++i) {
    t.inputs.push_back(testing::random_tensor({1, kTokens, kDim}, 70 + i, -1.0f, 1.0f));
    qkv[i] = b.input(std::string(1, "qkv"[i]), {1, kTokens, kDim});
  }
  b.output(b.attention(qkv[0], qkv[1], qkv[2], 1.0 / std::sqrt(double(kDim)), kFrame));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return t;
}

Expected<Tensor> run_device(const Attn& t, uint64_t max_range, size_t* dispatches) {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Device> device, testing::test_device());
  codegen::Target target = codegen::target_for(device->info());
  if (max_range) target.max_storage_buffer_range = max_range;
  STRATA_ASSIGN_OR_RETURN(runtime::Plan plan, codegen::compile_plan(t.graph, t.weights, target, {}));
  *dispatches = plan.dispatches.size();
  STRATA_ASSIGN_OR_RETURN(auto exec, runtime::Executor::create(device, plan, codegen::weight_source(t.weights)));
  Tensor out({1, kTokens, kDim});
  std::vector<std::span<const std::byte>> in;
  for (const Tensor& x : t.inputs) in.push_back(std::as_bytes(std::span(x.data)));
  std::vector<std::span<std::byte>> outs{std::as_writable_bytes(std::span(out.data))};
  STRATA_RETURN_IF_ERROR(exec->run(in, outs));
  return out;
}

TEST(FrameCausalAttention, InterpreterSeesItsFrameAndEarlierOnes) {
  Attn t = build();
  auto got = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(got) << got.message();
  // Oracle: query i against keys [0, end of i's frame) only, by slicing, no mask.
  for (int64_t i : {int64_t{0}, kFrame - 1, kFrame, 2 * kFrame + 5, kTokens - 1}) {
    const int64_t keys = std::min(kTokens, (i / kFrame + 1) * kFrame);
    Tensor q({1, 1, kDim}), k({1, keys, kDim}), v({1, keys, kDim});
    std::copy_n(t.inputs[0].data.begin() + i * kDim, kDim, q.data.begin());
    std::copy_n(t.inputs[1].data.begin(), keys * kDim, k.data.begin());
    std::copy_n(t.inputs[2].data.begin(), keys * kDim, v.data.begin());
    Tensor want = interp::attention(q, k, v, 1.0 / std::sqrt(double(kDim)), {});
    for (int64_t c = 0; c < kDim; ++c)
      EXPECT_EQ(got->front().data[static_cast<size_t>(i * kDim + c)], want.data[static_cast<size_t>(c)])
          << "query " << i << " column " << c;
  }
}

TEST(FrameCausalAttention, KernelMatchesAndSplitsAreBitIdentical) {
  Attn t = build();
  auto want = interpret(t.graph, t.weights, t.inputs);
  ASSERT_TRUE(want) << want.message();
  size_t whole_dispatches = 0, split_dispatches = 0;
  auto whole = run_device(t, 0, &whole_dispatches);
  ASSERT_TRUE(whole) << whole.message();
  auto split = run_device(t, 16 << 10, &split_dispatches);  // k is 76.8 KB: key windows
  ASSERT_TRUE(split) << split.message();
  EXPECT_EQ(whole_dispatches, 1u);
  EXPECT_GT(split_dispatches, 4u);  // query chunks × key windows
  EXPECT_LE(max_abs_diff(*whole, want->front()), 2e-5);
  testing::expect_identical(*split, *whole);
}

}  // namespace
}  // namespace strata

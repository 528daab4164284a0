// Codegen: a transformer's per-head q or k norm (token_rms_norm over x[T, H, D]) that
// writes the result of the permute to [H, T, D] and the rope after it
// (codegen/lower_norm.cpp, layer_norm.comp ROPE; CodegenOptions::norm_rope), the
// permute and the rope absorbed (no dispatch).
//
// What must hold:
//   - the same bytes as the three dispatches (the norm rounds to f16 as it stores,
//     then rotates as rope.comp does): head dims of 128 (Z-Image: 8 lanes a row, 16
//     rows a workgroup) and 32, tokens not a multiple of the rows a workgroup holds;
//   - one dispatch where there were three;
//   - a norm whose result something else reads keeps the permute and the rope;
//   - the f16 zimage_small plan on the emulated tensor cores: the same output bit for
//     bit, and no rope or q/k permute dispatch left.
#include "codegen/vk_test_util.h"

#include "ir/builder.h"
#include "ir/npy.h"
#include "models/zimage.h"
#include "passes/pass.h"
#include "tests/e2e/cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <span>
#include <string>

namespace strata {
namespace {

using testing::random_tensor;

struct Ran {
  std::vector<Tensor> outputs;
  std::vector<std::string> kernels;
};

Ran compile_and_run(const Graph& g, const WeightStore& weights, const std::vector<Tensor>& inputs,
                    const codegen::Target& target, bool norm_rope) {
  Ran r;
  codegen::CodegenOptions options;
  options.norm_rope = norm_rope;
  auto plan = codegen::compile_plan(g, weights, target, options);
  EXPECT_TRUE(plan) << plan.message();
  if (!plan) return r;
  for (const runtime::DispatchDesc& d : plan->dispatches) r.kernels.push_back(plan->pipelines[d.pipeline].name);
  auto device = testing::test_device_for(plan->requirements);
  EXPECT_TRUE(device) << device.message();
  if (!device) return r;
  auto exec = runtime::Executor::create(*device, std::move(*plan), codegen::weight_source(weights));
  EXPECT_TRUE(exec) << exec.message();
  if (!exec) return r;
  for (ValueId v : g.outputs()) r.outputs.emplace_back(g.value(v).type.shape);
  std::vector<std::span<const std::byte>> in;
  for (const Tensor& x : inputs) in.push_back(std::as_bytes(std::span(x.data)));
  std::vector<std::span<std::byte>> out;
  for (Tensor& y : r.outputs) out.push_back(std::as_writable_bytes(std::span(y.data)));
  Status s = (*exec)->run(in, out);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return r;
}

int count_with(const std::vector<std::string>& kernels, const std::string& part) {
  int n = 0;
  for (const std::string& k : kernels) n += k.find(part) != std::string::npos;
  return n;
}

struct Built {
  Graph graph;
  WeightStore weights;
  std::vector<Tensor> inputs;
};

// rope(permute(token_rms_norm(x[T, H, D], γ) {f16}, {1, 0, 2}), cos, sin), returned as
// f32; with `norm_also_output`, the norm's result too.
Built norm_permute_rope(int64_t tokens, int64_t heads, int64_t head_dim, bool norm_also_output, uint64_t seed) {
  Built t;
  Builder b(t.graph, &t.weights);
  t.inputs = {random_tensor({tokens, heads, head_dim}, seed, -3.0f, 3.0f)};
  const ValueId x = b.cast(b.input("x", {tokens, heads, head_dim}), DType::f16);
  EXPECT_TRUE(t.weights.add_owned("gamma", {head_dim}, std::move(random_tensor({head_dim}, seed + 1, 0.5f, 1.5f).data))
                  .is_ok());
  const ValueId gamma = b.constant("gamma", TensorType{{head_dim}, DType::f32, {}});
  // Tables of unit pairs, as a rope's are.
  Tensor angle = random_tensor({tokens, head_dim / 2}, seed + 2, -3.14f, 3.14f), cos = angle, sin = angle;
  for (size_t i = 0; i < angle.data.size(); ++i) {
    cos.data[i] = std::cos(angle.data[i]);
    sin.data[i] = std::sin(angle.data[i]);
  }
  EXPECT_TRUE(t.weights.add_owned("cos", {tokens, head_dim / 2}, std::move(cos.data)).is_ok());
  EXPECT_TRUE(t.weights.add_owned("sin", {tokens, head_dim / 2}, std::move(sin.data)).is_ok());
  const ValueId cv = b.constant("cos", TensorType{{tokens, head_dim / 2}, DType::f32, {}});
  const ValueId sv = b.constant("sin", TensorType{{tokens, head_dim / 2}, DType::f32, {}});
  const ValueId y = b.op(Op::token_rms_norm, {x, gamma}, Attrs{{"eps", 1e-5}, {"dtype", std::string("f16")}});
  const ValueId r = b.rope(b.permute(y, {1, 0, 2}), cv, sv);
  b.output(b.cast(r, DType::f32));
  if (norm_also_output) b.output(b.cast(y, DType::f32));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return t;
}

TEST(CodegenNormRope, NormWritesTheRotatedHeadsBitIdentically) {
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  const codegen::Target target = codegen::target_for((*device)->info());
  struct Case {
    int64_t tokens, heads, head_dim;
  };
  uint64_t seed = 1100;
  for (const Case c : {Case{37, 3, 128}, Case{9, 5, 32}}) {
    SCOPED_TRACE(std::to_string(c.heads) + " heads of " + std::to_string(c.head_dim));
    const Built t = norm_permute_rope(c.tokens, c.heads, c.head_dim, false, seed += 10);
    const Ran fused = compile_and_run(t.graph, t.weights, t.inputs, target, true);
    const Ran apart = compile_and_run(t.graph, t.weights, t.inputs, target, false);
    EXPECT_EQ(count_with(apart.kernels, "rope.comp"), 1);
    EXPECT_EQ(count_with(fused.kernels, "rope.comp"), 0);
    EXPECT_EQ(count_with(fused.kernels, "ROPE=1"), 1);
    EXPECT_EQ(fused.kernels.size() + 2, apart.kernels.size());
    ASSERT_EQ(fused.outputs.size(), 1u);
    ASSERT_EQ(apart.outputs.size(), 1u);
    testing::expect_identical(fused.outputs[0], apart.outputs[0]);
  }
}

TEST(CodegenNormRope, NormReadByMoreKeepsThePermuteAndTheRope) {
  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  const Built t = norm_permute_rope(7, 2, 64, true, 1200);
  const Ran fused = compile_and_run(t.graph, t.weights, t.inputs, codegen::target_for((*device)->info()), true);
  EXPECT_EQ(count_with(fused.kernels, "ROPE=1"), 0);
  EXPECT_EQ(count_with(fused.kernels, "rope.comp"), 1);
}

// The f16 plan of zimage_small on the emulated tensor cores (as
// test_zimage_coop.cpp's), with the token epilogues fused: 6 blocks, each a q and a k
// norm followed by a permute and a rope.
TEST(CodegenNormRope, ZImageSmallRunsNoRopeAndIsBitIdentical) {
  constexpr const char* kCase = "zimage_small";
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_zimage_dir(e2e::case_file(kCase, "transformer"));
  ASSERT_TRUE(model) << model.message();
  auto latent = read_npy(e2e::case_file(kCase, "latent.npy"));
  auto cap = read_npy(e2e::case_file(kCase, "cap_feats.npy"));
  auto ts = read_npy(e2e::case_file(kCase, "timestep.npy"));
  ASSERT_TRUE(latent && cap && ts);
  ZImageOptions o;
  o.latent_h = latent->shape[2];
  o.latent_w = latent->shape[3];
  o.caption_length = cap->shape[0];
  o.weight_dtype = DType::f16;
  auto g = build_zimage(*model, o);
  ASSERT_TRUE(g) << g.message();
  CompileOptions options;
  options.precision = Precision::f16;
  options.fuse_token_ops = true;
  PassContext ctx{options, model->weights, {}};
  ASSERT_TRUE(run_pipeline(*g, ctx).is_ok());
  int ropes = 0;
  for (const Node& n : g->nodes()) ropes += n.op == Op::rope;
  EXPECT_EQ(ropes, 12);

  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  target.tensor_cores = codegen::TensorCores::emulated;
  const std::vector<Tensor> inputs = {*latent, *cap, *ts};
  const Ran fused = compile_and_run(*g, model->weights, inputs, target, true);
  const Ran apart = compile_and_run(*g, model->weights, inputs, target, false);
  EXPECT_EQ(count_with(apart.kernels, "rope.comp"), ropes);
  EXPECT_EQ(count_with(fused.kernels, "rope.comp"), 0);
  EXPECT_EQ(count_with(fused.kernels, "ROPE=1"), ropes);
  EXPECT_EQ(count_with(fused.kernels, "strided_copy.comp"), count_with(apart.kernels, "strided_copy.comp") - ropes);
  EXPECT_EQ(fused.kernels.size(), apart.kernels.size() - 2 * static_cast<size_t>(ropes));
  ASSERT_EQ(fused.outputs.size(), 1u);
  ASSERT_EQ(apart.outputs.size(), 1u);
  testing::expect_identical(fused.outputs[0], apart.outputs[0]);
  std::printf("[ zimage   ] f16: %zu dispatches with the q and k norms writing the rotated heads, %zu without\n",
              fused.kernels.size(), apart.kernels.size());
}

}  // namespace
}  // namespace strata

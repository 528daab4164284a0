// The Z-Image transformer's f16 plan on the tensor-core kernels (zimage_small): the
// pass pipeline at f16 (lower_precision: f16 norms, projections and attention, f32
// residual stream), then codegen for a target with tensor cores — emulated on
// lavapipe (Target::tensor_cores = emulated, coopmat.glsl COOPMAT = 2) — so the
// linears run conv_gemm_coop.comp (lower_gemm.cpp) and the attention
// attention_coop*.comp. Issue 17's f16 bound: the output and the four intermediates
// ≥ 55 dB PSNR (peak-to-peak 2) against diffusers, no NaN.
#include "codegen/vk_test_util.h"

#include "ir/npy.h"
#include "models/zimage.h"
#include "passes/pass.h"
#include "tests/e2e/cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <span>

namespace strata {
namespace {

constexpr const char* kCase = "zimage_small";

TEST(ZImageCoop, F16PlanOnTensorCoresMatchesDiffusers) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_zimage_dir(e2e::case_file(kCase, "transformer"));
  ASSERT_TRUE(model) << model.message();
  auto latent = read_npy(e2e::case_file(kCase, "latent.npy"));
  auto cap = read_npy(e2e::case_file(kCase, "cap_feats.npy"));
  auto t = read_npy(e2e::case_file(kCase, "timestep.npy"));
  ASSERT_TRUE(latent && cap && t);
  ZImageOptions o;
  o.latent_h = latent->shape[2];
  o.latent_w = latent->shape[3];
  o.caption_length = cap->shape[0];
  o.weight_dtype = DType::f16;
  o.intermediates = true;
  auto g = build_zimage(*model, o);
  ASSERT_TRUE(g) << g.message();
  CompileOptions options;
  options.precision = Precision::f16;
  PassContext ctx{options, model->weights, {}};
  Status s = run_pipeline(*g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();
  // The residual stream stays f32 (every add, the x and caption embedders that start
  // it); norms, projections, FFN hiddens and attention are f16.
  size_t f16_linears = 0, linears = 0, attentions = 0, embedders = 0;
  for (const Node& n : g->nodes()) {
    const DType d = g->value(n.outputs[0]).type.dtype;
    if (n.op == Op::add) { EXPECT_EQ(d, DType::f32) << n.name; }
    if (n.op == Op::token_rms_norm) { EXPECT_EQ(d, DType::f16) << n.name; }
    if (n.op == Op::attention) {
      ++attentions;
      for (ValueId v : n.inputs) EXPECT_EQ(g->value(v).type.dtype, DType::f16) << n.name;
    }
    if (n.op != Op::linear) continue;
    ++linears;
    f16_linears += d == DType::f16;
    const bool embedder = n.name.find("x_embedder") != std::string::npos || n.name.rfind("cap_embedder", 0) == 0;
    if (embedder) { EXPECT_EQ(d, DType::f32) << n.name; }
    embedders += embedder;
  }
  EXPECT_EQ(embedders, 2u);
  EXPECT_EQ(attentions, 6u);  // 2 noise refiner + 2 context refiner + 2 main layers
  EXPECT_GT(f16_linears, linears / 2) << f16_linears << " of " << linears;

  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  target.tensor_cores = codegen::TensorCores::emulated;
  auto plan = codegen::compile_plan(*g, model->weights, target, {});
  ASSERT_TRUE(plan) << plan.message();
  std::string pipelines;
  for (const auto& p : plan->pipelines) pipelines += p.name + "\n";
  EXPECT_NE(pipelines.find("conv_gemm_coop.comp"), std::string::npos) << pipelines;
  EXPECT_NE(pipelines.find("attention_coop"), std::string::npos) << pipelines;
  auto exec = runtime::Executor::create(*device, std::move(*plan), codegen::weight_source(model->weights));
  ASSERT_TRUE(exec) << exec.message();
  std::vector<Tensor> outs;
  for (ValueId v : g->outputs()) outs.emplace_back(g->value(v).type.shape);
  std::vector<std::span<const std::byte>> in;
  for (const Tensor* x : {&*latent, &*cap, &*t}) in.push_back(std::as_bytes(std::span(x->data)));
  std::vector<std::span<std::byte>> out;
  for (Tensor& y : outs) out.push_back(std::as_writable_bytes(std::span(y.data)));
  s = (*exec)->run(in, out);
  ASSERT_TRUE(s.is_ok()) << s.message();

  ASSERT_EQ(outs.size(), 5u);
  std::vector<std::string> names{"output"};
  for (const auto& n : zimage_intermediate_names()) names.push_back(n);
  for (size_t i = 0; i < names.size(); ++i) {
    auto want = read_npy(e2e::case_file(kCase, i == 0 ? "expected.npy" : "intermediate_" + names[i] + ".npy"));
    ASSERT_TRUE(want) << want.message();
    Tensor& got = outs[i];
    got.shape = want->shape;  // the graph's output shapes are diffusers' (same elements)
    ASSERT_EQ(got.data.size(), want->data.size()) << names[i];
    for (float v : got.data) ASSERT_TRUE(std::isfinite(v)) << names[i];
    const double psnr = e2e::psnr_range2(got, *want);
    std::printf("[ zimage   ] f16 tensor cores (emulated) %-20s PSNR %.1f dB\n", names[i].c_str(), psnr);
    EXPECT_GE(psnr, 55.0) << names[i];
  }
}

// The same plan at --quantize w8a8 on the emulated int8 kernels: ≥ 30 dB against
// diffusers (the bound for zimage_small), and q, k, v (and w1, w3) sharing one
// row quantizer, so fewer quantizers run than int8 GEMMs. (Against the interpreter's
// W8A8 on the same graph it is not within f16 rounding: the device quantizes f16
// activations, the interpreter f32 ones, and a code that flips by one is 1/127 of its
// row's largest value.)
TEST(ZImageCoop, W8A8PlanOnEmulatedInt8Within30dBWithSharedQuantizers) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_zimage_dir(e2e::case_file(kCase, "transformer"));
  ASSERT_TRUE(model) << model.message();
  auto latent = read_npy(e2e::case_file(kCase, "latent.npy"));
  auto cap = read_npy(e2e::case_file(kCase, "cap_feats.npy"));
  auto t = read_npy(e2e::case_file(kCase, "timestep.npy"));
  auto expected = read_npy(e2e::case_file(kCase, "expected.npy"));
  ASSERT_TRUE(latent && cap && t && expected);
  ZImageOptions o;
  o.latent_h = latent->shape[2];
  o.latent_w = latent->shape[3];
  o.caption_length = cap->shape[0];
  o.weight_dtype = DType::f16;
  auto g = build_zimage(*model, o);
  ASSERT_TRUE(g) << g.message();
  CompileOptions options;
  options.precision = Precision::f16;
  options.quantize = "w8a8";
  PassContext ctx{options, model->weights, {}};
  ASSERT_TRUE(run_pipeline(*g, ctx).is_ok());
  ASSERT_GT(ctx.quantized_linears, 20);

  auto device = testing::test_device_f16();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  target.tensor_cores = codegen::TensorCores::emulated;
  auto plan = codegen::compile_plan(*g, model->weights, target, {});
  ASSERT_TRUE(plan) << plan.message();
  int quantizers = 0, gemms = 0;
  for (const runtime::DispatchDesc& d : plan->dispatches) {
    const std::string& name = plan->pipelines[d.pipeline].name;
    quantizers += name.find("quantize_rows.comp") != std::string::npos;
    gemms += name.find("gemm_int8.comp") != std::string::npos;
  }
  EXPECT_EQ(gemms, ctx.quantized_linears);
  EXPECT_LT(quantizers, gemms);
  auto exec = runtime::Executor::create(*device, std::move(*plan), codegen::weight_source(model->weights));
  ASSERT_TRUE(exec) << exec.message();
  Tensor got(g->value(g->outputs()[0]).type.shape);
  std::vector<std::span<const std::byte>> in;
  for (const Tensor* x : {&*latent, &*cap, &*t}) in.push_back(std::as_bytes(std::span(x->data)));
  ASSERT_TRUE((*exec)->run(in, {std::as_writable_bytes(std::span(got.data))}));
  auto reference = interpret(*g, model->weights, {*latent, *cap, *t});
  ASSERT_TRUE(reference) << reference.message();
  Tensor want = (*reference)[0];
  got.shape = want.shape = expected->shape;
  for (float v : got.data) ASSERT_TRUE(std::isfinite(v));
  const double vs_interpreter = e2e::psnr_range2(got, want), vs_diffusers = e2e::psnr_range2(got, *expected);
  std::printf("[ zimage   ] w8a8 (emulated int8): %d quantizers for %d GEMMs, PSNR %.1f dB against the "
              "interpreter's W8A8, %.1f dB against diffusers\n", quantizers, gemms, vs_interpreter, vs_diffusers);
  EXPECT_GE(vs_diffusers, 30.0);
}

}  // namespace
}  // namespace strata

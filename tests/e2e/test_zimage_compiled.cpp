// The Z-Image transformer through the whole compiler on the zimage_small case: model
// graph → the pass pipeline → codegen (portable kernels) → Vulkan (lavapipe in CI).
// f32: the output and the four intermediates within 1e-4 of diffusers; f16 (f16
// matrix weights, f16 plan): PSNR ≥ 55 dB (peak-to-peak 2) against diffusers, no NaN.
#include "compiled_graph.h"
#include "ir/npy.h"
#include "models/zimage.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "tests/e2e/cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

namespace strata {
namespace {

constexpr const char* kCase = "zimage_small";

class CompiledZImage : public ::testing::TestWithParam<Precision> {};

TEST_P(CompiledZImage, MatchesDiffusers) {
  const Precision precision = GetParam();
  const bool f16 = precision == Precision::f16;
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
  o.weight_dtype = f16 ? DType::f16 : DType::f32;
  o.intermediates = true;
  auto g = build_zimage(*model, o);
  ASSERT_TRUE(g) << g.message();

  CompileOptions options;
  options.precision = precision;
  PassContext ctx{options, model->weights, {}};
  Status s = run_pipeline(*g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();

  runtime::DeviceRequirements features;
  features.shader_float16 = features.storage_buffer_16bit_access = f16;
  auto device = runtime::open_device({}, features);
  ASSERT_TRUE(device) << device.message();
  auto compiled = testing::CompiledGraph::create(*device, *g, model->weights);
  ASSERT_TRUE(compiled) << compiled.message();
  // The bf16 tensors as shipped are converted once, on upload: matrices to the
  // plan's weight dtype, vectors to f32.
  size_t to_f16 = 0, to_f32 = 0;
  for (const runtime::WeightUpload& w : (*compiled)->plan().weights) {
    // Derived constants (RoPE, frequencies; pad_channels' padded copies "...[pad ...]") are f32.
    if (w.source.rfind("zimage.", 0) == 0 || w.source.find('[') != std::string::npos) continue;
    EXPECT_EQ(w.transform.stored, runtime::DType::bf16) << w.source;
    (w.transform.upload == runtime::DType::f16 ? to_f16 : to_f32)++;
  }
  EXPECT_EQ(to_f16 > 0, f16);
  EXPECT_GT(to_f32, 0u);
  auto out = (*compiled)->run({*latent, *cap, *t});
  ASSERT_TRUE(out) << out.message();
  ASSERT_EQ(out->size(), 5u);

  std::vector<std::string> names{"output"};
  for (const auto& n : zimage_intermediate_names()) names.push_back(n);
  for (size_t i = 0; i < names.size(); ++i) {
    auto want = read_npy(e2e::case_file(kCase, i == 0 ? "expected.npy" : "intermediate_" + names[i] + ".npy"));
    ASSERT_TRUE(want) << want.message();
    const Tensor& got = (*out)[i];
    ASSERT_EQ(got.shape, want->shape) << names[i];
    for (float v : got.data) ASSERT_TRUE(std::isfinite(v)) << names[i];
    const double d = max_abs_diff(got, *want), psnr = e2e::psnr_range2(got, *want);
    std::printf("[ zimage   ] %s %-20s max |d| = %.3g, PSNR %.1f dB\n", f16 ? "f16" : "f32", names[i].c_str(), d,
                psnr);
    if (f16)
      EXPECT_GE(psnr, 55.0) << names[i];
    else
      EXPECT_LE(d, 1e-4) << names[i];
  }
}

INSTANTIATE_TEST_SUITE_P(SharedCase, CompiledZImage, ::testing::Values(Precision::f32, Precision::f16),
                         [](const auto& info) { return info.param == Precision::f16 ? "f16" : "f32"; });

}  // namespace
}  // namespace strata

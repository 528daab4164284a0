// The whole compiler on the diffusers cases (tests/cases.h finds them): model graph → the pass pipeline
// → codegen → Vulkan (lavapipe in CI). f32 storage stays within 1e-4 of diffusers;
// f16 storage reaches PSNR ≥ 55 dB (peak-to-peak 2) with no NaN.
#include "compiled_graph.h"
#include "codegen/codegen.h"
#include "tests/e2e/cases.h"
#include "ir/npy.h"
#include "models/vae.h"
#include "passes/pass.h"
#include "runtime/device.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {
namespace {

using e2e::case_file;
using e2e::psnr_range2;

struct Param {
  std::string model, size;
  Precision precision;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << p.model << " " << p.size << (p.precision == Precision::f16 ? " f16" : " f32");
}

class CompiledDecoder : public ::testing::TestWithParam<Param> {};

TEST_P(CompiledDecoder, MatchesDiffusers) {
  const Param& p = GetParam();
  STRATA_REQUIRE_CASE(p.model);
  auto vae = load_vae_dir(case_file(p.model, "vae"));
  ASSERT_TRUE(vae) << vae.message();
  auto latent = read_npy(case_file(p.model, "latent_" + p.size + ".npy"));
  auto expected = read_npy(case_file(p.model, "expected_" + p.size + ".npy"));
  ASSERT_TRUE(latent && expected);
  auto g = build_decoder(*vae, {.latent_h = latent->shape[1], .latent_w = latent->shape[2]});
  ASSERT_TRUE(g) << g.message();

  CompileOptions options;
  options.precision = p.precision;
  PassContext ctx{options, vae->weights, {}};
  Status s = run_pipeline(*g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();

  runtime::DeviceRequirements features;
  features.shader_float16 = features.storage_buffer_16bit_access = p.precision == Precision::f16;
  auto device = runtime::open_device({}, features);
  ASSERT_TRUE(device) << device.message();
  auto compiled = testing::CompiledGraph::create(*device, *g, vae->weights);
  ASSERT_TRUE(compiled) << compiled.message();
  latent->shape.insert(latent->shape.begin(), 1);
  auto out = (*compiled)->run({*latent});
  ASSERT_TRUE(out) << out.message();
  Tensor image = (*out)[0];
  image.shape.erase(image.shape.begin());
  ASSERT_EQ(image.shape, expected->shape);
  for (float v : image.data) ASSERT_FALSE(std::isnan(v));
  if (p.precision == Precision::f32)
    EXPECT_LE(max_abs_diff(image, *expected), 1e-4);
  else
    EXPECT_GE(psnr_range2(image, *expected), 55.0);
}

INSTANTIATE_TEST_SUITE_P(
    SharedCases, CompiledDecoder,
    ::testing::Values(Param{"flux_small", "8x8", Precision::f32}, Param{"flux_small", "6x10", Precision::f32},
                      Param{"qwen_small", "8x8", Precision::f32}, Param{"qwen_small", "10x6", Precision::f32},
                      Param{"flux_small", "8x8", Precision::f16}, Param{"flux_small", "6x10", Precision::f16},
                      Param{"qwen_small", "8x8", Precision::f16}, Param{"qwen_small", "10x6", Precision::f16}),
    [](const auto& info) {
      return info.param.model + "_" + info.param.size + (info.param.precision == Precision::f16 ? "_f16" : "_f32");
    });

}  // namespace
}  // namespace strata

// Parity with diffusers: each case (a real diffusers VAE with seeded weights,
// latents, and the decoder output computed by diffusers in float64) decoded by the
// reference interpreter in f32 must match within 1e-4 everywhere.
#include "ir/interpreter.h"
#include "ir/npy.h"
#include "ir/verifier.h"
#include "models/vae.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <string>

namespace strata {
namespace {

struct Case {
  std::string model;   // case folder (tests/cases.h finds it)
  std::string size;    // "8x8": latent_8x8.npy / expected_8x8.npy
};

std::string case_path(const Case& c, const std::string& file) { return test_cases::case_file(c.model, file); }

class DiffusersCase : public ::testing::TestWithParam<Case> {};

TEST_P(DiffusersCase, InterpreterMatchesDiffusersWithin1e4) {
  const Case& c = GetParam();
  STRATA_REQUIRE_CASE(c.model);
  auto vae = load_vae_dir(case_path(c, "vae"));
  ASSERT_TRUE(vae) << vae.message();
  auto latent = read_npy(case_path(c, "latent_" + c.size + ".npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(case_path(c, "expected_" + c.size + ".npy"));
  ASSERT_TRUE(expected) << expected.message();

  auto hw = check_latent_shape(vae->config, latent->shape);
  ASSERT_TRUE(hw) << hw.message();
  auto graph = build_decoder(*vae, {.latent_h = hw->first, .latent_w = hw->second});
  ASSERT_TRUE(graph) << graph.message();
  ASSERT_TRUE(verify(*graph).is_ok()) << verify(*graph).message();

  Tensor input = *latent;
  input.shape.insert(input.shape.begin(), 1);
  auto out = interpret(*graph, vae->weights, {input});
  ASSERT_TRUE(out) << out.message();
  ASSERT_EQ(out->size(), 1u);
  Tensor image = (*out)[0];
  ASSERT_EQ(image.shape, (Shape{1, expected->shape[0], expected->shape[1], expected->shape[2]}));
  image.shape.erase(image.shape.begin());
  double diff = max_abs_diff(image, *expected);
  EXPECT_LE(diff, 1e-4) << c.model << " " << c.size;
}

INSTANTIATE_TEST_SUITE_P(SharedCases, DiffusersCase,
                         ::testing::Values(Case{"flux_small", "8x8"}, Case{"flux_small", "6x10"},
                                           Case{"qwen_small", "8x8"}, Case{"qwen_small", "10x6"}),
                         [](const auto& info) {
                           return info.param.model + "_" + info.param.size;
                         });

}  // namespace
}  // namespace strata

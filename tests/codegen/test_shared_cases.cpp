// The diffusers cases (found by tests/cases.h) decoded through Vulkan (lavapipe in CI) in f32: within
// 1e-4 of diffusers' float64 output, and a compiled decoder replayed on a second
// latent gives that latent's decode (nothing leaks between calls).
#include "compiled_graph.h"
#include "vk_test_util.h"

#include "codegen/codegen.h"
#include "ir/interpreter.h"
#include "ir/npy.h"
#include "models/vae.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

using testing::test_device;

using test_cases::case_file;

struct Loaded {
  Vae vae;
  Graph graph;
  Tensor latent;    // [1, C, h, w]
  Tensor expected;  // [1, 3, H, W]
};

Loaded load_case(const std::string& model, const std::string& size) {
  auto vae = load_vae_dir(case_file(model, "vae"));
  EXPECT_TRUE(vae) << vae.message();
  auto latent = read_npy(case_file(model, "latent_" + size + ".npy"));
  EXPECT_TRUE(latent) << latent.message();
  auto expected = read_npy(case_file(model, "expected_" + size + ".npy"));
  EXPECT_TRUE(expected) << expected.message();
  auto hw = check_latent_shape(vae->config, latent->shape);
  EXPECT_TRUE(hw) << hw.message();
  auto g = build_decoder(*vae, {.latent_h = hw->first, .latent_w = hw->second});
  EXPECT_TRUE(g) << g.message();
  latent->shape.insert(latent->shape.begin(), 1);
  expected->shape.insert(expected->shape.begin(), 1);
  return Loaded{std::move(*vae), std::move(*g), std::move(*latent), std::move(*expected)};
}

class VulkanCase : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(VulkanCase, MatchesDiffusersWithin1e4) {
  STRATA_REQUIRE_CASE(GetParam().first);
  Loaded c = load_case(GetParam().first, GetParam().second);
  auto device = test_device();
  ASSERT_TRUE(device) << device.message();
  auto compiled = testing::CompiledGraph::create(*device, c.graph, c.vae.weights);
  ASSERT_TRUE(compiled) << compiled.message();
  auto out = (*compiled)->run({c.latent});
  ASSERT_TRUE(out) << out.message();
  EXPECT_LE(max_abs_diff((*out)[0], c.expected), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(SharedCases, VulkanCase,
                         ::testing::Values(std::pair{"flux_small", "8x8"}, std::pair{"flux_small", "6x10"},
                                           std::pair{"qwen_small", "8x8"}, std::pair{"qwen_small", "10x6"}),
                         [](const auto& info) { return info.param.first + "_" + info.param.second; });

TEST(VulkanReplay, SecondLatentGetsItsOwnDecode) {
  STRATA_REQUIRE_CASE("flux_small");
  Loaded c = load_case("flux_small", "8x8");
  auto device = test_device();
  ASSERT_TRUE(device) << device.message();
  auto compiled = testing::CompiledGraph::create(*device, c.graph, c.vae.weights);
  ASSERT_TRUE(compiled) << compiled.message();
  Tensor other = c.latent;
  for (size_t i = 0; i < other.data.size(); ++i) other.data[i] = -0.5f * other.data[other.data.size() - 1 - i];
  auto want_other = interpret(c.graph, c.vae.weights, {other});
  ASSERT_TRUE(want_other) << want_other.message();

  auto first = (*compiled)->run({c.latent});
  auto second = (*compiled)->run({other});
  auto third = (*compiled)->run({c.latent});
  ASSERT_TRUE(first && second && third);
  EXPECT_LE(max_abs_diff((*first)[0], c.expected), 1e-4);
  EXPECT_LE(max_abs_diff((*second)[0], (*want_other)[0]), 1e-4);
  EXPECT_GT(max_abs_diff((*first)[0], (*second)[0]), 0.1);  // really a different image
  EXPECT_EQ((*first)[0].data, (*third)[0].data);            // replay is deterministic
}

}  // namespace
}  // namespace strata

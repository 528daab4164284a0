// Every op under any binding limit (issue 14): for any limit at or above the largest
// weight, every dispatch of every op kind binds at most the limit (conv_gemm and
// norm_act in bands, the rest in windows or boxes: docs/BANDS.md), and the decode is
// bit-identical to the unlimited one. Seeded small decoders of both architectures, in
// f32 and f16, under limits drawn with a fixed seed between the largest weight's bytes
// and the largest binding of the unlimited plan (the lower bound included). The issue's
// exact repro (Qwen-Image base_dim 20, 16x40x48, f32, 1 MiB) takes minutes on
// lavapipe: tests/slow/test_binding_limit_repro.cpp.
#include "tests/e2e/limited_decode.h"

#include <gtest/gtest.h>

#include <random>

namespace strata {
namespace {

using e2e::limited_decode;

struct Model {
  const char* name;
  VaeConfig config;
  int64_t h, w;
};

class BindingLimitProperty : public ::testing::TestWithParam<Precision> {};

TEST_P(BindingLimitProperty, AnyLimitAboveTheLargestWeightIsBitIdentical) {
  const Precision precision = GetParam();
  std::mt19937_64 rng(14);  // fixed: the limits are the same on every run
  QwenVaeConfig qwen = qwen_small_config();
  qwen.base_dim = 8;  // small and quick; its activations are still well above its weights
  for (const Model& m : {Model{"flux_small", flux_small_config(), 6, 8}, Model{"qwen base_dim 8", qwen, 8, 6}}) {
    SCOPED_TRACE(m.name);
    const Tensor latent = e2e::seeded_latent(m.h, m.w);
    auto whole = limited_decode(m.config, latent, precision, 0);
    ASSERT_TRUE(whole) << whole.message();
    const uint64_t lo = whole->largest_weight, hi = whole->largest_binding;
    ASSERT_LT(lo * 2, hi) << "the activations must be well above the weights for the limits to split them";
    // The lower bound (the largest weight exactly) and two random limits up to the
    // largest tensor.
    std::vector<uint64_t> limits = {lo};
    for (int i = 0; i < 2; ++i) limits.push_back(lo + rng() % (hi - lo));
    for (uint64_t limit : limits) {
      SCOPED_TRACE("binding limit " + std::to_string(limit));
      auto split = limited_decode(m.config, latent, precision, limit);
      ASSERT_TRUE(split) << split.message();
      EXPECT_EQ(split->over, "") << "a dispatch binds more than the limit";
      EXPECT_LE(split->largest_binding, limit);
      EXPECT_GT(split->dispatches, whole->dispatches) << "the limit must split something";
      EXPECT_TRUE(e2e::same_bits(split->image, whole->image)) << "output differs from the unlimited run";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, BindingLimitProperty, ::testing::Values(Precision::f32, Precision::f16),
                         [](const auto& info) { return info.param == Precision::f16 ? "f16" : "f32"; });

}  // namespace
}  // namespace strata

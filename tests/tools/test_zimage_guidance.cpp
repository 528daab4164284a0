// Classifier-free guidance as ZImagePipeline.__call__ applies it (models/zimage_pipeline.h):
// the scale above 0 guides, cfg_truncation turns guidance off at late steps, and
// cfg_normalization caps the guided prediction's norm at N·‖pos‖.
#include "models/zimage_pipeline.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace strata {
namespace {

TEST(ZImageGuidance, ScaleBelowOneStillGuides) {
  // diffusers guides whenever guidance_scale > 0: pos + 0.5·(pos − neg).
  std::vector<float> pos{1.0f, -2.0f};
  zimage_guide(pos, {3.0f, 2.0f}, 0.5f, 0.0f);
  EXPECT_FLOAT_EQ(pos[0], 0.0f);   // 1 + 0.5·(1 − 3)
  EXPECT_FLOAT_EQ(pos[1], -4.0f);  // −2 + 0.5·(−2 − 2)
}

TEST(ZImageGuidance, NormalizationCapsTheNorm) {
  // pos (3, 4), ‖pos‖ = 5; neg 0, scale 1: pred (6, 8), ‖pred‖ = 10.
  std::vector<float> capped{3.0f, 4.0f};
  zimage_guide(capped, {0.0f, 0.0f}, 1.0f, 1.5f);  // at most 7.5: (4.5, 6)
  EXPECT_FLOAT_EQ(capped[0], 4.5f);
  EXPECT_FLOAT_EQ(capped[1], 6.0f);
  std::vector<float> loose{3.0f, 4.0f};
  zimage_guide(loose, {0.0f, 0.0f}, 1.0f, 3.0f);  // 15 allowed: untouched
  EXPECT_FLOAT_EQ(loose[0], 6.0f);
  EXPECT_FLOAT_EQ(loose[1], 8.0f);
  std::vector<float> off{3.0f, 4.0f};
  zimage_guide(off, {0.0f, 0.0f}, 1.0f, 0.0f);
  EXPECT_FLOAT_EQ(off[1], 8.0f);
}

TEST(ZImageGuidance, TruncationTurnsLateStepsOff) {
  // t_norm = (1000 − timestep) / 1000: timestep 1000 → 0, 250 → 0.75.
  const ZImageGuidance g{.scale = 4.0f, .truncation = 0.5f};
  EXPECT_EQ(zimage_step_guidance(g, 1000.0f), 4.0f);
  EXPECT_EQ(zimage_step_guidance(g, 600.0f), 4.0f);  // 0.4
  EXPECT_EQ(zimage_step_guidance(g, 250.0f), 0.0f);  // 0.75 > 0.5
  // The default 1.0 never truncates; above 1 the option is off.
  EXPECT_EQ(zimage_step_guidance({.scale = 4.0f}, 0.0f), 4.0f);
  EXPECT_EQ(zimage_step_guidance({.scale = 4.0f, .truncation = 2.0f}, 0.0f), 4.0f);
}

}  // namespace
}  // namespace strata

// models/flow_match.h against values worked out with numpy from diffusers'
// FlowMatchEulerDiscreteScheduler.set_timesteps (linspace in float64, shift, rounded
// to float32; the pipeline's sigma_min = 0), independently of the code under test.
#include "models/flow_match.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

namespace strata {
namespace {

TEST(FlowMatch, StaticShiftNineSteps) {
  FlowMatchConfig c;  // shift 3, static
  auto s = flow_match_schedule(c, 9, 4096);
  ASSERT_TRUE(s) << s.message();
  const std::vector<float> t = {1000.0f, 954.54541015625f, 900.0f, 833.3333129882812f, 750.0f,
                                642.8571166992188f, 500.0f, 300.0f, 0.0f};
  const std::vector<float> sigma = {1.0f, 0.9545454382896423f, 0.8999999761581421f, 0.8333333134651184f, 0.75f,
                                    0.6428571343421936f, 0.5f, 0.30000001192092896f, 0.0f, 0.0f};
  EXPECT_EQ(s->timesteps, t);
  EXPECT_EQ(s->sigmas, sigma);
}

TEST(FlowMatch, NoShiftAndDynamicShift) {
  FlowMatchConfig plain;
  plain.shift = 1.0;
  auto a = flow_match_schedule(plain, 4, 0);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->timesteps, (std::vector<float>{1000.0f, 666.6666870117188f, 333.3333435058594f, 0.0f}));
  FlowMatchConfig dynamic;
  dynamic.use_dynamic_shifting = true;
  // mu = 0.8 at (0.8 − b) / m tokens: m = 0.65 / 3840, b = 0.5 − 256 m.
  EXPECT_NEAR(flow_match_mu(dynamic, 4096), 1.15, 1e-12);
  EXPECT_NEAR(flow_match_mu(dynamic, 1024), 0.63, 1e-12);
  const double m = 0.65 / 3840.0, b = 0.5 - 256.0 * m;
  const int64_t tokens = 2048;
  const double mu = tokens * m + b;
  auto d = flow_match_schedule(dynamic, 5, tokens);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->sigmas.size(), 6u);
  // numpy: exp(mu) / (exp(mu) + (1/s − 1)) for s = 1, .75, .5, .25, 0 at this mu
  for (int i = 0; i < 5; ++i) {
    const double s0 = 1.0 - 0.25 * i;
    const double want = s0 == 0 ? 0.0 : std::exp(mu) / (std::exp(mu) + (1.0 / s0 - 1.0));
    EXPECT_EQ(d->sigmas[i], static_cast<float>(want)) << i;
  }
  EXPECT_EQ(d->sigmas.back(), 0.0f);
}

TEST(FlowMatch, StepAndModelTime) {
  EXPECT_EQ(flow_match_model_t(954.54541015625f), (1000.0f - 954.54541015625f) / 1000.0f);
  EXPECT_FLOAT_EQ(flow_match_model_t(1000.0f), 0.0f);
  std::vector<float> x = {1.0f, -2.0f}, v = {0.5f, 4.0f};
  flow_match_euler_step(x, v, 0.75f, 0.5f);  // dt = −0.25
  EXPECT_EQ(x, (std::vector<float>{0.875f, -3.0f}));
}

TEST(FlowMatch, ConfigFileAndErrors) {
  const std::string path = ::testing::TempDir() + "/scheduler_config.json";
  {
    std::ofstream out(path);
    out << R"({"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 6.0,
              "use_dynamic_shifting": false})";
  }
  auto c = load_flow_match_config(path);
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->shift, 6.0);
  EXPECT_FALSE(c->use_dynamic_shifting);
  {
    std::ofstream out(path);
    out << R"({"shift": "three"})";
  }
  auto bad = load_flow_match_config(path);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("shift is not a number"), std::string::npos) << bad.message();
  {
    std::ofstream out(path);
    out << R"({"use_karras_sigmas": true})";
  }
  EXPECT_FALSE(load_flow_match_config(path));
  EXPECT_FALSE(load_flow_match_config(path + ".missing"));
  EXPECT_FALSE(flow_match_schedule(FlowMatchConfig{}, 0, 16));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace strata

// Prompt to image (models/zimage_prompt_pipeline.h) against diffusers' ZImagePipeline
// on the zimage_pipeline case: from the case's noise, the turbo run (guidance 0,
// 4 steps) and the CFG run (guidance 4, 3 steps) give diffusers' latent after every
// step and its image, in f32 through the interpreter and in f16 on the device.
#include "ir/npy.h"
#include "models/flow_match.h"
#include "models/zimage_prompt_pipeline.h"
#include "tests/cases.h"
#include "tools/session_loader.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <fstream>
#include <iostream>
#include <sstream>

namespace strata {
namespace {

constexpr const char* kCase = "zimage_pipeline";

nlohmann::json case_json() {
  std::ifstream in(test_cases::case_file(kCase, "case.json"));
  return nlohmann::json::parse(in);
}

Tensor npy(const std::string& file) {
  auto t = read_npy(test_cases::case_file(kCase, file));
  EXPECT_TRUE(t) << t.message();
  return t ? *t : Tensor();
}

double max_abs(const std::vector<float>& a, const float* b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

// PSNR with the reference's peak-to-peak as the peak.
double psnr(const std::vector<float>& got, const std::vector<float>& want) {
  double se = 0, lo = want[0], hi = want[0];
  for (size_t i = 0; i < want.size(); ++i) {
    se += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    lo = std::min(lo, double(want[i]));
    hi = std::max(hi, double(want[i]));
  }
  const double mse = se / want.size();
  return mse == 0 ? 999.0 : 10.0 * std::log10((hi - lo) * (hi - lo) / mse);
}

struct Generated {
  ZImageGenerateResult result;
  std::vector<Tensor> steps;
};

Generated generate(const nlohmann::json& run, const std::string& backend,
                   const std::function<void(ZImageGenerateOptions&)>& adjust = {},
                   const std::string& quantize = "none") {
  const nlohmann::json c = case_json();
  auto dir = open_zimage_pipeline_dir(test_cases::find_case(kCase));
  EXPECT_TRUE(dir) << dir.message();
  ZImageGenerateOptions o;
  o.prompt = c["prompt"]["text"].get<std::string>();
  o.negative_prompt = c["negative_prompt"]["text"].get<std::string>();
  o.guidance_scale = run["guidance_scale"].get<float>();
  o.steps = run["steps"].get<int64_t>();
  o.width = c["size_wh"][0].get<int64_t>();
  o.height = c["size_wh"][1].get<int64_t>();
  o.noise = npy(c["noise"]["file"].get<std::string>());
  if (adjust) adjust(o);
  Generated r;
  o.on_latent = [&](int64_t, const Tensor& l) { r.steps.push_back(l); };
  RunSettings settings;
  settings.backend = backend;
  settings.no_cache = true;
  settings.compiler.quantize = quantize;
  SessionLoader loader(settings);
  std::ostringstream log;
  auto result = zimage_generate(*dir, o, loader, {}, log);
  EXPECT_TRUE(result) << result.message() << "\n" << log.str();
  if (result) r.result = std::move(*result);
  return r;
}

class PromptToImage : public ::testing::TestWithParam<int> {};

TEST_P(PromptToImage, F32MatchesDiffusersEveryStep) {
  STRATA_REQUIRE_CASE(kCase);
  const nlohmann::json run = case_json()["runs"][GetParam()];
  const std::string tag = run["tag"].get<std::string>();
  const Generated r = generate(run, "cpu");
  const Tensor per_step = npy(tag + "_latents_per_step.npy");
  ASSERT_EQ(static_cast<int64_t>(r.steps.size()), per_step.shape[0]);
  const size_t n = r.steps.empty() ? 0 : r.steps[0].data.size();
  double worst = 0;
  for (size_t s = 0; s < r.steps.size(); ++s) {
    const double d = max_abs(r.steps[s].data, per_step.data.data() + s * n);
    EXPECT_LE(d, 1e-3) << tag << " step " << s + 1;
    worst = std::max(worst, d);
  }
  const Tensor image = npy(tag + "_image.npy");
  ASSERT_EQ(r.result.image.shape, image.shape);
  const double d = max_abs(r.result.image.data, image.data.data());
  EXPECT_LE(d, 2e-3) << tag;
  std::cout << tag << ", f32: per-step latents max |d| " << worst << ", image max |d| " << d << "\n";
}

TEST_P(PromptToImage, F16OnTheDevice) {
  STRATA_REQUIRE_CASE(kCase);
  const nlohmann::json run = case_json()["runs"][GetParam()];
  const std::string tag = run["tag"].get<std::string>();
  const Generated r = generate(run, "vulkan");
  const Tensor image = npy(tag + "_image.npy");
  ASSERT_EQ(r.result.image.shape, image.shape);
  const double db = psnr(r.result.image.data, image.data);
  EXPECT_GE(db, 40.0) << tag;
  std::cout << tag << ", f16 on the device: image " << db << " dB\n";
}

INSTANTIATE_TEST_SUITE_P(Runs, PromptToImage, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) { return i.param == 0 ? "turbo" : "cfg"; });

// cfg_truncation below every step's t_norm runs every step unguided: the CFG run's
// latents become the unguided run's (guidance 0), bit for bit; at 0 only the first
// step (t_norm 0) is guided, so it matches diffusers' guided first step and the run
// then leaves the guided reference.
TEST(PromptToImageGuidance, TruncationTurnsGuidanceOff) {
  STRATA_REQUIRE_CASE(kCase);
  const nlohmann::json run = case_json()["runs"][1];
  ASSERT_GT(run["guidance_scale"].get<float>(), 0.0f);
  const Generated none = generate(run, "cpu", [](ZImageGenerateOptions& o) { o.cfg_truncation = -1.0f; });
  const Generated unguided = generate(run, "cpu", [](ZImageGenerateOptions& o) { o.guidance_scale = 0.0f; });
  ASSERT_EQ(none.steps.size(), unguided.steps.size());
  for (size_t s = 0; s < none.steps.size(); ++s) EXPECT_EQ(none.steps[s].data, unguided.steps[s].data) << s;
  const Generated first = generate(run, "cpu", [](ZImageGenerateOptions& o) { o.cfg_truncation = 0.0f; });
  const Tensor per_step = npy(run["tag"].get<std::string>() + "_latents_per_step.npy");
  const size_t n = first.steps[0].data.size();
  EXPECT_LE(max_abs(first.steps[0].data, per_step.data.data()), 1e-3);
  EXPECT_GT(max_abs(first.steps.back().data, per_step.data.data() + (first.steps.size() - 1) * n), 1e-3);
  EXPECT_NE(first.steps.back().data, unguided.steps.back().data);
}

// --quantize w8a8 (the text encoder's and the transformer's linears int8, the VAE
// not) through the interpreter: the turbo and CFG images against diffusers' f32 ones.
TEST_P(PromptToImage, W8A8ImageWithin30dB) {
  STRATA_REQUIRE_CASE(kCase);
  const nlohmann::json run = case_json()["runs"][GetParam()];
  const std::string tag = run["tag"].get<std::string>();
  const Generated r = generate(run, "cpu", {}, "w8a8");
  const Tensor image = npy(tag + "_image.npy");
  ASSERT_EQ(r.result.image.shape, image.shape);
  const double db = psnr(r.result.image.data, image.data);
  EXPECT_GE(db, 30.0) << tag;
  EXPECT_LT(db, 99.0) << tag << ": the image did not change, so nothing was quantized";
  std::cout << tag << ", w8a8 on the interpreter: image " << db << " dB\n";
}

// The pipeline's sigmas (get_default_z_image_sigmas, shifted by the scheduler in f32)
// are the ones case.json lists, bit for bit.
TEST(PromptToImageSchedule, SigmasAndTimestepsAreDiffusers) {
  STRATA_REQUIRE_CASE(kCase);
  auto dir = open_zimage_pipeline_dir(test_cases::find_case(kCase));
  ASSERT_TRUE(dir) << dir.message();
  std::ostringstream log;
  auto config = zimage_scheduler_config(dir->transformer, log);
  ASSERT_TRUE(config) << config.message();
  // Held: a range-for over case_json()["runs"] would iterate a temporary already freed.
  const nlohmann::json cases = case_json();
  for (const nlohmann::json& run : cases["runs"]) {
    const int64_t steps = run["steps"].get<int64_t>();
    auto s = flow_match_schedule_from_sigmas(*config, zimage_default_sigmas(steps), 24);
    ASSERT_TRUE(s) << s.message();
    EXPECT_EQ(s->sigmas, run["sigmas"].get<std::vector<float>>()) << run["tag"];
    EXPECT_EQ(s->timesteps, run["timesteps"].get<std::vector<float>>()) << run["tag"];
  }
}

TEST(PromptToImageDir, ComponentsAreChecked) {
  STRATA_REQUIRE_CASE(kCase);
  EXPECT_EQ(open_zimage_pipeline_dir("/nonexistent/strata").message(), "--model '/nonexistent/strata' is not a directory");
  auto vae_only = open_zimage_pipeline_dir(test_cases::case_file(kCase, "vae"));
  EXPECT_NE(vae_only.message().find("no model_index.json"), std::string::npos) << vae_only.message();
}

}  // namespace
}  // namespace strata

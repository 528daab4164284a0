// `strata generate` (tools/generate_command.h) on the zimage_small transformer and the
// flux_small VAE: the denoised latent is the same through Vulkan and the interpreter
// (CFG with captions of two padded lengths, 4 steps); bad input fails before any work
// with one line, exit 1, and no output file; and ZImageDenoiser (models/zimage_pipeline.h)
// keeps one program per padded caption length.
#include "ir/interpreter.h"
#include "ir/npy.h"
#include "models/weights.h"
#include "models/zimage.h"
#include "tests/cases.h"
#include "tools/cli.h"
#include "models/zimage_pipeline.h"
#include "tools/session_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <unistd.h>

namespace strata {
namespace {
namespace fs = std::filesystem;

using test_cases::case_file;

constexpr const char* kCase = "zimage_small";

struct Result {
  int code;
  std::string out, err;
};

Result run(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("strata_generate_cli_" + std::to_string(::getpid()) + "_" + name)).string();
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// The first `rows` rows of the case's caption features.
Tensor caption_rows(int64_t rows) {
  auto cap = read_npy(case_file(kCase, "cap_feats.npy"));
  EXPECT_TRUE(cap) << cap.message();
  Tensor t({rows, cap->shape[1]}, std::vector<float>(cap->data.begin(), cap->data.begin() + rows * cap->shape[1]));
  return t;
}

std::vector<std::string> generate_args(const std::string& out, const std::string& caption) {
  return {"generate", "--transformer", case_file(kCase, "transformer"), "--vae", case_file("flux_small", "vae"),
          "--caption-features", caption, "--size", "64x48", "--steps", "4", "--seed", "7", "--out", out};
}

TEST(GenerateCli, VulkanAndInterpreterGiveTheSameLatentWithCfg) {
  STRATA_REQUIRE_CASE(kCase);
  STRATA_REQUIRE_CASE("flux_small");
  const std::string neg = temp_path("neg.npy");
  ASSERT_TRUE(write_npy(neg, caption_rows(20)));  // pads to 32, the caption (45) to 64
  std::map<std::string, Tensor> latents;
  for (const std::string backend : {"cpu", "vulkan"}) {
    const std::string png = temp_path(backend + ".png"), lat = temp_path(backend + ".npy");
    auto args = generate_args(png, case_file(kCase, "cap_feats.npy"));
    args.insert(args.end(), {"--negative-features", neg, "--cfg", "4", "--out-latent", lat, "--backend", backend,
                             "--precision", "f32"});
    if (backend == "cpu") {
      args.resize(args.size() - 2);  // --precision is the device plan's
    } else {
      // The latent alone on Vulkan: no decode (compiling the VAE's conv kernels on
      // lavapipe takes half a minute; the CPU run decodes).
      args.erase(std::find(args.begin(), args.end(), "--out"), std::find(args.begin(), args.end(), "--out") + 2);
      args.erase(std::find(args.begin(), args.end(), "--vae"), std::find(args.begin(), args.end(), "--vae") + 2);
    }
    Result r = run(args);
    ASSERT_EQ(r.code, 0) << backend << ": " << r.err << r.out;
    EXPECT_NE(r.out.find("5 plans"), std::string::npos) << r.out;  // per_prompt(.neg), per_t, per_step(.neg)
    EXPECT_NE(r.out.find("hoisted states"), std::string::npos) << r.out;
    EXPECT_EQ(fs::exists(png), backend == "cpu");
    auto l = read_npy(lat);
    ASSERT_TRUE(l) << l.message();
    EXPECT_EQ(l->shape, (Shape{16, 1, 6, 8}));
    latents[backend] = *l;
    fs::remove(png);
    fs::remove(lat);
  }
  fs::remove(neg);
  const double d = max_abs_diff(latents["cpu"], latents["vulkan"]);
  EXPECT_LE(d, 1e-4);
  // The loop moved the latent away from the seeded noise.
  Tensor noise({16, 1, 6, 8}, seeded_normal(7, "zimage.initial_latent", 16 * 6 * 8, 0.0, 1.0));
  EXPECT_GT(max_abs_diff(latents["cpu"], noise), 0.1);
}

// Three CFG steps on the interpreter, computed here from the pipeline's formulas: a
// scheduler_config.json beside the transformer sets shift 1, so the pipeline's sigmas
// linspace(1, 1/3, 3) stay [1, 2/3, 1/3], then 0; the model's t is (1000 − 1000·σ) /
// 1000; pred = pos + S·(pos − neg); latent += (σ' − σ)·(−pred).
TEST(GenerateCli, CfgStepsFollowThePipelineAndTheSchedulerConfig) {
  STRATA_REQUIRE_CASE(kCase);
  const fs::path root = temp_path("pipeline");
  fs::create_directories(root / "scheduler");
  fs::copy(case_file(kCase, "transformer"), root / "transformer");
  {
    std::ofstream f(root / "scheduler" / "scheduler_config.json");
    f << R"({"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 1.0,
             "use_dynamic_shifting": false})";
  }
  const std::string neg = (root / "neg.npy").string(), lat = (root / "latent.npy").string();
  ASSERT_TRUE(write_npy(neg, caption_rows(20)));
  Result r = run({"generate", "--transformer", (root / "transformer").string(), "--caption-features",
                  case_file(kCase, "cap_feats.npy"), "--negative-features", neg, "--cfg", "2.5", "--size", "64x48",
                  "--steps", "3", "--seed", "3", "--out-latent", lat, "--backend", "cpu"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("scheduler: " + (root / "scheduler" / "scheduler_config.json").string()), std::string::npos)
      << r.out;
  auto got = read_npy(lat);
  ASSERT_TRUE(got) << got.message();

  auto model = load_zimage_dir(case_file(kCase, "transformer"));
  ASSERT_TRUE(model) << model.message();
  auto forward = [&](const Tensor& x, int64_t rows, float t) {
    auto g = build_zimage(*model, {.latent_h = 6, .latent_w = 8, .caption_length = rows});
    EXPECT_TRUE(g) << g.message();
    auto out = interpret(*g, model->weights, {x, caption_rows(rows), Tensor({1}, {t})});
    EXPECT_TRUE(out) << out.message();
    return (*out)[0];
  };
  Tensor x({16, 1, 6, 8}, seeded_normal(3, "zimage.initial_latent", 16 * 6 * 8, 0.0, 1.0));
  const float sigmas[] = {1.0f, 2.0f / 3.0f, 1.0f / 3.0f, 0.0f};
  float ts[3];
  for (int i = 0; i < 3; ++i) ts[i] = (1000.0f - 1000.0f * sigmas[i]) / 1000.0f;
  for (int step = 0; step < 3; ++step) {
    const Tensor pos = forward(x, 45, ts[step]), negative = forward(x, 20, ts[step]);
    for (size_t i = 0; i < x.data.size(); ++i) {
      const float pred = pos.data[i] + 2.5f * (pos.data[i] - negative.data[i]);
      x.data[i] += (sigmas[step + 1] - sigmas[step]) * -pred;
    }
  }
  EXPECT_LE(max_abs_diff(*got, x), 1e-5);
  Tensor noise({16, 1, 6, 8}, seeded_normal(3, "zimage.initial_latent", 16 * 6 * 8, 0.0, 1.0));
  EXPECT_GT(max_abs_diff(x, noise), 0.1);
  fs::remove_all(root);
}

// One bad input: exit 1, one line naming the problem, no image.
void expect_rejected(std::vector<std::string> args, const std::string& out, const std::string& needle) {
  Result r = run(std::move(args));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(GenerateCli, BadInputFailsInOneLineWithoutOutput) {
  STRATA_REQUIRE_CASE(kCase);
  STRATA_REQUIRE_CASE("flux_small");
  const std::string out = temp_path("bad.png"), cap = case_file(kCase, "cap_feats.npy");
  const std::string narrow = temp_path("narrow.npy"), nan = temp_path("nan.npy");
  ASSERT_TRUE(write_npy(narrow, Tensor({3, 31}, std::vector<float>(93, 0.5f))));
  Tensor bad = caption_rows(5);
  bad.data[7] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(write_npy(nan, bad));

  expect_rejected(generate_args(out, narrow), out, "[L, 32]");
  expect_rejected(generate_args(out, nan), out, "non-finite value (nan) at element 7");
  auto size = generate_args(out, cap);
  size[std::find(size.begin(), size.end(), "--size") - size.begin() + 1] = "72x64";
  expect_rejected(size, out, "multiples of 16");
  auto steps = generate_args(out, cap);
  steps[std::find(steps.begin(), steps.end(), "--steps") - steps.begin() + 1] = "0";
  expect_rejected(steps, out, "--steps 0");
  auto vae = generate_args(out, cap);
  vae[std::find(vae.begin(), vae.end(), "--vae") - vae.begin() + 1] = temp_path("no_such_vae");
  expect_rejected(vae, out, "--vae");
  auto cfg = generate_args(out, cap);
  cfg.insert(cfg.end(), {"--cfg", "3"});
  expect_rejected(cfg, out, "--negative-features");
  fs::remove(narrow);
  fs::remove(nan);
}

// --allow-nonfinite lets NaN caption features through to a latent that holds NaN.
TEST(GenerateCli, AllowNonfiniteLetsNanCaptionFeaturesThrough) {
  STRATA_REQUIRE_CASE(kCase);
  const std::string nan = temp_path("nan_allowed.npy"), latent = temp_path("nan_latent.npy");
  Tensor bad = caption_rows(5);
  bad.data[7] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(write_npy(nan, bad));
  Result r = run({"generate", "--transformer", case_file(kCase, "transformer"), "--caption-features", nan, "--size",
                  "64x48", "--steps", "2", "--backend", "cpu", "--out-latent", latent, "--allow-nonfinite"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = read_npy(latent);
  ASSERT_TRUE(got) << got.message();
  EXPECT_TRUE(std::any_of(got->data.begin(), got->data.end(), [](float v) { return std::isnan(v); }));
  fs::remove(nan);
  fs::remove(latent);
}

// Captions of 45 and 40 tokens pad to 64 and share a program; 20 pads to 32 and gets
// its own. The host-padded caption gives diffusers' output (45 tokens) and the
// unpadded graph's (40 tokens).
TEST(ZImageDenoiser, OneProgramPerPaddedCaptionLength) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_zimage_dir(case_file(kCase, "transformer"));
  ASSERT_TRUE(model) << model.message();
  auto latent = read_npy(case_file(kCase, "latent.npy"));
  auto expected = read_npy(case_file(kCase, "expected.npy"));
  ASSERT_TRUE(latent && expected);
  RunSettings cpu;
  cpu.backend = "cpu";
  SessionLoader loader(cpu);
  std::ostringstream log;
  auto den = ZImageDenoiser::create(*model, latent->shape[2], latent->shape[3], loader, log);
  ASSERT_TRUE(den) << den.message();
  const float t = 0.37f;

  ASSERT_TRUE((*den)->set_captions(caption_rows(45), nullptr));
  EXPECT_EQ((*den)->programs_built(), 1);
  auto out45 = (*den)->predict(*latent, t);
  ASSERT_TRUE(out45) << out45.message();
  EXPECT_LE(max_abs_diff((*out45)[0], *expected), 1e-4);

  ASSERT_TRUE((*den)->set_captions(caption_rows(40), nullptr));
  EXPECT_EQ((*den)->programs_built(), 1) << "40 tokens pad to 64 like 45: the program is reused";
  auto out40 = (*den)->predict(*latent, t);
  ASSERT_TRUE(out40) << out40.message();
  ZImageOptions o{.latent_h = latent->shape[2], .latent_w = latent->shape[3], .caption_length = 40};
  auto g40 = build_zimage(*model, o);
  ASSERT_TRUE(g40) << g40.message();
  auto ref40 = interpret(*g40, model->weights, {*latent, caption_rows(40), Tensor({1}, {t})});
  ASSERT_TRUE(ref40) << ref40.message();
  EXPECT_LE(max_abs_diff((*out40)[0], (*ref40)[0]), 1e-6);
  EXPECT_GT(max_abs_diff((*out40)[0], (*out45)[0]), 1e-4) << "the mask did not reach the output";

  ASSERT_TRUE((*den)->set_captions(caption_rows(20), nullptr));
  EXPECT_EQ((*den)->programs_built(), 2);
  ASSERT_TRUE((*den)->set_captions(caption_rows(33), nullptr));
  EXPECT_EQ((*den)->programs_built(), 2);
}

}  // namespace
}  // namespace strata

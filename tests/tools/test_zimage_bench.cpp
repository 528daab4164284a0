// `strata bench --arch zimage` (tools/zimage_bench.h), in-process on the zimage_small
// case's weights (--transformer) on lavapipe: one forward compiled as the hoisted
// program, timed per plan, and the split reported (per prompt; per step = per_t +
// per_step); bad sizes fail with one line before any work.
#include "tests/cases.h"
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

namespace strata {
namespace {

using test_cases::case_file;

constexpr const char* kCase = "zimage_small";

TEST(ZImageBench, ReportsPerPromptAndPerStepParts) {
  STRATA_REQUIRE_CASE(kCase);
  std::ostringstream out, err;
  const int code = run_cli({"bench", "--arch", "zimage", "--transformer", case_file(kCase, "transformer"), "--size",
                            "96", "--caption-length", "45", "--reps", "1", "--warmup", "0", "--no-cache",
                            "--level-schedule-saving", "0.5"},
                           out, err);
  ASSERT_EQ(code, 0) << err.str();
  const std::string text = out.str();
  // --level-schedule-saving 0.5 reaches the schedule pass: the per-step plan keeps its
  // chain order (passes/schedule.cpp; under the default fifth its q, k and v chains run
  // side by side, 100 -> 76 barriers).
  EXPECT_NE(text.find("schedule: level order not taken (100 barriers -> 76: under 50 % fewer)"), std::string::npos)
      << text;
  // 96² image: a 12×12 latent, 36 image tokens padded to 64, 45 caption tokens to 64.
  EXPECT_NE(text.find("latent 12x12, 64 image + 64 caption tokens (45 valid)"), std::string::npos) << text;
  // The three plans in run order, each timed.
  const size_t prompt = text.find("  per_prompt "), t = text.find("  per_t "), step = text.find("  per_step ");
  ASSERT_NE(prompt, std::string::npos) << text;
  ASSERT_NE(t, std::string::npos) << text;
  ASSERT_NE(step, std::string::npos) << text;
  EXPECT_LT(prompt, t);
  EXPECT_LT(t, step);
  // The summary: per step is per_t + per_step, the forward both parts.
  std::smatch m;
  const std::regex plan_ms("  (per_\\w+) +([0-9.]+) ms device-resident");
  std::map<std::string, double> ms;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), plan_ms); it != std::sregex_iterator(); ++it)
    ms[(*it)[1]] = std::stod((*it)[2]);
  ASSERT_EQ(ms.size(), 3u) << text;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("per prompt ([0-9.]+) ms; per step ([0-9.]+) ms"))) << text;
  EXPECT_NEAR(std::stod(m[1]), ms["per_prompt"], 0.01);
  EXPECT_NEAR(std::stod(m[2]), ms["per_t"] + ms["per_step"], 0.02);
}

// --level-schedule-saving takes a fraction above 0 and at most 1, and says so before any work.
TEST(ZImageBench, LevelScheduleSavingIsAFraction) {
  for (const std::string text : {"0", "1.5", "abc"}) {
    SCOPED_TRACE(text);
    std::ostringstream out, err;
    const int code = run_cli({"bench", "--arch", "zimage", "--size", "96", "--level-schedule-saving", text}, out, err);
    EXPECT_NE(code, 0);
    EXPECT_NE(err.str().find("--level-schedule-saving '" + text + "'"), std::string::npos) << err.str();
    EXPECT_EQ(out.str().find("compiled"), std::string::npos) << out.str();
  }
}

// --steps N: after the per-plan timings, an N-step generate on the loaded program and
// the seeded Flux VAE's decode of its latent: one line with the step count, N step
// times, and an image of the requested size with every value finite.
TEST(ZImageBench, StepsTimesAGenerateFromThePromptToTheImage) {
  STRATA_REQUIRE_CASE(kCase);
  std::ostringstream out, err;
  const int code = run_cli({"bench", "--arch", "zimage", "--transformer", case_file(kCase, "transformer"), "--size",
                            "32", "--caption-length", "45", "--reps", "1", "--warmup", "0", "--no-cache", "--steps",
                            "2"},
                           out, err);
  ASSERT_EQ(code, 0) << err.str();
  const std::string text = out.str();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m,
                                std::regex("generate, 2 steps \\(no CFG\\) \\+ the Flux VAE decode, 32x32: ([0-9.]+) ms "
                                           "from the prompt to the image \\(per prompt ([0-9.]+) ms, steps ([0-9.]+) ms")))
      << text;
  EXPECT_GT(std::stod(m[1]), std::stod(m[2]) + std::stod(m[3]) - 0.05);  // the total holds both parts
  EXPECT_NE(text.find("image [1,3,32,32] (100 % finite)"), std::string::npos) << text;
}

TEST(ZImageBench, StepsMustBeACount) {
  std::ostringstream out, err;
  EXPECT_EQ(run_cli({"bench", "--arch", "zimage", "--size", "1024", "--steps", "-1"}, out, err), 2);
  EXPECT_NE(err.str().find("--steps must be an integer from 0 to 1000"), std::string::npos) << err.str();
}

TEST(ZImageBench, SizeMustBeAMultipleOf16) {
  std::ostringstream out, err;
  EXPECT_EQ(run_cli({"bench", "--arch", "zimage", "--size", "1000"}, out, err), 2);
  EXPECT_NE(err.str().find("--size must be a positive multiple of 16"), std::string::npos) << err.str();
}

// --layers: a count from 1 to 1000, for the seeded released config only; both errors
// are one line before any work.
TEST(ZImageBench, LayersNeedsAPositiveCountAndTheSeededModel) {
  for (const char* bad : {"0", "-3", "x", "1001"}) {
    SCOPED_TRACE(bad);
    std::ostringstream out, err;
    EXPECT_EQ(run_cli({"bench", "--arch", "zimage", "--size", "1024", "--layers", bad}, out, err), 2);
    EXPECT_NE(err.str().find("--layers must be an integer from 1 to 1000"), std::string::npos) << err.str();
  }
  std::ostringstream out, err;
  EXPECT_EQ(run_cli({"bench", "--arch", "zimage", "--size", "96", "--layers", "2", "--transformer", "/nonexistent"},
                    out, err),
            1);
  EXPECT_NE(err.str().find("--layers takes the released config's seeded weights, not --transformer"),
            std::string::npos)
      << err.str();
}

}  // namespace
}  // namespace strata

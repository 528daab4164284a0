// `strata compile --transformer ... --explain-hoist` (tools/hoist_command.h) on the
// zimage_small case: the caption path is reported per prompt, the t embedder per t,
// the main layers per step, with the hoisted states; bad input fails with one line.
#include "tests/cases.h"
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

namespace strata {
namespace {

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

TEST(HoistCli, ExplainsWhatRunsPerPromptPerTAndPerStep) {
  STRATA_REQUIRE_CASE(kCase);
  Result r = run({"compile", "--transformer", test_cases::case_file(kCase, "transformer"), "--latent-shape",
                  "16x1x12x20", "--caption-length", "45", "--explain-hoist"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("per_prompt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("per_t"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hoisted."), std::string::npos) << r.out;
  bool context_per_prompt = false, t_per_t = false, layers_per_step = false;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.find("context_refiner") == 2 && line.find(" per_prompt ") != std::string::npos) context_per_prompt = true;
    if (line.find("t_embedder") == 2 && line.find(" per_t ") != std::string::npos) t_per_t = true;
    if (line.find("layers.") == 2 && line.find(" per_step ") != std::string::npos) layers_per_step = true;
    if (line.find("context_refiner") == 2) { EXPECT_EQ(line.find(" per_step "), std::string::npos) << line; }
  }
  EXPECT_TRUE(context_per_prompt) << r.out;
  EXPECT_TRUE(t_per_t) << r.out;
  EXPECT_TRUE(layers_per_step) << r.out;
}

TEST(HoistCli, BadInputFailsWithOneLine) {
  STRATA_REQUIRE_CASE(kCase);
  const std::string dir = test_cases::case_file(kCase, "transformer");
  Result no_length = run({"compile", "--transformer", dir, "--latent-shape", "16x1x12x20", "--explain-hoist"});
  EXPECT_EQ(no_length.code, 2);
  EXPECT_NE(no_length.err.find("--caption-length"), std::string::npos) << no_length.err;
  Result zero = run({"compile", "--transformer", dir, "--latent-shape", "16x1x12x20", "--caption-length", "0",
                     "--explain-hoist"});
  EXPECT_EQ(zero.code, 2);
  Result odd = run({"compile", "--transformer", dir, "--latent-shape", "16x1x13x20", "--caption-length", "4",
                    "--explain-hoist"});
  EXPECT_EQ(odd.code, 1);
  EXPECT_EQ(std::count(odd.err.begin(), odd.err.end(), '\n'), 1) << odd.err;
  Result missing = run({"compile", "--transformer", "/nonexistent/transformer", "--latent-shape", "16x1x12x20",
                        "--caption-length", "4", "--explain-hoist"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/transformer"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace strata

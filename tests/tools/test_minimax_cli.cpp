// `strata decode` of the MiniMax-H3 VAE, run in-process: dispatched on the config's
// _class_name, it writes diffusers' tiled, clip-wise decode (.npy: decode()'s values);
// a latent the class cannot decode (2 latent frames, probe_2x4x6.json) fails before
// decoding with one line naming the shortest valid length and leaves no output.
#include "ir/npy.h"
#include "tests/cases.h"
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include <unistd.h>

namespace strata {
namespace {
namespace fs = std::filesystem;

using test_cases::case_file;

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
  return (fs::temp_directory_path() / ("strata_minimax_cli_" + std::to_string(::getpid()) + "_" + name)).string();
}

// (The device runs are tests/compile/test_minimax_program.cpp's.)
TEST(MiniMaxCli, CpuDecodeWritesDiffusersTiledDecode) {
  STRATA_REQUIRE_CASE("minimax_small");
  const std::string out = temp_path("m.npy");
  Result r = run({"decode", "--backend", "cpu", "--vae", case_file("minimax_small", "vae"), "--latent",
                  case_file("minimax_small", "latent_7x4x6.npy"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = read_npy(out);
  auto want = read_npy(case_file("minimax_small", "expected_7x4x6.npy"));
  ASSERT_TRUE(got && want);
  EXPECT_EQ(got->shape, (Shape{3, 22, 64, 96}));
  EXPECT_LE(max_abs_diff(*got, *want), 1e-4);
  fs::remove(out);
}

TEST(MiniMaxCli, TooShortLatentFailsWithOneLineAndNoOutput) {
  STRATA_REQUIRE_CASE("minimax_small");
  const std::string latent = temp_path("short.npy"), out = temp_path("short_out.npy");
  ASSERT_TRUE(write_npy(latent, Tensor({24, 2, 4, 6})).is_ok());
  Result r = run({"decode", "--backend", "cpu", "--vae", case_file("minimax_small", "vae"), "--latent", latent,
                  "--out", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("at least 3 latent frames"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(out));
  fs::remove(latent);
}

// bench checks its frame count before compiling anything.
TEST(MiniMaxCli, BenchNeedsAFrameCountOfTheForm17nPlus5) {
  Result bad = run({"bench", "--arch", "minimax-small", "--frames", "21", "--size", "64x96"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("17·n + 5 frames"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace strata

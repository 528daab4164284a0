// `strata decode` of a video VAE (Wan 2.2), run in-process: the frames it writes are
// diffusers' (.npy), an .mp4 plays with the right frame count and size (ffprobe), and
// every kind of bad input fails before decoding with one line and leaves no output.
#include "ir/npy.h"
#include "tests/cases.h"
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
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
  return (fs::temp_directory_path() / ("strata_video_cli_" + std::to_string(::getpid()) + "_" + name)).string();
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(VideoCli, CpuDecodeWritesDiffusersFrames) {
  STRATA_REQUIRE_CASE("wan22_small");
  const std::string out = temp_path("w.npy");
  Result r = run({"decode", "--backend", "cpu", "--vae", case_file("wan22_small", "vae"), "--latent",
                  case_file("wan22_small", "latent_3x4x6.npy"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = read_npy(out);
  auto want = read_npy(case_file("wan22_small", "expected_3x4x6.npy"));
  ASSERT_TRUE(got && want);
  EXPECT_EQ(got->shape, (Shape{3, 9, 64, 96}));
  EXPECT_LE(max_abs_diff(*got, *want), 1e-4);
  fs::remove(out);
}

TEST(VideoCli, Mp4PlaysWithTheFrameCountAndSize) {
  STRATA_REQUIRE_CASE("wan22_small");
  if (std::system("ffprobe -version > /dev/null 2>&1") != 0) GTEST_SKIP() << "ffprobe is not installed";
  const std::string out = temp_path("w.mp4");
  Result r = run({"decode", "--vae", case_file("wan22_small", "vae"), "--latent",
                  case_file("wan22_small", "latent_3x4x6.npy"), "--out", out, "--fps", "12"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string probe = temp_path("probe.txt");
  ASSERT_EQ(std::system(("ffprobe -v error -count_frames -select_streams v:0 -show_entries "
                         "stream=codec_name,width,height,nb_read_frames,r_frame_rate -of csv=p=0 '" +
                         out + "' > '" + probe + "'")
                            .c_str()),
            0);
  std::ifstream in(probe);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "h264,96,64,12/1,9");  // 1 + 4·(3 − 1) frames of 16·6 × 16·4
  fs::remove(out);
  fs::remove(probe);
}

// Each bad input: exit 1, one line naming the problem, no output file.
TEST(VideoCli, BadInputFailsBeforeDecodingAndLeavesNothing) {
  STRATA_REQUIRE_CASE("wan22_small");
  const std::string vae = case_file("wan22_small", "vae");
  struct Bad {
    std::string what;
    Tensor latent;
    std::string out;
    std::string expected;
  };
  Tensor nan_latent({48, 2, 4, 6});
  nan_latent.data[48 * 0 + 7] = std::nanf("");
  nan_latent.data[100] = INFINITY;
  const Bad bads[] = {
      {"wrong channel count", Tensor({16, 2, 4, 6}), temp_path("a.npy"), "[48, T, h, w]"},
      {"no frames", Tensor({48, 0, 4, 6}), temp_path("b.npy"), "T = 0"},
      {"non-finite values", nan_latent, temp_path("c.npy"), "2 non-finite values"},
      {"unwritable output", Tensor({48, 2, 4, 6}), "/nonexistent-strata-dir/w.mp4", "cannot write"},
  };
  for (const Bad& b : bads) {
    SCOPED_TRACE(b.what);
    const std::string latent = temp_path("latent.npy");
    ASSERT_TRUE(write_npy(latent, b.latent).is_ok());
    Result r = run({"decode", "--vae", vae, "--latent", latent, "--out", b.out});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find(b.expected), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_EQ(r.out.find("compiled"), std::string::npos) << "decoding started: " << r.out;
    EXPECT_FALSE(fs::exists(b.out));
    std::error_code ec;  // no temporary sibling left either (the unwritable one has no folder)
    for (const auto& e : fs::directory_iterator(fs::path(b.out).parent_path(), ec))
      EXPECT_NE(e.path().filename().string().rfind(fs::path(b.out).filename().string() + ".partial", 0), 0u)
          << e.path();
    fs::remove(latent);
  }
}

TEST(VideoCli, BenchNeedsAFrameCountOfTheForm1Plus4k) {
  Result r = run({"bench", "--arch", "wan22-small", "--frames", "6", "--size", "64x96"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("1 + 4·k frames"), std::string::npos) << r.err;
}

// --winograd-tile takes 2 or 4 only, and says so before any work.
TEST(VideoCli, WinogradTileIsTwoOrFour) {
  Result r = run({"bench", "--arch", "wan22-small", "--frames", "5", "--size", "64x96", "--winograd-tile", "3"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--winograd-tile '3' must be 2"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("compiled"), std::string::npos) << r.out;
}

// --winograd-2d-min-pixels takes a count of pixels, 0 or more, and says so before any work.
TEST(VideoCli, WinogradTwoDMinPixelsIsACount) {
  for (const auto& [text, message] : {std::pair<std::string, std::string>{"-5", "'-5' must be 0 or more"},
                                      {"abc", "'abc' is not an integer"}}) {
    Result r = run({"bench", "--arch", "flux-small", "--size", "64", "--winograd-2d-min-pixels", text});
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("--winograd-2d-min-pixels " + message), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("compiled"), std::string::npos) << r.out;
  }
}

// --winograd-2d with --no-winograd is a contradiction, said before any work.
TEST(VideoCli, WinogradTwoDContradictsNoWinograd) {
  Result r = run({"bench", "--arch", "flux-small", "--size", "64", "--winograd-2d", "--no-winograd"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--winograd-2d and --no-winograd contradict"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("compiled"), std::string::npos) << r.out;
}

// --winograd-2d (the default, kept for scripts) with --no-winograd-2d likewise.
TEST(VideoCli, WinogradTwoDContradictsNoWinogradTwoD) {
  Result r = run({"bench", "--arch", "flux-small", "--size", "64", "--winograd-2d", "--no-winograd-2d"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--winograd-2d and --no-winograd-2d contradict"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("compiled"), std::string::npos) << r.out;
}

// A video bench writes no frames: --out is refused, not silently ignored.
TEST(VideoCli, BenchRefusesOutForAVideoDecoder) {
  const std::string out = (fs::temp_directory_path() / "strata_video_bench_out.npy").string();
  fs::remove(out);
  Result r = run({"bench", "--arch", "wan22-small", "--frames", "5", "--size", "64x96", "--out", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--out applies to image decoders"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace strata

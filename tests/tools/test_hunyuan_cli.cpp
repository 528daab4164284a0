// `strata decode` of the HunyuanVideo VAE, run in-process: dispatched on the config's
// _class_name, the default mode writes diffusers' frame-wise decode and --frames whole
// its whole-clip decode; bad input fails before decoding with one line and leaves no
// output, as for Wan.
#include "ir/npy.h"
#include "tests/cases.h"
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <cmath>
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
  return (fs::temp_directory_path() / ("strata_hunyuan_cli_" + std::to_string(::getpid()) + "_" + name)).string();
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(HunyuanCli, CpuDecodeWritesDiffusersFrameWiseDecode) {
  STRATA_REQUIRE_CASE("hunyuan_small");
  const std::string out = temp_path("h.npy");
  Result r = run({"decode", "--backend", "cpu", "--vae", case_file("hunyuan_small", "vae"), "--latent",
                  case_file("hunyuan_small", "latent_6x6x8.npy"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = read_npy(out);
  auto want = read_npy(case_file("hunyuan_small", "expected_6x6x8.npy"));
  ASSERT_TRUE(got && want);
  EXPECT_EQ(got->shape, (Shape{3, 21, 48, 64}));
  EXPECT_LE(max_abs_diff(*got, *want), 1e-4);
  fs::remove(out);
}

// (The device runs of both modes are tests/compile/test_hunyuan_program.cpp's.)
TEST(HunyuanCli, FramesWholeWritesTheWholeClipDecode) {
  STRATA_REQUIRE_CASE("hunyuan_small");
  const std::string out = temp_path("w.npy");
  Result r = run({"decode", "--backend", "cpu", "--frames", "whole", "--vae", case_file("hunyuan_small", "vae"),
                  "--latent", case_file("hunyuan_small", "latent_6x6x8.npy"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = read_npy(out);
  auto whole = read_npy(case_file("hunyuan_small", "expected_whole_6x6x8.npy"));
  auto framewise = read_npy(case_file("hunyuan_small", "expected_6x6x8.npy"));
  ASSERT_TRUE(got && whole && framewise);
  ASSERT_EQ(got->shape, whole->shape);
  EXPECT_LE(max_abs_diff(*got, *whole), 1e-4);
  EXPECT_GT(max_abs_diff(*got, *framewise), 0.1);  // the two modes differ (3.2 in the case's json)
  fs::remove(out);
}

// --slab-frames streams the whole clip: the same decode, here through 3 slabs.
TEST(HunyuanCli, SlabFramesStreamTheWholeClipDecode) {
  STRATA_REQUIRE_CASE("hunyuan_small");
  const std::string out = temp_path("s.npy");
  Result r = run({"decode", "--backend", "cpu", "--frames", "whole", "--slab-frames", "2", "--vae",
                  case_file("hunyuan_small", "vae"), "--latent", case_file("hunyuan_small", "latent_6x6x8.npy"),
                  "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("slabs of 2 latent frames (3 slabs), 14 passes"), std::string::npos) << r.out;
  auto got = read_npy(out);
  auto whole = read_npy(case_file("hunyuan_small", "expected_whole_6x6x8.npy"));
  ASSERT_TRUE(got && whole);
  ASSERT_EQ(got->shape, whole->shape);
  EXPECT_LE(max_abs_diff(*got, *whole), 1e-4);
  fs::remove(out);
}

// Each bad input: exit 1, one line naming the problem, no output file.
TEST(HunyuanCli, BadInputFailsBeforeDecodingAndLeavesNothing) {
  STRATA_REQUIRE_CASE("hunyuan_small");
  const std::string vae = case_file("hunyuan_small", "vae");
  struct Bad {
    std::string what;
    Tensor latent;
    std::string out;
    std::vector<std::string> extra;
    std::string expected;
  };
  Tensor nan_latent({16, 2, 4, 6});
  nan_latent.data[7] = std::nanf("");
  nan_latent.data[100] = INFINITY;
  const Bad bads[] = {
      {"wrong channel count", Tensor({48, 2, 4, 6}), temp_path("a.npy"), {}, "[16, T, h, w]"},
      {"no frames", Tensor({16, 0, 4, 6}), temp_path("b.npy"), {}, "T = 0"},
      {"non-finite values", nan_latent, temp_path("c.npy"), {}, "2 non-finite values"},
      {"unwritable output", Tensor({16, 2, 4, 6}), "/nonexistent-strata-dir/h.mp4", {}, "cannot write"},
      {"unknown --frames", Tensor({16, 2, 4, 6}), temp_path("d.npy"), {"--frames", "7"}, "--frames whole"},
      {"slabs without --frames whole", Tensor({16, 2, 4, 6}), temp_path("e.npy"), {"--slab-frames", "2"},
       "--slab-frames streams a HunyuanVideo clip decoded in one call"},
      {"no frames per slab", Tensor({16, 2, 4, 6}), temp_path("f.npy"), {"--frames", "whole", "--slab-frames", "0"},
       "--slab-frames 0: give a positive number"},
  };
  for (const Bad& b : bads) {
    SCOPED_TRACE(b.what);
    const std::string latent = temp_path("latent.npy");
    ASSERT_TRUE(write_npy(latent, b.latent).is_ok());
    std::vector<std::string> args{"decode", "--vae", vae, "--latent", latent, "--out", b.out};
    args.insert(args.end(), b.extra.begin(), b.extra.end());
    Result r = run(args);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find(b.expected), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1) << r.err;
    EXPECT_EQ(r.out.find("compiled"), std::string::npos) << "decoding started: " << r.out;
    EXPECT_FALSE(fs::exists(b.out));
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::path(b.out).parent_path(), ec))
      EXPECT_NE(e.path().filename().string().rfind(fs::path(b.out).filename().string() + ".partial", 0), 0u)
          << e.path();
    fs::remove(latent);
  }
}

TEST(HunyuanCli, FramesWholeIsRefusedForWan) {
  STRATA_REQUIRE_CASE("wan22_small");
  const std::string out = temp_path("wan.npy");
  Result r = run({"decode", "--frames", "whole", "--vae", case_file("wan22_small", "vae"), "--latent",
                  case_file("wan22_small", "latent_1x5x7.npy"), "--out", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("applies to AutoencoderKLHunyuanVideo"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

// bench checks its frame count before compiling anything (a run of bench compiles the
// program, too slow for this suite; it was measured by hand).
TEST(HunyuanCli, BenchNeedsAFrameCountOfTheForm1Plus4k) {
  Result bad = run({"bench", "--arch", "hunyuan-small", "--frames", "6", "--size", "16x24"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("1 + 4·k frames"), std::string::npos) << bad.err;
  Result wan = run({"bench", "--arch", "wan22-small", "--whole", "--frames", "5", "--size", "64x96"});
  EXPECT_EQ(wan.code, 1);
  EXPECT_NE(wan.err.find("--whole applies to AutoencoderKLHunyuanVideo"), std::string::npos) << wan.err;
}

}  // namespace
}  // namespace strata

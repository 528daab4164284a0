// `strata forward` (tools/forward_command.h), run in-process on the zimage_small case:
// the output and the dumped intermediates are diffusers' (CPU and Vulkan), and every
// kind of bad input fails before any work with one line, exit 1, and no output file.
#include "ir/npy.h"
#include "tests/cases.h"
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
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
  return (fs::temp_directory_path() / ("strata_forward_cli_" + std::to_string(::getpid()) + "_" + name)).string();
}

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// forward's arguments for the case, with `latent` and `caption` files.
std::vector<std::string> forward_args(const std::string& out, const std::string& latent, const std::string& caption,
                                      const std::string& transformer = case_file(kCase, "transformer")) {
  return {"forward", "--transformer", transformer, "--latent", latent, "--caption-features", caption,
          "--t", "0.37", "--out", out};
}

std::vector<std::string> case_args(const std::string& out) {
  return forward_args(out, case_file(kCase, "latent.npy"), case_file(kCase, "cap_feats.npy"));
}

TEST(ForwardCli, CpuWritesDiffusersOutputAndIntermediates) {
  STRATA_REQUIRE_CASE(kCase);
  const std::string out = temp_path("o.npy"), dump = temp_path("dump");
  auto args = case_args(out);
  args.insert(args.end(), {"--backend", "cpu", "--dump-intermediates", dump});
  Result r = run(args);
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = read_npy(out);
  auto want = read_npy(case_file(kCase, "expected.npy"));
  ASSERT_TRUE(got && want);
  EXPECT_EQ(got->shape, (Shape{16, 1, 12, 20}));
  EXPECT_LE(max_abs_diff(*got, *want), 1e-4);
  for (const char* name : {"t_embedder", "context_refiner_out", "noise_refiner_out", "layers_out"}) {
    const std::string file = std::string("intermediate_") + name + ".npy";
    auto mine = read_npy((fs::path(dump) / file).string());
    auto theirs = read_npy(case_file(kCase, file));
    ASSERT_TRUE(mine) << mine.message();
    ASSERT_TRUE(theirs);
    ASSERT_EQ(mine->shape, theirs->shape) << name;
    EXPECT_LE(max_abs_diff(*mine, *theirs), 1e-4) << name;
  }
  fs::remove(out);
  fs::remove_all(dump);
}

TEST(ForwardCli, VulkanF32WritesDiffusersOutput) {
  STRATA_REQUIRE_CASE(kCase);
  const std::string out = temp_path("v.npy");
  auto args = case_args(out);
  args.insert(args.end(), {"--precision", "f32", "--no-cache"});
  Result r = run(args);
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = read_npy(out);
  auto want = read_npy(case_file(kCase, "expected.npy"));
  ASSERT_TRUE(got && want);
  EXPECT_LE(max_abs_diff(*got, *want), 1e-4);
  fs::remove(out);
}

// The fused token epilogues (passes/fuse_token_norm.cpp, the default) and the
// elementwise chain (--no-fuse-token-ops) both give diffusers' output; the pass's
// report says which ran: zimage_small's 6 blocks (2 unmodulated context refiners)
// fold 16 modulations, 12 residual adds and 6 SwiGLU gates, or none.
TEST(ForwardCli, FusedAndUnfusedTokenEpiloguesBothGiveDiffusersOutput) {
  STRATA_REQUIRE_CASE(kCase);
  auto want = read_npy(case_file(kCase, "expected.npy"));
  ASSERT_TRUE(want);
  for (const bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused" : "--no-fuse-token-ops");
    const std::string out = temp_path(fused ? "fused.npy" : "unfused.npy");
    auto args = case_args(out);
    args.insert(args.end(), {"--precision", "f32", "--no-cache"});
    if (!fused) args.push_back("--no-fuse-token-ops");
    Result r = run(args);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string log = r.out + r.err;
    EXPECT_NE(log.find(fused ? "fuse_token_norm: 16 token norms take their modulation, 12 their residual add; 6 silu"
                             : "fuse_token_norm: 0 token norms take their modulation, 0 their residual add; 0 silu"),
              std::string::npos)
        << log;
    auto got = read_npy(out);
    ASSERT_TRUE(got);
    EXPECT_LE(max_abs_diff(*got, *want), 1e-4);
    fs::remove(out);
  }
}

// Runs forward on bad input: exit 1, one line naming the problem, no output written.
void expect_bad_input(const std::vector<std::string>& args, const std::string& out, const std::string& needle) {
  Result r = run(args);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(ForwardCli, CaptionFeaturesOfTheWrongWidth) {
  STRATA_REQUIRE_CASE(kCase);
  const std::string cap = temp_path("narrow.npy"), out = temp_path("o1.npy");
  ASSERT_TRUE(write_npy(cap, Tensor({45, 31})).is_ok());
  expect_bad_input(forward_args(out, case_file(kCase, "latent.npy"), cap), out, "cap_feat_dim 32");
  fs::remove(cap);
}

TEST(ForwardCli, LatentSizeNotAMultipleOfThePatch) {
  STRATA_REQUIRE_CASE(kCase);
  const std::string latent = temp_path("odd.npy"), out = temp_path("o2.npy");
  ASSERT_TRUE(write_npy(latent, Tensor({16, 1, 13, 20})).is_ok());
  expect_bad_input(forward_args(out, latent, case_file(kCase, "cap_feats.npy")), out,
                   "not a multiple of the patch size 2 (the image size must be a multiple of 16)");
  fs::remove(latent);
}

TEST(ForwardCli, NonFiniteCaptionFeature) {
  STRATA_REQUIRE_CASE(kCase);
  auto cap = read_npy(case_file(kCase, "cap_feats.npy"));
  ASSERT_TRUE(cap);
  cap->data[100] = std::numeric_limits<float>::quiet_NaN();
  const std::string path = temp_path("nan.npy"), out = temp_path("o3.npy");
  ASSERT_TRUE(write_npy(path, *cap).is_ok());
  expect_bad_input(forward_args(out, case_file(kCase, "latent.npy"), path), out, "non-finite value (nan) at element 100");
  // --allow-nonfinite: it runs, and the NaN reaches the output through the attention.
  auto allowed = forward_args(out, case_file(kCase, "latent.npy"), path);
  allowed.insert(allowed.end(), {"--backend", "cpu", "--allow-nonfinite"});
  Result r = run(allowed);
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = read_npy(out);
  ASSERT_TRUE(got) << got.message();
  EXPECT_TRUE(std::any_of(got->data.begin(), got->data.end(), [](float v) { return std::isnan(v); }));
  fs::remove(out);
  fs::remove(path);
}

TEST(ForwardCli, MissingTransformerDirectory) {
  STRATA_REQUIRE_CASE(kCase);
  const std::string out = temp_path("o4.npy");
  expect_bad_input(forward_args(out, case_file(kCase, "latent.npy"), case_file(kCase, "cap_feats.npy"),
                                "/nonexistent/transformer"),
                   out, "transformer directory '/nonexistent/transformer' does not exist");
}

TEST(ForwardCli, MissingArgumentsAreUsageErrors) {
  Result r = run({"forward", "--transformer", "x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("forward needs --transformer, --latent, --caption-features, --t and --out"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace strata

// The command line, run in-process: what a user types gets the right result, and bad
// input gets a message that names the problem and a non-zero exit code.
#include "ir/npy.h"
#include "tools/args.h"
#include "tools/cli.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

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
  return (fs::temp_directory_path() / ("strata_cli_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(Cli, CpuDecodeWritesTheDiffusersArray) {
  STRATA_REQUIRE_CASE("qwen_small");
  std::string out = temp_path("q.npy");
  Result r = run({"decode", "--backend", "cpu", "--vae", case_file("qwen_small", "vae"), "--latent",
                  case_file("qwen_small", "latent_10x6.npy"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = read_npy(out);
  auto want = read_npy(case_file("qwen_small", "expected_10x6.npy"));
  ASSERT_TRUE(got && want);
  EXPECT_EQ(got->shape, (Shape{3, 80, 48}));
  EXPECT_LE(max_abs_diff(*got, *want), 1e-4);
}

TEST(Cli, WrongLatentShapeIsNamed) {
  STRATA_REQUIRE_CASE("flux_small");
  std::string out = temp_path("bad.npy");
  // A 4-channel latent for a 16-channel VAE.
  std::string latent = temp_path("latent4.npy");
  ASSERT_TRUE(write_npy(latent, Tensor({4, 8, 8})).is_ok());
  Result r =
      run({"decode", "--backend", "cpu", "--vae", case_file("flux_small", "vae"), "--latent", latent, "--out", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("[4,8,8]"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Cli, MissingFilesAreNamed) {
  Result r = run({"decode", "--backend", "cpu", "--vae", "/no/such/vae", "--latent", "/no/such.npy", "--out", "x.npy"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/no/such/vae"), std::string::npos) << r.err;
}

TEST(Cli, UsageErrorsExitWith2) {
  EXPECT_EQ(run({"decode", "--vea", "x"}).code, 2);
  EXPECT_EQ(run({"frobnicate"}).code, 2);
  EXPECT_EQ(run({"decode", "--latent"}).code, 2);
  EXPECT_EQ(run({"decode", "--backend", "tpu", "--demo"}).code, 2);
  Result kernels = run({"decode", "--kernels", "fast", "--demo"});
  EXPECT_EQ(kernels.code, 2);
  EXPECT_NE(kernels.err.find("--kernels 'fast'"), std::string::npos) << kernels.err;
  Result r = run({"graph", "--arch", "flux", "--latent-shape", "16x8"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("[16,8]"), std::string::npos) << r.err;
}

TEST(Cli, GraphPrintsTextAndDot) {
  STRATA_REQUIRE_CASE("flux_small");
  Result text = run({"graph", "--vae", case_file("flux_small", "vae"), "--latent-shape", "16x8x8"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("graph @flux_vae_decoder(%latent: f32[1,16,8,8])", 0), 0u) << text.out.substr(0, 200);
  EXPECT_NE(text.out.find("= conv2d \"decoder.conv_out\""), std::string::npos);
  Result dot = run({"graph", "--vae", case_file("flux_small", "vae"), "--latent-shape", "16x8x8", "--format", "dot"});
  ASSERT_EQ(dot.code, 0) << dot.err;
  EXPECT_EQ(dot.out.rfind("digraph", 0), 0u);
  EXPECT_NE(dot.out.find("decoder.conv_out"), std::string::npos);
}

TEST(Cli, CompareChecksBounds) {
  std::string a = temp_path("a.npy"), b = temp_path("b.npy");
  ASSERT_TRUE(write_npy(a, Tensor({2}, {0.0f, 1.0f})).is_ok());
  ASSERT_TRUE(write_npy(b, Tensor({2}, {0.0f, 1.5f})).is_ok());
  EXPECT_EQ(run({"compare", a, b, "--max-abs", "0.6"}).code, 0);
  EXPECT_EQ(run({"compare", a, b, "--max-abs", "0.4"}).code, 1);
  EXPECT_EQ(run({"compare", a, b, "--max-abs", "lots"}).code, 2);
}

TEST(Args, ParsesShapesAndRejectsTypos) {
  auto s = parse_shape("16x8x10");
  ASSERT_TRUE(s);
  EXPECT_EQ(*s, (Shape{16, 8, 10}));
  EXPECT_FALSE(parse_shape("16x0x8"));
  EXPECT_FALSE(parse_shape("16xx8"));
  EXPECT_FALSE(parse_shape("sixteen"));
  auto a = parse_args({"--out=x.png", "--demo"}, {{"out", true, ""}, {"demo", false, ""}});
  ASSERT_TRUE(a) << a.message();
  EXPECT_EQ(a->get_or("out", ""), "x.png");
  EXPECT_TRUE(a->has("demo"));
  auto bad = parse_args({"--ot", "x"}, {{"out", true, ""}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("--ot"), std::string::npos);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

TEST(Cli, GraphStagePrintsTheGraphAfterAPass) {
  STRATA_REQUIRE_CASE("flux_small");
  Result r = run({"graph", "--vae", case_file("flux_small", "vae"), "--latent-shape", "16x8x8", "--stage",
                  "fold_upsample"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("conv_gemm"), std::string::npos);
  EXPECT_NE(r.out.find("norm_act"), std::string::npos);
  EXPECT_NE(r.out.find("gather = \"upsample2x\""), std::string::npos);
  EXPECT_EQ(r.out.find("upsample_nearest"), std::string::npos);
  EXPECT_EQ(r.out.find("= group_norm"), std::string::npos);
  Result bad =
      run({"graph", "--vae", case_file("flux_small", "vae"), "--latent-shape", "16x8x8", "--stage", "fuse_all"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("fuse_all"), std::string::npos) << bad.err;
}

TEST(Cli, DumpGraphNamesEveryPass) {
  STRATA_REQUIRE_CASE("qwen_small");
  std::string out = temp_path("dump.npy");
  Result r = run({"decode", "--vae", case_file("qwen_small", "vae"), "--latent",
                  case_file("qwen_small", "latent_8x8.npy"), "--out", out, "--precision", "f32", "--dump-graph",
                  "all"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* pass : {"canonicalize", "fuse_norm_act", "fold_upsample", "assign_layout", "plan_buffers"})
    EXPECT_NE(r.out.find(std::string("// after ") + pass + "\n"), std::string::npos) << pass;
  EXPECT_EQ(run({"decode", "--demo", "--dump-graph", "nonsense"}).code, 2);
}

}  // namespace
}  // namespace strata

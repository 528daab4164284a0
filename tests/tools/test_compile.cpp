// `strata compile` and the byte-size flags: --binding-limit bands the graph and
// --explain-bands shows the bands; bad sizes are usage errors naming the flag.
#include "tools/args.h"
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <sstream>

namespace strata {
namespace {

struct Result {
  int code;
  std::string out, err;
};

Result run(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(Args, ParsesByteSizes) {
  const std::pair<const char*, uint64_t> good[] = {
      {"0", 0}, {"65536", 65536}, {"12B", 12}, {"64KiB", 65536}, {"3MiB", 3ull << 20}, {"8GiB", 8ull << 30},
      {"2TiB", 2ull << 40}, {"18446744073709551615", UINT64_MAX},
  };
  for (const auto& [text, bytes] : good) {
    auto v = parse_byte_size("binding-limit", text);
    ASSERT_TRUE(v) << text << ": " << v.message();
    EXPECT_EQ(*v, bytes) << text;
  }
  for (const char* text : {"", "KiB", "-1", "12XB", "1.5GiB", "64 KiB", "64kib", "64KB", "16777216TiB",
                           "18446744073709551616"}) {
    auto v = parse_byte_size("binding-limit", text);
    ASSERT_FALSE(v) << text;
    EXPECT_NE(v.message().find(std::string("--binding-limit '") + text + "'"), std::string::npos) << v.message();
  }
}

TEST(Cli, CompileExplainsBands) {
  // f32 flux-small at 64²: the 64-row activations are 512 KiB, the largest weight
  // 144 KiB; 160 KiB bands decoder.conv_out into rows of 17 (see tests/passes).
  Result r = run({"compile", "--arch", "flux-small", "--latent-shape", "16x8x8", "--precision", "f32",
                  "--binding-limit", "160KiB", "--explain-bands"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  for (const char* line : {"split_bands: binding limit 160.0 KiB: ",
                           "node 'decoder.conv_out' (conv_gemm): 64 output rows in 4 bands of 17\n",
                           "  band 3: kept [51,64) of 64\n",
                           "    0 conv k3 p1 s1: in [50,64) of 64 (halo 1 above, 0 below)\n",
                           " dispatches, ", "buffers:\n", "  total "})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
}

TEST(Cli, CompileExplainsKernels) {
  // f32 flux-small at 64² with the 160 KiB limit above: every node's config, the
  // banded conv_out with one dispatch per band (4) and its per-band row0.
  Result r = run({"compile", "--arch", "flux-small", "--latent-shape", "16x8x8", "--precision", "f32",
                  "--binding-limit", "160KiB", "--no-cache", "--explain-kernels"});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const size_t at = r.out.find("node 'decoder.conv_out' (conv_gemm)\n  kernel conv_gemm.comp\n");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string conv_out = r.out.substr(at, r.out.find("\nnode '", at + 1) - at);
  for (const char* line : {"  tile BK=16 BM=8 BN=128 TM=1 TN=4\n", "  workgroup 256x1x1\n", "    @0 uint ci = ",
                           "  dispatch band 4/4 grid ", "    push row0=51"})
    EXPECT_NE(conv_out.find(line), std::string::npos) << line << "\n" << conv_out;
  EXPECT_NE(r.out.find("(norm_act)\n  kernel norm_act_stats"), std::string::npos) << r.out;
}

TEST(Cli, CompileRejectsABadByteSize) {
  Result r = run({"compile", "--arch", "flux-small", "--latent-shape", "16x8x8", "--binding-limit", "12XB"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--binding-limit '12XB'"), std::string::npos) << r.err;
}

TEST(Cli, CompileLimitBelowAWeightNamesTheNode) {
  Result r = run({"compile", "--arch", "flux-small", "--latent-shape", "16x8x8", "--binding-limit", "64KiB"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("pass 'split_bands': node 'decoder."), std::string::npos) << r.err;
}

TEST(Cli, CompilePassesOnlyOnTheCpuBackend) {
  Result r = run({"compile", "--arch", "flux-small", "--latent-shape", "16x8x8", "--backend", "cpu", "--precision",
                  "f32", "--binding-limit", "160KiB", "--explain-bands"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("total: 19 nodes banded"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nbuffers:\n"), std::string::npos) << r.out;  // no codegen
}

}  // namespace
}  // namespace strata

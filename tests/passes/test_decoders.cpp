// The fusion chain (canonicalize → fuse_norm_act → fuse_residual → fold_upsample) on
// the diffusers cases (tests/cases.h finds them): after every pass the interpreter
// computes the decoder's image within 1e-6 (relative to its peak) of the unfused graph,
// the fused graph still matches diffusers within 1e-4, and the dispatch-relevant nodes
// are what the passes promise (Flux: no upsample_nearest, silu, add or conv2d left).
#include "golden.h"

#include "ir/npy.h"
#include "ir/verifier.h"
#include "models/vae.h"
#include "passes/passes.h"
#include "tests/cases.h"

#include <iostream>
#include <map>

namespace strata {
namespace {

struct Case {
  std::string model, size;
};

std::string case_path(const Case& c, const std::string& file) { return test_cases::case_file(c.model, file); }

std::map<std::string, int64_t> op_counts(const Graph& g) {
  std::map<std::string, int64_t> m;
  for (const Node& n : g.nodes()) ++m[std::string(op_name(n.op))];
  return m;
}

std::string counts_str(const std::map<std::string, int64_t>& m) {
  std::string s;
  for (const auto& [op, n] : m) s += fmt::format("{} {}, ", op, n);
  return s;
}

class FusedDecoder : public ::testing::TestWithParam<Case> {};

TEST_P(FusedDecoder, FusionChainKeepsTheImage) {
  const Case& c = GetParam();
  STRATA_REQUIRE_CASE(c.model);
  auto vae = load_vae_dir(case_path(c, "vae"));
  ASSERT_TRUE(vae) << vae.message();
  auto latent = read_npy(case_path(c, "latent_" + c.size + ".npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(case_path(c, "expected_" + c.size + ".npy"));
  ASSERT_TRUE(expected) << expected.message();
  auto hw = check_latent_shape(vae->config, latent->shape);
  ASSERT_TRUE(hw) << hw.message();
  auto graph = build_decoder(*vae, {.latent_h = hw->first, .latent_w = hw->second});
  ASSERT_TRUE(graph) << graph.message();

  Tensor input = *latent;
  input.shape.insert(input.shape.begin(), 1);
  const Graph unfused = *graph;
  auto want = interpret(unfused, vae->weights, {input});
  ASSERT_TRUE(want) << want.message();

  Graph g = *graph;
  CompileOptions options;
  options.stop_after = "fold_upsample";
  std::vector<std::string> checked;
  options.on_pass = [&](const std::string& pass, const Graph& after) {
    SCOPED_TRACE("after " + pass);
    auto got = interpret(after, vae->weights, {input});
    ASSERT_TRUE(got) << got.message();
    testing::expect_same_outputs(*want, *got, 1e-6);
    checked.push_back(pass);
  };
  PassContext ctx{options, vae->weights, {}};
  Status s = run_pipeline(g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(checked.size(), 5u);  // canonicalize … fold_upsample

  auto out = interpret(g, vae->weights, {input});
  ASSERT_TRUE(out) << out.message();
  Tensor image = (*out)[0];
  image.shape.erase(image.shape.begin());
  EXPECT_LE(max_abs_diff(image, *expected), 1e-4);

  auto before = op_counts(unfused), after = op_counts(g);
  std::cout << c.model << " " << c.size << ": " << unfused.nodes().size() << " nodes → " << g.nodes().size()
            << "\n  before: " << counts_str(before) << "\n  after:  " << counts_str(after) << "\n";
  for (const auto& l : ctx.log) std::cout << "  " << l << "\n";
  EXPECT_LT(g.nodes().size(), unfused.nodes().size());
  for (const char* gone : {"conv2d", "conv3d", "silu", "upsample_nearest", "group_norm", "rms_norm"})
    EXPECT_EQ(after.count(gone), 0u) << gone;
  EXPECT_EQ(after["norm_act"], before["group_norm"] + before["rms_norm"]);
  if (c.model == "flux_small") {
    EXPECT_EQ(after.count("add"), 0u);
    // + the attention's four projections (q, k, v from the map, the output back to it)
    EXPECT_EQ(after["conv_gemm"], before["conv2d"] + 4);
    EXPECT_EQ(after.count("linear"), 0u);
  } else {
    EXPECT_EQ(after["add"], 1);  // the latent de-normalisation's broadcast shift
    EXPECT_EQ(after["conv_gemm"], before["conv2d"] + before["conv3d"]);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedCases, FusedDecoder,
                         ::testing::Values(Case{"flux_small", "8x8"}, Case{"flux_small", "6x10"},
                                           Case{"qwen_small", "8x8"}, Case{"qwen_small", "10x6"}),
                         [](const auto& info) { return info.param.model + "_" + info.param.size; });

}  // namespace
}  // namespace strata

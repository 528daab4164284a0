// The pipeline: pass order, stop_after, the on_pass hook, and errors that name the pass.
#include "golden.h"

#include "passes/passes.h"

#include <fmt/format.h>

namespace strata {
namespace {

// x → conv2d → group_norm → silu → upsample → conv2d, parsed.
Graph small_graph(WeightStore& store) {
  auto g = parse_graph(R"(
graph @small(%x: f32[1,4,3,3]) {
  %a.weight: f32[4,4,3,3] = weight "a.weight"
  %a.bias: f32[4] = weight "a.bias"
  %a: f32[1,4,3,3] = conv2d "a" (%x, %a.weight, %a.bias) {pad = [1, 1], stride = [1, 1]}
  %n.weight: f32[4] = weight "n.weight"
  %n.bias: f32[4] = weight "n.bias"
  %n: f32[1,4,3,3] = group_norm "n" (%a, %n.weight, %n.bias) {eps = 1e-06, groups = 2}
  %s: f32[1,4,3,3] = silu "s" (%n)
  %up: f32[1,4,6,6] = upsample_nearest "up" (%s) {factors = [2, 2]}
  %b.weight: f32[2,4,3,3] = weight "b.weight"
  %b: f32[1,2,6,6] = conv2d "b" (%up, %b.weight) {pad = [1, 1], stride = [1, 1]}
  return %b
})");
  EXPECT_TRUE(g) << g.message();
  testing::add_seeded_weights(*g, store);
  return *g;
}

TEST(Pipeline, PassNamesInPipelineOrder) {
  EXPECT_EQ(pass_names(), (std::vector<std::string>{"canonicalize", "fuse_norm_act", "fuse_residual",
                                                    "fuse_frame_taps", "fold_upsample", "pad_channels", "assign_layout",
                                                    "lower_precision", "fuse_token_norm", "quantize_linears",
                                                    "phase_weights", "winograd_convs", "attention_gemms",
                                                    "fold_transposes", "split_bands", "schedule", "plan_buffers"}));
}

TEST(Pipeline, StopAfterAndOnPass) {
  WeightStore store;
  Graph g = small_graph(store);
  CompileOptions options;
  options.stop_after = "fold_upsample";
  std::vector<std::string> seen;
  std::vector<size_t> sizes;
  options.on_pass = [&](const std::string& name, const Graph& after) {
    seen.push_back(name);
    sizes.push_back(after.nodes().size());
  };
  PassContext ctx{options, store, {}};
  Status s = run_pipeline(g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(seen, (std::vector<std::string>{"canonicalize", "fuse_norm_act", "fuse_residual", "fuse_frame_taps",
                                            "fold_upsample"}));
  // 5 nodes → conv_gemm, norm_act (silu absorbed), conv_gemm (upsample folded); no
  // frame stack, so fuse_frame_taps changes nothing.
  EXPECT_EQ(sizes, (std::vector<size_t>{5, 4, 4, 4, 3}));
  EXPECT_FALSE(ctx.log.empty());
}

TEST(Pipeline, UnknownStopAfterIsAnError) {
  WeightStore store;
  Graph g = small_graph(store);
  CompileOptions options;
  options.stop_after = "fuse_everything";
  PassContext ctx{options, store, {}};
  Status s = run_pipeline(g, ctx);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("unknown pass 'fuse_everything'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("canonicalize, fuse_norm_act"), std::string::npos) << s.message();
}

TEST(Pipeline, VerifierFailureNamesThePassAndTheNode) {
  // A silu whose declared result disagrees with its operand: canonicalize leaves it,
  // the verifier after it reports it.
  Graph g;
  ValueId x = g.add_input("x", TensorType{{1, 2}, DType::f32, {}});
  ValueId y = g.add_value("y", TensorType{{1, 3}, DType::f32, {}});
  g.add_node(Node{Op::silu, "bad.silu", {}, {x}, {y}});
  g.mark_output(y);
  WeightStore store;
  CompileOptions options;
  PassContext ctx{options, store, {}};
  Status s = run_pipeline(g, ctx);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message().rfind("after pass 'canonicalize': ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("bad.silu"), std::string::npos) << s.message();
  // Then the graph it rejected, whole (it is small), in the text form.
  const std::string dump = "\nthe graph pass 'canonicalize' produced:\n"
                           "graph @main(%x: f32[1,2]) {\n"
                           "  %y: f32[1,3] = silu \"bad.silu\" (%x)\n"
                           "  return %y\n"
                           "}\n";
  EXPECT_NE(s.message().find(dump), std::string::npos) << s.message();
}

TEST(Pipeline, PassFailurePrintsThePassInput) {
  // A binding limit below every weight: split_bands fails. The message names the pass
  // and prints the graph it was given, i.e. the graph after lower_precision.
  WeightStore store;
  Graph g = small_graph(store);
  CompileOptions options;
  options.binding_limit = 64;
  WeightStore other_store;
  Graph expected_input = small_graph(other_store);
  {
    CompileOptions upto = options;
    upto.stop_after = "lower_precision";
    PassContext ctx{upto, other_store, {}};
    ASSERT_TRUE(run_pipeline(expected_input, ctx).is_ok());
  }
  PassContext ctx{options, store, {}};
  Status s = run_pipeline(g, ctx);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message().rfind("pass 'split_bands': ", 0), 0u) << s.message();
  const std::string dump = "\nthe graph pass 'split_bands' failed on (its input):\n" + print_graph(expected_input);
  EXPECT_NE(s.message().find(dump), std::string::npos) << s.message();
}

TEST(Pipeline, LargeGraphFailurePrintsAnExcerptAroundTheNode) {
  // 300 silus in a chain, the 150th declaring the wrong shape: the message shows the
  // lines around it, not the whole graph, and says where the whole graph is.
  Graph g;
  ValueId v = g.add_input("x", TensorType{{1, 2}, DType::f32, {}});
  for (int i = 0; i < 300; ++i) {
    ValueId y = g.add_value(fmt::format("s{}", i), TensorType{{1, i == 150 ? 3 : 2}, DType::f32, {}});
    g.add_node(Node{Op::silu, fmt::format("s{}", i), {}, {v}, {y}});
    v = y;
  }
  g.mark_output(v);
  WeightStore store;
  CompileOptions options;
  PassContext ctx{options, store, {}};
  Status s = run_pipeline(g, ctx);
  ASSERT_FALSE(s.is_ok());
  const std::string& m = s.message();
  EXPECT_NE(m.find("node 's150'"), std::string::npos) << m;
  EXPECT_NE(m.find("\n  %s150: f32[1,3] = silu \"s150\" (%s149)\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\n  %s138: f32[1,2] = silu \"s138\" (%s137)\n"), std::string::npos) << m;  // 12 before
  EXPECT_NE(m.find("\n  %s162: f32[1,2] = silu \"s162\" (%s161)\n"), std::string::npos) << m;  // 12 after
  EXPECT_EQ(m.find("\"s137\""), std::string::npos) << m;
  EXPECT_EQ(m.find("\"s163\""), std::string::npos) << m;
  // Lines 2..139 and 165..301 (1-based) are cut; the header and the return stay.
  EXPECT_NE(m.find("graph @main(%x: f32[1,2]) {\n  // ... 138 lines\n  %s138:"), std::string::npos) << m;
  EXPECT_NE(m.find("(%s161)\n  // ... 137 lines\n  return %s299\n}\n"), std::string::npos) << m;
  EXPECT_NE(m.find("// lines 140-164 of 303 around node line 152; the whole graph: rerun pass 'canonicalize' on its "
                   "input, the model's graph (`strata graph` without --stage)"),
            std::string::npos)
      << m;
}

TEST(Pipeline, FullPipelineRunsAndVerifies) {
  // Every pass in order, f32: the result still verifies and computes the same image
  // (pad_channels / assign_layout only change storage in f32 mode).
  WeightStore store;
  Graph g = small_graph(store);
  const Graph before = g;
  CompileOptions options;
  PassContext ctx{options, store, {}};
  Status s = run_pipeline(g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();
  auto in = testing::seeded_inputs(before, 3);
  auto want = interpret(before, store, in);
  ASSERT_TRUE(want) << want.message();
  auto got = interpret(g, store, in);
  ASSERT_TRUE(got) << got.message();
  testing::expect_same_outputs(*want, *got, 1e-5);
}

}  // namespace
}  // namespace strata

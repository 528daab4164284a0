// The --profile report: kinds, stages and rates computed by hand on a synthetic plan,
// the work split of dispatch_costs on a small graph, and the whole report from a real
// decode on the test device.
#include "ir/cost.h"
#include "tools/cli.h"
#include "tools/profile_report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

namespace strata {
namespace {

runtime::DispatchDesc dispatch(uint32_t pipeline, std::string label, std::array<uint32_t, 3> grid = {1, 1, 1},
                               std::vector<runtime::BindingDesc> bindings = {}) {
  runtime::DispatchDesc d;
  d.pipeline = pipeline;
  d.label = std::move(label);
  d.grid = grid;
  d.bindings = std::move(bindings);
  return d;
}

runtime::PipelineDesc pipeline(std::string name) {
  runtime::PipelineDesc p;
  p.name = std::move(name);
  return p;
}

// Four dispatches, 2 ms in all:
//   #0 conv_gemm, up_blocks.0 band 1/2: 1000 µs, 2e10 FLOP, 1e8 B -> 20 TFLOP/s, 100 GB/s
//   #1 conv_gemm, up_blocks.0 band 2/2:  500 µs, 1e10 FLOP, 5e7 B -> 20 TFLOP/s, 100 GB/s
//   #2 norm_act_stats, mid_block:         250 µs, 0 FLOP, 2.5e7 B  -> -, 100 GB/s
//   #3 attention, mid_block:              250 µs, 1e9 FLOP, 1e6 B  -> 4 TFLOP/s, 4 GB/s
// Totals: 3.1e10 FLOP / 2 ms = 15.5 TFLOP/s; 1.76e8 B / 2 ms = 88 GB/s.
struct Synthetic {
  runtime::Plan plan;
  runtime::Profile profile;
  std::vector<DispatchCost> costs;
  Synthetic() {
    plan.pipelines = {pipeline("conv_gemm.comp[CI=64,SILU=0]"), pipeline("norm_act_stats.comp[WG=256]"),
                      pipeline("attention.comp")};
    plan.dispatches = {dispatch(0, "decoder.up_blocks.0.resnets.0.conv1:band 1/2", {4, 2, 1}),
                       dispatch(0, "decoder.up_blocks.0.resnets.0.conv1:band 2/2", {4, 1, 1}),
                       dispatch(1, "decoder.mid_block.resnets.0.norm1:stats", {16, 1, 1}),
                       dispatch(2, "decoder.mid_block.attentions.0.attn", {8, 1, 1})};
    profile.dispatch_us = {1000, 500, 250, 250};
    profile.total_us = 2000;
    costs = {{2e10, 1e8}, {1e10, 5e7}, {0, 2.5e7}, {1e9, 1e6}};
  }
};

TEST(ProfileReport, KindsStagesAndRatesByHand) {
  Synthetic s;
  std::string got = profile_report(s.plan, s.profile, {.device_name = "NVIDIA H200", .costs = s.costs, .slowest = 2});
  std::string want =
      "device time 2.000 ms in 4 dispatches; H200 ceilings: ~620 TFLOP/s cooperative-matrix f16->f32, 3.9 TB/s copy\n"
      "  by kernel kind           dispatches   device ms      %   TFLOP/s      GB/s\n"
      "  conv_gemm                         2       1.500   75.0      20.0       100\n"
      "  norm_act_stats                    1       0.250   12.5         -       100\n"
      "  attention                         1       0.250   12.5      4.00      4.00\n"
      "  total                             4       2.000  100.0      15.5      88.0\n"
      "  (TFLOP/s: the compiled graph's FLOPs, padding included; GB/s: bytes bound per dispatch, reads + writes, "
      "an upper bound)\n"
      "  by stage                 dispatches   device ms      %\n"
      "  decoder.up_blocks.0               2       1.500   75.0\n"
      "  decoder.mid_block                 2       0.500   25.0\n"
      "slowest dispatches:\n"
      "  #0        1.000 ms  decoder.up_blocks.0.resnets.0.conv1:band 1/2  grid 4x2x1  20.0 TFLOP/s, 100 GB/s\n"
      "  #1        0.500 ms  decoder.up_blocks.0.resnets.0.conv1:band 2/2  grid 4x1x1  20.0 TFLOP/s, 100 GB/s\n";
  EXPECT_EQ(got, want);
}

TEST(ProfileReport, NoCeilingsOffTheH200AndNoRatesWithoutCosts) {
  Synthetic s;
  std::string got = profile_report(s.plan, s.profile, {.device_name = "llvmpipe (LLVM 15.0.6, 256 bits)"});
  EXPECT_EQ(got.rfind("device time 2.000 ms in 4 dispatches\n", 0), 0u) << got;
  EXPECT_EQ(got.find("ceilings"), std::string::npos);
  EXPECT_NE(got.find("  conv_gemm                         2       1.500   75.0         -         -\n"),
            std::string::npos)
      << got;
  EXPECT_EQ(got.find("TFLOP/s,"), std::string::npos) << got;  // no per-dispatch rates
}

// A program's plan: only its dispatches are counted, timed and listed.
TEST(ProfileReport, ADispatchRangeReportsOnlyThosePlans) {
  Synthetic s;
  std::string got = profile_report(s.plan, s.profile, {.costs = s.costs, .slowest = 5, .first = 2, .count = 2});
  EXPECT_EQ(got.rfind("device time 0.500 ms in 2 dispatches\n", 0), 0u) << got;
  EXPECT_EQ(got.find("conv_gemm"), std::string::npos) << got;
  EXPECT_NE(got.find("  total                             2       0.500  100.0"), std::string::npos) << got;
  EXPECT_NE(got.find("  #2 "), std::string::npos) << got;
  EXPECT_EQ(got.find("  #0 "), std::string::npos) << got;
}

TEST(ProfileReport, NoProfileSaysSo) {
  Synthetic s;
  EXPECT_EQ(profile_report(s.plan, runtime::Profile{}), "no profile (run with --profile)\n");
}

TEST(ProfileReport, KindAndStageNames) {
  EXPECT_EQ(kernel_kind("conv_gemm.comp[CI=64,SILU=0]"), "conv_gemm");
  EXPECT_EQ(kernel_kind("unary.comp"), "unary");
  EXPECT_EQ(kernel_kind("attention"), "attention");
  EXPECT_EQ(stage_of("decoder.up_blocks.2.resnets.0.conv1:band 1/3"), "decoder.up_blocks.2");
  EXPECT_EQ(stage_of("decoder.up_blocks.2.upsamplers.0.conv"), "decoder.up_blocks.2");
  EXPECT_EQ(stage_of("decoder.mid_block.attentions.0.to_q"), "decoder.mid_block");
  EXPECT_EQ(stage_of("decoder.mid_block.resnets.1.norm2:apply 2/2"), "decoder.mid_block");
  EXPECT_EQ(stage_of("decoder.conv_norm_out.silu:stats"), "decoder.conv_norm_out");
  EXPECT_EQ(stage_of("decoder.conv_out"), "decoder.conv_out");
  EXPECT_EQ(stage_of("post_quant_conv"), "post_quant_conv");
  EXPECT_EQ(stage_of("input.latent"), "input.latent");
}

// conv "c" (2 bands, grids of 4 and 2 workgroups) and a norm "n" (stats, reduce,
// apply): FLOPs go to the node's main dispatches by workgroups; bytes are the
// binding ranges, a read-write binding twice.
TEST(ProfileReport, DispatchCostsSplitANodesWorkOverItsMainDispatches) {
  Graph g;
  auto type = [](Shape s) {
    TensorType t;
    t.shape = std::move(s);
    return t;
  };
  ValueId x = g.add_input("x", type({1, 4, 8, 8}));
  ValueId w = g.add_constant("w", type({8, 4, 3, 3}), "w");
  ValueId y = g.add_value("y", type({1, 8, 8, 8}));
  ValueId z = g.add_value("z", type({1, 8, 8, 8}));
  g.add_node(Node{.op = Op::conv2d, .name = "c", .attrs = {}, .inputs = {x, w}, .outputs = {y}});
  g.add_node(Node{.op = Op::silu, .name = "n", .attrs = {}, .inputs = {y}, .outputs = {z}});
  g.mark_output(z);
  const double conv_flops = 2.0 * 512 * 36;  // 2 × output elements × (4 × 3 × 3) taps
  ASSERT_EQ(node_flops(g, g.nodes()[0]), conv_flops);
  ASSERT_EQ(node_flops(g, g.nodes()[1]), 512.0);

  runtime::Plan plan;
  plan.pipelines = {pipeline("conv_gemm.comp[A=1]"), pipeline("norm_act_stats.comp"),
                    pipeline("group_norm_reduce.comp"), pipeline("norm_act_apply.comp"), pipeline("convert.comp")};
  using runtime::Access;
  plan.dispatches = {
      dispatch(4, "input.x", {1, 1, 1}, {{0, 0, 1024, Access::read}, {1, 0, 512, Access::write}}),
      dispatch(0, "c:band 1/2", {2, 2, 1}, {{1, 0, 300, Access::read}, {2, 0, 100, Access::write}}),
      dispatch(0, "c:band 2/2", {2, 1, 1}, {{1, 0, 300, Access::read}, {2, 0, 100, Access::read_write}}),
      dispatch(1, "n:stats", {8, 1, 1}, {{2, 0, 64, Access::read}}),
      dispatch(2, "n:reduce", {1, 1, 1}, {{3, 0, 8, Access::read_write}}),
      dispatch(3, "n:apply 1/2", {3, 1, 1}, {{2, 0, 10, Access::read}}),
      dispatch(3, "n:apply 2/2", {1, 1, 1}, {{2, 0, 10, Access::read}}),
  };
  std::vector<DispatchCost> c = dispatch_costs(g, plan);
  ASSERT_EQ(c.size(), 7u);
  EXPECT_EQ(c[0].flops, 0.0);  // staging: no graph node
  EXPECT_EQ(c[0].bytes, 1536.0);
  EXPECT_DOUBLE_EQ(c[1].flops, conv_flops * 4 / 6);
  EXPECT_DOUBLE_EQ(c[2].flops, conv_flops * 2 / 6);
  EXPECT_EQ(c[1].bytes, 400.0);
  EXPECT_EQ(c[2].bytes, 500.0);  // the read-write window counts twice
  EXPECT_EQ(c[3].flops, 0.0);    // statistics and reduction: not the main kind
  EXPECT_EQ(c[4].flops, 0.0);
  EXPECT_EQ(c[4].bytes, 16.0);
  EXPECT_DOUBLE_EQ(c[5].flops, 512.0 * 3 / 4);
  EXPECT_DOUBLE_EQ(c[6].flops, 512.0 * 1 / 4);
}

// Two entries of one program run the same nodes (a video decoder's first_chunk and
// next_frame plans): with an entry's dispatch range, the node's whole work goes to that
// entry's dispatches; the other entry's get none (measured before: each got a share,
// so the profile of one plan reported a fraction of its FLOPs).
TEST(ProfileReport, DispatchCostsOfOneEntryHoldItsNodesWholeWork) {
  Graph g;
  auto type = [](Shape s) {
    TensorType t;
    t.shape = std::move(s);
    return t;
  };
  ValueId x = g.add_input("x", type({1, 4, 8, 8}));
  ValueId w = g.add_constant("w", type({8, 4, 3, 3}), "w");
  ValueId y = g.add_value("y", type({1, 8, 8, 8}));
  g.add_node(Node{.op = Op::conv2d, .name = "c", .attrs = {}, .inputs = {x, w}, .outputs = {y}});
  g.mark_output(y);
  const double conv_flops = 2.0 * 512 * 36;
  runtime::Plan plan;
  plan.pipelines = {pipeline("conv_gemm.comp[A=1]")};
  using runtime::Access;
  plan.dispatches = {
      dispatch(0, "c", {2, 1, 1}, {{0, 0, 100, Access::read}}),  // entry "first_chunk"
      dispatch(0, "c", {2, 1, 1}, {{0, 0, 100, Access::read}}),  // entry "next_frame"
  };
  const std::vector<DispatchCost> second = dispatch_costs(g, plan, 1, 1);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].flops, 0.0);
  EXPECT_DOUBLE_EQ(second[1].flops, conv_flops);
  EXPECT_EQ(second[0].bytes, 100.0);  // bytes stay per dispatch
  const std::vector<DispatchCost> all = dispatch_costs(g, plan);  // no range: the node's work shared
  EXPECT_DOUBLE_EQ(all[0].flops + all[1].flops, conv_flops);
}

struct CliResult {
  int code;
  std::string out, err;
};

CliResult run(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

// The rows of one table of the report: lines after the header starting `title`,
// up to the next line that does not start with two spaces and a letter/digit.
std::vector<std::string> table_rows(const std::string& report, const std::string& title) {
  std::istringstream in(report);
  std::vector<std::string> rows;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("  " + title, 0) == 0) {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (line.size() < 3 || line.rfind("  ", 0) != 0 || line[2] == ' ' || line[2] == '(') break;
    rows.push_back(line);
  }
  return rows;
}

TEST(ProfileReport, DemoDecodeReportsKindsAndStages) {
  std::string image = (std::filesystem::temp_directory_path() /
                       ("strata_profile_" + std::to_string(::getpid()) + ".npy")).string();
  CliResult r = run({"decode", "--demo", "--profile", "--out", image});
  ASSERT_EQ(r.code, 0) << r.err;
  std::filesystem::remove(image);
  EXPECT_NE(r.out.find("device time "), std::string::npos) << r.out;
  std::vector<std::string> kinds = table_rows(r.out, "by kernel kind");
  ASSERT_FALSE(kinds.empty()) << r.out;
  std::string kind_names;
  for (const std::string& row : kinds) kind_names += row.substr(2, row.find(' ', 2) - 2) + " ";
  // The demo's NHWC f16 norms take the vector kernels (norm_act_*_vec.comp).
  for (const char* kind : {"conv_gemm ", "norm_act_stats_vec ", "norm_act_apply_vec ", "attention ", "total "})
    EXPECT_NE(kind_names.find(kind), std::string::npos) << kind << " missing from: " << kind_names << "\n" << r.out;
  // conv_gemm does arithmetic: its TFLOP/s column is a number, not "-".
  for (const std::string& row : kinds)
    if (row.rfind("  conv_gemm ", 0) == 0) {
      std::istringstream fields(row);
      std::string name, count, ms, pct, tflops, gbs;
      fields >> name >> count >> ms >> pct >> tflops >> gbs;
      EXPECT_NE(tflops, "-") << row;
      EXPECT_NE(gbs, "-") << row;
    }

  std::vector<std::string> stages = table_rows(r.out, "by stage");
  ASSERT_GE(stages.size(), 4u) << r.out;
  double percent = 0;
  std::string stage_names;
  for (const std::string& row : stages) {
    std::istringstream fields(row);
    std::string name;
    double count = 0, ms = 0, pct = 0;
    fields >> name >> count >> ms >> pct;
    stage_names += name + " ";
    percent += pct;
  }
  EXPECT_NEAR(percent, 100.0, 0.05 * static_cast<double>(stages.size())) << r.out;
  for (const char* stage : {"decoder.mid_block ", "decoder.up_blocks.0 ", "decoder.conv_out "})
    EXPECT_NE(stage_names.find(stage), std::string::npos) << stage << " missing from: " << stage_names;
  EXPECT_NE(r.out.find("slowest dispatches:\n"), std::string::npos);
}

}  // namespace
}  // namespace strata

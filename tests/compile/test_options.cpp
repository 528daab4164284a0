// The options table (compile/options.h): every option that can change a plan is in
// the plan-cache key, flags parse and check their values, and flags that disagree
// about one option are refused.
#include "compile/options.h"
#include "compile/plan_cache.h"
#include "compile/target.h"
#include "ir/builder.h"

#include <gtest/gtest.h>

#include <set>

namespace strata {
namespace {

CompilerOptions with_row(const OptionRow& row) {
  CompilerOptions o;
  const Status s = row.set(o, row.takes_value ? row.other_value : "");
  EXPECT_TRUE(s.is_ok()) << row.field << ": " << s.message();
  return o;
}

TEST(Options, EveryRowThatChangesAPlanChangesTheKey) {
  const CompilerOptions defaults;
  const std::string base = options_key_text(defaults);
  std::set<std::string> fields;
  for (const OptionRow& row : option_table()) {
    fields.insert(row.field);
    const CompilerOptions o = with_row(row);
    // A flag that sets its option's default (kept so that scripts naming it work).
    if (row.show(o) == row.show(defaults)) continue;
    if (row.changes_plan)
      EXPECT_NE(options_key_text(o), base) << "option " << row.field << " (--" << row.flag << ") is not in the key";
    else
      EXPECT_EQ(options_key_text(o), base) << row.field;
  }
  // The options a plan depends on, named here by hand: a row dropped from the table
  // (and so from the key) fails this.
  for (const char* f : {"conv_tile", "winograd_gemm_tile", "phase_convs", "winograd_convs", "winograd_tile",
                        "winograd_min_pixels", "winograd_min_channels", "winograd_min_taps",
                        "winograd_single_min_pixels", "winograd_single_u_at_run", "fuse_token_ops",
                        "level_schedule", "level_schedule_min_saving", "attention_gemms", "fold_softmax",
                        "attention_rows", "kernel_defines", "range_guard_log2", "f16_conv_weights",
                        "write_in_place", "shared_io_slots", "memory_budget_activations_only", "min_bands",
                        "attention_query_chunk", "attention_dsplit", "quantize", "quantize_exclude",
                        "smooth_quant"})
    EXPECT_TRUE(fields.count(f)) << f << " has no row";
}

TEST(Options, KeyOfAProgramFollowsOptionsAndTarget) {
  Graph g;
  g.name = "g";
  WeightStore weights;
  Builder b(g, &weights);
  b.output(b.silu(b.input("x", {1, 4, 4, 4})));
  auto device = find_device();
  ASSERT_TRUE(device) << device.message();
  auto target = make_target(*device);
  ASSERT_TRUE(target) << target.message();
  const std::string base = plan_cache_key(cache_key_parts(g, weights, *target, CompilerOptions{}));
  EXPECT_EQ(plan_cache_key(cache_key_parts(g, weights, *target, CompilerOptions{})), base) << "deterministic";
  CompilerOptions tile;
  tile.codegen.conv_tile = "f16";
  EXPECT_NE(plan_cache_key(cache_key_parts(g, weights, *target, tile)), base);
  auto f32 = make_target(*device, TargetOptions{.precision = Precision::f32});
  ASSERT_TRUE(f32);
  EXPECT_NE(plan_cache_key(cache_key_parts(g, weights, *f32, CompilerOptions{})), base) << "precision";
  auto banded = make_target(*device, TargetOptions{.binding_limit = 1 << 20});
  ASSERT_TRUE(banded);
  EXPECT_NE(plan_cache_key(cache_key_parts(g, weights, *banded, CompilerOptions{})), base) << "binding limit";
  auto portable = make_target(*device, TargetOptions{.portable_kernels = true});
  ASSERT_TRUE(portable);
  // A device without tensor cores is already portable; the key follows the kernel family chosen.
  if (target->tensor_cores()) {
    EXPECT_NE(plan_cache_key(cache_key_parts(g, weights, *portable, CompilerOptions{})), base) << "kernels";
  }
  // How a compile runs and reports is not part of the plan.
  CompilerOptions report;
  report.explain_bands = true;
  report.cache_dir = "/elsewhere";
  EXPECT_EQ(plan_cache_key(cache_key_parts(g, weights, *target, report)), base);
}

TEST(Options, FlagsSetAndCheckTheirValues) {
  CompilerOptions o;
  ASSERT_TRUE(set_options(o, {{"no-winograd", ""}, {"winograd-tile", "2"}, {"level-schedule-saving", "0.5"},
                              {"kernel-define", "attention_coop_dsplit.comp:PF=1"}})
                  .is_ok());
  EXPECT_FALSE(o.winograd_convs);
  EXPECT_EQ(o.winograd_tile, 2);
  EXPECT_EQ(o.level_schedule_min_saving, 0.5);
  EXPECT_EQ(o.codegen.kernel_defines.at("attention_coop_dsplit.comp").at("PF"), "1");

  CompilerOptions bad;
  EXPECT_EQ(set_options(bad, {{"winograd-tile", "3"}}).message(),
            "--winograd-tile '3' must be 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3))");
  EXPECT_EQ(set_options(bad, {{"winograd-min-pixels", "-1"}}).message(),
            "--winograd-min-pixels '-1' must be 0 or more");
  EXPECT_EQ(set_options(bad, {{"winograd-min-channels", "x"}}).message(),
            "--winograd-min-channels 'x' is not an integer");
  EXPECT_EQ(set_options(bad, {{"level-schedule-saving", "0"}}).message(),
            "--level-schedule-saving '0' must be above 0 and at most 1");
  EXPECT_EQ(set_options(bad, {{"kernel-define", "nofile"}}).message(), "--kernel-define 'nofile' is not FILE:NAME=VALUE");
  EXPECT_EQ(set_options(bad, {{"winograd-2d", ""}, {"no-winograd-2d", ""}}).message(),
            "--winograd-2d and --no-winograd-2d contradict each other");
  EXPECT_EQ(set_options(bad, {{"no-winograd", ""}, {"winograd-2d", ""}}).message(),
            "--winograd-2d and --no-winograd contradict each other");
  EXPECT_EQ(set_options(bad, {{"no-such-option", ""}}).message(), "--no-such-option is not a compiler option");
}

TEST(Options, EveryFlagHasHelpAndIsUnique) {
  std::set<std::string> seen;
  for (const OptionFlag& f : option_flags()) {
    EXPECT_TRUE(seen.insert(f.name).second) << "--" << f.name << " twice";
    EXPECT_FALSE(f.help.empty()) << "--" << f.name;
  }
  EXPECT_TRUE(seen.count("no-winograd"));
  EXPECT_TRUE(seen.count("attention-tile"));
  EXPECT_FALSE(seen.count("min_bands")) << "library-only options have no flag";
}

}  // namespace
}  // namespace strata

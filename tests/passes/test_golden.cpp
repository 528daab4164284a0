// Golden tests of the fusion passes: each case in golden/PASS.txt is printed after the
// pass and compared with the expected text exactly, and the interpreter runs the graph
// before and after on seeded inputs (bit for bit where the case says "exact", else
// within 1e-6 relative). On a mismatch the printed graphs are written to
// <build>/golden_actual/PASS.txt for review.
#include "golden.h"

#include "ir/verifier.h"
#include "passes/passes.h"

#include <filesystem>
#include <map>

namespace strata {
namespace {

using PassFn = Status (*)(Graph&, PassContext&);

const std::map<std::string, PassFn>& passes() {
  static const std::map<std::string, PassFn> m = {{"canonicalize", run_canonicalize},
                                                   {"fuse_norm_act", run_fuse_norm_act},
                                                   {"fuse_residual", run_fuse_residual},
                                                   {"fold_upsample", run_fold_upsample}};
  return m;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, PrintsExpectedGraphAndKeepsSemantics) {
  const std::string file = GetParam();
  auto cases = testing::read_golden(std::string(STRATA_TEST_DATA_DIR) + "/passes/golden/" + file + ".txt");
  ASSERT_FALSE(cases.empty());
  std::string actual_file;
  bool mismatch = false;
  for (const auto& c : cases) {
    SCOPED_TRACE(file + ": " + c.title);
    ASSERT_TRUE(passes().count(c.pass)) << "unknown pass '" << c.pass << "'";
    auto parsed = parse_graph(c.input);
    ASSERT_TRUE(parsed) << parsed.message();
    Graph before = *parsed, after = *parsed;
    WeightStore store;
    testing::add_seeded_weights(before, store);
    CompileOptions options;
    PassContext ctx{options, store, {}};
    Status s = passes().at(c.pass)(after, ctx);
    ASSERT_TRUE(s.is_ok()) << s.message();
    Status v = verify(after);
    ASSERT_TRUE(v.is_ok()) << v.message() << "\n" << print_graph(after);
    const std::string got = print_graph(after);
    EXPECT_EQ(got, c.expected);
    mismatch |= got != c.expected;
    actual_file += "// ==== " + c.title + "\n" + c.input + "// ---- after " + c.pass + (c.exact ? " exact" : "") +
                   "\n" + got + "\n";
    for (uint32_t seed : {1u, 2u}) {
      auto inputs = testing::seeded_inputs(before, seed);
      auto want = interpret(before, store, inputs);
      ASSERT_TRUE(want) << want.message();
      auto have = interpret(after, store, inputs);
      ASSERT_TRUE(have) << have.message();
      testing::expect_same_outputs(*want, *have, c.exact ? 0.0 : 1e-6);
    }
  }
  if (mismatch) {
    const auto dir = std::filesystem::path(STRATA_BINARY_DIR) / "golden_actual";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / (file + ".txt")) << actual_file;
  }
}

INSTANTIATE_TEST_SUITE_P(Passes, Golden,
                         ::testing::Values("canonicalize", "fuse_norm_act", "fuse_residual", "fold_upsample"));

}  // namespace
}  // namespace strata

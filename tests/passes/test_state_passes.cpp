// State bindings (ir/graph.h StateBinding) through the whole pass pipeline: the
// passes rewrite graphs in place and keep graph inputs and outputs at their positions,
// so a plan's state reads and writes still name the same inputs and outputs after
// every pass, the written-back value keeps the read's shape and dtype, and the plan,
// run as a program for several steps, computes what it did before the passes.
#include "golden.h"

#include "ir/program_interpreter.h"
#include "passes/passes.h"

namespace strata {
namespace {

// One step of a recurrence: h' = silu(group_norm(conv(x) + h)), returned through a
// conv and written back to state "h"; the state input sits after x.
Graph step_graph(WeightStore& store) {
  auto g = parse_graph(R"(
graph @step(%x: f32[1,4,3,3], %h: f32[1,4,3,3] state "h") {
  %a.weight: f32[4,4,3,3] = weight "a.weight"
  %a.bias: f32[4] = weight "a.bias"
  %a: f32[1,4,3,3] = conv2d "a" (%x, %a.weight, %a.bias) {pad = [1, 1], stride = [1, 1]}
  %r: f32[1,4,3,3] = add "r" (%a, %h)
  %n.weight: f32[4] = weight "n.weight"
  %n.bias: f32[4] = weight "n.bias"
  %n: f32[1,4,3,3] = group_norm "n" (%r, %n.weight, %n.bias) {eps = 1e-06, groups = 2}
  %s: f32[1,4,3,3] = silu "s" (%n)
  %b.weight: f32[2,4,3,3] = weight "b.weight"
  %b: f32[1,2,3,3] = conv2d "b" (%s, %b.weight) {pad = [1, 1], stride = [1, 1]}
  return %b, %s state "h"
})");
  EXPECT_TRUE(g) << g.message();
  testing::add_seeded_weights(*g, store);
  return *g;
}

// Three steps of the plan as a program; the returned outputs of every step.
std::vector<Tensor> run_steps(const Graph& plan, const WeightStore& store) {
  ProgramGraph p;
  p.plans.push_back(plan);
  auto pi = ProgramInterpreter::create(std::move(p), store);
  EXPECT_TRUE(pi.has_value()) << pi.message();
  if (!pi) return {};
  std::vector<Tensor> outs;
  for (uint32_t step = 0; step < 3; ++step) {
    Graph x_only;
    x_only.add_input("x", plan.value(plan.inputs()[0]).type);
    auto out = pi->run("step", testing::seeded_inputs(x_only, 10 + step));
    EXPECT_TRUE(out.has_value()) << out.message();
    if (!out || out->size() != 1) return {};
    outs.push_back(std::move((*out)[0]));
  }
  return outs;
}

void expect_bindings_kept(Precision precision, double tol) {
  WeightStore store;
  Graph g = step_graph(store);
  const Graph before = g;
  CompileOptions options;
  options.precision = precision;
  PassContext ctx{options, store, {}};
  std::vector<std::string> passes_seen;
  options.on_pass = [&](const std::string& name, const Graph& after) {
    passes_seen.push_back(name);
    EXPECT_EQ(after.state_reads(), before.state_reads()) << "after " << name;
    EXPECT_EQ(after.state_writes(), before.state_writes()) << "after " << name;
    EXPECT_EQ(after.value(after.inputs()[1]).name, "h") << "after " << name;
  };
  Status s = run_pipeline(g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(passes_seen, pass_names());
  const TensorType& read = g.value(g.inputs()[1]).type;
  const TensorType& written = g.value(g.outputs()[1]).type;
  EXPECT_EQ(read.shape, written.shape);
  EXPECT_EQ(read.dtype, written.dtype);
  // Stored as the plan stores activations, so every plan binding the state agrees:
  // rank 4 is NHWC, and an f16 plan stores it f16 (assign_layout, lower_precision).
  EXPECT_EQ(read.layout, written.layout);
  EXPECT_EQ(read.layout.kind, LayoutKind::nhwc);
  EXPECT_EQ(read.dtype, precision == Precision::f16 ? DType::f16 : DType::f32);
  const std::vector<Tensor> want = run_steps(before, store);
  ASSERT_EQ(want.size(), 3u);
  testing::expect_same_outputs(want, run_steps(g, store), tol);
  if (precision == Precision::f16) {  // the passes did lower the plan
    bool any_f16 = false;
    for (const Value& v : g.values()) any_f16 = any_f16 || v.type.dtype == DType::f16;
    EXPECT_TRUE(any_f16) << print_graph(g);
  }
  if (::testing::Test::HasFailure()) ADD_FAILURE() << print_graph(g);
}

TEST(StatePasses, BindingsSurviveThePipelineF32) { expect_bindings_kept(Precision::f32, 1e-5); }

// f16 storage: the state is stored f16 like the activations, so each step differs by
// f16 rounding, the bound lower_precision's own tests use.
TEST(StatePasses, BindingsSurviveThePipelineF16) { expect_bindings_kept(Precision::f16, 1e-2); }

}  // namespace
}  // namespace strata

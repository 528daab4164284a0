// passes/hoist_invariant.h on a small model in the seed style: a caption whose rows
// become keys and values the latent tokens attend to (the per-prompt prefix), a
// modulation MLP of t (per step, shared by CFG branches), and the latent's own path.
// The split must compute the graph's values bit for bit, on the interpreter and on
// Vulkan, and put each node where its inputs allow.
#include "compile/compile.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/program_interpreter.h"
#include "passes/hoist_invariant.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>

namespace strata {
namespace {

constexpr int64_t kD = 16, kCap = 6, kTokens = 8;

struct Model {
  WeightStore weights;
  Graph graph;
};

std::vector<float> random_values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Model build_model() {
  Model m;
  uint32_t seed = 7;
  for (const char* w : {"cap_embedder", "cap_k", "cap_v", "t_mlp.0", "t_mlp.2", "to_q", "to_k", "to_v", "to_out"})
    EXPECT_TRUE(m.weights.add_owned(std::string(w) + ".weight", {kD, kD}, random_values(kD * kD, seed++, 0.25f)));
  EXPECT_TRUE(m.weights.add_owned("pos_table", {kTokens, kD}, random_values(kTokens * kD, seed++, 1.0f)));
  Builder b(m.graph, &m.weights);
  const ValueId cap = b.input("cap", {kCap, kD});
  const ValueId t = b.input("t", {1, kD});
  const ValueId x = b.input("x", {kTokens, kD});
  // Per prompt: the caption's keys and values.
  const ValueId c = b.silu(b.linear(cap, b.weight("cap_embedder.weight")));
  const ValueId kc = b.linear(c, b.weight("cap_k.weight"));
  const ValueId vc = b.linear(c, b.weight("cap_v.weight"));
  // Per step, t only: the modulation.
  const ValueId mod = b.linear(b.silu(b.linear(t, b.weight("t_mlp.0.weight"))), b.weight("t_mlp.2.weight"));
  // Constants only: a position table scaled (compile-time work).
  const ValueId pos = b.scale(b.weight("pos_table"), 0.5);
  // Per step: the latent tokens attend to themselves and the caption.
  const ValueId h = b.mul(b.add(x, pos), mod);
  const ValueId q = b.linear(h, b.weight("to_q.weight"));
  const ValueId k = b.concat({kc, b.linear(h, b.weight("to_k.weight"))}, 0);
  const ValueId v = b.concat({vc, b.linear(h, b.weight("to_v.weight"))}, 0);
  const ValueId a = b.attention(q, k, v, 0.25);
  b.output(b.add(x, b.linear(a, b.weight("to_out.weight"))));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return m;
}

HoistOptions options() {
  HoistOptions o;
  o.input_class = {{"cap", "prompt"}, {"t", "t"}, {"x", "latent"}};
  o.plans = {{"per_prompt", {"prompt"}}, {"per_t", {"t"}}, {"per_step", {"prompt", "t", "latent"}}};
  return o;
}

Tensor random_tensor(Shape shape, uint32_t seed) {
  Tensor t(shape);
  t.data = random_values(t.data.size(), seed, 1.0f);
  return t;
}

void expect_same_bytes(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape, b.shape);
  EXPECT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)), 0);
}

const Graph* plan(const ProgramGraph& p, const std::string& name) {
  const Graph* g = p.find(name);
  EXPECT_NE(g, nullptr) << name;
  return g;
}

bool has_node(const Graph* g, const std::string& name) {
  for (const Node& n : g->nodes())
    if (n.name == name) return true;
  return false;
}

TEST(HoistInvariant, NodesGoWhereTheirInputsAllow) {
  Model m = build_model();
  HoistReport report;
  auto program = hoist_invariant(m.graph, options(), &report);
  ASSERT_TRUE(program) << program.message();
  ASSERT_EQ(program->plans.size(), 3u);
  const Graph *prompt = plan(*program, "per_prompt"), *per_t = plan(*program, "per_t"),
              *step = plan(*program, "per_step");
  ASSERT_TRUE(prompt && per_t && step);
  EXPECT_TRUE(has_node(prompt, "cap_embedder"));
  EXPECT_TRUE(has_node(prompt, "cap_k"));
  EXPECT_TRUE(has_node(prompt, "cap_v"));
  EXPECT_TRUE(has_node(per_t, "t_mlp.0"));
  EXPECT_TRUE(has_node(per_t, "t_mlp.2"));
  EXPECT_TRUE(has_node(step, "to_q"));
  EXPECT_FALSE(has_node(step, "cap_k"));
  EXPECT_FALSE(has_node(step, "t_mlp.2"));
  // The constants-only node runs once, in the first plan.
  size_t scale_nodes = 0;
  for (const Node& n : prompt->nodes()) scale_nodes += n.op == Op::scale;
  EXPECT_EQ(scale_nodes, 1u);
  // Inputs: each plan takes only the inputs it uses.
  EXPECT_EQ(prompt->inputs().size() - prompt->state_reads().size(), 1u);
  EXPECT_EQ(step->inputs().size() - step->state_reads().size(), 1u);
  // States: the caption's keys and values, the scaled table (per_prompt -> per_step)
  // and the modulation (per_t -> per_step); nothing else crosses.
  ASSERT_EQ(report.states.size(), 4u);
  uint64_t bytes = 0;
  for (const auto& s : report.states) {
    bytes += s.bytes;
    ASSERT_EQ(s.to_plans.size(), 1u);
    EXPECT_EQ(s.to_plans[0], "per_step") << s.state;
    EXPECT_EQ(s.state.rfind("hoisted.", 0), 0u) << s.state;
  }
  EXPECT_EQ(bytes, uint64_t(4) * (2 * kCap * kD + kTokens * kD + kD));
  EXPECT_EQ(report.state_bytes, bytes);
  EXPECT_GT(report.plan_flops.at("per_prompt"), 0.0);
  const std::string text = explain_hoist(report);
  EXPECT_NE(text.find("cap_k"), std::string::npos) << text;
  EXPECT_NE(text.find("hoisted."), std::string::npos) << text;
  EXPECT_NE(text.find("(constants)"), std::string::npos) << text;
}

TEST(HoistInvariant, ThePlansComputeTheGraphBitForBitOnTheInterpreter) {
  Model m = build_model();
  auto program = hoist_invariant(m.graph, options());
  ASSERT_TRUE(program) << program.message();
  auto pi = ProgramInterpreter::create(*program, m.weights);
  ASSERT_TRUE(pi) << pi.message();
  const Tensor cap = random_tensor({kCap, kD}, 100);
  ASSERT_TRUE(pi->run("per_prompt", {cap}));
  for (uint32_t step = 0; step < 3; ++step) {  // one prompt, several steps
    const Tensor t = random_tensor({1, kD}, 200 + step), x = random_tensor({kTokens, kD}, 300 + step);
    ASSERT_TRUE(pi->run("per_t", {t}));
    auto got = pi->run("per_step", {x});
    ASSERT_TRUE(got) << got.message();
    auto want = interpret(m.graph, m.weights, {cap, t, x});
    ASSERT_TRUE(want) << want.message();
    ASSERT_EQ(got->size(), 1u);
    expect_same_bytes((*got)[0], (*want)[0]);
  }
}

TEST(HoistInvariant, ThePlansComputeTheGraphBitForBitOnVulkan) {
  Model m = build_model();
  auto device = find_device();
  ASSERT_TRUE(device) << device.message();
  auto target = make_target(*device, {.precision = Precision::f32});
  ASSERT_TRUE(target) << target.message();
  std::ostringstream log;
  auto whole = compile(m.graph, m.weights, *target, {}, log);
  ASSERT_TRUE(whole) << whole.message() << log.str();
  auto whole_loaded = LoadedProgram::load(std::move(*whole), {}, log);
  ASSERT_TRUE(whole_loaded) << whole_loaded.message();
  auto split = hoist_invariant(m.graph, options());
  ASSERT_TRUE(split) << split.message();
  auto program = compile(*split, m.weights, *target, {}, log);
  ASSERT_TRUE(program) << program.message() << log.str();
  auto loaded = LoadedProgram::load(std::move(*program), {}, log);
  ASSERT_TRUE(loaded) << loaded.message();

  const Tensor cap = random_tensor({kCap, kD}, 100);
  ASSERT_TRUE((*loaded)->run("per_prompt", {cap}));
  for (uint32_t step = 0; step < 2; ++step) {
    const Tensor t = random_tensor({1, kD}, 200 + step), x = random_tensor({kTokens, kD}, 300 + step);
    ASSERT_TRUE((*loaded)->run("per_t", {t}));
    auto got = (*loaded)->run("per_step", {x});
    ASSERT_TRUE(got) << got.message();
    auto want = (*whole_loaded)->run({cap, t, x});
    ASSERT_TRUE(want) << want.message();
    ASSERT_EQ(got->size(), 1u);
    expect_same_bytes((*got)[0], (*want)[0]);
  }
}

TEST(HoistInvariant, ErrorsNameWhatIsMissing) {
  Model m = build_model();
  HoistOptions no_class = options();
  no_class.input_class.erase("t");
  auto a = hoist_invariant(m.graph, no_class);
  ASSERT_FALSE(a);
  EXPECT_NE(a.message().find("%t has no class"), std::string::npos) << a.message();
  HoistOptions uncovered = options();
  uncovered.plans.pop_back();  // nothing covers prompt + t + latent
  auto b = hoist_invariant(m.graph, uncovered);
  ASSERT_FALSE(b);
  EXPECT_NE(b.message().find("which no plan covers"), std::string::npos) << b.message();
}

}  // namespace
}  // namespace strata

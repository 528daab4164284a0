// The Graphviz dump (ir/dot.h): exact text for a tiny graph, structural checks
// (every edge joins declared DOT nodes) for larger ones, and, when the `dot` tool is
// installed, that its output renders.
#include "ir/builder.h"
#include "ir/dot.h"
#include "ir/printer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace strata {
namespace {

TensorType f32(Shape s) { return TensorType{std::move(s), DType::f32, {}}; }

Graph tiny() {
  Graph g;
  g.name = "tiny";
  Builder b(g, nullptr);
  ValueId x = b.input("x", {1, 4, 8, 8});
  ValueId w = b.constant("conv.weight", f32({4, 4, 3, 3}));
  ValueId bias = b.constant("conv.bias", f32({4}));
  ValueId h = b.conv2d(x, w, bias, {.pad = 1});
  b.output(b.silu(h));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

// A graph with several readers per value, a constant that is also a graph output, a
// constant named after its reader and one that is not, and a multi-use input.
// Values: x #0, shift #1, proj.weight #2, proj #3, attention #4, add #5, table #6,
// mul #7, concat #8. Nodes: linear n0, attention n1, add n2, mul n3, concat n4.
Graph wider() {
  Graph g;
  g.name = "wider";
  Builder b(g, nullptr);
  ValueId x = b.input("x", {2, 6, 8});
  ValueId shift = b.constant("shift", f32({8}));
  ValueId w = b.constant("proj.weight", f32({8, 8}));
  ValueId q = b.linear(x, w);
  ValueId a = b.attention(q, x, x, 0.35);
  ValueId s = b.add(a, shift);
  ValueId table = b.constant("table", f32({8}));
  ValueId m = b.mul(s, table);
  b.output(b.concat({m, x, a}, 2));
  b.output(shift);
  b.output(x);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

struct DotShape {
  std::set<std::string> declared;
  std::vector<std::pair<std::string, std::string>> edges;
};

// Reads node declarations and edges; fails the test on any other statement.
DotShape dot_shape(const std::string& dot) {
  DotShape out;
  std::istringstream in(dot);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("digraph \"", 0), 0u) << line;
  std::regex decl(R"(^  ([a-z][0-9]+) \[.*\];$)");
  std::regex edge(R"(^  ([a-z][0-9]+) -> ([a-z][0-9]+) \[label="[^"]*"(, style=dashed)?\];$)");
  std::regex attrs(R"(^  (graph|node|edge) \[.*\];$)");
  bool closed = false;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line == "}") {
      closed = true;
    } else if (std::regex_match(line, m, edge)) {
      out.edges.emplace_back(m[1], m[2]);
    } else if (std::regex_match(line, m, decl)) {
      EXPECT_TRUE(out.declared.insert(m[1]).second) << "declared twice: " << line;
    } else {
      EXPECT_TRUE(std::regex_match(line, attrs)) << "unexpected line: " << line;
    }
  }
  EXPECT_TRUE(closed);
  for (const auto& [from, to] : out.edges) {
    EXPECT_TRUE(out.declared.count(from)) << "edge from undeclared " << from;
    EXPECT_TRUE(out.declared.count(to)) << "edge to undeclared " << to;
  }
  return out;
}

TEST(DotTest, TinyGraphExactText) {
  EXPECT_EQ(to_dot(tiny()),
            "digraph \"tiny\" {\n"
            "  graph [rankdir=TB, fontname=\"Helvetica\"];\n"
            "  node [fontname=\"Helvetica\", fontsize=10];\n"
            "  edge [fontname=\"Helvetica\", fontsize=9];\n"
            "  i0 [shape=ellipse, style=filled, fillcolor=\"#cfe2ff\", label=\"input %x\\nf32[1,4,8,8]\"];\n"
            "  n0 [shape=box, style=\"rounded,filled\", fillcolor=\"#f6f6f6\", "
            "label=\"conv2d\\nconv\\nf32[1,4,8,8]\\n+ weight f32[4,4,3,3]\\n+ bias f32[4]\"];\n"
            "  i0 -> n0 [label=\"[1,4,8,8]\"];\n"
            "  n1 [shape=box, style=\"rounded,filled\", fillcolor=\"#f6f6f6\", label=\"silu\\nsilu\\nf32[1,4,8,8]\"];\n"
            "  n0 -> n1 [label=\"[1,4,8,8]\"];\n"
            "  o0 [shape=ellipse, style=filled, fillcolor=\"#d1f0d1\", label=\"output %silu\\nf32[1,4,8,8]\"];\n"
            "  n1 -> o0 [label=\"[1,4,8,8]\"];\n"
            "}\n");
}

TEST(DotTest, FoldedConstantsStructure) {
  Graph g = wider();
  std::string dot = to_dot(g);
  DotShape s = dot_shape(dot);
  // One DOT node per IR node, input and output; only the constant that is a graph
  // output (shift) gets its own node, and its readers get edges from it.
  EXPECT_EQ(s.declared, (std::set<std::string>{"i0", "c1", "n0", "n1", "n2", "n3", "n4", "o0", "o1", "o2"}));
  // linear: x; attention: q, x, x; add: a, shift; mul: s; concat: m, x, a; 3 outputs.
  EXPECT_EQ(s.edges.size(), 1u + 3 + 2 + 1 + 3 + 3);
  EXPECT_NE(dot.find("label=\"linear\\nproj\\nf32[2,6,8]\\n+ weight f32[8,8]\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"mul\\nmul\\nf32[2,6,8]\\n+ table f32[8]\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"add\\nadd\\nf32[2,6,8]\"]"), std::string::npos) << dot;
  EXPECT_NE(dot.find("c1 [shape=note"), std::string::npos) << dot;
  EXPECT_NE(dot.find("c1 -> n2 [label=\"[8]\", style=dashed];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("c1 -> o1 [label=\"[8]\", style=dashed];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("i0 -> o2 [label=\"[2,6,8]\"];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("n4 -> o0 [label=\"[2,6,24]\"];"), std::string::npos) << dot;
}

TEST(DotTest, UnfoldedConstantsGetNodesAndDashedEdges) {
  Graph g = wider();
  std::string dot = to_dot(g, {.fold_constants = false});
  DotShape s = dot_shape(dot);
  EXPECT_EQ(s.declared, (std::set<std::string>{"i0", "c1", "c2", "c6", "n0", "n1", "n2", "n3", "n4", "o0", "o1",
                                               "o2"}));
  EXPECT_EQ(s.edges.size(), 1u + 3 + 2 + 1 + 3 + 3 + 2);  // + proj.weight, table
  EXPECT_NE(dot.find("c2 [shape=note, style=filled, fillcolor=\"#e8e8e8\", label=\"weight %proj.weight\\nf32[8,8]\"];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("c2 -> n0 [label=\"[8,8]\", style=dashed];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("c6 -> n3 [label=\"[8]\", style=dashed];"), std::string::npos) << dot;
  EXPECT_EQ(dot.find("+ "), std::string::npos) << dot;
}

TEST(DotTest, EscapesNamesAndShowsUndefinedValues) {
  Graph g;
  g.name = "a \"quoted\" graph";
  ValueId x = g.add_input("x\\y", f32({2}));
  ValueId ghost = g.add_value("ghost", f32({2}));
  ValueId y = g.add_value("y", f32({2}));
  g.add_node(Node{Op::add, "line\nbreak", {}, {x, ghost}, {y}});
  g.add_node(Node{Op::silu, "bad", {}, {99}, {g.add_value("z", f32({2}))}});  // out-of-range operand skipped
  g.mark_output(y);
  std::string dot = to_dot(g);
  DotShape s = dot_shape(dot);
  EXPECT_EQ(dot.rfind("digraph \"a \\\"quoted\\\" graph\" {\n", 0), 0u) << dot;
  EXPECT_NE(dot.find("label=\"input %\\\"x\\\\\\\\y\\\"\\nf32[2]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"add\\nline\\nbreak\\nf32[2]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("u1 [shape=octagon, style=filled, fillcolor=\"#f8c8c8\", label=\"undefined %ghost\\nf32[2]\"];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("u1 -> n0"), std::string::npos) << dot;
  EXPECT_EQ(s.edges.size(), 3u);  // x, ghost -> add; add -> output
}

// Renders with Graphviz when it is installed; the structure tests above do not need it.
TEST(DotTest, RendersWithGraphvizWhenPresent) {
  if (std::system("command -v dot > /dev/null 2>&1") != 0) GTEST_SKIP() << "graphviz 'dot' not installed";
  Graph g = wider();
  g.name = "render \"me\"";
  for (bool fold : {true, false}) {
    std::string base = ::testing::TempDir() + "strata_dot_test_" + (fold ? "folded" : "unfolded");
    {
      std::ofstream f(base + ".dot");
      f << to_dot(g, {.fold_constants = fold});
    }
    std::string cmd = "dot -Tsvg '" + base + ".dot' -o '" + base + ".svg' 2> '" + base + ".err'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream svg(base + ".svg");
    std::stringstream content;
    content << svg.rdbuf();
    EXPECT_NE(content.str().find("<svg"), std::string::npos);
    EXPECT_NE(content.str().find("proj"), std::string::npos);
    std::ifstream err(base + ".err");
    std::stringstream warnings;
    warnings << err.rdbuf();
    EXPECT_EQ(warnings.str(), "") << "graphviz warnings";
  }
}

}  // namespace
}  // namespace strata

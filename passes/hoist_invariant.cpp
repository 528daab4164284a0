// See hoist_invariant.h.
#include "passes/hoist_invariant.h"

#include "ir/cost.h"
#include "ir/verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace strata {
namespace {

using ClassSet = uint64_t;  // bit i: the i-th class in use

std::vector<std::string> class_names(ClassSet s, const std::vector<std::string>& classes) {
  std::vector<std::string> out;
  for (size_t i = 0; i < classes.size(); ++i)
    if (s >> i & 1u) out.push_back(classes[i]);
  return out;
}

}  // namespace

Expected<ProgramGraph> hoist_invariant(const Graph& g, const HoistOptions& options, HoistReport* report) {
  if (g.has_state()) return error("hoist_invariant: graph '{}' already reads or writes state", g.name);
  if (options.plans.empty()) return error("hoist_invariant: no plans given");
  STRATA_RETURN_IF_ERROR(verify(g).with_context("hoist_invariant: the graph does not verify"));

  // The classes, in first-seen order, as bits.
  std::vector<std::string> classes;
  auto class_bit = [&](const std::string& c) -> Expected<ClassSet> {
    auto it = std::find(classes.begin(), classes.end(), c);
    if (it == classes.end()) {
      if (classes.size() == 64) return error("hoist_invariant: more than 64 input classes");
      classes.push_back(c);
      it = classes.end() - 1;
    }
    return ClassSet{1} << (it - classes.begin());
  };
  const std::vector<Value>& values = g.values();
  std::vector<ClassSet> deps(values.size(), 0);
  for (ValueId in : g.inputs()) {
    const std::string& name = g.value(in).name;
    auto it = options.input_class.find(name);
    if (it == options.input_class.end())
      return error("hoist_invariant: graph input %{} has no class (give it one in HoistOptions::input_class)", name);
    STRATA_ASSIGN_OR_RETURN(deps[static_cast<size_t>(in)], class_bit(it->second));
  }
  std::vector<ClassSet> plan_covers;
  for (const HoistPlan& p : options.plans) {
    ClassSet s = 0;
    for (const std::string& c : p.classes) {
      STRATA_ASSIGN_OR_RETURN(ClassSet b, class_bit(c));
      s |= b;
    }
    plan_covers.push_back(s);
  }

  // Each node's dependencies and plan.
  const std::vector<Node>& nodes = g.nodes();
  std::vector<size_t> node_plan(nodes.size(), 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    ClassSet d = 0;
    for (ValueId v : nodes[n].inputs)
      if (v != kNoValue) d |= deps[static_cast<size_t>(v)];
    for (ValueId v : nodes[n].outputs) deps[static_cast<size_t>(v)] = d;
    size_t p = 0;
    while (p < plan_covers.size() && (d & ~plan_covers[p]) != 0) ++p;
    if (p == plan_covers.size()) {
      const std::vector<std::string> names = class_names(d, classes);
      return error("hoist_invariant: node '{}' depends on {}, which no plan covers (the last plan should cover "
                   "every class)",
                   nodes[n].name, fmt::join(names, ", "));
    }
    node_plan[n] = p;
  }
  std::vector<int64_t> producer = g.producers();
  auto plan_of_value = [&](ValueId v) -> int64_t {
    const int64_t n = producer[static_cast<size_t>(v)];
    return n < 0 ? -1 : static_cast<int64_t>(node_plan[static_cast<size_t>(n)]);
  };

  // Values that cross plans, and which plans read them.
  std::map<ValueId, std::set<size_t>> crossing;
  for (size_t n = 0; n < nodes.size(); ++n)
    for (ValueId v : nodes[n].inputs) {
      if (v == kNoValue) continue;
      const int64_t from = plan_of_value(v);
      if (from >= 0 && static_cast<size_t>(from) != node_plan[n]) crossing[v].insert(node_plan[n]);
    }
  std::set<ValueId> graph_outputs(g.outputs().begin(), g.outputs().end());

  ProgramGraph program;
  program.name = g.name;
  for (size_t p = 0; p < options.plans.size(); ++p) {
    Graph out;
    out.name = options.plans[p].name;
    std::map<ValueId, ValueId> map;
    // Graph inputs this plan's nodes use, in the graph's input order.
    std::set<ValueId> used;
    bool any = false;
    for (size_t n = 0; n < nodes.size(); ++n)
      if (node_plan[n] == p) {
        any = true;
        for (ValueId v : nodes[n].inputs)
          if (v != kNoValue) used.insert(v);
      }
    if (!any) continue;
    for (ValueId in : g.inputs())
      if (used.count(in)) map[in] = out.add_input(g.value(in).name, g.value(in).type);
    auto operand = [&](ValueId v) -> ValueId {
      if (v == kNoValue) return kNoValue;
      if (auto it = map.find(v); it != map.end()) return it->second;
      const Value& val = g.value(v);
      ValueId nv = kNoValue;
      if (val.kind == ValueKind::constant)
        nv = out.add_constant(val.name, val.type, val.weight);
      else  // computed by an earlier plan
        nv = out.add_state_input(val.name, val.type, options.state_prefix + val.name);
      map[v] = nv;
      return nv;
    };
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (node_plan[n] != p) continue;
      Node copy = nodes[n];
      for (ValueId& v : copy.inputs) v = operand(v);
      for (ValueId& v : copy.outputs) {
        const Value& val = g.value(v);
        const ValueId nv = out.add_value(val.name, val.type);
        map[v] = nv;
        v = nv;
      }
      out.add_node(std::move(copy));
    }
    for (ValueId v : g.outputs())
      if (plan_of_value(v) == static_cast<int64_t>(p)) out.mark_output(map.at(v));
    for (const auto& [v, readers] : crossing)
      if (plan_of_value(v) == static_cast<int64_t>(p))
        out.mark_state_output(map.at(v), options.state_prefix + g.value(v).name);
    program.plans.push_back(std::move(out));
  }
  for (ValueId v : g.outputs())
    if (plan_of_value(v) < 0)
      return error("hoist_invariant: graph output %{} is an input or a constant, which no plan computes",
                   g.value(v).name);
  STRATA_RETURN_IF_ERROR(verify_program(program).with_context("hoist_invariant: internal error"));

  if (report) {
    *report = HoistReport{};
    for (size_t n = 0; n < nodes.size(); ++n) {
      HoistReport::NodeEntry e;
      e.node = nodes[n].name;
      e.op = std::string(op_name(nodes[n].op));
      e.plan = options.plans[node_plan[n]].name;
      ClassSet d = 0;
      for (ValueId v : nodes[n].outputs) d |= deps[static_cast<size_t>(v)];
      e.depends_on = class_names(d, classes);
      e.flops = node_flops(g, nodes[n]);
      for (ValueId v : nodes[n].outputs) e.output_bytes += g.value(v).type.bytes();
      report->plan_flops[e.plan] += e.flops;
      report->nodes.push_back(std::move(e));
    }
    for (const auto& [v, readers] : crossing) {
      HoistReport::StateEntry s;
      s.state = options.state_prefix + g.value(v).name;
      s.from_plan = options.plans[static_cast<size_t>(plan_of_value(v))].name;
      for (size_t r : readers) s.to_plans.push_back(options.plans[r].name);
      s.bytes = g.value(v).type.bytes();
      report->state_bytes += s.bytes;
      report->states.push_back(std::move(s));
    }
  }
  return program;
}

std::string explain_hoist(const HoistReport& r) {
  std::string out = "hoisting: FLOPs per run of each plan\n";
  for (const auto& [plan, flops] : r.plan_flops) out += fmt::format("  {:<16} {:.4g} GFLOP\n", plan, flops * 1e-9);
  out += "nodes (plan, op, GFLOP, output bytes, depends on):\n";
  for (const HoistReport::NodeEntry& e : r.nodes)
    out += fmt::format("  {:<40} {:<12} {:<18} {:>10.4g} {:>12}  {}\n", e.node, e.plan, e.op, e.flops * 1e-9,
                       e.output_bytes, e.depends_on.empty() ? std::string("(constants)") : fmt::format("{}", fmt::join(e.depends_on, ", ")));
  out += fmt::format("states that cross plans: {} ({} bytes)\n", r.states.size(), r.state_bytes);
  for (const HoistReport::StateEntry& s : r.states)
    out += fmt::format("  {:<40} {:>12} bytes  {} -> {}\n", s.state, s.bytes, s.from_plan, fmt::join(s.to_plans, ", "));
  return out;
}

}  // namespace strata

// hoist_invariant: splits one graph into the plans of a program by how often its
// inputs change, so work that does not depend on the step runs once (DESIGN.md,
// "Programs").
//
// Rewrites: a Graph (no state of its own) into a ProgramGraph. Every graph input has a
// class (HoistOptions::input_class, e.g. "prompt", "t", "latent"); a value depends on
// the classes of the inputs it is computed from (constants depend on none). The plans
// are listed in run order, each with the classes it may depend on; a node goes to the
// first plan whose classes cover its dependencies, so a consumer never sits in an
// earlier plan than its producer. A value computed in one plan and used in a later
// one becomes state `state_prefix + value name`: the producer writes it, each
// consumer plan reads it. A graph input becomes an input of every plan that uses it
// directly; a graph output stays an output of the plan that computes it. Plans left
// without nodes are dropped.
//
// Preserves: every node, its attributes, operands and value names, in the original
// order within each plan, so running the plans in order computes the same values as
// the graph, bit for bit (the interpreter and each kernel see the same operations on
// the same bytes); the tests check this on the interpreter and on Vulkan.
//
// Requires: a verified graph without state bindings, a class for every input, and a
// last plan that covers every class in use.
//
// Typical use (a diffusion transformer): plans "per_prompt" {prompt}, "per_t" {t},
// "per_step" {prompt, t, latent}: the caption refiner runs once per prompt, the
// modulation vectors once per step (shared by both CFG branches), the rest per branch.
#pragma once

#include "ir/graph.h"
#include "ir/program.h"
#include "ir/status.h"

#include <map>
#include <string>
#include <vector>

namespace strata {

struct HoistPlan {
  std::string name;
  std::vector<std::string> classes;  // input classes its nodes may depend on
};

struct HoistOptions {
  std::map<std::string, std::string> input_class;  // graph input name -> class
  std::vector<HoistPlan> plans;                     // in run order
  std::string state_prefix = "hoisted.";
};

// What went where: one entry per node, one per state that crosses plans.
struct HoistReport {
  struct NodeEntry {
    std::string node, op, plan;
    std::vector<std::string> depends_on;  // input classes
    double flops = 0;
    uint64_t output_bytes = 0;
  };
  struct StateEntry {
    std::string state, from_plan;
    std::vector<std::string> to_plans;
    uint64_t bytes = 0;
  };
  std::vector<NodeEntry> nodes;
  std::vector<StateEntry> states;
  std::map<std::string, double> plan_flops;  // plan -> FLOPs of one run
  uint64_t state_bytes = 0;                  // all hoisted states
};

Expected<ProgramGraph> hoist_invariant(const Graph& graph, const HoistOptions& options,
                                       HoistReport* report = nullptr);

// The report as text: per plan its FLOPs, then node by node (plan, op, FLOPs, output
// bytes, what it depends on), then the states with their bytes. Ends with a newline.
std::string explain_hoist(const HoistReport& report);

}  // namespace strata

// A program before compilation: named plans that share state (DESIGN.md, "Programs").
//
// Each plan is a Graph (its name is Graph::name). A plan's state inputs read a named
// state at the start of a run and its state outputs write one back at the end
// (ir/graph.h, StateBinding); states live between runs and are shared by name across
// plans, so a per-prompt plan can write what a per-step plan reads. The text form is
// `program @NAME { graph ... graph ... }` (ir/printer.h print_program, ir/parser.h
// parse_program); ir/program_interpreter.h runs one.
#pragma once

#include "ir/graph.h"
#include "ir/status.h"

#include <map>
#include <string>
#include <vector>

namespace strata {

struct ProgramGraph {
  std::string name = "program";
  std::vector<Graph> plans;
  const Graph* find(const std::string& plan) const;  // nullptr if absent
};

// name -> type of every state some plan reads or writes. Error when two bindings of a
// state disagree in shape or dtype (naming both plans and values); layouts are not
// compared (passes choose them).
Expected<std::map<std::string, TensorType>> program_states(const ProgramGraph& p);

// Each plan verifies (ir/verifier.h); plan names are unique and non-empty; every state
// has one type across all plans (program_states); every state some plan reads is
// written by some plan ("state 'x' is read by plan 'p' but no plan writes it"). A state
// that is written but never read is allowed (the caller reads it).
Status verify_program(const ProgramGraph& p);

}  // namespace strata

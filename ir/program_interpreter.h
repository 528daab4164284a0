// Runs a program (ir/program.h) on the CPU, plan by plan, keeping its states between
// runs as the runtime will: the oracle for a compiled Program.
//
//   auto pi = ProgramInterpreter::create(program, weights);
//   pi->run("prepare", {prompt});          // writes state "ctx"
//   for (...) pi->run("step", {latent});   // reads "ctx"
//
// A run of a plan interprets its graph (ir/interpreter.h) with its state inputs taken
// from the current states and its other inputs from the caller; afterwards its state
// outputs replace those states. All reads of a run see the states from before it, so
// a plan that reads and writes "sum" reads the old sum and leaves the new one.
#pragma once

#include "ir/interpreter.h"
#include "ir/program.h"
#include "ir/tensor.h"
#include "ir/weight_store.h"

#include <map>
#include <string>
#include <vector>

namespace strata {

class ProgramInterpreter {
public:
  // Verifies the program (verify_program); every state starts as zeros of its type.
  // `weights` must outlive the interpreter (it keeps a pointer).
  static Expected<ProgramInterpreter> create(ProgramGraph program, const WeightStore& weights,
                                             InterpretOptions options = {});

  // Runs plan `plan`: `inputs` are its non-state inputs, in inputs() order; returns its
  // non-state outputs in outputs() order. Errors (states unchanged): unknown plan
  // (naming the plans it has), wrong input count (naming the plan and both counts) or
  // shape (naming the input and both shapes), and any error of interpret().
  Expected<std::vector<Tensor>> run(const std::string& plan, const std::vector<Tensor>& inputs);

  // The current value of a state; the error names the states the program has.
  Expected<Tensor> state(const std::string& name) const;
  // Replaces a state (its shape must be the state's); values are stored as given.
  Status set_state(const std::string& name, Tensor value);

  const ProgramGraph& program() const { return program_; }
  // name -> type of every state (program_states).
  const std::map<std::string, TensorType>& state_types() const { return types_; }

private:
  ProgramInterpreter(ProgramGraph program, const WeightStore& weights, InterpretOptions options)
      : program_(std::move(program)), weights_(&weights), options_(std::move(options)) {}
  std::string state_names() const;

  ProgramGraph program_;
  const WeightStore* weights_;
  InterpretOptions options_;
  std::map<std::string, TensorType> types_;
  std::map<std::string, Tensor> states_;
};

}  // namespace strata

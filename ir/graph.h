// Graph, Node, Value: the dataflow IR.
//
// A Graph owns its Values (indexed by ValueId) and its Nodes (kept in topological
// order: a node's inputs are graph inputs, constants, or outputs of earlier nodes).
// A Value is a graph input, a constant (naming a tensor in a WeightStore; the graph
// never holds weight data) or an intermediate produced by exactly one node. Graphs
// are plain data: copy one to get an independent graph (passes compare the
// interpreter on a graph before and after a rewrite).
//
// State: a graph that is one plan of a program (ir/program.h) may read named states at
// the start of a run (some of its inputs) and write them back at the end (some of its
// outputs), for the next run of this or another plan. The bindings name positions in
// inputs() / outputs(), not ValueIds, so a pass that replaces an output value in place
// or compact()s the graph keeps them valid; a pass that reorders or removes graph
// inputs or outputs must move the bindings with them.
#pragma once

#include "ir/attrs.h"
#include "ir/ops.h"
#include "ir/types.h"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace strata {

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

enum class ValueKind { input, constant, intermediate };

// Where a value lives on the device, set by passes/plan_buffers.cpp: a byte offset
// into a named arena ("act", "in", "out"). Printed as a suffix of the value's type,
// ` @act+4096`.
struct BufferAssignment {
  std::string arena;
  uint64_t offset = 0;
  bool operator==(const BufferAssignment&) const = default;
};

// A graph input that reads a state, or a graph output that writes one back: `index`
// is a position in inputs() (reads) or outputs() (writes).
struct StateBinding {
  std::string state;
  size_t index = 0;
  bool operator==(const StateBinding&) const = default;
};

struct Value {
  ValueId id = kNoValue;
  std::string name;    // unique in the graph; printed as %name
  TensorType type;
  ValueKind kind = ValueKind::intermediate;
  std::string weight;  // constants: the tensor's name in the WeightStore
  std::optional<BufferAssignment> buffer;  // set by plan_buffers; absent before
};

struct Node {
  Op op = Op::add;
  std::string name;  // for messages, e.g. "decoder.up_blocks.0.resnets.1.conv1"
  Attrs attrs;
  std::vector<ValueId> inputs;   // kNoValue marks an absent optional operand
  std::vector<ValueId> outputs;
};

class Graph {
public:
  std::string name = "main";

  // Creating values. Names are made unique by appending ".1", ".2", ... on a clash.
  ValueId add_input(std::string name, TensorType type);
  ValueId add_constant(std::string name, TensorType type, std::string weight);
  ValueId add_value(std::string name, TensorType type);  // intermediate
  // Appends a node (after all existing ones) and returns its index.
  size_t add_node(Node node);
  void mark_output(ValueId v) { outputs_.push_back(v); }
  // Adds a graph input (appended to inputs()) whose value comes from state `state`
  // at the start of a run.
  ValueId add_state_input(std::string name, TensorType type, std::string state);
  // Appends `v` to outputs() and records that it is written back to state `state` at
  // the end of a run.
  void mark_state_output(ValueId v, std::string state);

  const Value& value(ValueId id) const { return values_.at(static_cast<size_t>(id)); }
  Value& value(ValueId id) { return values_.at(static_cast<size_t>(id)); }
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId>& outputs() { return outputs_; }
  // State bindings, in inputs() / outputs() order (each index appears at most once).
  const std::vector<StateBinding>& state_reads() const { return state_reads_; }
  const std::vector<StateBinding>& state_writes() const { return state_writes_; }
  bool has_state() const { return !state_reads_.empty() || !state_writes_.empty(); }
  // The state the i-th input reads / the i-th output writes, or nullptr.
  const std::string* input_state(size_t input_index) const;
  const std::string* output_state(size_t output_index) const;

  // Constants in creation order.
  std::vector<ValueId> constants() const;

  // The value with this name, or kNoValue.
  ValueId find_value(const std::string& name) const;
  // producer()[v] = index of the node that outputs v, or -1 (inputs, constants).
  std::vector<int64_t> producers() const;

  // Removes values no node or output refers to (after a pass deletes nodes) and
  // renumbers the rest in their current order. inputs() and outputs() keep their
  // positions, so state bindings stay valid.
  void compact();

private:
  std::string unique_name(std::string base);
  ValueId add(Value v);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<StateBinding> state_reads_;   // sorted by index
  std::vector<StateBinding> state_writes_;  // sorted by index
  std::unordered_map<std::string, ValueId> by_name_;
};

}  // namespace strata

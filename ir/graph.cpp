#include "ir/graph.h"

#include <algorithm>

namespace strata {

std::string Graph::unique_name(std::string base) {
  if (base.empty()) base = "v";
  if (!by_name_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string candidate = base + "." + std::to_string(i);
    if (!by_name_.count(candidate)) return candidate;
  }
}

ValueId Graph::add(Value v) {
  v.id = static_cast<ValueId>(values_.size());
  v.name = unique_name(std::move(v.name));
  by_name_[v.name] = v.id;
  values_.push_back(std::move(v));
  return values_.back().id;
}

ValueId Graph::add_input(std::string name, TensorType type) {
  ValueId id = add(Value{kNoValue, std::move(name), std::move(type), ValueKind::input, ""});
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_state_input(std::string name, TensorType type, std::string state) {
  ValueId id = add_input(std::move(name), std::move(type));
  state_reads_.push_back(StateBinding{std::move(state), inputs_.size() - 1});
  return id;
}

void Graph::mark_state_output(ValueId v, std::string state) {
  outputs_.push_back(v);
  state_writes_.push_back(StateBinding{std::move(state), outputs_.size() - 1});
}

namespace {
const std::string* bound_state(const std::vector<StateBinding>& bindings, size_t index) {
  for (const StateBinding& b : bindings)
    if (b.index == index) return &b.state;
  return nullptr;
}
}  // namespace

const std::string* Graph::input_state(size_t input_index) const { return bound_state(state_reads_, input_index); }
const std::string* Graph::output_state(size_t output_index) const {
  return bound_state(state_writes_, output_index);
}

ValueId Graph::add_constant(std::string name, TensorType type, std::string weight) {
  return add(Value{kNoValue, std::move(name), std::move(type), ValueKind::constant, std::move(weight)});
}

ValueId Graph::add_value(std::string name, TensorType type) {
  return add(Value{kNoValue, std::move(name), std::move(type), ValueKind::intermediate, ""});
}

size_t Graph::add_node(Node node) {
  nodes_.push_back(std::move(node));
  return nodes_.size() - 1;
}

std::vector<ValueId> Graph::constants() const {
  std::vector<ValueId> out;
  for (const auto& v : values_)
    if (v.kind == ValueKind::constant) out.push_back(v.id);
  return out;
}

ValueId Graph::find_value(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? kNoValue : it->second;
}

std::vector<int64_t> Graph::producers() const {
  std::vector<int64_t> out(values_.size(), -1);
  for (size_t i = 0; i < nodes_.size(); ++i)
    for (ValueId v : nodes_[i].outputs)
      if (v >= 0 && static_cast<size_t>(v) < out.size()) out[static_cast<size_t>(v)] = static_cast<int64_t>(i);
  return out;
}

void Graph::compact() {
  std::vector<bool> used(values_.size(), false);
  for (ValueId v : inputs_) used[static_cast<size_t>(v)] = true;
  for (ValueId v : outputs_) used[static_cast<size_t>(v)] = true;
  for (const auto& n : nodes_) {
    for (ValueId v : n.inputs)
      if (v != kNoValue) used[static_cast<size_t>(v)] = true;
    for (ValueId v : n.outputs) used[static_cast<size_t>(v)] = true;
  }
  std::vector<ValueId> remap(values_.size(), kNoValue);
  std::vector<Value> kept;
  by_name_.clear();
  for (auto& v : values_) {
    if (!used[static_cast<size_t>(v.id)]) continue;
    remap[static_cast<size_t>(v.id)] = static_cast<ValueId>(kept.size());
    v.id = static_cast<ValueId>(kept.size());
    by_name_[v.name] = v.id;
    kept.push_back(std::move(v));
  }
  values_ = std::move(kept);
  auto fix = [&](ValueId& v) {
    if (v != kNoValue) v = remap[static_cast<size_t>(v)];
  };
  for (auto& v : inputs_) fix(v);
  for (auto& v : outputs_) fix(v);
  for (auto& n : nodes_) {
    for (auto& v : n.inputs) fix(v);
    for (auto& v : n.outputs) fix(v);
  }
}

}  // namespace strata

#include "ir/verifier.h"

#include "ir/infer.h"
#include "ir/printer.h"

#include <unordered_map>

namespace strata {
namespace {

class Verifier {
public:
  explicit Verifier(const Graph& g) : g_(g), producer_(g.values().size(), -1), producers_(g.producers()) {}

  Status run() {
    STRATA_RETURN_IF_ERROR(check_values());
    STRATA_RETURN_IF_ERROR(check_inputs());
    for (size_t i = 0; i < g_.nodes().size(); ++i) STRATA_RETURN_IF_ERROR(check_node(i));
    for (const Value& v : g_.values())
      if (v.kind == ValueKind::intermediate && producer_[static_cast<size_t>(v.id)] < 0)
        return error("{}: intermediate produced by no node", value_str(v.id));
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      ValueId v = g_.outputs()[i];
      if (!in_range(v)) return error("graph output {} is not a value of the graph (id {})", i, v);
    }
    return check_state();
  }

private:
  bool in_range(ValueId v) const { return v >= 0 && static_cast<size_t>(v) < g_.values().size(); }

  static std::string_view kind_phrase(ValueKind k) {
    return k == ValueKind::input ? "a graph input" : k == ValueKind::constant ? "a constant" : "an intermediate";
  }
  std::string value_str(ValueId v) const { return fmt::format("value {} (#{})", value_ref(g_, v), v); }
  std::string node_str(size_t i) const {
    const Node& n = g_.nodes()[i];
    return fmt::format("node '{}' ({}, #{})", n.name, to_string(n.op), i);
  }

  Status check_values() {
    std::unordered_map<std::string, ValueId> seen;
    for (size_t i = 0; i < g_.values().size(); ++i) {
      const Value& v = g_.values()[i];
      if (v.id != static_cast<ValueId>(i))
        return error("value %{} at index {} has id {}", name_token(v.name), i, v.id);
      if (v.name.empty()) return error("value #{} has an empty name", i);
      auto [it, fresh] = seen.emplace(v.name, v.id);
      if (!fresh) return error("{} has the same name as value #{}", value_str(v.id), it->second);
      for (int64_t d : v.type.shape)
        if (d < 0) return error("{}: negative dimension in {}", value_str(v.id), type_str(v.type));
      if (v.kind == ValueKind::constant && v.weight.empty())
        return error("{}: constant names no weight", value_str(v.id));
    }
    return Status::ok();
  }

  Status check_inputs() {
    std::vector<bool> listed(g_.values().size(), false);
    for (size_t i = 0; i < g_.inputs().size(); ++i) {
      ValueId v = g_.inputs()[i];
      if (!in_range(v)) return error("graph input {} is not a value of the graph (id {})", i, v);
      if (g_.value(v).kind != ValueKind::input)
        return error("graph input {}, {}, is {}", i, value_str(v), kind_phrase(g_.value(v).kind));
      if (listed[static_cast<size_t>(v)]) return error("{} is listed twice as a graph input", value_str(v));
      listed[static_cast<size_t>(v)] = true;
    }
    for (const Value& v : g_.values())
      if (v.kind == ValueKind::input && !listed[static_cast<size_t>(v.id)])
        return error("{} is an input value but not a graph input", value_str(v.id));
    return Status::ok();
  }

  // Whether operand v of node i is defined before it; otherwise the error.
  Status check_operand(size_t i, size_t k, ValueId v) {
    if (v == kNoValue) return Status::ok();  // absent optional operands: infer checks
    if (!in_range(v)) return error("{}: operand {} is not a value of the graph (id {})", node_str(i), k, v);
    if (g_.value(v).kind != ValueKind::intermediate) return Status::ok();
    if (producer_[static_cast<size_t>(v)] >= 0) return Status::ok();
    int64_t later = producers_[static_cast<size_t>(v)];
    if (later >= 0)
      return error("{}: operand {} {} is used before it is defined by {} (nodes out of topological order)",
                   node_str(i), k, value_ref(g_, v), node_str(static_cast<size_t>(later)));
    return error("{}: operand {} {} is undefined (no node produces it)", node_str(i), k, value_ref(g_, v));
  }

  Status check_node(size_t i) {
    const Node& n = g_.nodes()[i];
    if (static_cast<size_t>(n.op) >= all_ops().size())
      return error("node '{}' (#{}) has an unknown op ({})", n.name, i, static_cast<int>(n.op));
    std::vector<const TensorType*> types;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      STRATA_RETURN_IF_ERROR(check_operand(i, k, n.inputs[k]));
      types.push_back(n.inputs[k] == kNoValue ? nullptr : &g_.value(n.inputs[k]).type);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ValueId v = n.outputs[k];
      if (!in_range(v)) return error("{}: result {} is not a value of the graph (id {})", node_str(i), k, v);
      const Value& val = g_.value(v);
      if (val.kind != ValueKind::intermediate)
        return error("{}: result {} {} is {} (only intermediates are produced by nodes)", node_str(i), k,
                     value_ref(g_, v), kind_phrase(val.kind));
      int64_t& p = producer_[static_cast<size_t>(v)];
      if (p >= 0)
        return error("{}: result {} is also produced by {}", node_str(i), value_ref(g_, v),
                     node_str(static_cast<size_t>(p)));
      p = static_cast<int64_t>(i);
    }
    auto inferred = infer_output_types(n.op, n.attrs, types);
    if (!inferred) return inferred.status().with_context(node_str(i));
    if (inferred->size() != n.outputs.size())
      return error("{}: has {} results, the op defines {}", node_str(i), n.outputs.size(), inferred->size());
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const TensorType& d = g_.value(n.outputs[k]).type;
      const TensorType& t = (*inferred)[k];
      if (d.shape != t.shape || d.dtype != t.dtype)
        return error("{}: result {} is declared {}, inferred {}", node_str(i), value_ref(g_, n.outputs[k]),
                     type_str(d), type_str(t));
    }
    return Status::ok();
  }

  // One direction's bindings: names non-empty, positions in range and increasing (so
  // each input / output carries at most one state), each state bound once.
  Status check_bindings(const std::vector<StateBinding>& bindings, const std::vector<ValueId>& list,
                        std::string_view what) {
    std::unordered_map<std::string, size_t> seen;
    for (size_t k = 0; k < bindings.size(); ++k) {
      const StateBinding& b = bindings[k];
      if (b.index >= list.size())
        return error("state '{}' is bound to graph {} {}, the graph has {}", b.state, what, b.index, list.size());
      const std::string v = value_str(list[b.index]);
      if (b.state.empty()) return error("graph {} {}, {}, is bound to a state with an empty name", what, b.index, v);
      if (k > 0 && b.index <= bindings[k - 1].index)
        return error("state bindings of graph {}s out of order or repeated at {} {} ({}, state '{}')", what, what,
                     b.index, v, b.state);
      auto [it, fresh] = seen.emplace(b.state, b.index);
      if (!fresh)
        return error("state '{}' is bound to graph {} {}, {}, and to graph {} {}, {}", b.state, what, it->second,
                     value_str(list[it->second]), what, b.index, v);
    }
    return Status::ok();
  }

  Status check_state() {
    STRATA_RETURN_IF_ERROR(check_bindings(g_.state_reads(), g_.inputs(), "input"));
    STRATA_RETURN_IF_ERROR(check_bindings(g_.state_writes(), g_.outputs(), "output"));
    // What a run writes back, the next run reads: the same shape and dtype. Layouts
    // may differ (passes choose them; a runtime converts at the boundary).
    for (const StateBinding& r : g_.state_reads())
      for (const StateBinding& w : g_.state_writes()) {
        if (r.state != w.state) continue;
        const TensorType& a = g_.value(g_.inputs()[r.index]).type;
        const TensorType& b = g_.value(g_.outputs()[w.index]).type;
        if (a.shape != b.shape || a.dtype != b.dtype)
          return error("state '{}' is read as {}: {} but written back as {}: {}", r.state,
                       value_str(g_.inputs()[r.index]), type_str(a), value_str(g_.outputs()[w.index]), type_str(b));
      }
    return Status::ok();
  }

  const Graph& g_;
  std::vector<int64_t> producer_;   // producer among the nodes checked so far
  const std::vector<int64_t> producers_;  // last producer in the whole graph (for messages)
};

}  // namespace

Status verify(const Graph& g) { return Verifier(g).run(); }

}  // namespace strata

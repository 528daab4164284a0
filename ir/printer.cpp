#include "ir/printer.h"

#include <fmt/format.h>

namespace strata {
namespace {

bool is_bare_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool valid_id(const Graph& g, ValueId id) {
  return id >= 0 && static_cast<size_t>(id) < g.values().size();
}

bool valid_op(Op op) { return static_cast<size_t>(op) < all_ops().size(); }

std::string quoted(const std::string& s) { return attr_value_str(AttrValue{s}); }

// `OP "NAME" (OPERANDS) {ATTRS}`: the right-hand side of a node statement, with
// operands written by `ref`.
template <typename Ref>
std::string node_rhs(const Node& node, Ref ref) {
  std::string out = to_string(node.op) + " " + quoted(node.name) + " (";
  for (size_t i = 0; i < node.inputs.size(); ++i) out += (i ? ", " : "") + ref(node.inputs[i]);
  out += ")";
  std::string attrs = attrs_str(node.attrs);
  if (!attrs.empty()) out += " " + attrs;
  return out;
}

// ` @act+4096` for a value plan_buffers placed, "" otherwise.
std::string buffer_suffix(const Value& v) {
  if (!v.buffer) return "";
  return " @" + name_token(v.buffer->arena) + "+" + std::to_string(v.buffer->offset);
}

std::string typed_ref(const Graph& g, ValueId id) {
  if (!valid_id(g, id)) return value_ref(g, id);
  const Value& v = g.value(id);
  return value_ref(g, id) + ": " + type_str(v.type) + buffer_suffix(v);
}

}  // namespace

std::string name_token(const std::string& name) {
  bool bare = !name.empty();
  for (char c : name) bare = bare && is_bare_name_char(c);
  return bare ? name : quoted(name);
}

std::string value_ref(const Graph& g, ValueId id) {
  if (id == kNoValue) return "_";
  if (!valid_id(g, id)) return fmt::format("%<bad id {}>", id);
  return "%" + name_token(g.value(id).name);
}

std::string to_string(const TensorType& type) { return type_str(type); }
std::string to_string(const Layout& layout) {
  std::string s = layout_str(layout);
  return s.empty() ? "logical" : s;
}
std::string to_string(DType dtype) { return std::string(dtype_name(dtype)); }
std::string to_string(Op op) {
  return valid_op(op) ? std::string(op_name(op)) : fmt::format("<op {}>", static_cast<int>(op));
}
std::string to_string(ValueKind kind) {
  switch (kind) {
    case ValueKind::input: return "input";
    case ValueKind::constant: return "constant";
    case ValueKind::intermediate: return "intermediate";
  }
  return "?";
}
std::string to_string(const Attrs& attrs) { return attrs_str(attrs); }
std::string to_string(const StateBinding& b) { return "state " + quoted(b.state) + " at " + std::to_string(b.index); }

std::string to_string(const Value& value) {
  std::string out = "%" + name_token(value.name) + ": " + type_str(value.type) + buffer_suffix(value);
  if (value.kind == ValueKind::constant) out += " = weight " + quoted(value.weight);
  return out;
}

std::string to_string(const Node& node, const Graph& g) {
  std::string out;
  for (size_t i = 0; i < node.outputs.size(); ++i) out += (i ? ", " : "") + typed_ref(g, node.outputs[i]);
  return out + " = " + node_rhs(node, [&](ValueId id) { return value_ref(g, id); });
}

std::string to_string(const Node& node) {
  auto ref = [](ValueId id) { return id == kNoValue ? std::string("_") : fmt::format("%#{}", id); };
  std::string out;
  for (size_t i = 0; i < node.outputs.size(); ++i) out += (i ? ", " : "") + ref(node.outputs[i]);
  return out + " = " + node_rhs(node, ref);
}

std::string print_graph(const Graph& g) {
  std::string out = "graph @" + name_token(g.name) + "(";
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    out += (i ? ", " : "") + typed_ref(g, g.inputs()[i]);
    if (const std::string* st = g.input_state(i)) out += " state " + quoted(*st);
  }
  out += ") {\n";

  std::vector<bool> printed(g.values().size(), false);
  auto print_constant = [&](ValueId id) {
    if (!valid_id(g, id) || printed[static_cast<size_t>(id)]) return;
    const Value& v = g.value(id);
    if (v.kind != ValueKind::constant) return;
    printed[static_cast<size_t>(id)] = true;
    out += "  " + to_string(v) + "\n";
  };
  for (const Node& node : g.nodes()) {
    for (ValueId id : node.inputs) print_constant(id);
    out += "  " + to_string(node, g) + "\n";
  }
  for (ValueId id : g.constants()) print_constant(id);

  out += "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    out += (i ? ", " : " ") + value_ref(g, g.outputs()[i]);
    if (const std::string* st = g.output_state(i)) out += " state " + quoted(*st);
  }
  return out + "\n}\n";
}

std::string print_program(const ProgramGraph& p) {
  std::string out = "program @" + name_token(p.name) + " {\n";
  for (const Graph& g : p.plans) {
    std::string text = print_graph(g);
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      out += "  " + text.substr(start, end - start + 1);
      start = end + 1;
    }
  }
  return out + "}\n";
}

std::string to_string(const ProgramGraph& p) { return print_program(p); }

std::string to_string(const Graph& g) { return print_graph(g); }

std::ostream& operator<<(std::ostream& os, const Graph& g) { return os << print_graph(g); }
std::ostream& operator<<(std::ostream& os, const ProgramGraph& p) { return os << print_program(p); }
std::ostream& operator<<(std::ostream& os, const Node& node) { return os << to_string(node); }
std::ostream& operator<<(std::ostream& os, const Value& value) { return os << to_string(value); }
std::ostream& operator<<(std::ostream& os, const TensorType& type) { return os << to_string(type); }
std::ostream& operator<<(std::ostream& os, const Layout& layout) { return os << to_string(layout); }
std::ostream& operator<<(std::ostream& os, DType dtype) { return os << to_string(dtype); }
std::ostream& operator<<(std::ostream& os, Op op) { return os << to_string(op); }
std::ostream& operator<<(std::ostream& os, ValueKind kind) { return os << to_string(kind); }
std::ostream& operator<<(std::ostream& os, const Attrs& attrs) { return os << to_string(attrs); }
std::ostream& operator<<(std::ostream& os, const StateBinding& b) { return os << to_string(b); }

}  // namespace strata

#include "ir/dot.h"

#include "ir/printer.h"

#include <fmt/format.h>

#include <set>

namespace strata {
namespace {

// A DOT string literal's contents; lines are joined with DOT's "\n" afterwards.
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string label(const std::vector<std::string>& lines) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\\n" : "") + escape(lines[i]);
  return "\"" + out + "\"";
}

class DotWriter {
public:
  DotWriter(const Graph& g, const DotOptions& o) : g_(g), o_(o), producers_(g.producers()) {}

  std::string run() {
    out_ += "digraph \"" + escape(g_.name) + "\" {\n";
    out_ += "  graph [rankdir=TB, fontname=\"Helvetica\"];\n";
    out_ += "  node [fontname=\"Helvetica\", fontsize=10];\n";
    out_ += "  edge [fontname=\"Helvetica\", fontsize=9];\n";
    for (ValueId v : g_.inputs())
      if (in_range(v))
        out_ += fmt::format("  i{} [shape=ellipse, style=filled, fillcolor=\"#cfe2ff\", label={}];\n", v,
                            label({"input " + value_ref(g_, v), type_str(g_.value(v).type)}));
    std::vector<bool> graph_output(g_.values().size(), false);
    for (ValueId v : g_.outputs())
      if (in_range(v)) graph_output[static_cast<size_t>(v)] = true;
    for (ValueId v : g_.constants())
      if (!o_.fold_constants || graph_output[static_cast<size_t>(v)])
        out_ += fmt::format("  c{} [shape=note, style=filled, fillcolor=\"#e8e8e8\", label={}];\n", v,
                            label({"weight " + value_ref(g_, v), type_str(g_.value(v).type)}));
    for (size_t i = 0; i < g_.nodes().size(); ++i) write_node(i);
    for (size_t k = 0; k < g_.outputs().size(); ++k) {
      ValueId v = g_.outputs()[k];
      if (!in_range(v)) continue;
      out_ += fmt::format("  o{} [shape=ellipse, style=filled, fillcolor=\"#d1f0d1\", label={}];\n", k,
                          label({"output " + value_ref(g_, v), type_str(g_.value(v).type)}));
      write_edge(v, fmt::format("o{}", k));
    }
    return out_ + "}\n";
  }

private:
  bool in_range(ValueId v) const { return v >= 0 && static_cast<size_t>(v) < g_.values().size(); }

  bool folded(ValueId v) const {
    if (!o_.fold_constants || g_.value(v).kind != ValueKind::constant) return false;
    for (ValueId out : g_.outputs())
      if (out == v) return false;
    return true;
  }

  // The constant's name as shown in its reader's label.
  std::string short_name(const Value& c, const Node& reader) const {
    const std::string prefix = reader.name + ".";
    if (c.name.size() > prefix.size() && c.name.compare(0, prefix.size(), prefix) == 0)
      return c.name.substr(prefix.size());
    return c.name;
  }

  void write_node(size_t i) {
    const Node& n = g_.nodes()[i];
    std::vector<std::string> lines = {to_string(n.op), n.name};
    for (ValueId v : n.outputs) lines.push_back(in_range(v) ? type_str(g_.value(v).type) : value_ref(g_, v));
    for (ValueId v : n.inputs)
      if (in_range(v) && folded(v)) lines.push_back("+ " + short_name(g_.value(v), n) + " " + type_str(g_.value(v).type));
    out_ += fmt::format("  n{} [shape=box, style=\"rounded,filled\", fillcolor=\"#f6f6f6\", label={}];\n", i,
                        label(lines));
    for (ValueId v : n.inputs)
      if (in_range(v) && !folded(v)) write_edge(v, fmt::format("n{}", i));
  }

  // The DOT id that supplies value v, declaring an "undefined" node when none does.
  std::string source(ValueId v) {
    const Value& val = g_.value(v);
    if (val.kind == ValueKind::input) return fmt::format("i{}", v);
    if (val.kind == ValueKind::constant) return fmt::format("c{}", v);
    int64_t p = producers_[static_cast<size_t>(v)];
    if (p >= 0) return fmt::format("n{}", p);
    std::string id = fmt::format("u{}", v);
    if (!undefined_declared_.count(v)) {
      undefined_declared_.insert(v);
      out_ += fmt::format("  {} [shape=octagon, style=filled, fillcolor=\"#f8c8c8\", label={}];\n", id,
                          label({"undefined " + value_ref(g_, v), type_str(val.type)}));
    }
    return id;
  }

  void write_edge(ValueId v, const std::string& to) {
    std::string style = g_.value(v).kind == ValueKind::constant ? ", style=dashed" : "";
    std::string from = source(v);
    out_ += fmt::format("  {} -> {} [label=\"{}\"{}];\n", from, to, shape_str(g_.value(v).type.shape), style);
  }

  const Graph& g_;
  const DotOptions& o_;
  const std::vector<int64_t> producers_;
  std::set<ValueId> undefined_declared_;
  std::string out_;
};

}  // namespace

std::string to_dot(const Graph& g, const DotOptions& options) { return DotWriter(g, options).run(); }

}  // namespace strata

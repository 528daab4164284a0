#include "passes/rewrite.h"

namespace strata {

size_t Uses::count(ValueId v) const {
  const auto i = static_cast<size_t>(v);
  return readers[i].size() + static_cast<size_t>(outputs[i]);
}

bool Uses::only_reader_is(ValueId v, size_t n) const {
  const auto i = static_cast<size_t>(v);
  return outputs[i] == 0 && readers[i].size() == 1 && readers[i][0] == n;
}

Uses find_uses(const Graph& g) {
  Uses u;
  u.readers.resize(g.values().size());
  u.outputs.assign(g.values().size(), 0);
  for (size_t n = 0; n < g.nodes().size(); ++n)
    for (ValueId v : g.nodes()[n].inputs)
      if (v != kNoValue) u.readers[static_cast<size_t>(v)].push_back(n);
  for (ValueId v : g.outputs()) ++u.outputs[static_cast<size_t>(v)];
  return u;
}

void replace_uses(Graph& g, ValueId from, ValueId to, size_t first_node) {
  for (size_t n = first_node; n < g.nodes().size(); ++n)
    for (ValueId& v : g.nodes()[n].inputs)
      if (v == from) v = to;
  for (ValueId& v : g.outputs())
    if (v == from) v = to;
}

void remove_nodes(Graph& g, const std::vector<bool>& dead) {
  std::vector<Node> kept;
  for (size_t n = 0; n < g.nodes().size(); ++n)
    if (!dead[n]) kept.push_back(std::move(g.nodes()[n]));
  g.nodes() = std::move(kept);
  g.compact();
}

void trim_operands(Node& n) {
  while (!n.inputs.empty() && n.inputs.back() == kNoValue) n.inputs.pop_back();
}

}  // namespace strata

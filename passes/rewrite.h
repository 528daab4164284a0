// Small graph-editing helpers shared by the passes: who reads a value, redirecting
// readers, deleting nodes, trimming absent trailing operands.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace strata {

// Readers of every value of a graph, computed once (recompute after an edit).
struct Uses {
  // readers[v]: index of each node reading v, once per operand slot, in node order.
  std::vector<std::vector<size_t>> readers;
  // outputs[v]: how many times v is listed as a graph output.
  std::vector<int> outputs;

  // Node reads plus graph-output listings.
  size_t count(ValueId v) const;
  // True when v is read exactly once, by node `n`, and is not a graph output.
  bool only_reader_is(ValueId v, size_t n) const;
};
Uses find_uses(const Graph& g);

// Every operand equal to `from` in nodes [first_node, end) and every graph output
// equal to `from` becomes `to`.
void replace_uses(Graph& g, ValueId from, ValueId to, size_t first_node = 0);

// Deletes the nodes marked in `dead` (indexed like g.nodes()) and drops the values no
// longer referred to (Graph::compact).
void remove_nodes(Graph& g, const std::vector<bool>& dead);

// Drops absent (kNoValue) operands at the end of a node's operand list.
void trim_operands(Node& n);

}  // namespace strata

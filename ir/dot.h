// Graphviz DOT dump of a graph (`strata --dump-dot`): render with `dot -Tsvg g.dot`.
//
// One DOT node per IR node, box-shaped, labelled with the op, the node's name and
// its result type(s); one edge per tensor an IR node reads, labelled with the
// tensor's shape. Graph inputs are blue ellipses ("input %z" + type), graph outputs
// green ellipses ("output %out" + type) fed by the producing node, and a value that
// no node produces but is read (a broken graph) a red octagon ("undefined %x").
//
// Constants are folded into the label of the node that reads them by default (a
// decoder has two or three weights per conv; drawing each would double the graph):
// one line per constant operand, "+ weight f32[64,16,3,3]", naming the constant by
// its suffix after "<node name>." when it has that prefix ("decoder.conv_in.weight"
// read by node "decoder.conv_in" shows as "weight"), else by its full name. With
// fold_constants = false, and for a constant that is itself a graph output, the
// constant gets its own grey note-shaped node ("weight %w" + type) with dashed edges.
//
// DOT ids are generated (n<node index>, i/c<value id>, o<output index>), so names of
// any spelling are safe; labels escape '"' and '\'. Printing never fails: operands
// with out-of-range ids are skipped.
#pragma once

#include "ir/graph.h"

#include <string>

namespace strata {

struct DotOptions {
  bool fold_constants = true;  // constants listed in their reader's label
};

std::string to_dot(const Graph& g, const DotOptions& options = {});

}  // namespace strata

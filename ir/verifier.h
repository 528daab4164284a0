// The verifier: checks the invariants every stage relies on. It runs after every pass
// (passes/pipeline.cpp) and after parsing, and names the node or value that breaks an
// invariant, so a bad rewrite is caught where it happens.
//
// Checks, in this order (the first failure is returned):
//   values   each value's id is its index; names are non-empty and unique; dims are
//            >= 0; constants name a weight; graph inputs are in range, of kind input,
//            listed once, and every input-kind value is listed.
//   nodes    in graph order: the op is in the table; operand and result ids are in
//            range (kNoValue only for operands); every operand is a graph input, a
//            constant or the result of an earlier node (a later node's result means
//            the nodes are out of order); results are intermediates produced by no
//            other node; the node passes check_attrs and infer_output_types, with the
//            op's number of results, each of the inferred shape and dtype (layouts
//            are chosen by passes and not compared).
//   values   every intermediate is produced by a node.
//   outputs  in range and defined.
//   state    each state read / write names a state (non-empty) and a graph input /
//            output in range, at most one state per position (bindings kept in
//            position order), each state read at most once and written at most once;
//            a state the graph both reads and writes has the same shape and dtype on
//            both sides ("state 'sum' is read as value %acc (#0): f32[4] but written
//            back as value %y (#3): f32[8]"). Dtype f32 and logical layout are NOT
//            required: passes keep graph boundaries logical and f32 today, but a
//            future plan may keep an f16 state (a KV cache), and the runtime decides.
//
// Node errors read "node 'decoder.conv_in' (conv2d, #3): ...", value errors
// "value %name (#7): ...".
#pragma once

#include "ir/graph.h"
#include "ir/status.h"

namespace strata {

Status verify(const Graph& g);

}  // namespace strata

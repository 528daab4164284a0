// Work counts of a graph: the floating-point operations its nodes must do (a
// multiply-add counts 2) and the bytes its tensors occupy. Benchmarks divide by time
// to report achieved TFLOP/s; docs/PERFORMANCE.md compares with the card's ceilings.
#pragma once

#include "ir/graph.h"

#include <cstdint>

namespace strata {

// FLOPs of one node: convolutions and matrix products count 2 per multiply-add over
// the taps that meet data (a causal 3-D conv on one frame counts its last temporal
// tap only), attention counts q·kᵀ and p·v; everything else counts one per output
// element (norms, activations, data movement: small next to the products).
double node_flops(const Graph& g, const Node& n);
double graph_flops(const Graph& g);

}  // namespace strata

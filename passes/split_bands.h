// What split_bands (passes/split_bands.cpp) leaves in a graph, for the CLI
// (`--explain-bands`): which conv_gemm and norm_act nodes run in bands, and the rows
// and bytes every band binds.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <string>

namespace strata {

// A window may start up to this many bytes before its first row (Vulkan's largest
// minStorageBufferOffsetAlignment), so a band's windows must each fit in
// binding_limit − kWindowSlack bytes.
inline constexpr uint64_t kWindowSlack = 256;

// A report of the bands the graph's band_rows attributes ask for, deterministic (graph
// order): a header with the limit; per banded node its name, op, output rows, band
// count and height, then per band band_math's describe(Band) (kept rows, each stage's
// rows and halos) and one line per operand window (rows, halo, bytes), windows above
// binding_limit − kWindowSlack marked "OVER"; a line counting the conv_gemm and
// norm_act nodes that run whole; a totals line. binding_limit 0: no limit to compare.
std::string explain_bands(const Graph& graph, uint64_t binding_limit);

}  // namespace strata

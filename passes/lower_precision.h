// Range checking for f16 graphs (`--check-range`): the largest |value| stored at every
// f16 site of a run, from the reference interpreter. See passes/lower_precision.cpp
// for where lower_precision puts f16 storage and range guards.
#pragma once

#include "ir/graph.h"
#include "ir/status.h"
#include "ir/tensor.h"
#include "ir/weight_store.h"

#include <string>
#include <vector>

namespace strata {

// lower_precision's range-guard exponent when CompileOptions::range_guard_log2 is
// unset: un-normalised streams are stored as x · 2^-4 (see lower_precision.cpp).
inline constexpr int kDefaultRangeGuardLog2 = 4;

// The largest finite f16 value.
inline constexpr double kF16Max = 65504.0;

// One f16 site: a node result stored as f16.
struct RangeReport {
  std::string value;       // the value's name
  std::string node;        // the node that writes it
  double max_abs = 0.0;    // largest finite |stored value| (after any range guard)
  int64_t nonfinite = 0;   // elements that are inf or NaN (an f16 overflow rounds to inf)
  int64_t elements = 0;
  // Past the f16 range: an inf/NaN element, or a finite maximum above kF16Max.
  bool overflow() const { return nonfinite > 0 || max_abs > kF16Max; }
};

// Runs `graph` in the interpreter on `inputs` and reports every f16 node result, in
// execution order. Errors are the interpreter's (wrong inputs, missing weights).
Expected<std::vector<RangeReport>> check_ranges(const Graph& graph, const WeightStore& weights,
                                                const std::vector<Tensor>& inputs);

// A table for `--check-range`: one line per site ("max |x|", headroom to 65504,
// OVERFLOW marks), then a summary line.
std::string format_range_reports(const std::vector<RangeReport>& reports);

}  // namespace strata

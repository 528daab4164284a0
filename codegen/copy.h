// Plain copies between two windows, for lowerings that move a whole value (a reshape
// that must land elsewhere, a graph output that is an input or a constant). Copies
// bits (uint words), so every value, NaN payloads included, arrives unchanged.
#pragma once

#include "codegen/lowering.h"

namespace strata::codegen {

// Appends one dispatch copying `elements` 4-byte words from `src` to `dst`, labelled
// "<node>:<step>". Windows whose ranges exceed the target's binding limit are split
// into several dispatches.
Status emit_copy(Lowering& l, const Node& node, runtime::BindingDesc src, runtime::BindingDesc dst,
                 uint64_t elements, const std::string& step);

}  // namespace strata::codegen

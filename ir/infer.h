// Shape and attribute rules of every op: the builder infers output types with them,
// the verifier re-checks every node with them, the parser uses them to check a text
// graph. Errors say what does not fit ("input channels 32 != weight's 64"); callers
// prefix the node's name.
#pragma once

#include "ir/attrs.h"
#include "ir/ops.h"
#include "ir/types.h"

#include <vector>

namespace strata {

// Checks that every required attribute is present, every present attribute is one
// the op declares, and each has the declared kind.
Status check_attrs(Op op, const Attrs& attrs);

// Output types of `op` for the given input types (nullptr: an absent optional
// operand). Checks operand counts, ranks, and that the shapes fit together.
Expected<std::vector<TensorType>> infer_output_types(Op op, const Attrs& attrs,
                                                     const std::vector<const TensorType*>& inputs);

// numpy-style broadcast of two shapes (trailing dims aligned, 1 stretches).
Expected<Shape> broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace strata

// Copies and conversions between windows, for lowerings that move a whole value (a
// reshape that must land elsewhere, a graph output that is an input or a constant,
// the staging of inputs and outputs between host slots and device values).
#pragma once

#include "codegen/lowering.h"

#include <string>
#include <vector>

namespace strata::codegen {

// Appends one dispatch copying `elements` 4-byte words from `src` to `dst`, labelled
// "<node>:<step>". Copies bits (uint words), so every value, NaN payloads included,
// arrives unchanged. Windows whose ranges exceed the target's binding limit are
// split into several dispatches.
Status emit_copy(Lowering& l, const Node& node, runtime::BindingDesc src, runtime::BindingDesc dst,
                 uint64_t elements, const std::string& step);

// A tensor as kernels see it: a binding, the logical shape, the physical element
// stride of every logical dim, and the storage dtype (f32 or f16).
struct TensorRef {
  runtime::BindingDesc binding;
  Shape shape;
  std::vector<int64_t> strides;
  DType storage = DType::f32;
};

// Copies the elements of `src` into `dst` in logical row-major order (the two may
// have different shapes of equal element count, layouts and storage types), each
// rounded through `out_dtype` (kernels/unary.comp, COPY).
Status emit_convert(Lowering& l, const Node& node, const TensorRef& src, const TensorRef& dst, DType out_dtype,
                    const std::string& step);

}  // namespace strata::codegen

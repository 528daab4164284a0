// Weight-table transforms: how the bytes of one weight upload are made from the
// tensor in the store. codegen/placement.cpp chooses one per uploaded constant;
// weight_source (codegen/compiled_graph.cpp) applies it. The type is
// runtime::WeightTransform (runtime/plan.h), so a plan carries it as data, not text.
#pragma once

#include "ir/types.h"
#include "runtime/plan.h"

namespace strata::codegen {

// The runtime's spelling of an IR dtype.
runtime::DType to_runtime(DType t);
// The IR dtype of a runtime float dtype; an error for the others (i32, u32, u8).
Expected<DType> from_runtime(runtime::DType t);

// The transform of a constant whose tensor is stored as `stored` and whose value has
// dtype `value`, uploaded as `upload` (f32 or f16). Uploaded as f32 it is rounded
// through `value` when that is narrower than the stored tensor (f32 bytes rounded
// through f16, as the interpreter reads such a constant): describe() gives "f32",
// "f16->f32", "bf16->f32", "f32->f16->f32". Uploaded as f16 it is converted once
// (the value is f16): "f16" (bytes as stored), "f32->f16", "bf16->f16".
runtime::WeightTransform weight_transform(DType stored, DType value, DType upload = DType::f32);

}  // namespace strata::codegen

#include "codegen/weight_transform.h"

namespace strata::codegen {

runtime::DType to_runtime(DType t) {
  switch (t) {
    case DType::f32: return runtime::DType::f32;
    case DType::f16: return runtime::DType::f16;
    case DType::bf16: return runtime::DType::bf16;
  }
  return runtime::DType::f32;
}

Expected<DType> from_runtime(runtime::DType t) {
  switch (t) {
    case runtime::DType::f32: return DType::f32;
    case runtime::DType::f16: return DType::f16;
    case runtime::DType::bf16: return DType::bf16;
    default: break;
  }
  return error("{} is not a float dtype", runtime::dtype_name(t));
}

runtime::WeightTransform weight_transform(DType stored, DType value, DType upload) {
  runtime::WeightTransform t{to_runtime(stored), std::nullopt, to_runtime(upload)};
  // Rounding matters only on the way to f32: an f16 upload is the value's own dtype.
  if (upload == DType::f32 && value != DType::f32 && value != stored) t.rounded_through = to_runtime(value);
  return t;
}

}  // namespace strata::codegen

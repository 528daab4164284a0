// How values are stored on the device: element type and physical layout.
//
// Element type (the "storage dtype"): f32 values are stored as f32 and f16 values as
// IEEE half (float16_t buffers: GL_EXT_shader_16bit_storage, with arithmetic in f32
// after the load); bf16 values are stored as f32 holding bfloat16 numbers. Kernels
// read every operand through a type define (X_T = float | float16_t, see
// add_type_define) and convert to f32, accumulate in f32, and store through
// store_round() (common.glsl), so an f16 store rounds to nearest even exactly as the
// interpreter does. Constants are stored as f32 (holding numbers of their dtype),
// except f16 weights read only by conv_gemm, which stay f16 (placement.h).
//
// Physical layout: `logical` is row major in the logical shape. `nhwc` keeps the
// batch dim first and moves the channel dim (dim 1) innermost. Either stores the
// channel dim with Cp = padded_channels slots when that exceeds C; for an nhwc
// x[N, C, H, W] the element (n, c, y, x) is at ((n·H + y)·W + x)·Cp + c. Slots
// c >= C are padding: kernels never read them, and the conv_gemm and norm_act
// kernels write them as zeros.
#pragma once

#include "codegen/shader_compiler.h"
#include "ir/types.h"
#include "passes/memory_plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata::codegen {

// The storage dtype of an activation of dtype `t` (f16 -> f16, else f32): the memory
// planner's (passes/memory_plan.h), which sizes values the same way.
inline DType activation_storage(DType t) { return stored_dtype(t); }

// Bytes per stored element of storage dtype `s` (f32 or f16).
inline uint32_t storage_bytes(DType s) { return s == DType::f16 ? 2u : 4u; }

// The GLSL element type of storage dtype `s`.
inline const char* glsl_type(DType s) { return s == DType::f16 ? "float16_t" : "float"; }

// Defines `name` as the GLSL type of storage dtype `s`; an f16 type also defines
// F16 = 1, which enables the 16-bit storage extensions (common.glsl) and makes the
// plan require shaderFloat16 and storageBuffer16BitAccess.
inline void add_type_define(Defines& d, const std::string& name, DType s) {
  d[name] = glsl_type(s);
  if (s == DType::f16) d["F16"] = "1";
}

// The 4-vector type of an operand stored as `s` (binary.comp, unary.comp with VEC 4).
inline void add_vec4_type_define(Defines& d, const std::string& name, DType s) {
  d[name] = s == DType::f16 ? "f16vec4" : "vec4";
}

// The ROUND define (common.glsl) for a kernel whose output has dtype `t`.
inline const char* round_define(DType t) {
  switch (t) {
    case DType::f16: return "ROUND_F16";
    case DType::bf16: return "ROUND_BF16";
    default: return "ROUND_NONE";
  }
}

// Channel slots stored per position: Cp when the layout pads the channel dim (dim 1)
// past C, else C.
inline int64_t stored_channels(const TensorType& t) {
  const int64_t c = t.rank() >= 2 ? t.shape[1] : 1;
  return t.rank() >= 2 && t.layout.padded_channels > c ? t.layout.padded_channels : c;
}

// Element strides of every logical dim in the physical layout.
inline std::vector<int64_t> physical_strides(const TensorType& t) {
  const size_t r = t.shape.size();
  std::vector<int64_t> s(r, 1);
  if (r < 2) return s;
  const int64_t cp = stored_channels(t);
  if (t.layout.kind != LayoutKind::nhwc) {  // row major, dim 1 holding Cp slots
    for (size_t i = r; i-- > 1;) s[i - 1] = s[i] * (i == 1 ? cp : t.shape[i]);
    return s;
  }
  // Physical order: dim 0, dims 2..r-1, then dim 1 (Cp slots).
  int64_t step = cp;
  s[1] = 1;
  for (size_t i = r; i-- > 2;) {
    s[i] = step;
    step *= t.shape[i];
  }
  s[0] = step;
  return s;
}

// Stored elements (padding slots included): the memory planner's count.
inline int64_t physical_elements(const TensorType& t) { return stored_elements(t); }

// Whether the physical order is the logical row-major order (no padding).
inline bool is_row_major(const TensorType& t) { return physical_strides(t) == physical_strides(TensorType{t.shape, DType::f32, Layout{}}); }

}  // namespace strata::codegen

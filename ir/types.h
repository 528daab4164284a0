// Element types, layouts and tensor types of the IR.
//
// A TensorType is the logical shape (NCHW for images, NCFHW for video frames,
// [tokens, channels] for attention), the element type, and the physical layout that
// passes choose (logical order, or NHWC with channels padded). Shapes are int64.
#pragma once

#include "ir/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

enum class DType { f32, f16, bf16 };

std::string_view dtype_name(DType t);                 // "f32", "f16", "bf16"
Expected<DType> parse_dtype(std::string_view name);   // inverse of dtype_name
size_t dtype_size(DType t);                           // bytes per element

using Shape = std::vector<int64_t>;

int64_t num_elements(const Shape& s);
std::string shape_str(const Shape& s);  // "[1,64,8,8]"

// Physical layout of an activation. `logical` stores elements in the order of the
// logical shape (row major). `nhwc` stores channels innermost; padded_channels > 0
// means the channel dimension is stored padded to that count (zeros in the pad).
enum class LayoutKind { logical, nhwc };

struct Layout {
  LayoutKind kind = LayoutKind::logical;
  int64_t padded_channels = 0;  // 0: unpadded
  bool operator==(const Layout&) const = default;
  bool is_default() const { return *this == Layout{}; }
};

std::string layout_str(const Layout& l);  // "nhwc" or "nhwc:cpad=64"; "" for logical

struct TensorType {
  Shape shape;
  DType dtype = DType::f32;
  Layout layout;
  bool operator==(const TensorType&) const = default;
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t elements() const { return num_elements(shape); }
  size_t bytes() const { return static_cast<size_t>(elements()) * dtype_size(dtype); }
};

// "f32[1,64,8,8]" or "f16[1,64,8,8]{nhwc:cpad=64}"
std::string type_str(const TensorType& t);

// IEEE half and bfloat16 conversions (round to nearest even).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace strata
